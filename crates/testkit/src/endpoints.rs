//! Endpoints that misbehave the way real networks do, for the stores' fault tests.

use std::time::Duration;

use leasehold_core::store::Linearizable;
use leasehold_core::{Error, LeaseClient};
use tokio::io::AsyncReadExt;
use tokio::net::TcpListener;

/// An HTTP-looking endpoint that accepts connections and reads forever, never answering
/// a byte: a hung server, or a network that drops every answer. Its `http://` URL; it
/// serves until the runtime ends.
pub async fn silent_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind a loopback port");
    let addr = listener.local_addr().expect("the bound address");
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                while matches!(conn.read(&mut buf).await, Ok(n) if n > 0) {}
            });
        }
    });
    format!("http://{addr}")
}

/// A `try_acquire` on `store`, whose endpoint is a [`silent_server`], sends its write and
/// never hears back. It must report [`Error::Indeterminate`] ("may have applied"),
/// never [`Error::Unavailable`] ("did not apply, safe to retry"), even though the read
/// meant to settle the outcome fails too; and it must end within `bound`.
///
/// # Panics
/// If it reports anything else, or takes longer.
pub async fn assert_acquire_is_in_doubt<S: Linearizable>(store: S, bound: Duration) {
    let client = LeaseClient::new(store);
    let started = tokio::time::Instant::now();
    let attempt = client.try_acquire("silent/acquire", Duration::from_secs(5));
    match tokio::time::timeout(bound + Duration::from_secs(10), attempt).await {
        Ok(Err(Error::Indeterminate { .. })) => {}
        Ok(other) => panic!("an acquire whose write got no answer gave {other:?}"),
        Err(_) => panic!("an acquire against a silent endpoint hung"),
    }
    let took = started.elapsed();
    assert!(took <= bound, "took {took:?}, beyond its bound of {bound:?}");
}
