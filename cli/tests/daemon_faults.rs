//! `cryptodispatchd` with a node that fails (the `fault-injection` feature, which gives the
//! daemon `--fault-aes-panic-after`): the job that was on it is answered `UNAVAILABLE`, so a
//! client or HAProxy may send it to another daemon, not `INTERNAL`.
#![cfg(all(feature = "daemon", feature = "fault-injection"))]

mod daemon_support;

use std::time::Duration;

use daemon_support::remote::client::{Client, Retry};
use daemon_support::remote::proto::{self, AesRequest};
use daemon_support::*;
use tonic::Code;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_on_a_failed_node_is_unavailable() {
    let f = Fixture::new("node-failed");
    let mut args = f.args();
    args.extend(["--fault-aes-panic-after".into(), "0".into()]);
    let d = Daemon::start(&args);
    bounded("a failed node", Duration::from_secs(60), async {
        let mut config = d.config(Some(ALL));
        config.retry = Retry {
            attempts: 1,
            ..Retry::default()
        };
        let c = Client::connect(&config).await.unwrap();
        // 256 KiB of CBC: many packets, run on the (only) AES node, which panics at once.
        let request = AesRequest {
            key: "k128".into(),
            mode: proto::Mode::Cbc as i32,
            iv: vec![0; 16],
            padding: proto::Padding::None as i32,
            data: vec![0; 256 << 10],
        };
        let e = c.encrypt(request).await.unwrap_err();
        assert_eq!(e.code(), Code::Unavailable, "{e:?}");
        assert!(e.message().contains("failed"), "{}", e.message());
    })
    .await;
}
