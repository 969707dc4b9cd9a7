//! A forwarder that hands moto one request at a time.
//!
//! moto's DynamoDB backend evaluates a condition and then applies the write without a
//! lock, and `moto_server` serves requests on threads: two concurrent conditional
//! writes to one item can both pass their condition (seen here: 2 of 8 concurrent
//! creates won; 48 of 51 compare-and-swap increments landed). DynamoDB serializes the
//! writes to an item on its leader replica. So the tests talk to moto through this
//! forwarder, which reads each request whole, then passes it to moto and its answer
//! back under one lock: moto then applies one request at a time, as DynamoDB applies
//! one write per item at a time. Bytes are forwarded unchanged; nothing is emulated.
//!
//! It serializes the requests of one process. Tests that run several processes only
//! race on versions that no longer exist (a frozen holder's renewal after a takeover),
//! which fail whatever the interleaving.

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Mutex;

/// The endpoint of this process's forwarder to `upstream` (started on first use, on
/// its own thread and runtime, so it outlives every test's runtime).
pub fn serialized(upstream: &str) -> String {
    static ENDPOINT: OnceLock<String> = OnceLock::new();
    ENDPOINT.get_or_init(|| start(upstream)).clone()
}

fn start(upstream: &str) -> String {
    let authority = upstream
        .strip_prefix("http://")
        .unwrap_or_else(|| panic!("moto endpoint {upstream:?} is not http://host:port"))
        .trim_end_matches('/');
    let upstream: SocketAddr = std::net::ToSocketAddrs::to_socket_addrs(authority)
        .unwrap_or_else(|e| panic!("moto endpoint {authority:?}: {e}"))
        .next()
        .unwrap_or_else(|| panic!("moto endpoint {authority:?} resolves to nothing"));
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("moto-serializer".into())
        .spawn(move || {
            let rt = leasehold_testkit::runtime();
            rt.block_on(async move {
                let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind forwarder");
                tx.send(listener.local_addr().expect("addr")).expect("send addr");
                let lock = Arc::new(Mutex::new(()));
                loop {
                    let Ok((sock, _)) = listener.accept().await else {
                        continue;
                    };
                    tokio::spawn(serve(sock, upstream, lock.clone()));
                }
            });
        })
        .expect("spawn forwarder");
    let addr = rx.recv().expect("forwarder address");
    format!("http://{addr}")
}

async fn serve(mut client: TcpStream, upstream: SocketAddr, lock: Arc<Mutex<()>>) {
    loop {
        let Some(request) = read_message(&mut client, false).await else {
            return;
        };
        let response = {
            let _one_at_a_time = lock.lock().await;
            exchange(upstream, &request).await
        };
        let Some(response) = response else { return };
        if client.write_all(&response).await.is_err() {
            return;
        }
    }
}

async fn exchange(upstream: SocketAddr, request: &[u8]) -> Option<Vec<u8>> {
    let mut up = TcpStream::connect(upstream).await.ok()?;
    up.write_all(request).await.ok()?;
    read_message(&mut up, true).await
}

/// Reads one HTTP/1.1 message: headers, then `Content-Length` bytes of body (or, for a
/// response without one, everything up to the close).
async fn read_message<S: AsyncRead + Unpin>(sock: &mut S, response: bool) -> Option<Vec<u8>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let header_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = sock.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let headers = String::from_utf8_lossy(&buf[..header_end]).to_ascii_lowercase();
    let length = headers
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok());
    match length {
        Some(len) => {
            while buf.len() < header_end + len {
                let n = sock.read(&mut chunk).await.ok()?;
                if n == 0 {
                    return None;
                }
                buf.extend_from_slice(&chunk[..n]);
            }
            buf.truncate(header_end + len);
        }
        None if response => {
            sock.read_to_end(&mut buf).await.ok()?;
        }
        None => {}
    }
    Some(buf)
}
