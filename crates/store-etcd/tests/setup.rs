//! Setup verbs, the same on every store: `provision` (nothing to create on etcd, so it
//! checks) and `verify`, against the real server and against a port nobody answers.
#![allow(missing_docs)]

mod common;

use std::time::{Duration, Instant};

use etcd_client::{Client, ConnectOptions};
use leasehold_core::Error;
use leasehold_etcd::{EtcdConfig, EtcdStore};

#[tokio::test]
async fn provision_and_verify_on_the_real_server() {
    let store = common::store("setup").await;
    EtcdStore::provision(store.client(), store.config())
        .await
        .expect("provision");
    store.verify().await.expect("verify");
    assert!(
        store.stats().ranges >= 1,
        "verify sent its range request: {:?}",
        store.stats()
    );
}

#[tokio::test]
async fn verify_against_a_closed_port_is_unavailable_and_bounded() {
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        format!("http://{}", l.local_addr().expect("addr"))
    };
    // etcd-client connects lazily with this option: the first request finds no server.
    let opts = ConnectOptions::new()
        .with_connect_timeout(Duration::from_millis(300))
        .with_timeout(Duration::from_millis(500));
    let client = Client::connect([closed.as_str()], Some(opts))
        .await
        .expect("a client (connects on use)");
    let config = EtcdConfig::default()
        .with_request_timeout(Duration::from_secs(1))
        .expect("config");
    let started = Instant::now();
    let err = EtcdStore::new(client, config)
        .verify()
        .await
        .expect_err("nobody answers");
    assert!(matches!(err, Error::Unavailable { .. }), "{err:?}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "bounded: {:?}",
        started.elapsed()
    );
}
