//! `RedisStore::connect` is bounded: a refused port and a server that accepts the
//! connection but never answers both give `Unavailable` within the connect timeout
//! (before the bound, 9.5 s and 16.5 s, with nothing to configure).
#![allow(missing_docs)]

use std::net::TcpListener;
use std::time::{Duration, Instant};

use leasehold_core::Error;
use leasehold_redis::{RedisConfig, RedisStore};

/// A loopback port nothing listens on.
fn refused_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = l.local_addr().expect("addr").port();
    drop(l);
    port
}

/// Connects to `port` with `config`; the error and how long it took.
async fn connect(port: u16, config: RedisConfig) -> (Error, Duration) {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).expect("url");
    let started = Instant::now();
    // The outer bound only keeps a regression from hanging the test run.
    let outcome = tokio::time::timeout(Duration::from_secs(30), RedisStore::connect(client, config))
        .await
        .expect("connect returned within 30 s");
    match outcome {
        Ok(_) => panic!("connected to a port where no Redis answers"),
        Err(e) => (e, started.elapsed()),
    }
}

#[tokio::test]
async fn a_refused_port_fails_within_the_connect_timeout() {
    for (config, bound) in [
        (RedisConfig::default(), RedisConfig::DEFAULT_CONNECT_TIMEOUT),
        (
            RedisConfig::default().with_connect_timeout(Duration::from_millis(300)),
            Duration::from_millis(300),
        ),
    ] {
        let (e, took) = connect(refused_port(), config).await;
        assert!(matches!(e, Error::Unavailable { .. }), "{e:?}");
        // What failed, and the driver's words on why.
        assert!(e.to_string().contains("Connection refused"), "{e}");
        assert!(
            took <= bound + Duration::from_millis(500),
            "took {took:?}, bound {bound:?}"
        );
    }
}

#[tokio::test]
async fn a_silent_server_fails_within_the_connect_timeout() {
    // Accepts connections (the kernel's backlog does) and never answers a byte.
    let silent = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = silent.local_addr().expect("addr").port();
    for bound in [Duration::from_millis(300), RedisConfig::DEFAULT_CONNECT_TIMEOUT] {
        let (e, took) = connect(port, RedisConfig::default().with_connect_timeout(bound)).await;
        assert!(matches!(e, Error::Unavailable { .. }), "{e:?}");
        assert!(took >= bound, "gave up after {took:?}, before its bound of {bound:?}");
        assert!(
            took <= bound + Duration::from_millis(500),
            "took {took:?}, bound {bound:?}"
        );
    }
    drop(silent);
}
