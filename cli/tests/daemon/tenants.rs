//! Tenants in the daemon: tokens of a file that names tenants with weights and limits.
//!
//! - A tenant at its limit of calls in flight (`max-inflight-jobs=1`) for longer than
//!   `--queue-wait-ms` gets `RESOURCE_EXHAUSTED` naming that limit, with the trailer
//!   `grpc-retry-pushback-ms`, while another tenant's calls are served meanwhile; a tenant over
//!   its byte rate gets the same status naming the rate, with a pushback of the bucket's
//!   refill time.
//! - `/metrics` has every tenant's series; calls with `--allow-unauthenticated` are in
//!   `default`.
//! - A file that gives one tenant two different settings stops the start, naming the line and
//!   not the token.
#![cfg(feature = "daemon")]

use crate::daemon_support;

use std::time::{Duration, Instant};

use cryptodispatch::crypto::{AesOp, Direction, Padding};
use cryptodispatch::packet::Mode;
use daemon_support::remote::proto::{self, AesRequest};
use daemon_support::*;
use tonic::Code;

const LIMIT: Duration = Duration::from_secs(120);
const TIGHT: &str = "tight-tenant-token-0123456789";
const ROOMY: &str = "roomy-tenant-token-0123456789";
const METERED: &str = "metered-tenant-token-012345";

fn cbc(data: Vec<u8>) -> AesRequest {
    AesRequest {
        key: "k128".into(),
        mode: proto::Mode::Cbc as i32,
        iv: vec![9; 16],
        padding: proto::Padding::None as i32,
        data,
    }
}

fn expected(data: &[u8]) -> Vec<u8> {
    let op = AesOp::new(Direction::Encrypt, Mode::Cbc).with_padding(Padding::None);
    aes_reference(&K128, op, &[9; 16], data)
}

/// The value of the sample `name{labels}` in a metrics text, if present.
fn sample(text: &str, name_and_labels: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name_and_labels)?.trim().parse().ok())
}

fn pushback(status: &tonic::Status) -> u64 {
    status
        .metadata()
        .get("grpc-retry-pushback-ms")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no grpc-retry-pushback-ms in {status:?}"))
}

/// Scrapes until `ready` holds of the text (at most 20 s).
fn scrape_until(addr: std::net::SocketAddr, ready: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, text) = http_get(addr, "/metrics");
        if ready(&text) || Instant::now() > deadline {
            return text;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_over_its_limit_is_refused_with_a_pushback_while_another_is_served() {
    let f = Fixture::new("tenants");
    let tokens = format!(
        "{TIGHT} k128 tenant=tight max-inflight-jobs=1\n\
         {ROOMY} k128 tenant=roomy weight=2\n\
         {METERED} k128 tenant=metered max-bytes-per-sec=64KiB\n\
         {ALL} *\n"
    );
    f.dir.write("tokens", tokens.as_bytes(), 0o600);
    let mut args = f.args();
    // Slowed nodes, so that a large job stays in flight well past the admission wait.
    args.extend(
        [
            "--slowdown",
            "100",
            "--queue-wait-ms",
            "200",
            "--metrics",
            "127.0.0.1:0",
        ]
        .map(String::from),
    );
    let d = Daemon::start(&args);
    let m = d.metrics.unwrap();
    bounded("the tenants", LIMIT, async {
        let tight = d.client(Some(TIGHT)).await;
        let roomy = d.client(Some(ROOMY)).await;
        let metered = d.client(Some(METERED)).await;

        // The tight tenant's one call in flight: a CBC chain of about a second on the node
        // (from its calibrated time per packet), so well past the admission wait.
        let unit =
            "cryptodispatch_node_unit_time_seconds{node=\"0\",cluster=\"aes\",cmd=\"encrypt\"}";
        let text = tokio::task::spawn_blocking(move || http_get(m, "/metrics").1)
            .await
            .unwrap();
        let unit = sample(&text, unit).expect("a unit time");
        let packets = (1.0 / unit).ceil().clamp(8.0, 700.0) as usize;
        let big = bytes(packets << 14, 1);
        let running = {
            let (tight, big) = (tight.clone(), big.clone());
            tokio::spawn(async move { tight.encrypt(cbc(big)).await })
        };
        let in_flight = "cryptodispatch_tenant_jobs_in_flight{tenant=\"tight\"}";
        let text = tokio::task::spawn_blocking(move || {
            scrape_until(m, |t| sample(t, in_flight) == Some(1.0))
        })
        .await
        .unwrap();
        assert_eq!(sample(&text, in_flight), Some(1.0), "{text}");

        // A second call of the tight tenant waits at its limit, then is refused.
        let e = tight.encrypt(cbc(vec![5; 16 << 10])).await.unwrap_err();
        assert_eq!(e.code(), Code::ResourceExhausted, "{e:?}");
        assert!(e.message().contains("\"tight\""), "{e:?}");
        assert!(e.message().contains("max-inflight-jobs"), "{e:?}");
        assert_eq!(pushback(&e), 200);

        // Meanwhile the roomy tenant is served, right.
        let calls: Vec<_> = (0..8u64)
            .map(|i| {
                let roomy = roomy.clone();
                tokio::spawn(async move {
                    let data = bytes(16 << 10, 100 + i);
                    let out = roomy.encrypt(cbc(data.clone())).await;
                    (data, out)
                })
            })
            .collect();
        for call in calls {
            let (data, out) = call.await.unwrap();
            assert_eq!(out.expect("the roomy tenant is served"), expected(&data));
        }
        let out = running.await.unwrap().expect("the big call completes");
        assert_eq!(out, expected(&big));

        // The metered tenant: its bucket holds 64 KiB; a second 64 KiB must wait a second.
        let data = bytes(64 << 10, 7);
        assert_eq!(
            metered.encrypt(cbc(data.clone())).await.unwrap(),
            expected(&data)
        );
        let e = metered.encrypt(cbc(data)).await.unwrap_err();
        assert_eq!(e.code(), Code::ResourceExhausted, "{e:?}");
        assert!(e.message().contains("max-bytes-per-sec"), "{e:?}");
        let ms = pushback(&e);
        assert!((500..=1000).contains(&ms), "{ms} ms: {e:?}");
    })
    .await;

    let roomy_done = "cryptodispatch_tenant_jobs_completed_total{tenant=\"roomy\"}";
    let text = scrape_until(m, |t| sample(t, roomy_done) == Some(8.0));
    for (series, value) in [
        (roomy_done, 8.0),
        (
            "cryptodispatch_tenant_bytes_completed_total{tenant=\"roomy\"}",
            8.0 * 16384.0,
        ),
        (
            "cryptodispatch_tenant_bytes_served_total{tenant=\"roomy\"}",
            8.0 * 16384.0,
        ),
        (
            "cryptodispatch_tenant_jobs_completed_total{tenant=\"tight\"}",
            1.0,
        ),
        (
            "cryptodispatch_tenant_jobs_refused_total{tenant=\"tight\"}",
            1.0,
        ),
        (
            "cryptodispatch_tenant_bytes_refused_total{tenant=\"tight\"}",
            16384.0,
        ),
        (
            "cryptodispatch_tenant_jobs_refused_total{tenant=\"roomy\"}",
            0.0,
        ),
        (
            "cryptodispatch_tenant_jobs_failed_total{tenant=\"roomy\"}",
            0.0,
        ),
        (
            "cryptodispatch_tenant_jobs_admitted_total{tenant=\"metered\"}",
            1.0,
        ),
        (
            "cryptodispatch_tenant_jobs_refused_total{tenant=\"metered\"}",
            1.0,
        ),
        (
            "cryptodispatch_tenant_jobs_admitted_total{tenant=\"default\"}",
            0.0,
        ),
        ("cryptodispatch_tenant_weight{tenant=\"roomy\"}", 2.0),
        ("cryptodispatch_tenant_weight{tenant=\"tight\"}", 1.0),
        (
            "cryptodispatch_tenant_limit{tenant=\"tight\",limit=\"jobs_in_flight\"}",
            1.0,
        ),
        (
            "cryptodispatch_tenant_limit{tenant=\"metered\",limit=\"bytes_per_sec\"}",
            65536.0,
        ),
        (
            "cryptodispatch_tenant_jobs_in_flight{tenant=\"tight\"}",
            0.0,
        ),
        ("cryptodispatch_tenant_bytes_waiting{tenant=\"tight\"}", 0.0),
        (
            "cryptodispatchd_rpc_requests_total{rpc=\"Encrypt\",code=\"RESOURCE_EXHAUSTED\"}",
            2.0,
        ),
    ] {
        assert_eq!(sample(&text, series), Some(value), "{series}\n{text}");
    }
    // The roomy tenant's calls came beside the tight tenant's big one, within its credit: the
    // light path (of the jobs admitted).
    let light = sample(
        &text,
        "cryptodispatch_tenant_jobs_light_total{tenant=\"roomy\"}",
    );
    assert!(
        light.is_some_and(|n| (1.0..=8.0).contains(&n)),
        "{light:?}\n{text}"
    );
    assert_eq!(
        sample(
            &text,
            "cryptodispatch_tenant_jobs_light_total{tenant=\"default\"}"
        ),
        Some(0.0)
    );
    // No call was longer than the light path takes: none went ahead in the core on credit.
    assert_eq!(
        sample(
            &text,
            "cryptodispatch_tenant_jobs_granted_total{tenant=\"roomy\"}"
        ),
        Some(0.0)
    );
    // Why jobs were kept off the light path, and those run beside a stalled node or as
    // their tenant was behind, per tenant: the default tenant sent none.
    for series in [
        "jobs_kept_busy",
        "jobs_over_credit",
        "jobs_inline_stalled",
        "jobs_inline_behind",
    ] {
        let roomy = format!("cryptodispatch_tenant_{series}_total{{tenant=\"roomy\"}}");
        assert!(sample(&text, &roomy).is_some(), "{roomy}\n{text}");
        let default = format!("cryptodispatch_tenant_{series}_total{{tenant=\"default\"}}");
        assert_eq!(sample(&text, &default), Some(0.0), "{default}\n{text}");
    }
    // No limit the tenant does not have.
    assert!(!text.contains("cryptodispatch_tenant_limit{tenant=\"roomy\""));
    for tenant in ["roomy", "tight", "metered"] {
        let p99 = sample(
            &text,
            &format!(
                "cryptodispatch_tenant_latency_seconds{{tenant=\"{tenant}\",quantile=\"0.99\"}}"
            ),
        );
        assert!(p99.is_some_and(|s| s > 0.0), "{tenant}: {p99:?}\n{text}");
    }
    let stderr = d.stderr();
    assert!(
        stderr.contains("tenants tight (weight 1), roomy (weight 2), metered (weight 1)"),
        "{stderr}"
    );
    for token in [TIGHT, ROOMY, METERED, ALL] {
        assert!(
            !stderr.contains(token) && !text.contains(token),
            "a token leaked"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unauthenticated_calls_are_in_the_default_tenant() {
    let f = Fixture::new("tenants-open");
    let args = [
        "--keys",
        &f.keys.display().to_string(),
        "--allow-unauthenticated",
        "--insecure-loopback",
        "--listen",
        "127.0.0.1:0",
        "--nodes",
        "1",
        "--metrics",
        "127.0.0.1:0",
    ]
    .map(String::from);
    let d = Daemon::start(&args);
    bounded("an open daemon", LIMIT, async {
        let c = d.client(None).await;
        let data = bytes(40_000, 3);
        let mut r = cbc(data.clone());
        r.data.truncate(32_768);
        assert_eq!(c.encrypt(r).await.unwrap(), expected(&data[..32_768]));
    })
    .await;
    let done = "cryptodispatch_tenant_jobs_completed_total{tenant=\"default\"}";
    let text = scrape_until(d.metrics.unwrap(), |t| sample(t, done) == Some(1.0));
    assert_eq!(sample(&text, done), Some(1.0), "{text}");
    assert_eq!(
        sample(&text, "cryptodispatch_tenant_weight{tenant=\"default\"}"),
        Some(1.0)
    );
}

#[test]
fn a_tenant_given_two_settings_stops_the_start() {
    let f = Fixture::new("tenants-disagree");
    let tokens = format!(
        "# two tokens, one tenant\n{TIGHT} k128 tenant=t weight=2\n{ROOMY} * tenant=t weight=5\n"
    );
    f.dir.write("tokens", tokens.as_bytes(), 0o600);
    let refused = Daemon::try_start(&f.args()).expect_err("the daemon must refuse to start");
    assert_eq!(refused.status.code(), Some(2), "{}", refused.stderr);
    assert!(
        refused
            .stderr
            .contains("line 3: the tenant \"t\" has other settings on line 2"),
        "{}",
        refused.stderr
    );
    assert!(!refused.stderr.contains(TIGHT) && !refused.stderr.contains(ROOMY));
}
