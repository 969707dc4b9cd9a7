//! The stores under test: each opens the library's store for its server and a
//! *floor*, the bare operations a hand-written lock on the same server would send.

mod dynamo;
mod etcd;
mod memory;
mod mysql;
mod postgres;
mod redis;
pub mod redis_server_time;
mod s3;
mod sql_floor;
mod sql_server;
mod sqlite;
mod zookeeper;

use std::ops::Deref;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use leasehold_core::store::CasStore;
use serde::{Deserialize, Serialize};

use crate::{BenchError, Result, fail};

/// The stores the benchmarks know. In the results file each is its
/// [`key`](StoreKind::key) (`"memory"`, `"postgres"`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StoreKind {
    /// `leasehold_core::MemoryStore`, in process (the library's own cost, no network).
    Memory,
    /// `leasehold-postgres`.
    Postgres,
    /// `leasehold-sqlite`.
    Sqlite,
    /// `leasehold-mysql` on MariaDB.
    MySql,
    /// `leasehold-etcd`.
    Etcd,
    /// `leasehold-dynamodb` on moto.
    Dynamo,
    /// `leasehold-s3` on moto.
    S3,
    /// `leasehold-redis` (efficiency-only).
    Redis,
    /// `leasehold-zookeeper`.
    ZooKeeper,
}

impl StoreKind {
    /// Every store, in report order.
    pub const ALL: [StoreKind; 9] = [
        StoreKind::Memory,
        StoreKind::Postgres,
        StoreKind::Sqlite,
        StoreKind::MySql,
        StoreKind::Etcd,
        StoreKind::ZooKeeper,
        StoreKind::Dynamo,
        StoreKind::S3,
        StoreKind::Redis,
    ];

    /// The name used in the report.
    pub fn label(self) -> &'static str {
        match self {
            Self::Memory => "MemoryStore",
            Self::Postgres => "Postgres",
            Self::Sqlite => "SQLite",
            Self::MySql => "MySQL (MariaDB)",
            Self::Etcd => "etcd",
            Self::ZooKeeper => "ZooKeeper",
            Self::Dynamo => "DynamoDB (moto)",
            Self::S3 => "S3 (moto)",
            Self::Redis => "Redis",
        }
    }

    /// The name on the command line (`--stores`).
    pub fn key(self) -> &'static str {
        match self {
            Self::Memory => "memory",
            Self::Postgres => "postgres",
            Self::Sqlite => "sqlite",
            Self::MySql => "mysql",
            Self::Etcd => "etcd",
            Self::ZooKeeper => "zookeeper",
            Self::Dynamo => "dynamo",
            Self::S3 => "s3",
            Self::Redis => "redis",
        }
    }

    /// Parses [`StoreKind::key`].
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.key() == s)
    }

    /// Served by the emulator (slower per request; fewer samples).
    pub fn emulated(self) -> bool {
        matches!(self, Self::Dynamo | Self::S3)
    }

    /// Part of the scale benchmark: MemoryStore (the client alone), Postgres, and the
    /// stores that joined after it (MySQL, ZooKeeper).
    pub fn scales(self) -> bool {
        matches!(self, Self::Memory | Self::Postgres | Self::MySql | Self::ZooKeeper)
    }

    /// Compared with a peer lock on the same server (the peers table).
    pub fn has_peer(self) -> bool {
        matches!(self, Self::Postgres | Self::Etcd | Self::Redis)
    }

    /// How this store's waiters learn of a release (the handoff table's column), given
    /// whether it pushes changes at all.
    pub fn wake_mechanism(self, notifies: bool) -> &'static str {
        match (self, notifies) {
            (Self::Memory, true) => "in-process notify",
            (Self::Postgres, true) => "`LISTEN` / `pg_notify`",
            (Self::Etcd, true) => "etcd watch",
            (Self::ZooKeeper, true) => "ZooKeeper watch",
            (Self::Redis, true) => "Redis pub/sub",
            (_, true) => "store notification",
            (_, false) => "polling with backoff",
        }
    }
}

/// A lock taken by a floor, as the hand-written lock would keep it.
#[derive(Debug, Clone)]
pub struct RawLock {
    /// The store key.
    pub key: String,
    /// The holder value written.
    pub holder: String,
    /// What the next conditional write must compare (ETag, version, revision, token).
    pub version: String,
}

impl RawLock {
    /// The lock on `key` that `holder` took at `version`.
    pub(crate) fn new(key: impl Into<String>, holder: &str, version: impl Into<String>) -> Self {
        Self {
            key: key.into(),
            holder: holder.to_owned(),
            version: version.into(),
        }
    }
}

/// What a challenger learned of a planted lock before waiting for it to expire.
pub type Observed = Option<String>;

/// The holder value of the locks a crashed holder left behind (planted, never renewed).
pub(crate) const CRASHED: &str = "raw-crashed";

/// The bare operations of a hand-written lock: one request each, no library.
///
/// A floor implements [`take`](Floor::take), [`renew`](Floor::renew) and
/// [`release`](Floor::release); acquire, plant and takeover are `take` unless the
/// store's lock does something else for them.
#[async_trait]
pub trait Floor: Send + Sync {
    /// The store's name in messages (`"postgres"`, `"redis"`, ...).
    fn label(&self) -> &'static str;
    /// The lock's take: writes `holder` on `key` when the key is free for it (absent,
    /// released or expired); `Ok(None)` when it is held.
    async fn take(&self, key: &str, holder: &str, ttl: Duration) -> Result<Option<RawLock>>;
    /// Takes a free lock (absent or released key).
    async fn acquire(&self, key: &str, holder: &str, ttl: Duration) -> Result<RawLock> {
        self.take(key, holder, ttl)
            .await?
            .ok_or_else(|| fail(format!("{} floor: {key} is not free", self.label())))
    }
    /// Extends a held lock.
    async fn renew(&self, lock: &mut RawLock, ttl: Duration) -> Result<()>;
    /// Gives a held lock back.
    async fn release(&self, lock: RawLock) -> Result<()>;
    /// Writes a lock held by a crashed holder that expires after `ttl` (not timed).
    async fn plant(&self, key: &str, ttl: Duration) -> Result<()> {
        planted(self.label(), key, self.take(key, CRASHED, ttl).await?)
    }
    /// What a challenger reads before waiting out the holder (not timed).
    async fn observe(&self, key: &str) -> Result<Observed> {
        let _ = key;
        Ok(None)
    }
    /// Takes over an expired lock: `Ok(None)` when the store still shows it held (the
    /// caller retries; only the successful attempt is timed).
    async fn takeover(&self, key: &str, seen: &Observed, holder: &str, ttl: Duration) -> Result<Option<RawLock>> {
        let _ = seen;
        self.take(key, holder, ttl).await
    }
}

/// The error of a floor whose lock on `key` is gone (another holder, or expired).
pub(crate) fn lost(label: &str, key: &str) -> BenchError {
    fail(format!("{label} floor: lost {key}"))
}

/// The end of a floor's [`plant`](Floor::plant): the lock it wrote on `key`, or the
/// error when the key was taken (plants go to fresh keys).
pub(crate) fn planted(label: &str, key: &str, lock: Option<RawLock>) -> Result<()> {
    lock.map(drop)
        .ok_or_else(|| fail(format!("{label} floor: cannot plant {key}")))
}

/// The value a floor's [`observe`](Floor::observe) read on `key`, which its takeover
/// compares; an error when it read none.
pub(crate) fn observed<'a>(label: &str, key: &str, seen: &'a Observed) -> Result<&'a str> {
    seen.as_deref()
        .ok_or_else(|| fail(format!("{label} floor: {key} was never observed")))
}

/// What the report says about one store (in the results file as it is).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreInfo {
    /// Which store.
    #[serde(rename = "store")]
    pub kind: StoreKind,
    /// Server version.
    pub version: String,
    /// Settings that matter for the figures (durability, pool sizes, ...).
    pub settings: Vec<String>,
    /// What the library sends per operation.
    pub library_ops: OpTexts,
    /// What the floor sends per operation.
    pub floor_ops: OpTexts,
}

/// One line per operation.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpTexts {
    /// Acquire of a free lease.
    pub acquire: String,
    /// Renewal.
    pub renew: String,
    /// Release.
    pub release: String,
    /// Takeover of an expired lease.
    pub takeover: String,
}

/// One store under test.
#[async_trait]
pub trait Backend: Send + Sync {
    /// A new store instance (own connections) on this run's namespace; instances of
    /// one backend see the same records.
    async fn store(&self) -> Result<Arc<dyn CasStore>>;
    /// The floor: bare operations on the same server.
    async fn floor(&self) -> Result<Box<dyn Floor>>;
    /// Version and settings, for the report.
    async fn describe(&self) -> Result<StoreInfo>;
    /// Removes what this run created (its own tables, keys, files).
    async fn cleanup(&self) -> Result<()>;
    /// The peer lock on the same server, compared with this store (table 3), if any.
    async fn peer(&self, plan: &crate::Plan) -> Result<Option<crate::peers::PeerResult>> {
        let _ = plan;
        Ok(None)
    }
}

/// A backend as [`open`] returns it: the store it was opened for, and its [`Backend`]
/// methods (through `Deref`).
pub struct Opened {
    kind: StoreKind,
    backend: Box<dyn Backend>,
}

impl Opened {
    /// Which store.
    pub fn kind(&self) -> StoreKind {
        self.kind
    }
}

impl Deref for Opened {
    type Target = dyn Backend;

    fn deref(&self) -> &Self::Target {
        self.backend.as_ref()
    }
}

/// Opens the backend of `kind` for the run tagged `tag`.
///
/// # Errors
/// A missing `LEASEHOLD_*` variable or an unreachable store.
pub async fn open(kind: StoreKind, tag: &str) -> Result<Opened> {
    let backend: Box<dyn Backend> = match kind {
        StoreKind::Memory => Box::new(memory::MemoryBackend::new()),
        StoreKind::Postgres => Box::new(postgres::PostgresBackend::open(tag).await?),
        StoreKind::Sqlite => Box::new(sqlite::SqliteBackend::open(tag).await?),
        StoreKind::MySql => Box::new(mysql::MySqlBackend::open(tag).await?),
        StoreKind::Etcd => Box::new(etcd::EtcdBackend::open(tag).await?),
        StoreKind::ZooKeeper => Box::new(zookeeper::ZooKeeperBackend::open(tag).await?),
        StoreKind::Dynamo => Box::new(dynamo::DynamoBackend::open(tag).await?),
        StoreKind::S3 => Box::new(s3::S3Backend::open(tag).await?),
        StoreKind::Redis => Box::new(redis::RedisBackend::open(tag).await?),
    };
    Ok(Opened { kind, backend })
}

/// A required environment variable (set by `eval "$(scripts/stores.sh env)"`).
///
/// # Errors
/// When it is not set, naming the command that sets it.
pub fn env(var: &str) -> Result<String> {
    std::env::var(var).map_err(|_| {
        fail(format!(
            "{var} is not set: start the stores with `scripts/stores.sh start` and \
             `eval \"$(scripts/stores.sh env)\"` (scripts/bench.sh does both)"
        ))
    })
}

/// TTL in whole milliseconds for the stores' own commands.
pub(crate) fn ttl_ms(ttl: Duration) -> i64 {
    i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX)
}

/// A random holder value of a floor lock (as a hand-written lock would use).
pub(crate) fn holder_value() -> String {
    format!("raw-{:016x}", rand::random::<u64>())
}
