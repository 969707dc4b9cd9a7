//! An in-test TCP proxy between workers and a store, for network faults without netem:
//! delay, blackhole, dropped connections, and forward-then-drop-the-reply (which makes a
//! request's outcome unknown to its sender).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// What the proxy does to traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProxyMode {
    /// Forward both ways.
    Pass,
    /// Forward both ways after this delay per chunk.
    Delay(Duration),
    /// Keep connections open but forward nothing (requests time out). What was sent
    /// meanwhile is held and delivered when the mode returns to `Pass` (a partition
    /// that heals), or lost with the connection on `Drop` (one that breaks it).
    Blackhole,
    /// Close every connection, and every new one at once.
    Drop,
    /// Forward requests to the store, drop its replies and close the client side: the
    /// request may have applied, the sender cannot know.
    DropReplies,
}

/// Counters of what the proxy did.
#[derive(Debug, Default)]
pub struct ProxyStats {
    /// Connections accepted.
    pub connections: AtomicU64,
    /// Mode changes that injected a fault (anything but `Pass`).
    pub faults: AtomicU64,
}

/// A running proxy. Dropping it stops accepting; open connections end with their peers.
#[derive(Debug)]
pub struct FaultProxy {
    addr: SocketAddr,
    mode: watch::Sender<ProxyMode>,
    stats: Arc<ProxyStats>,
    accept: JoinHandle<()>,
}

impl FaultProxy {
    /// Listens on an ephemeral loopback port and forwards to `upstream`.
    ///
    /// # Errors
    /// If the listener cannot be bound.
    pub async fn start(upstream: SocketAddr) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (mode, rx) = watch::channel(ProxyMode::Pass);
        let stats = Arc::new(ProxyStats::default());
        let s = stats.clone();
        let accept = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                s.connections.fetch_add(1, Ordering::Relaxed);
                let rx = rx.clone();
                tokio::spawn(async move {
                    if *rx.borrow() == ProxyMode::Drop {
                        return;
                    }
                    if let Ok(server) = TcpStream::connect(upstream).await {
                        let _ = client.set_nodelay(true);
                        let _ = server.set_nodelay(true);
                        connection(client, server, rx).await;
                    }
                });
            }
        });
        Ok(Self {
            addr,
            mode,
            stats,
            accept,
        })
    }

    /// The address workers should connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Switches the mode for all connections, open and new.
    pub fn set(&self, mode: ProxyMode) {
        if mode != ProxyMode::Pass {
            self.stats.faults.fetch_add(1, Ordering::Relaxed);
        }
        let _ = self.mode.send(mode);
    }

    /// What the proxy did so far.
    pub fn stats(&self) -> &ProxyStats {
        &self.stats
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.accept.abort();
        let _ = self.mode.send(ProxyMode::Drop);
    }
}

async fn connection(client: TcpStream, server: TcpStream, rx: watch::Receiver<ProxyMode>) {
    let (cr, cw) = client.into_split();
    let (sr, sw) = server.into_split();
    let up = pump(cr, sw, rx.clone(), true);
    let down = pump(sr, cw, rx, false);
    // Either direction ending ends the connection.
    tokio::select! {
        () = up => {}
        () = down => {}
    }
}

async fn pump<R, W>(mut from: R, mut to: W, mut rx: watch::Receiver<ProxyMode>, request_side: bool)
where
    R: AsyncReadExt + Unpin,
    W: AsyncWriteExt + Unpin,
{
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = tokio::select! {
            r = from.read(&mut buf) => match r { Ok(0) | Err(_) => return, Ok(n) => n },
            changed = rx.changed() => {
                if changed.is_err() || *rx.borrow() == ProxyMode::Drop { return; }
                continue;
            }
        };
        // A blackholed chunk is held, not discarded: TCP never loses bytes inside a live
        // connection, it delivers them late (the partition heals) or the connection
        // breaks (the controller switches to `Drop`).
        loop {
            let mode = *rx.borrow_and_update();
            match mode {
                ProxyMode::Pass => break,
                ProxyMode::Delay(d) => {
                    tokio::time::sleep(d).await;
                    break;
                }
                ProxyMode::Blackhole => {
                    if rx.changed().await.is_err() {
                        return;
                    }
                }
                ProxyMode::Drop => return,
                ProxyMode::DropReplies if request_side => break,
                ProxyMode::DropReplies => return,
            }
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
