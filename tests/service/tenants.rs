//! Tenants through the service's API: registration, limits on jobs and bytes in flight and on
//! bytes per second (blocking, handing back, waiting without a thread), a flooding tenant that
//! cannot hold another at the door, and the per-tenant counters.

use crate::common;

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::{Gen, block_on, ref_aes};
use cryptodispatch::crypto::AesImpl;
use cryptodispatch::packet::Mode;
use cryptodispatch::{
    AesOp, Direction, Job, NodeSpec, Padding, Service, ServiceBuilder, SubmitError, TenantError,
    TenantId, TenantSpec, TrySubmitError,
};

const KEY: [u8; 16] = [7; 16];

/// A service with one AES node slowed down, so that jobs stay in flight a while, and no
/// inline path (every job goes to the node).
fn slow_service(slowdown: f64) -> Service {
    Service::builder()
        .aes_cluster([NodeSpec::new().slowdown(slowdown)])
        .inline_limit(0)
        .build()
        .unwrap()
}

fn job(service: &Service, tenant: TenantId, len: usize) -> Job {
    let key = service.add_aes_key(&KEY).unwrap();
    Job::encrypt(key, Mode::Cbc, &[1; 16], vec![3u8; len]).tenant(tenant)
}

#[test]
fn a_long_jobs_bytes_count_as_served_while_it_runs() {
    // 256 packets of 16 KiB on a node slowed a hundred times: a job of a few hundred
    // milliseconds, run in several placements.
    let service = slow_service(100.0);
    let t = service.add_tenant(TenantSpec::new("long")).unwrap();
    let len = 4 << 20;
    let h = service.submit(job(&service, t, len)).unwrap();
    let tenant = |s: &Service| {
        let m = s.metrics();
        m.tenants.into_iter().find(|x| x.tenant == t).unwrap()
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let midway = loop {
        let tm = tenant(&service);
        if tm.bytes_served > 0 {
            break tm;
        }
        assert!(Instant::now() < deadline, "nothing served: {tm:?}");
        thread::sleep(Duration::from_micros(200));
    };
    assert!(
        midway.bytes_served < len as u64 && midway.bytes_completed == 0,
        "served only at the job's end: {midway:?}"
    );
    h.wait().unwrap();
    let end = tenant(&service);
    assert_eq!(
        (end.bytes_served, end.bytes_completed),
        (len as u64, len as u64)
    );
}

#[test]
fn an_unknown_tenant_is_refused_and_names_are_checked() {
    let service = slow_service(1.0);
    let err = service.submit(job(&service, TenantId(42), 16)).unwrap_err();
    assert_eq!(err, SubmitError::UnknownTenant(TenantId(42)));
    assert!(matches!(
        service.try_submit(job(&service, TenantId(42), 16)),
        Err(TrySubmitError::Invalid(SubmitError::UnknownTenant(_)))
    ));
    assert_eq!(
        service.add_tenant(TenantSpec::new("bad name")),
        Err(TenantError::BadName)
    );
    let a = service.add_tenant(TenantSpec::new("a")).unwrap();
    assert_eq!(
        service.add_tenant(TenantSpec::new("a")),
        Err(TenantError::Duplicate("a".into()))
    );
    assert_eq!(service.tenant_id("a"), Some(a));
    assert_eq!(service.tenant_id("default"), Some(TenantId::DEFAULT));
    // The job's output is the same under any tenant.
    let out = service
        .submit(job(&service, a, 4096))
        .unwrap()
        .wait()
        .unwrap();
    let expected = ref_aes(
        &KEY,
        AesOp::new(Direction::Encrypt, Mode::Cbc),
        &[1; 16],
        &[3u8; 4096],
    );
    assert_eq!(out.into_data().unwrap(), expected.unwrap());
}

#[test]
fn jobs_in_flight_are_bounded_try_submit_hands_back_and_submit_waits() {
    let service = Arc::new(slow_service(50.0));
    let t = service
        .add_tenant(TenantSpec::new("bounded").max_jobs_in_flight(2))
        .unwrap();
    let first = service.submit(job(&service, t, 64 << 10)).unwrap();
    let second = service.submit(job(&service, t, 64 << 10)).unwrap();
    // A third is handed back whole.
    match service.try_submit(job(&service, t, 100)) {
        Err(TrySubmitError::OverLimit(j)) => {
            assert_eq!(j.len(), 100);
            assert_eq!(j.tenant_id(), t);
        }
        other => panic!("expected OverLimit, got {other:?}"),
    }
    // Another tenant is not held.
    let other = service
        .submit(job(&service, TenantId::DEFAULT, 16))
        .unwrap();
    // A blocking submit waits until one of the two finishes.
    let s = Arc::clone(&service);
    let waiter = thread::spawn(move || {
        let h = s.submit(job(&s, t, 16)).unwrap();
        h.wait().unwrap()
    });
    thread::sleep(Duration::from_millis(20));
    let m = service.metrics();
    let tm = m.tenants.iter().find(|x| x.tenant == t).unwrap();
    assert!(tm.jobs_in_flight <= 2, "{tm:?}");
    first.wait().unwrap();
    second.wait().unwrap();
    waiter.join().unwrap();
    other.wait().unwrap();
    let m = service.metrics();
    let tm = m.tenants.iter().find(|x| x.tenant == t).unwrap();
    assert_eq!(tm.jobs_admitted, 3);
    assert_eq!(tm.jobs_completed, 3);
    assert_eq!(tm.bytes_completed, 2 * (64 << 10) + 16);
    assert_eq!(tm.bytes_served, tm.bytes_completed);
    assert_eq!((tm.jobs_refused, tm.bytes_refused), (1, 100));
    assert_eq!(
        (tm.jobs_in_flight, tm.bytes_in_flight, tm.bytes_waiting),
        (0, 0, 0)
    );
    let [p50, _, p99, _] = tm.latency.unwrap();
    assert!(p50 <= p99 && !p50.is_zero());
    assert_eq!(m.tenants[0].tenant, TenantId::DEFAULT);
    assert_eq!(m.tenants[0].jobs_completed, 1);
}

#[test]
fn submit_async_waits_for_the_tenants_room_without_a_thread() {
    let service = slow_service(50.0);
    let t = service
        .add_tenant(TenantSpec::new("async").max_bytes_in_flight(64 << 10))
        .unwrap();
    let first = service.submit(job(&service, t, 64 << 10)).unwrap();
    let (second, stats) = block_on(service.submit_async(job(&service, t, 1024)));
    // It was pending once at least, then woken by the first job's end.
    assert!(stats.polls >= 2, "{stats:?}");
    assert!(first.wait().is_ok());
    assert_eq!(
        second.unwrap().wait().unwrap().into_data().unwrap().len(),
        1024
    );
    // A future dropped while it waits submits nothing and counts as refused.
    let held = service.submit(job(&service, t, 64 << 10)).unwrap();
    {
        let mut fut = std::pin::pin!(service.submit_async(job(&service, t, 4096)));
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        assert!(fut.as_mut().poll(&mut cx).is_pending());
        let m = service.metrics();
        assert_eq!(m.tenants[1].bytes_waiting, 4096);
    }
    held.wait().unwrap();
    let m = service.metrics();
    let tm = &m.tenants[1];
    assert_eq!(
        (tm.jobs_admitted, tm.jobs_completed, tm.jobs_refused),
        (3, 3, 1)
    );
    assert_eq!((tm.bytes_waiting, tm.bytes_in_flight), (0, 0));
}

#[test]
fn the_byte_rate_holds_a_tenant_to_its_bucket() {
    let service = Service::builder()
        .aes_cluster([NodeSpec::new()])
        .build()
        .unwrap();
    let t = service
        .add_tenant(TenantSpec::new("metered").max_bytes_per_sec(2 << 20))
        .unwrap();
    let start = Instant::now();
    // The bucket starts full (2 MiB): 3 MiB take half a second more at least.
    let handles: Vec<_> = (0..12)
        .map(|_| service.submit(job(&service, t, 256 << 10)).unwrap())
        .collect();
    for h in handles {
        h.wait().unwrap();
    }
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(450),
        "3 MiB at 2 MiB/s in {took:?}"
    );
    // Async submitters are held the same way, and woken by the supervisor's tick.
    let start = Instant::now();
    for _ in 0..2 {
        let (h, _) = block_on(service.submit_async(job(&service, t, 256 << 10)));
        h.unwrap().wait().unwrap();
    }
    assert!(start.elapsed() >= Duration::from_millis(150));
    let m = service.metrics();
    assert_eq!(m.tenants[1].bytes_completed, 14 * (256 << 10));
}

#[test]
fn a_flooding_tenant_cannot_hold_another_at_the_door() {
    let service = Service::builder()
        .aes_cluster([NodeSpec::new().slowdown(20.0)])
        .inline_limit(0)
        .receive_queue_len(16)
        .build()
        .unwrap();
    let noisy = service.add_tenant(TenantSpec::new("noisy")).unwrap();
    let quiet = service.add_tenant(TenantSpec::new("quiet")).unwrap();
    let mut held = Vec::new();
    let mut g = Gen::new(5);
    // The noisy tenant fills the cluster until it is refused.
    loop {
        let len = 16 * (1 + g.next_u64() as usize % 1024);
        match service.try_submit(job(&service, noisy, len)) {
            Ok(h) => held.push(h),
            Err(TrySubmitError::Full(_)) => break,
            Err(e) => panic!("{e}"),
        }
        assert!(held.len() < 10_000, "never full");
    }
    // The quiet tenant still gets in at once, and the default tenant too.
    let h = service.try_submit(job(&service, quiet, 4096)).unwrap();
    let d = service
        .try_submit(job(&service, TenantId::DEFAULT, 4096))
        .unwrap();
    h.wait().unwrap();
    d.wait().unwrap();
    for h in held {
        h.wait().unwrap();
    }
    // The light path is off unless asked for.
    assert_eq!(service.metrics().jobs_light, 0);
}

#[test]
fn bursts_under_a_limit_send_what_they_hold_first() {
    let service = slow_service(5.0);
    let t = service
        .add_tenant(TenantSpec::new("bursty").max_jobs_in_flight(3))
        .unwrap();
    let jobs: Vec<Job> = (0..10).map(|_| job(&service, t, 4096)).collect();
    let handles = service.submit_burst(jobs).unwrap();
    assert_eq!(handles.len(), 10);
    for h in handles {
        h.wait().unwrap();
    }
    let tm = &service.metrics().tenants[1];
    assert_eq!((tm.jobs_admitted, tm.jobs_completed), (10, 10));
}

/// A flooding tenant's backlog beside a quiet tenant, and what it gives.
struct Backlog {
    service: Service,
    noisy: TenantId,
    quiet: TenantId,
    key: cryptodispatch::KeyId,
    /// The flooding tenant's 300 jobs of 8 KiB (CBC encryption), submitted.
    handles: Vec<cryptodispatch::JobHandle>,
    /// The output each of them gives.
    output: Vec<u8>,
}

/// Waits for the flooding tenant's backlog, each job's output checked, and returns the
/// service's metrics once every packet admitted is accounted for as completed.
fn drain(
    service: &Service,
    backlog: Vec<cryptodispatch::JobHandle>,
    output: &[u8],
) -> cryptodispatch::Metrics {
    for h in backlog {
        assert_eq!(h.wait().unwrap().into_data().unwrap(), output);
    }
    let m = service.metrics();
    assert_eq!(m.packets_completed, m.packets_admitted, "{m}");
    m
}

/// How many of tenant `t`'s jobs took the light path.
fn jobs_light(service: &Service, t: TenantId) -> u64 {
    let m = service.metrics();
    m.tenants.iter().find(|x| x.tenant == t).unwrap().jobs_light
}

/// Jobs of tenant `t` too long for the light path that went ahead in the core on its credit.
fn jobs_granted(service: &Service, t: TenantId) -> u64 {
    let m = service.metrics();
    m.tenants
        .iter()
        .find(|x| x.tenant == t)
        .unwrap()
        .jobs_granted
}

/// `n` of the noisy tenant's backlog jobs, of data from `seed`, as [`backlog`] submits them.
fn flood_jobs(
    service: &Service,
    key: cryptodispatch::KeyId,
    noisy: TenantId,
    iv: &[u8; 16],
    seed: u64,
    n: usize,
) -> Vec<cryptodispatch::JobHandle> {
    let flood = Gen::new(seed).bytes(8 << 10);
    (0..n)
        .map(|_| {
            let job = Job::encrypt(key, Mode::Cbc, iv, flood.clone()).tenant(noisy);
            service.submit(job).unwrap()
        })
        .collect()
}

/// A service with one slowed AES node of 1 KiB packets and the light path on, the tenants
/// `noisy` and `quiet`, and the noisy tenant's backlog submitted, of data from `seed`.
fn backlog(iv: &[u8; 16], seed: u64) -> Backlog {
    let service = Service::builder()
        .aes_cluster([NodeSpec::new().slowdown(16.0)])
        .packet_size(1024)
        .inline_limit(0)
        .light_path(true)
        .build()
        .unwrap();
    let noisy = service.add_tenant(TenantSpec::new("noisy")).unwrap();
    let quiet = service.add_tenant(TenantSpec::new("quiet")).unwrap();
    let key = service.add_aes_key(&KEY).unwrap();
    let flood = Gen::new(seed).bytes(8 << 10);
    let output = ref_aes(&KEY, AesOp::new(Direction::Encrypt, Mode::Cbc), iv, &flood).unwrap();
    let handles = flood_jobs(&service, key, noisy, iv, seed, 300);
    Backlog {
        service,
        noisy,
        quiet,
        key,
        handles,
        output,
    }
}

/// A quiet tenant's small jobs, of every mode, both ways and several packets long, pass a
/// flooding tenant's backlog (they take the light path, docs/ALGORITHM.md §15.7) with outputs
/// exact to the byte; nothing of either tenant is lost and every packet is accounted for.
#[test]
fn a_quiet_tenants_small_jobs_pass_a_backlog_exactly() {
    let iv = [0x21; 16];
    let Backlog {
        service,
        noisy,
        quiet,
        key,
        handles: backlog,
        output: flood_out,
    } = backlog(&iv, 1);
    // The flood's first jobs may take the light path themselves, while the node is still
    // empty: count only what the quiet tenant sends from here.
    let light_before = service.metrics().jobs_light;
    let mut g = Gen::new(2);
    let modes = [Mode::Ecb, Mode::Cbc, Mode::Ofb, Mode::Cfb, Mode::Ctr];
    for i in 0..40 {
        let mode = modes[i % modes.len()];
        let direction = if i % 2 == 0 {
            Direction::Encrypt
        } else {
            Direction::Decrypt
        };
        let op = match direction {
            Direction::Encrypt => AesOp::new(direction, mode),
            Direction::Decrypt => AesOp::new(direction, mode).with_padding(Padding::None),
        };
        // Up to seven packets, within one node queue of eight; a partial block where the mode
        // takes one.
        let partial = match mode {
            Mode::Ecb | Mode::Cbc => 0,
            _ => g.next_u64() as usize % 16,
        };
        let blocks = 1 + g.next_u64() as usize % 448;
        let data = g.bytes(16 * blocks + partial);
        let iv: &[u8] = if mode == Mode::Ecb { &[] } else { &iv };
        let expected = ref_aes(&KEY, op, iv, &data).unwrap();
        let out = service
            .submit(Job::aes(key, op, iv, data).tenant(quiet))
            .unwrap()
            .wait()
            .unwrap();
        assert_eq!(out.into_data().unwrap(), expected, "job {i}: {op:?}");
    }
    let waiting = backlog.iter().filter(|h| !h.is_finished()).count();
    assert!(waiting > 0, "the quiet jobs did not pass the backlog");
    let m = drain(&service, backlog, &flood_out);
    // The quiet tenant's jobs took the light path, as far as its credit went (38 of 40 on a
    // quiet machine).
    assert!((20..=40).contains(&(m.jobs_light - light_before)), "{m}");
    let tenant = |t: TenantId| m.tenants.iter().find(|x| x.tenant == t).unwrap();
    assert_eq!(
        (tenant(noisy).jobs_completed, tenant(quiet).jobs_completed),
        (300, 40)
    );
    // Per tenant: the quiet tenant's light jobs are those counted since.
    assert_eq!(tenant(quiet).jobs_light, m.jobs_light - light_before, "{m}");
    assert_eq!(
        tenant(noisy).jobs_light + tenant(quiet).jobs_light,
        m.jobs_light
    );
    service.shutdown();
}

/// A quiet tenant that sends a burst after a pause (as a client does when a pause of its own
/// held its calls back) has saved up light credit for it: all of a burst of three node queues'
/// worth takes the light path beside a backlog, where a credit of one node queue sent the part
/// past the first into the core (docs/ALGORITHM.md §15.7, why a quiet tenant may save up).
#[test]
fn a_quiet_tenants_burst_after_a_pause_takes_the_light_path() {
    let iv = [0x35; 16];
    let Backlog {
        service,
        noisy,
        quiet,
        key,
        handles: mut backlog,
        output: flood_out,
    } = backlog(&iv, 3);
    let small = Gen::new(4).bytes(1024);
    let op = AesOp::new(Direction::Encrypt, Mode::Ctr);
    let expected = ref_aes(&KEY, op, &iv, &small).unwrap();
    let send = || {
        let job = Job::aes(key, op, &iv, small.clone()).tenant(quiet);
        service.submit(job).unwrap()
    };
    // One job starts the quiet tenant's credit; then it pauses while the credit refills.
    assert_eq!(send().wait().unwrap().into_data().unwrap(), expected);
    thread::sleep(Duration::from_millis(100));
    // The backlog topped up, so that it is there beside the burst (the node may have served
    // much of it during the pause).
    backlog.extend(flood_jobs(&service, key, noisy, &iv, 3, 300));
    // A burst of 24 one-packet jobs: three node queues of eight packets.
    let burst: Vec<_> = (0..24).map(|_| send()).collect();
    for h in burst {
        assert_eq!(h.wait().unwrap().into_data().unwrap(), expected);
    }
    assert_eq!(jobs_light(&service, quiet), 25, "{}", service.metrics());
    assert!(
        backlog.iter().any(|h| !h.is_finished()),
        "the burst did not pass the backlog"
    );
    drain(&service, backlog, &flood_out);
    service.shutdown();
}

/// A quiet tenant's long jobs, longer than a node queue and up to sixteen of them, pass a
/// flooding tenant's backlog by the light path one after another, and several at once, exact
/// to the byte, where they used to wait their turns in the core; a longer job takes the core's
/// path, ahead of the backlog there on the credit, exact all the same (docs/ALGORITHM.md
/// §15.7, long jobs).
#[test]
fn a_quiet_tenants_long_jobs_take_the_light_path_beside_a_backlog() {
    const FLOOD: u64 = 5;
    let iv = [0x37; 16];
    let Backlog {
        service,
        noisy,
        quiet,
        key,
        handles: mut backlog,
        output: flood_out,
    } = backlog(&iv, FLOOD);
    let run = |seed: u64, len: usize, mode: Mode| {
        let op = AesOp::new(Direction::Encrypt, mode);
        let data = Gen::new(seed).bytes(len);
        let expected = ref_aes(&KEY, op, &iv, &data).unwrap();
        let job = Job::aes(key, op, &iv, data).tenant(quiet);
        let out = service.submit(job).unwrap().wait().unwrap();
        assert_eq!(
            out.into_data().unwrap(),
            expected,
            "{len} bytes of {mode:?}"
        );
    };
    // Forty more of the flooding tenant's jobs, the same as its backlog's.
    let top_up = || flood_jobs(&service, key, noisy, &iv, FLOOD, 40);
    // Node queues of 8 packets of 1 KiB (and a block each): jobs of two to twelve of them,
    // a chained mode and a parallel one, a pause between them as a quiet client leaves.
    let long = [
        (16 << 10, Mode::Cbc),
        (24 << 10, Mode::Ctr),
        (32 << 10, Mode::Cbc),
        (96 << 10, Mode::Cbc),
    ];
    for (i, &(len, mode)) in long.iter().enumerate() {
        run(10 + i as u64, len, mode);
        thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        jobs_light(&service, quiet),
        long.len() as u64,
        "{}",
        service.metrics()
    );
    // Three long jobs of the serial modes sent at once: where the table chose lanes they run
    // side by side, one packet of each per set, their chaining states through the store
    // (which sets form is checked in `hand.rs`); exact either way. The 96 KiB job left the
    // tenant up to 88 KiB in debt, and the three need 40 KiB of credit (each a node queue of
    // it, and takes 16 KiB): at the slowed node's 1.6 MB/s, half of it the tenant's share,
    // that is about 160 ms of refill, so the tenant pauses as long before it sends them, as a
    // quiet client within its share would (after 20 ms, on a busy machine, the third took the
    // core's path); the flooding tenant tops its backlog up meanwhile, with the same jobs.
    thread::sleep(Duration::from_millis(250));
    backlog.extend(top_up());
    let burst: Vec<_> = [Mode::Cbc, Mode::Ofb, Mode::Cfb]
        .into_iter()
        .enumerate()
        .map(|(i, mode)| {
            let op = AesOp::new(Direction::Encrypt, mode);
            let data = Gen::new(30 + i as u64).bytes(16 << 10);
            let expected = ref_aes(&KEY, op, &iv, &data).unwrap();
            let job = Job::aes(key, op, &iv, data).tenant(quiet);
            (service.submit(job).unwrap(), expected, mode)
        })
        .collect();
    for (h, expected, mode) in burst {
        assert_eq!(h.wait().unwrap().into_data().unwrap(), expected, "{mode:?}");
    }
    let light = long.len() as u64 + 3;
    assert_eq!(jobs_light(&service, quiet), light, "{}", service.metrics());
    assert!(
        backlog.iter().any(|h| !h.is_finished()),
        "the long jobs did not pass the backlog"
    );
    // Longer than sixteen node queues: through the core, ahead of the backlog there on the
    // credit saved since the last job. The flooding tenant tops its backlog up first (the
    // jobs above may have drained most of it on a busy machine), with the same jobs.
    thread::sleep(Duration::from_millis(20));
    backlog.extend(top_up());
    run(20, 168 << 10, Mode::Cbc);
    assert_eq!(jobs_light(&service, quiet), light, "{}", service.metrics());
    assert_eq!(jobs_granted(&service, quiet), 1, "{}", service.metrics());
    assert!(
        backlog.iter().any(|h| !h.is_finished()),
        "the job too long for the light path did not pass the backlog"
    );
    drain(&service, backlog, &flood_out);
    service.shutdown();
}

/// Quiet tenants' light jobs, sent from several threads at once (so that they wait together
/// and run as lane sets) while a flooding tenant keeps a backlog, and a shutdown in the middle
/// of it all: every job admitted completes with exact output, every later one is refused as
/// shut down, and the shutdown does not wait forever for light packets it did not count.
#[test]
fn light_jobs_from_many_threads_and_a_shutdown_lose_nothing() {
    let service = Arc::new(
        Service::builder()
            .aes_cluster([NodeSpec::new().slowdown(4.0), NodeSpec::new()])
            .packet_size(1024)
            .inline_limit(0)
            .light_path(true)
            .build()
            .unwrap(),
    );
    let noisy = service.add_tenant(TenantSpec::new("noisy")).unwrap();
    let key = service.add_aes_key(&KEY).unwrap();
    let iv = [0x33; 16];
    let op = AesOp::new(Direction::Encrypt, Mode::Cbc);
    let flood: Vec<u8> = Gen::new(3).bytes(4 << 10);
    let flood_out = ref_aes(&KEY, op, &iv, &flood).unwrap();
    let backlog: Vec<_> = (0..200)
        .map(|_| {
            let job = Job::encrypt(key, Mode::Cbc, &iv, flood.clone()).tenant(noisy);
            service.submit(job).unwrap()
        })
        .collect();
    let quiet: Vec<TenantId> = (0..4)
        .map(|i| {
            service
                .add_tenant(TenantSpec::new(format!("quiet{i}")))
                .unwrap()
        })
        .collect();
    let senders: Vec<_> = quiet
        .iter()
        .enumerate()
        .map(|(i, &tenant)| {
            let service = Arc::clone(&service);
            thread::spawn(move || {
                let mut g = Gen::new(10 + i as u64);
                let (mut done, mut refused) = (0, 0);
                // Until the shutdown refuses them.
                while refused == 0 && done < 1_000_000 {
                    let blocks = 1 + g.next_u64() as usize % 128;
                    let data = g.bytes(16 * blocks);
                    let expected = ref_aes(&KEY, op, &iv, &data).unwrap();
                    match service.submit(Job::aes(key, op, &iv, data).tenant(tenant)) {
                        Ok(h) => {
                            let out = h.wait().expect("an admitted job completes");
                            assert_eq!(out.into_data().unwrap(), expected);
                            done += 1;
                        }
                        Err(SubmitError::ShutDown) => refused += 1,
                        Err(e) => panic!("{e}"),
                    }
                }
                (done, refused)
            })
        })
        .collect();
    thread::sleep(Duration::from_millis(30));
    let closer = {
        let service = Arc::clone(&service);
        thread::spawn(move || service.shutdown())
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while !closer.is_finished() {
        assert!(Instant::now() < deadline, "shutdown did not finish");
        thread::sleep(Duration::from_millis(10));
    }
    closer.join().unwrap();
    let (mut done, mut refused) = (0, 0);
    for s in senders {
        let (d, r) = s.join().unwrap();
        done += d;
        refused += r;
    }
    // Each sender was still sending when the shutdown came.
    assert_eq!(refused, 4);
    assert!(done > 0);
    let m = drain(&service, backlog, &flood_out);
    assert!(m.jobs_light > 0, "{m}");
}

/// A service with the light path on and no inline path, built from `builder`, with two
/// tenants named `names` and the test key.
fn light_tenants(
    builder: cryptodispatch::ServiceBuilder,
    names: [&str; 2],
) -> (Service, [TenantId; 2], cryptodispatch::KeyId) {
    let service = builder.inline_limit(0).light_path(true).build().unwrap();
    let tenants = names.map(|n| service.add_tenant(TenantSpec::new(n)).unwrap());
    let key = service.add_aes_key(&KEY).unwrap();
    (service, tenants, key)
}

/// Light packets wait in turns over the tenants (docs/ALGORITHM.md §15.7): a tenant's light job
/// placed behind eight of another tenant's waits for about one of them, not for all eight.
#[test]
fn light_jobs_take_turns_over_the_tenants() {
    let (service, [first, second], key) = light_tenants(
        Service::builder().aes_cluster([NodeSpec::new().slowdown(20.0)]),
        ["first", "second"],
    );
    // CTR runs one packet per set (no lanes), so the turns decide the order.
    let op = AesOp::new(Direction::Encrypt, Mode::Ctr);
    let iv = [0x44; 16];
    let data = Gen::new(5).bytes(16 << 10);
    let expected = ref_aes(&KEY, op, &iv, &data).unwrap();
    let job = |tenant| Job::aes(key, op, &iv, data.clone()).tenant(tenant);
    let earlier: Vec<_> = (0..8)
        .map(|_| service.submit(job(first)).unwrap())
        .collect();
    // Jobs the node finished before the second tenant's job came (a submitting thread
    // descheduled on a busy machine) were not passed by it: count from its submission.
    let finished_before = earlier.iter().filter(|h| h.is_finished()).count();
    let out = service.submit(job(second)).unwrap().wait().unwrap();
    let finished = earlier.iter().filter(|h| h.is_finished()).count() - finished_before;
    assert_eq!(out.into_data().unwrap(), expected);
    // In turns: the first tenant's first packet (maybe its second, already taken), then the
    // second tenant's. In arrival order it would be all eight still waiting.
    assert!(
        finished <= 4,
        "{finished} of the first tenant's jobs went first ({finished_before} had finished before)"
    );
    for h in earlier {
        assert_eq!(h.wait().unwrap().into_data().unwrap(), expected);
    }
    let m = service.metrics();
    assert_eq!(m.jobs_light, 9, "{m}");
    let light = |t: TenantId| m.tenants.iter().find(|x| x.tenant == t).unwrap().jobs_light;
    assert_eq!((light(first), light(second)), (8, 1), "{m}");
}

/// A tenant behind on its own light jobs (docs/ALGORITHM.md §15.7): while the node runs a
/// long set of another tenant's, a tenant's light jobs of one packet wait in its light queue;
/// once a whole lane set of them waits, its next job runs on its submitting thread rather
/// than wait for that set, exact to the byte. With inline runs off, it waits too.
#[test]
fn a_tenant_behind_on_its_own_light_jobs_runs_its_next_on_its_submitter() {
    for inline in [true, false] {
        // The light jobs must all come while the node runs the long set: on a machine too
        // busy for that, try again.
        let ran = (0..5).find_map(|attempt| behind_scenario(inline, attempt));
        assert!(
            ran.is_some(),
            "the node never ran the long set while the light jobs came (inline {inline})"
        );
    }
}

/// [`a_tenant_behind_on_its_own_light_jobs_runs_its_next_on_its_submitter`] once; `None` if
/// the node took one of the light jobs before the last came.
fn behind_scenario(inline: bool, attempt: u64) -> Option<()> {
    const WIDTH: usize = 4;
    const PACKET: usize = 256 << 10;
    let service = Service::builder()
        .aes_cluster([NodeSpec::new().capacity((16 * PACKET) as u64 + 16)])
        .packet_size(PACKET)
        .aes_implementation(AesImpl::Lanes { width: WIDTH })
        .light_path(true)
        .inline_limit(if inline {
            ServiceBuilder::DEFAULT_INLINE_LIMIT
        } else {
            0
        })
        .build()
        .unwrap();
    let [noisy, quiet] =
        ["noisy", "quiet"].map(|n| service.add_tenant(TenantSpec::new(n)).unwrap());
    let key = service.add_aes_key(&KEY).unwrap();
    let op = AesOp::new(Direction::Encrypt, Mode::Cbc);
    let iv = [0x2B; 16];
    let mut g = Gen::new(40 + attempt);
    let (long, short) = (g.bytes(64 * PACKET), g.bytes(4096));
    let (long_out, short_out) = (
        ref_aes(&KEY, op, &iv, &long).unwrap(),
        ref_aes(&KEY, op, &iv, &short).unwrap(),
    );
    // The noisy tenant's job goes through the core (a burst never takes the light path) and
    // runs a node queue (4 MiB, milliseconds) at a time, without a pause: no light job came
    // before its first set.
    let job = |tenant, data: &Vec<u8>| Job::aes(key, op, &iv, data.clone()).tenant(tenant);
    let long_handle = service
        .submit_burst(vec![job(noisy, &long)])
        .unwrap()
        .pop()
        .unwrap();
    thread::sleep(Duration::from_millis(1));
    // A lane set of the quiet tenant's light jobs, then one more.
    let handles: Vec<_> = (0..=WIDTH)
        .map(|_| service.submit(job(quiet, &short)).unwrap())
        .collect();
    let m = service.metrics();
    let of = |t: TenantId| m.tenants.iter().find(|x| x.tenant == t).unwrap().clone();
    let q = of(quiet);
    // The node still in the long set, which took none of them; and not so long off its core
    // that it looked stalled, which runs a job on its submitter first (another rule).
    let premise = handles[..WIDTH].iter().all(|h| !h.is_finished())
        && !long_handle.is_finished()
        && q.jobs_inline_stalled == 0;
    if premise {
        if inline {
            assert_eq!(
                (q.jobs_light, q.jobs_inline_behind),
                (WIDTH as u64, 1),
                "{m}"
            );
            assert!(handles[WIDTH].is_finished(), "{m}");
        } else {
            assert_eq!(
                (q.jobs_light, q.jobs_inline_behind),
                (WIDTH as u64 + 1, 0),
                "{m}"
            );
        }
        assert_eq!(m.jobs_inline_behind, q.jobs_inline_behind, "{m}");
        assert_eq!(of(noisy).jobs_inline_behind, 0, "{m}");
    }
    for h in handles {
        assert_eq!(h.wait().unwrap().into_data().unwrap(), short_out);
    }
    assert_eq!(long_handle.wait().unwrap().into_data().unwrap(), long_out);
    service.shutdown();
    premise.then_some(())
}

/// A light chain run (a tenant's light job of several packets, up to a node queue) pauses
/// between its packets for another tenant's light job of one packet (docs/ALGORITHM.md
/// §15.7): the short job waits for a packet of the run, not for all of it.
#[test]
fn a_light_job_of_one_packet_runs_at_a_pause_of_another_tenants_light_chain_run() {
    const PACKET: usize = 64 << 10;
    const PACKETS: usize = 64;
    // A node queue that holds the whole long job, so that it is one light chain run.
    let (service, [noisy, quiet], key) = light_tenants(
        Service::builder()
            .aes_cluster([NodeSpec::new().capacity((PACKET * PACKETS) as u64 + 16)])
            .aes_implementation(cryptodispatch::crypto::AesImpl::RustCrypto)
            .packet_size(PACKET),
        ["noisy", "quiet"],
    );
    let op = AesOp::new(Direction::Encrypt, Mode::Cbc);
    let iv = [0x61; 16];
    let (long, short) = (Gen::new(8).bytes(PACKET * PACKETS), Gen::new(9).bytes(1024));
    let (long_out, short_out) = (
        ref_aes(&KEY, op, &iv, &long).unwrap(),
        ref_aes(&KEY, op, &iv, &short).unwrap(),
    );
    let submit = |tenant, data: &Vec<u8>| {
        service
            .submit(Job::aes(key, op, &iv, data.clone()).tenant(tenant))
            .unwrap()
    };
    // The long job takes milliseconds; the short one is submitted a moment after it, while
    // it runs. Where the run finished first anyway (the test's thread descheduled meanwhile),
    // the round shows nothing and runs again.
    let mut rounds = Vec::new();
    for _ in 0..5 {
        let mut l = submit(noisy, &long);
        thread::sleep(Duration::from_micros(200));
        let mut s = submit(quiet, &short);
        let placed_while_running = !l.is_finished();
        let out = s
            .wait_timeout(Duration::from_secs(60))
            .expect("short job finished");
        let long_finished_first = l.is_finished();
        assert_eq!(out.unwrap().into_data().unwrap(), short_out);
        let out = l
            .wait_timeout(Duration::from_secs(60))
            .expect("long job finished");
        assert_eq!(out.unwrap().into_data().unwrap(), long_out);
        if placed_while_running {
            assert!(
                !long_finished_first,
                "the short job waited for the whole light chain run ({rounds:?})"
            );
            // Both went by the light path, the short one to the node (not run on its
            // submitter beside a node that looked stalled).
            let m = service.metrics();
            let of = |t: TenantId| m.tenants.iter().find(|x| x.tenant == t).unwrap();
            assert!(
                of(noisy).jobs_light >= 1 && of(quiet).jobs_light >= 1,
                "{m}"
            );
            assert_eq!(of(quiet).jobs_inline_stalled, 0, "{m}");
            assert_eq!(of(quiet).jobs_inline_behind, 0, "{m}");
            return;
        }
        rounds.push("the long job finished before the short one was placed");
    }
    panic!("no round placed the short job while the long one ran: {rounds:?}");
}

/// On a slowed node a light job does not wait out the emulated rest of the packet running
/// (docs/ALGORITHM.md §15.7): a slower core would run it at its next pause, so it runs while
/// the node waits, and the packet's own wait goes on after it.
#[test]
fn a_slowed_node_runs_a_light_job_within_its_emulated_wait() {
    const PACKET: usize = 64 << 10;
    // A node that holds one packet, so that a job of twenty is more than the light path takes
    // (sixteen node queues) and goes through the core; slowed so that it takes at least 800 ms.
    let service = |slowdown: f64| {
        let node = NodeSpec::new()
            .slowdown(slowdown)
            .capacity(PACKET as u64 + 16);
        // RustCrypto whatever else is built in: on OpenSSL a packet's real time is tens of
        // microseconds and moves by a quarter from run to run, a thousand times over.
        Service::builder()
            .aes_cluster([node])
            .aes_implementation(cryptodispatch::crypto::AesImpl::RustCrypto)
            .packet_size(PACKET)
            .inline_limit(0)
            .light_path(true)
            .build()
            .unwrap()
    };
    let op = AesOp::new(Direction::Encrypt, Mode::Cbc);
    let iv = [0x52; 16];
    const PACKETS: u32 = 20;
    let (long, short) = (
        Gen::new(6).bytes(PACKETS as usize * PACKET),
        Gen::new(7).bytes(1024),
    );
    let (long_out, short_out) = (
        ref_aes(&KEY, op, &iv, &long).unwrap(),
        ref_aes(&KEY, op, &iv, &short).unwrap(),
    );
    let output = |h: &mut cryptodispatch::JobHandle| {
        let out = h.wait_timeout(Duration::from_secs(120)).expect("finished");
        out.unwrap().into_data().unwrap()
    };
    let mut slowdown = 50.0;
    loop {
        let service = service(slowdown);
        let noisy = service.add_tenant(TenantSpec::new("noisy")).unwrap();
        let quiet = service.add_tenant(TenantSpec::new("quiet")).unwrap();
        let key = service.add_aes_key(&KEY).unwrap();
        let submit = |tenant, data: &Vec<u8>| {
            service
                .submit(Job::aes(key, op, &iv, data.clone()).tenant(tenant))
                .unwrap()
        };
        // A job's latency alone, twice over: checked, and both times given.
        let alone_twice = |tenant, data: &Vec<u8>, expected: &Vec<u8>| {
            [0, 1].map(|_| {
                let mut h = submit(tenant, data);
                assert_eq!(&output(&mut h), expected);
                h.latency().unwrap()
            })
        };
        // The long job alone, the faster of two (the first may pay a first call's costs,
        // slowed too): its latency is almost all emulated wait.
        let [a, b] = alone_twice(noisy, &long, &long_out);
        let whole = a.min(b);
        if whole < Duration::from_millis(800) && slowdown < 1000.0 {
            slowdown = (slowdown * 2.0).min(1000.0);
            continue;
        }
        // The short job alone (twice, the slower kept): its own time, which the slowdown
        // makes long too where an implementation has a fixed cost per call.
        let [a, b] = alone_twice(quiet, &short, &short_out);
        let short_alone = a.max(b);
        let light_before = service.metrics().jobs_light;
        // The long job again, and halfway through its first packet's wait the short job.
        // Without the light packets run during the wait, it waited for the rest of that
        // packet's time, half a packet's, before its own.
        let packet = whole / PACKETS;
        let mut running = submit(noisy, &long);
        thread::sleep(packet / 2);
        let mut light = submit(quiet, &short);
        assert_eq!(output(&mut light), short_out);
        assert_eq!(output(&mut running), long_out);
        let m = service.metrics();
        assert_eq!(m.jobs_light - light_before, 1, "{m}");
        let (short_took, long_took) = (light.latency().unwrap(), running.latency().unwrap());
        assert!(
            short_took < short_alone + packet / 4,
            "the short job took {short_took:?} beside a long one of {whole:?} alone \
             ({short_alone:?} alone)"
        );
        // The long job's wait was not dropped for the short one: it still took most of its
        // time (its real time, slowed many times over, moves from run to run, so no closer
        // bound holds).
        assert!(
            long_took >= whole.mul_f64(0.6),
            "{long_took:?} against {whole:?} alone"
        );
        service.shutdown();
        return;
    }
}
