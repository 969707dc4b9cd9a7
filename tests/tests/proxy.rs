//! The fault proxy against a real TCP echo server.
#![allow(missing_docs)]

use std::time::Duration;

use leasehold_tests::proxy::{FaultProxy, ProxyMode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

async fn echo_server() -> (std::net::SocketAddr, std::sync::Arc<std::sync::atomic::AtomicU64>) {
    let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = l.local_addr().expect("addr");
    let received = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let r = received.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            let r = r.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 64];
                while let Ok(n) = s.read(&mut buf).await {
                    if n == 0 || s.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                    r.fetch_add(u64::try_from(n).expect("n"), std::sync::atomic::Ordering::SeqCst);
                }
            });
        }
    });
    (addr, received)
}

async fn roundtrip(s: &mut TcpStream, timeout: Duration) -> Option<Vec<u8>> {
    s.write_all(b"ping").await.ok()?;
    let mut buf = [0u8; 4];
    match tokio::time::timeout(timeout, s.read_exact(&mut buf)).await {
        Ok(Ok(_)) => Some(buf.to_vec()),
        _ => None,
    }
}

#[tokio::test]
async fn every_mode_does_what_it_says() {
    let (upstream, received) = echo_server().await;
    let proxy = FaultProxy::start(upstream).await.expect("proxy");
    let mut s = TcpStream::connect(proxy.addr()).await.expect("connect");
    assert_eq!(
        roundtrip(&mut s, Duration::from_secs(2)).await.as_deref(),
        Some(&b"ping"[..])
    );

    proxy.set(ProxyMode::Delay(Duration::from_millis(150)));
    let t = std::time::Instant::now();
    assert!(roundtrip(&mut s, Duration::from_secs(2)).await.is_some());
    assert!(
        t.elapsed() >= Duration::from_millis(300),
        "delay applies both ways: {:?}",
        t.elapsed()
    );

    proxy.set(ProxyMode::Blackhole);
    assert!(
        roundtrip(&mut s, Duration::from_millis(300)).await.is_none(),
        "blackhole answered"
    );

    // The partition heals: what was held is delivered, in order, on the same connection.
    proxy.set(ProxyMode::Pass);
    let mut late = [0u8; 4];
    tokio::time::timeout(Duration::from_secs(2), s.read_exact(&mut late))
        .await
        .expect("the held request was not delivered after the blackhole healed")
        .expect("read");
    assert_eq!(&late, b"ping");

    // Forward-then-drop-the-reply: the server receives the request, the client gets nothing.
    let mut s2 = TcpStream::connect(proxy.addr()).await.expect("connect");
    assert!(roundtrip(&mut s2, Duration::from_secs(2)).await.is_some());
    let before = received.load(std::sync::atomic::Ordering::SeqCst);
    proxy.set(ProxyMode::DropReplies);
    assert!(
        roundtrip(&mut s2, Duration::from_millis(500)).await.is_none(),
        "a reply got through"
    );
    assert!(
        received.load(std::sync::atomic::Ordering::SeqCst) >= before + 4,
        "the request did not reach the server"
    );

    proxy.set(ProxyMode::Drop);
    let mut s3 = TcpStream::connect(proxy.addr())
        .await
        .expect("connect is accepted, then closed");
    assert!(roundtrip(&mut s3, Duration::from_millis(500)).await.is_none());
    assert!(proxy.stats().faults.load(std::sync::atomic::Ordering::SeqCst) >= 4);
}
