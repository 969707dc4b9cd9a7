//! A loopback TCP proxy that can stop delivering replies: requests still reach etcd and
//! apply, their answers never come back (the "sent, outcome unknown" fault); and that can
//! cut its connections and refuse new ones for a while (a lost connection).
#![allow(dead_code, unreachable_pub)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Ports this crate's tests may use for proxies.
const PORTS: std::ops::RangeInclusive<u16> = 52590..=52598;

/// A running proxy; stops accepting when dropped.
pub struct Proxy {
    pub port: u16,
    drop_replies: Arc<AtomicBool>,
    refuse: Arc<AtomicBool>,
    pipes: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// Forwards 127.0.0.1:`port` (one of 52590-52598) to `upstream` (`host:port`).
    pub async fn start(upstream: &str) -> Proxy {
        let mut bound = None;
        for port in PORTS {
            if let Ok(l) = TcpListener::bind(("127.0.0.1", port)).await {
                bound = Some((l, port));
                break;
            }
        }
        let (listener, port) = bound.unwrap_or_else(|| panic!("no free proxy port in {PORTS:?}"));
        let drop_replies = Arc::new(AtomicBool::new(false));
        let refuse = Arc::new(AtomicBool::new(false));
        let pipes = Arc::new(Mutex::new(Vec::new()));
        let upstream = upstream.to_owned();
        let (flag, refusing, open) = (drop_replies.clone(), refuse.clone(), pipes.clone());
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                if refusing.load(Ordering::SeqCst) {
                    continue;
                }
                let Ok(server) = TcpStream::connect(&upstream).await else {
                    continue;
                };
                let flag = flag.clone();
                let piped = tokio::spawn(pipe(client, server, flag));
                open.lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push(piped);
            }
        });
        Proxy {
            port,
            drop_replies,
            refuse,
            pipes,
            task,
        }
    }

    /// The endpoint URL of the proxy.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// From now on, bytes from etcd to the client are discarded.
    pub fn drop_replies(&self, on: bool) {
        self.drop_replies.store(on, Ordering::SeqCst);
    }

    /// Closes every open connection and refuses new ones (closes them at once) until
    /// [`Proxy::reconnect`].
    pub fn cut(&self) {
        self.refuse.store(true, Ordering::SeqCst);
        let pipes = std::mem::take(&mut *self.pipes.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
        for p in pipes {
            p.abort();
        }
    }

    /// Accepts connections again after [`Proxy::cut`].
    pub fn reconnect(&self) {
        self.refuse.store(false, Ordering::SeqCst);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
        self.cut();
    }
}

async fn pipe(client: TcpStream, server: TcpStream, drop_replies: Arc<AtomicBool>) {
    let (mut cr, mut cw) = client.into_split();
    let (mut sr, mut sw) = server.into_split();
    // Aborted with this task (a cut closes both directions at once).
    struct AbortOnDrop(tokio::task::JoinHandle<()>);
    impl Drop for AbortOnDrop {
        fn drop(&mut self) {
            self.0.abort();
        }
    }
    let _up = AbortOnDrop(tokio::spawn(async move {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            match cr.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if sw.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            }
        }
    }));
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match sr.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if drop_replies.load(Ordering::SeqCst) {
                    continue;
                }
                if cw.write_all(&buf[..n]).await.is_err() {
                    break;
                }
            }
        }
    }
}
