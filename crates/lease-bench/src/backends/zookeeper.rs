//! ZooKeeper: `leasehold-zookeeper` (claim `multi`, renewals as one `exists` on the
//! holder's session) against the bare requests a hand-written ZooKeeper lock sends: an
//! EPHEMERAL znode created on a session, kept alive by the session, deleted to release.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use leasehold_core::store::CasStore;
use leasehold_zookeeper::zookeeper_client as zk;
use leasehold_zookeeper::{ZooKeeperConfig, ZooKeeperStore};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{Backend, CRASHED, Floor, Observed, OpTexts, RawLock, StoreInfo, StoreKind, env, lost, planted};
use crate::{Result, fail};

/// The shared single ZooKeeper server, under a root of this run.
pub(crate) struct ZooKeeperBackend {
    addr: String,
    root: String,
    /// The server's `tickTime` (`LEASEHOLD_ZK_TICK_MS`), told to the library's store.
    tick: Duration,
}

/// A session of `timeout` on `addr`; `detached` sessions are not closed when dropped
/// (a crashed holder's, which must expire).
async fn session(addr: &str, timeout: Duration, detached: bool) -> Result<zk::Client> {
    let mut connector = zk::Client::connector().with_session_timeout(timeout);
    if detached {
        connector = connector.with_detached();
    }
    let connect = connector.connect(addr);
    match tokio::time::timeout(Duration::from_secs(5), connect).await {
        Ok(Ok(c)) => Ok(c),
        Ok(Err(e)) => Err(fail(format!("cannot connect to ZooKeeper at {addr}: {e}"))),
        Err(_) => Err(fail(format!("ZooKeeper at {addr} does not answer"))),
    }
}

fn persistent() -> zk::CreateOptions<'static> {
    zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all())
}

fn ephemeral() -> zk::CreateOptions<'static> {
    zk::CreateMode::Ephemeral.with_acls(zk::Acls::anyone_all())
}

/// Whole seconds of at least `ttl`, as the library's session classes.
fn class(ttl: Duration) -> Duration {
    Duration::from_secs(ttl.as_millis().div_ceil(1000).max(1).try_into().unwrap_or(u64::MAX))
}

impl ZooKeeperBackend {
    pub(crate) async fn open(tag: &str) -> Result<Self> {
        let addr = env("LEASEHOLD_ZK_ADDR")?;
        let tick_ms = env("LEASEHOLD_ZK_TICK_MS")?;
        let tick = Duration::from_millis(
            tick_ms
                .parse()
                .map_err(|e| fail(format!("LEASEHOLD_ZK_TICK_MS={tick_ms:?}: {e}")))?,
        );
        let root = format!("/lhbench/{}", tag.replace(['/', ' '], "-"));
        let admin = session(&addr, Duration::from_secs(10), false).await?;
        for dir in ["lib", "raw"] {
            admin.mkdir(&format!("{root}/{dir}"), &persistent()).await?;
        }
        Ok(Self { addr, root, tick })
    }
}

#[async_trait]
impl Backend for ZooKeeperBackend {
    async fn store(&self) -> Result<Arc<dyn CasStore>> {
        let config = ZooKeeperConfig::new(format!("{}/lib", self.root))?.with_tick_time(self.tick)?;
        Ok(Arc::new(ZooKeeperStore::connect(&self.addr, config).await?))
    }

    async fn floor(&self) -> Result<Box<dyn Floor>> {
        Ok(Box::new(ZooKeeperFloor {
            addr: self.addr.clone(),
            dir: format!("{}/raw", self.root),
            client: session(&self.addr, Duration::from_secs(60), false).await?,
        }))
    }

    async fn describe(&self) -> Result<StoreInfo> {
        Ok(StoreInfo {
            kind: StoreKind::ZooKeeper,
            version: server_version(&self.addr).await?,
            settings: vec![
                format!(
                    "one server (standalone), loopback, tickTime {} ms (`scripts/stores.sh`); transaction log fsync'd (ZooKeeper's default)",
                    self.tick.as_millis()
                ),
                "library: one `ZooKeeperStore` (a main session plus one session per TTL class), told the tickTime (`ZooKeeperConfig::with_tick_time`); floor: one session of its own".into(),
            ],
            library_ops: OpTexts {
                acquire: "one `multi`: versioned `setData` (or `create`) of the fence counter znode with the new token, `delete` of the vacant record znode at its data version, `create` of the EPHEMERAL record on the TTL class's session".into(),
                renew: "one `exists` of the record znode on the holder's session (proves the session alive and the record still the holder's)".into(),
                release: "one `multi`: `setData` of the counter at its version, `delete` of the EPHEMERAL record, `create` of the PERSISTENT vacant record".into(),
                takeover: "the claim `multi` alone (the store read the record held a TTL ago or more, so it claims it as gone), once the crashed holder's record was deleted at its TTL (by its store, which lives on and stopped renewing it)".into(),
            },
            floor_ops: OpTexts {
                acquire: "one `create` of an EPHEMERAL znode holding the holder's name (`NodeExists`: held)".into(),
                renew: "one `exists` of the znode on the session (the session's heartbeat, made explicit)".into(),
                release: "one `delete` at version 0".into(),
                takeover: "the `create` once ZooKeeper expired the crashed holder's session".into(),
            },
        })
    }

    async fn cleanup(&self) -> Result<()> {
        let admin = session(&self.addr, Duration::from_secs(10), false).await?;
        delete_tree(&admin, &self.root).await
    }
}

/// The server's version line, from the `srvr` four-letter word.
async fn server_version(addr: &str) -> Result<String> {
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    s.write_all(b"srvr").await?;
    let mut out = String::new();
    s.read_to_string(&mut out).await?;
    out.lines()
        .find_map(|l| l.strip_prefix("Zookeeper version: "))
        .map(|v| format!("ZooKeeper {}", v.split([',', '-']).next().unwrap_or(v).trim()))
        .ok_or_else(|| fail(format!("ZooKeeper at {addr}: no version in `srvr`: {out}")))
}

/// Deletes `path` and everything under it (a missing znode is fine).
async fn delete_tree(c: &zk::Client, path: &str) -> Result<()> {
    let mut stack = vec![(path.to_owned(), false)];
    while let Some((p, expanded)) = stack.pop() {
        if expanded {
            match c.delete(&p, None).await {
                Ok(()) | Err(zk::Error::NoNode) => {}
                Err(e) => return Err(fail(format!("delete {p}: {e}"))),
            }
            continue;
        }
        stack.push((p.clone(), true));
        match c.list_children(&p).await {
            Ok(children) => stack.extend(children.into_iter().map(|ch| (format!("{p}/{ch}"), false))),
            Err(zk::Error::NoNode) => {}
            Err(e) => return Err(fail(format!("list {p}: {e}"))),
        }
    }
    Ok(())
}

struct ZooKeeperFloor {
    addr: String,
    dir: String,
    client: zk::Client,
}

impl ZooKeeperFloor {
    async fn create(&self, c: &zk::Client, key: &str, holder: &str) -> Result<Option<RawLock>> {
        let path = format!("{}/{}", self.dir, key.replace('/', "%2F"));
        match c.create(&path, holder.as_bytes(), &ephemeral()).await {
            Ok(_) => Ok(Some(RawLock::new(path, holder, "0"))),
            Err(zk::Error::NodeExists) => Ok(None),
            Err(e) => Err(fail(format!("zookeeper floor: create {path}: {e}"))),
        }
    }
}

#[async_trait]
impl Floor for ZooKeeperFloor {
    fn label(&self) -> &'static str {
        "zookeeper"
    }

    async fn take(&self, key: &str, holder: &str, _ttl: Duration) -> Result<Option<RawLock>> {
        self.create(&self.client, key, holder).await
    }

    async fn renew(&self, lock: &mut RawLock, _ttl: Duration) -> Result<()> {
        match self.client.check_stat(&lock.key).await? {
            Some(s) if s.ephemeral_owner == self.client.session_id().0 => Ok(()),
            _ => Err(lost(self.label(), &lock.key)),
        }
    }

    async fn release(&self, lock: RawLock) -> Result<()> {
        match self.client.delete(&lock.key, Some(0)).await {
            Ok(()) => Ok(()),
            Err(_) => Err(lost(self.label(), &lock.key)),
        }
    }

    async fn plant(&self, key: &str, ttl: Duration) -> Result<()> {
        // A holder that crashed: its own session, detached and dropped, so it stops
        // heartbeating and ZooKeeper expires it (and its znode) after its timeout.
        let victim = session(&self.addr, class(ttl), true).await?;
        planted(self.label(), key, self.create(&victim, key, CRASHED).await?)?;
        drop(victim);
        Ok(())
    }

    async fn takeover(&self, key: &str, _seen: &Observed, holder: &str, _ttl: Duration) -> Result<Option<RawLock>> {
        self.create(&self.client, key, holder).await
    }
}
