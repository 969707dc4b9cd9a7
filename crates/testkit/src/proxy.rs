//! A TCP proxy in front of a real server, for the fault tests: it forwards, or lets
//! requests through and loses the answers (by closing the connection, or by keeping it
//! open and silent, as a hung server or a network that drops every answer does), or
//! delivers them late (a slow server or network); and it can cut every connection and
//! refuse new ones for a while (a lost network).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// What the proxy does with the server's answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProxyMode {
    /// Forwards both ways.
    Forward,
    /// Forwards requests, then closes the connection instead of forwarding the answer:
    /// the request applied, the client learns nothing.
    DropReply,
    /// Forwards requests and throws the answers away, keeping the connection open: the
    /// client waits for an answer that never comes.
    Withhold,
    /// Forwards requests, and each answer only after this long: a slow server.
    Delay(Duration),
}

/// A TCP proxy on a loopback port; it serves until dropped.
#[derive(Debug)]
pub struct Proxy {
    port: u16,
    mode: Arc<Mutex<ProxyMode>>,
    refuse: Arc<AtomicBool>,
    tasks: Arc<Mutex<Vec<JoinHandle<()>>>>,
    accept: JoinHandle<()>,
}

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Proxy {
    /// A proxy to `upstream` (`host:port`), forwarding.
    ///
    /// # Panics
    /// If no loopback port can be bound.
    pub async fn start(upstream: &str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind a loopback port");
        let port = listener.local_addr().expect("the bound address").port();
        let mode = Arc::new(Mutex::new(ProxyMode::Forward));
        let refuse = Arc::new(AtomicBool::new(false));
        let tasks: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let upstream = upstream.to_owned();
        let accept = {
            let (mode, refuse, tasks) = (mode.clone(), refuse.clone(), tasks.clone());
            tokio::spawn(async move {
                while let Ok((down, _)) = listener.accept().await {
                    if refuse.load(Ordering::SeqCst) {
                        continue; // closed at once
                    }
                    let Ok(up) = TcpStream::connect(upstream.as_str()).await else {
                        continue;
                    };
                    locked(&tasks).push(tokio::spawn(pump(down, up, mode.clone())));
                }
            })
        };
        Self {
            port,
            mode,
            refuse,
            tasks,
            accept,
        }
    }

    /// The proxy's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The proxy's `http://` endpoint (for HTTP and gRPC clients).
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// From now on, what to do with answers.
    pub fn set_mode(&self, mode: ProxyMode) {
        *locked(&self.mode) = mode;
    }

    /// Cuts every connection, and closes new ones at once until [`Proxy::reconnect`].
    pub fn cut(&self) {
        self.refuse.store(true, Ordering::SeqCst);
        for t in locked(&self.tasks).drain(..) {
            t.abort();
        }
    }

    /// Takes connections again after [`Proxy::cut`].
    pub fn reconnect(&self) {
        self.refuse.store(false, Ordering::SeqCst);
    }

    /// Stops listening (new connections are refused) and cuts every connection.
    pub fn close(&self) {
        self.accept.abort();
        for t in locked(&self.tasks).drain(..) {
            t.abort();
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.close();
    }
}

async fn pump(down: TcpStream, up: TcpStream, mode: Arc<Mutex<ProxyMode>>) {
    let (down_r, down_w) = down.into_split();
    let (up_r, up_w) = up.into_split();
    let requests = copy(down_r, up_w, || ProxyMode::Forward);
    let replies = copy(up_r, down_w, || *locked(&mode));
    // Whichever direction ends first ends the connection (both halves are dropped).
    tokio::select! {
        () = requests => {}
        () = replies => {}
    }
}

/// Copies what `from` reads to `to` until either side closes, as `mode` says for each
/// read: forwarded, the connection ended, or thrown away.
async fn copy(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, mode: impl Fn() -> ProxyMode) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        match mode() {
            ProxyMode::Forward => {
                if to.write_all(&buf[..n]).await.is_err() {
                    return;
                }
            }
            ProxyMode::DropReply => return,
            ProxyMode::Withhold => {}
            ProxyMode::Delay(d) => {
                tokio::time::sleep(d).await;
                if to.write_all(&buf[..n]).await.is_err() {
                    return;
                }
            }
        }
    }
}
