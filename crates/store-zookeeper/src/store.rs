//! [`ZooKeeperStore`]: the [`CasStore`] over ZooKeeper sessions.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, Weak};
use std::time::Duration;

use async_trait::async_trait;
use leasehold_core::store::session::{Expire, Expiry, Held, SessionBook, expire_due, kick_for};
use leasehold_core::store::{
    Capabilities, CasOutcome, CasStore, ClockSource, Current, DeleteOutcome, ExpireOutcome, Grade, LeaseRecord,
    Linearizable, Precondition, Stored, Version, Wait, WakeHub, record_codec,
};
use leasehold_core::{Error, FencingToken, LeaseName, NamePrefix, Result};
use tokio::sync::Notify;
use tokio::time::Instant;
use zookeeper_client as zk;

use crate::config::ZooKeeperConfig;
use crate::error::{self, Effect};
use crate::nodes::{self, Counter, Decoded, Paths, RecordNode, Snapshot, Ver};
use crate::session::{self, MAIN_SESSION_TIMEOUT, SessionHost, ZkSession};
use crate::stats::{Stats, ZooKeeperStats};

/// Pause before retrying an expiry delete that failed.
const EXPIRY_RETRY: Duration = Duration::from_millis(250);

/// Attempts of one write when what this store remembered of the name was stale.
const ATTEMPTS: usize = 3;

/// What the ZooKeeper store offers: expiry on ZooKeeper's clock (sessions), and a watch
/// wakes waiters; a refused `multi` does not answer the current record.
const CAPABILITIES: Capabilities = Capabilities::new(ClockSource::Store, Grade::Linearizable)
    .with_notifies_waiters(true)
    .with_held_outlives_writer(false);

/// Lease records in ZooKeeper: linearizable writes (`multi`), expiry on the ensemble's
/// session clock, waiters woken by watches.
///
/// Cheap to clone (an `Arc`); clones share sessions, caches and counters. Background
/// tasks (session state, expiry of abandoned records, watches) start on first use on
/// the current Tokio runtime and stop when the last clone is dropped; dropping it closes
/// its sessions (their held records go with them). See the crate docs for the znodes,
/// the protocol and the cost of each operation.
#[derive(Clone)]
pub struct ZooKeeperStore {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    cluster: String,
    pub(crate) config: ZooKeeperConfig,
    pub(crate) stats: Stats,
    main: tokio::sync::Mutex<Option<Arc<ZkSession>>>,
    classes: tokio::sync::Mutex<HashMap<Duration, Arc<ZkSession>>>,
    book: Mutex<SessionBook<ZkSession, Ver>>,
    seen: Mutex<HashMap<LeaseName, Snapshot>>,
    pub(crate) hub: WakeHub,
    pub(crate) watching: Mutex<HashSet<LeaseName>>,
    /// Token-marked znodes as last seen: `None` absent, else (mark, data version).
    pub(crate) fenced: Mutex<HashMap<String, Option<(FencingToken, i32)>>>,
    reaper_kick: Arc<Notify>,
    reaper_started: OnceLock<()>,
    pub(crate) me: Weak<Inner>,
}

impl fmt::Debug for ZooKeeperStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZooKeeperStore")
            .field("root", &self.inner.config.root())
            .field("request_timeout", &self.inner.config.request_timeout())
            .field("stats", &self.inner.stats.snapshot())
            .finish_non_exhaustive()
    }
}

/// A `multi` write's failure.
enum MultiFailure {
    /// Operation `index` failed its condition (or its parent is missing): nothing applied.
    Op(usize, zk::Error),
    /// The request failed as a whole.
    Request(Error),
}

/// What [`Inner::remove`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Removed {
    /// Applied.
    Done,
    /// Nothing: the record znode was not there (its first operation failed so).
    RecordMissing,
    /// Nothing: a version did not match (or, for the counter alone, a record is there).
    Refused,
}

/// What [`Inner::remove`] deletes of a name's two znodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Removal {
    /// The record; the fence counter's version is checked and the counter kept.
    Record,
    /// The record and the fence counter.
    Both,
    /// The fence counter alone (the record is gone).
    Counter,
}

/// One planned write of a name's znodes.
struct Plan {
    /// The snapshot the write is conditioned on.
    base: Snapshot,
    /// The token the counter holds after the write.
    counter_token: FencingToken,
    /// The record to write.
    record: LeaseRecord,
}

impl ZooKeeperStore {
    /// Connects to the ensemble `cluster` (`host:port[,host:port...][/chroot]`) with its
    /// main session, within the request timeout of `config`. Nothing is created:
    /// [`ZooKeeperStore::provision`] creates the root znode, [`ZooKeeperStore::verify`]
    /// checks it.
    ///
    /// # Errors
    /// [`Error::Unavailable`] when no server answers in time.
    pub async fn connect(cluster: &str, config: ZooKeeperConfig) -> Result<Self> {
        let inner = Arc::new_cyclic(|me: &Weak<Inner>| Inner {
            cluster: cluster.to_owned(),
            config,
            stats: Stats::default(),
            main: tokio::sync::Mutex::new(None),
            classes: tokio::sync::Mutex::new(HashMap::new()),
            book: Mutex::new(SessionBook::default()),
            seen: Mutex::new(HashMap::new()),
            hub: WakeHub::new(),
            watching: Mutex::new(HashSet::new()),
            fenced: Mutex::new(HashMap::new()),
            reaper_kick: Arc::new(Notify::new()),
            reaper_started: OnceLock::new(),
            me: me.clone(),
        });
        inner.main_client().await?;
        Ok(Self { inner })
    }

    /// Creates what the store needs: the root znode (and its parents), PERSISTENT.
    /// Idempotent.
    ///
    /// # Errors
    /// As [`ZooKeeperStore::connect`], and [`Error::Misconfigured`] when the ACLs do
    /// not permit it.
    pub async fn provision(cluster: &str, config: &ZooKeeperConfig) -> Result<()> {
        let store = Self::connect(cluster, config.clone()).await?;
        let inner = &store.inner;
        let client = inner.main_client().await?;
        let opts = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
        inner.stats.multi();
        inner
            .bounded(
                "create the root znode",
                Effect::Write,
                client.mkdir(config.root(), &opts),
            )
            .await
            .or_else(|e| {
                if matches!(e, Error::Indeterminate { .. }) {
                    Err(e)
                } else {
                    Ok(())
                }
            })?;
        store.verify().await
    }

    /// Checks that the ensemble answers within the request timeout and that the root
    /// znode exists: one read.
    ///
    /// # Errors
    /// [`Error::Unavailable`] when ZooKeeper does not answer; [`Error::NotProvisioned`]
    /// when the root znode is missing; [`Error::Misconfigured`] when it may not be read.
    pub async fn verify(&self) -> Result<()> {
        let inner = &self.inner;
        let client = inner.main_client().await?;
        inner.stats.read();
        let stat = inner
            .bounded("root check", Effect::Read, client.check_stat(inner.config.root()))
            .await?;
        match stat {
            Some(_) => Ok(()),
            None => Err(inner.missing_root()),
        }
    }

    /// The options this store was built with.
    pub fn config(&self) -> &ZooKeeperConfig {
        &self.inner.config
    }

    /// The znode holding `name`'s lease record.
    pub fn record_path(&self, name: &LeaseName) -> String {
        self.inner.paths(name).record
    }

    /// The znode holding `name`'s fence counter (the highest token issued).
    pub fn fence_path(&self, name: &LeaseName) -> String {
        self.inner.paths(name).fence
    }

    /// The requests this store has sent so far.
    pub fn stats(&self) -> ZooKeeperStats {
        self.inner.stats.snapshot()
    }

    /// The main session's client (reads, watches, vacant records), for your own
    /// requests and fenced `multi`s.
    ///
    /// # Errors
    /// [`Error::Unavailable`] when its session expired and a new one cannot be opened.
    pub async fn client(&self) -> Result<zk::Client> {
        self.inner.main_client().await
    }
}

impl SessionHost for Inner {
    fn session_gone(&self, id: i64) {
        let names = self.book().session_gone(id);
        let mut seen = self.seen();
        for n in &names {
            seen.remove(n);
        }
    }
    fn heartbeat_sent(&self) {
        self.stats.heartbeat();
    }
}

impl Inner {
    pub(crate) fn paths(&self, name: &LeaseName) -> Paths {
        Paths::new(self.config.root(), name)
    }

    fn book(&self) -> MutexGuard<'_, SessionBook<ZkSession, Ver>> {
        self.book.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn seen(&self) -> MutexGuard<'_, HashMap<LeaseName, Snapshot>> {
        self.seen.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn missing_root(&self) -> Error {
        Error::not_provisioned(
            format!(
                "the root znode {} does not exist (create it with ZooKeeperStore::provision)",
                self.config.root()
            ),
            zk::Error::NoNode,
        )
    }

    /// Opens a session of `timeout`; one that will hold records (`heartbeat`) keeps
    /// what the leader heard of it known.
    async fn open(&self, timeout: Duration, heartbeat: bool) -> Result<Arc<ZkSession>> {
        self.stats.session();
        let how = session::Opening {
            timeout,
            bound: self.config.request_timeout(),
            tick: self.config.tick_time(),
            heartbeat,
        };
        session::open(&self.cluster, how, self.me.clone()).await
    }

    /// The main session's client, opening a new session if the last one ended.
    pub(crate) async fn main_client(&self) -> Result<zk::Client> {
        let mut main = self.main.lock().await;
        if let Some(s) = main.as_ref().filter(|s| !s.is_dead_now()) {
            return Ok(s.client.clone());
        }
        let s = self.open(MAIN_SESSION_TIMEOUT, false).await?;
        let client = s.client.clone();
        *main = Some(s);
        Ok(client)
    }

    /// The live session for held records of `ttl`'s class, opening one if needed.
    async fn session_for(&self, ttl: Duration) -> Result<Arc<ZkSession>> {
        let class = session::class_of(ttl);
        let mut classes = self.classes.lock().await;
        if let Some(s) = classes.get(&class) {
            if !s.is_dead_now() {
                return Ok(s.clone());
            }
        }
        let s = self.open(class, true).await?;
        classes.insert(class, s.clone());
        Ok(s)
    }

    /// `request` bounded by the request timeout, its failure mapped for `what`.
    pub(crate) async fn bounded<T>(
        &self,
        what: &str,
        op: Effect,
        request: impl std::future::Future<Output = std::result::Result<T, zk::Error>>,
    ) -> Result<T> {
        let limit = self.config.request_timeout();
        match tokio::time::timeout(limit, request).await {
            Err(_) => Err(error::timed_out(what, op, limit)),
            Ok(r) => r.map_err(|e| error::map(what, op, e)),
        }
    }

    /// Like [`Inner::bounded`], with a missing znode as `None`.
    pub(crate) async fn bounded_node<T>(
        &self,
        what: &str,
        op: Effect,
        request: impl std::future::Future<Output = std::result::Result<T, zk::Error>>,
    ) -> Result<Option<T>> {
        let limit = self.config.request_timeout();
        match tokio::time::timeout(limit, request).await {
            Err(_) => Err(error::timed_out(what, op, limit)),
            Ok(Err(zk::Error::NoNode)) => Ok(None),
            Ok(r) => r.map(Some).map_err(|e| error::map(what, op, e)),
        }
    }

    /// Sends a `multi` built by `build` on `client`.
    pub(crate) async fn send_multi(
        &self,
        client: &zk::Client,
        what: &str,
        build: impl FnOnce(&mut zk::MultiWriter<'_>) -> std::result::Result<(), zk::Error>,
    ) -> std::result::Result<Vec<zk::MultiWriteResult>, MultiFailureOut> {
        let mut writer = client.new_multi_writer();
        build(&mut writer).map_err(|e| MultiFailureOut(MultiFailure::Request(invalid_request(what, e))))?;
        self.stats.multi();
        let limit = self.config.request_timeout();
        match tokio::time::timeout(limit, writer.commit()).await {
            Err(_) => Err(MultiFailureOut(MultiFailure::Request(error::timed_out(
                what,
                Effect::Write,
                limit,
            )))),
            Ok(Ok(r)) => Ok(r),
            Ok(Err(zk::MultiWriteError::OperationFailed { index, source })) => {
                Err(MultiFailureOut(MultiFailure::Op(index, source)))
            }
            Ok(Err(zk::MultiWriteError::RequestFailed { source })) => Err(MultiFailureOut(MultiFailure::Request(
                error::map(what, Effect::Write, source),
            ))),
        }
    }

    /// Reads both znodes of `name` in one `multi` read, remembering what it showed.
    pub(crate) async fn read_snapshot(&self, name: &LeaseName) -> Result<Snapshot> {
        let paths = self.paths(name);
        let client = self.main_client().await?;
        let mut reader = client.new_multi_reader();
        reader
            .add_get_data(&paths.record)
            .and_then(|()| reader.add_get_data(&paths.fence))
            .map_err(|e| invalid_request("read", e))?;
        self.stats.read();
        let results = self.bounded("read", Effect::Read, reader.commit()).await?;
        let mut it = results.into_iter();
        let record = match it.next() {
            Some(zk::MultiReadResult::Data { data, stat }) => Some(RecordNode {
                bytes: data,
                data_version: stat.version,
                ephemeral_owner: stat.ephemeral_owner,
                mzxid: stat.mzxid,
            }),
            Some(zk::MultiReadResult::Error { err: zk::Error::NoNode }) => None,
            other => return Err(unexpected_read(other)),
        };
        let counter = match it.next() {
            Some(zk::MultiReadResult::Data { data, stat }) => {
                let token = nodes::decode_fence(name, &data)?;
                if token == FencingToken::ZERO || stat.ephemeral_owner != 0 {
                    return Err(Error::corrupt(
                        name.as_str(),
                        "the fence counter znode is ephemeral or at token 0 (this store writes neither)",
                    ));
                }
                Some(Counter {
                    token,
                    version: stat.version,
                })
            }
            Some(zk::MultiReadResult::Error { err: zk::Error::NoNode }) => None,
            other => return Err(unexpected_read(other)),
        };
        let snap = Snapshot {
            counter,
            record,
            read_at: Some(Instant::now()),
        };
        self.seen().insert(name.clone(), snap.clone());
        self.adopt(name, &snap).await;
        Ok(snap)
    }

    /// A held record on one of this store's sessions that the store does not hold at
    /// that version (an operator's `set` of a record it held, a write whose answer was
    /// lost) lives as long as the store unless someone deletes it: the store expires it
    /// at its TTL from now, as ZooKeeper would if the process had died.
    async fn adopt(&self, name: &LeaseName, snap: &Snapshot) {
        let (Some(node), Ok(Decoded::Present(v, record))) = (&snap.record, snap.decode(name)) else {
            return;
        };
        if node.ephemeral_owner == 0 || record.is_vacant() {
            return;
        }
        if self.book().get(name).is_some_and(|h| h.version == Some(v)) {
            return;
        }
        let session = {
            let classes = self.classes.lock().await;
            classes.values().find(|s| s.id == node.ephemeral_owner).cloned()
        };
        if let Some(session) = session {
            let deadline = Instant::now() + record.ttl.get();
            self.hold(
                name,
                Held::new(Some(v), node.bytes.clone(), record, session, deadline, 0),
            );
        }
    }

    /// The snapshot of `name` this store last saw, if any.
    pub(crate) fn last_seen(&self, name: &LeaseName) -> Option<Snapshot> {
        self.seen().get(name).cloned()
    }

    fn forget(&self, name: &LeaseName) {
        self.seen().remove(name);
    }

    /// The record `d` shows, as a conflict reports it.
    fn current(&self, name: &LeaseName, d: Decoded) -> Current {
        match d {
            Decoded::Absent => Current::Absent,
            Decoded::Present(v, r) => Current::Present(self.stored(name, v, r)),
            Decoded::Kept(v, r) => Current::Present(kept(v, r)),
        }
    }

    /// A record with its version and time left.
    fn stored(&self, name: &LeaseName, v: Ver, record: LeaseRecord) -> Stored {
        let remaining = if record.is_vacant() {
            Duration::ZERO
        } else {
            self.book()
                .remaining(name, v, Instant::now())
                .unwrap_or(record.ttl.get())
        };
        Stored::new(record, v.to_version()).with_remaining(Some(remaining))
    }

    /// What to write for `expect`, given `snap`: `Ok(Ok(plan))` to send, `Ok(Err(current))`
    /// when the precondition does not hold on it.
    fn plan(
        &self,
        name: &LeaseName,
        snap: &Snapshot,
        expect: &Precondition,
        record: &LeaseRecord,
    ) -> Result<std::result::Result<Plan, Current>> {
        let counter = snap.counter(name)?;
        let decoded = snap.decode(name)?;
        let go = |base: Snapshot, token: FencingToken, record: LeaseRecord| {
            let counter_token = counter.map_or(token, |c| c.token.max(token));
            Ok(Ok(Plan {
                base,
                counter_token,
                record,
            }))
        };
        match (expect, decoded) {
            (Precondition::Absent, Decoded::Absent) => go(snap.clone(), record.token, record.clone()),
            (Precondition::Version(want), Decoded::Present(v, _) | Decoded::Kept(v, _)) if Ver::parse(want)? == v => {
                go(snap.clone(), record.token, record.clone())
            }
            (Precondition::Claimable, d) => {
                let now = Instant::now();
                let base = match &d {
                    Decoded::Absent => Some(snap.clone()),
                    Decoded::Present(v, r) if r.is_vacant() || self.book().own_expired(name, *v, now) => {
                        Some(snap.clone())
                    }
                    // Held by someone when last read, a TTL ago or more: it has most
                    // likely expired and gone since. Claim it as gone, as a new holder
                    // would (the `multi` fails if it is still there, and a read follows).
                    Decoded::Present(_, r) if self.may_be_gone(name, snap, r, now) => Some(Snapshot {
                        record: None,
                        ..snap.clone()
                    }),
                    // Kept until a purge: never claimable.
                    Decoded::Present(..) | Decoded::Kept(..) => None,
                };
                let Some(base) = base else {
                    return Ok(Err(self.current(name, d)));
                };
                // The counter is the highest token issued; a record an operator raised
                // above it raises it.
                let recorded = match &d {
                    Decoded::Present(_, r) | Decoded::Kept(_, r) => r.token,
                    Decoded::Absent => FencingToken::ZERO,
                };
                let last = counter.map_or(FencingToken::ZERO, |c| c.token).max(recorded);
                let token =
                    last.checked_next()
                        .filter(|t| *t <= FencingToken::MAX)
                        .ok_or_else(|| Error::TokensExhausted {
                            name: name.as_str().to_owned(),
                        })?;
                go(
                    base,
                    token,
                    LeaseRecord {
                        token,
                        ..record.clone()
                    },
                )
            }
            (Precondition::Absent | Precondition::Version(_), d) => Ok(Err(self.current(name, d))),
            // Refused in `write`, before anything is sent.
            _ => Err(leasehold_core::store::not_taken("ZooKeeper", expect)),
        }
    }

    /// Whether the held record `r` that `snap` shows may have gone since: a read showed
    /// it at least its TTL ago, and no watch of this store would have seen it go (a name
    /// with waiters is watched, and its snapshot is then current).
    fn may_be_gone(&self, name: &LeaseName, snap: &Snapshot, r: &LeaseRecord, now: Instant) -> bool {
        snap.read_at.is_some_and(|at| now >= at + r.ttl.get())
            && !self
                .watching
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .contains(name)
    }

    pub(crate) async fn write(
        &self,
        name: &LeaseName,
        expect: &Precondition,
        record: &LeaseRecord,
    ) -> Result<CasOutcome> {
        // What this store's write handles, all of it before anything is sent.
        if !matches!(
            expect,
            Precondition::Absent | Precondition::Version(_) | Precondition::Claimable
        ) {
            return Err(leasehold_core::store::not_taken("ZooKeeper", expect));
        }
        if let Precondition::Version(v) = expect {
            Ver::parse(v)?;
        }
        if !matches!(expect, Precondition::Claimable) {
            leasehold_core::fence::issued(record.token)?;
            if record.token > FencingToken::MAX {
                return Err(Error::invalid(
                    "fencing token",
                    format!("{} is above the highest token {}", record.token, FencingToken::MAX),
                ));
            }
        }
        let paths = self.paths(name);
        let mut session = match record.holder {
            Some(_) => Some(self.session_for(record.ttl.get()).await?),
            None => None,
        };
        // A name this store never saw is most likely new: try that first (one request).
        let mut snap = Some(self.last_seen(name).unwrap_or_default());
        let mut fresh = false;
        let mut session_retry = true;
        for _ in 0..ATTEMPTS {
            let base = match snap.take() {
                Some(s) => s,
                None => {
                    fresh = true;
                    self.read_snapshot(name).await?
                }
            };
            let plan = match self.plan(name, &base, expect, record) {
                Ok(Ok(plan)) => plan,
                Ok(Err(current)) if fresh => return Ok(CasOutcome::Conflict(current)),
                Err(e) if fresh => return Err(e),
                _ => continue,
            };
            let to_write = match &session {
                Some(s) => LeaseRecord {
                    ttl: s.ttl()?,
                    ..plan.record.clone()
                },
                None => plan.record.clone(),
            };
            let bytes = record_codec::encode(&to_write);
            let client = match &session {
                Some(s) => s.client.clone(),
                None => self.main_client().await?,
            };
            let call = Instant::now();
            let mode = if session.is_some() {
                zk::CreateMode::Ephemeral
            } else {
                zk::CreateMode::Persistent
            };
            let counter_bytes = nodes::encode_fence(plan.counter_token);
            let sent = self
                .send_multi(&client, "write", |w| {
                    let opts = mode.with_acls(zk::Acls::anyone_all());
                    add_set_or_create(w, &paths.fence, &counter_bytes, plan.base.counter.map(|c| c.version))?;
                    if let Some(node) = &plan.base.record {
                        w.add_delete(&paths.record, Some(node.data_version))?;
                    }
                    w.add_create(&paths.record, &bytes, &opts)
                })
                .await;
            match sent {
                Ok(results) => {
                    let counter_version = first_version(&results);
                    let ver = Ver {
                        counter: counter_version,
                        record: 0,
                    };
                    let owner = session.as_ref().map_or(0, |s| s.id);
                    self.seen().insert(
                        name.clone(),
                        Snapshot {
                            counter: Some(Counter {
                                token: plan.counter_token,
                                version: counter_version,
                            }),
                            record: Some(RecordNode {
                                bytes: bytes.clone(),
                                data_version: 0,
                                ephemeral_owner: owner,
                                mzxid: 0,
                            }),
                            read_at: None,
                        },
                    );
                    self.hub.claimed(name.as_str(), ver.position());
                    let remaining = match &session {
                        Some(s) => {
                            // The multi went through the leader: it confirms the
                            // heartbeats before it, and the grant is good for as long
                            // as the leader surely keeps the session.
                            s.answered(call);
                            s.through_leader(call);
                            let ttl = to_write.ttl.get();
                            self.hold(
                                name,
                                Held::new(Some(ver), bytes, to_write.clone(), s.clone(), call + ttl, 0),
                            );
                            s.lives_after(call)
                        }
                        None => {
                            self.book().unhold(name);
                            Duration::ZERO
                        }
                    };
                    return Ok(CasOutcome::Written(
                        Stored::new(to_write, ver.to_version()).with_remaining(Some(remaining)),
                    ));
                }
                Err(MultiFailureOut(MultiFailure::Op(index, e))) => {
                    let creates_counter = plan.base.counter.is_none() && index == 0;
                    let creates_record = index + 1 == results_len(&plan);
                    if matches!(e, zk::Error::NoNode) && (creates_counter || creates_record) {
                        // A create's parent is missing: the root.
                        return Err(self.missing_root());
                    }
                    // What this store assumed was stale: look again.
                    snap = None;
                }
                Err(MultiFailureOut(MultiFailure::Request(e))) => {
                    self.forget(name);
                    if let Some(s) = &session {
                        if s.is_dead_now() && session_retry && e.is_retryable() {
                            // The session ended under us; the server refused the multi.
                            session_retry = false;
                            s.mark_dead();
                            self.session_gone(s.id);
                            session = Some(self.session_for(record.ttl.get()).await?);
                            snap = None;
                            continue;
                        }
                        if e.is_indeterminate() {
                            // If it applied, the record is on our session: expire it on time.
                            let ttl = to_write.ttl.get();
                            self.hold(name, Held::new(None, bytes, to_write, s.clone(), call + ttl, 0));
                        }
                    }
                    return Err(e);
                }
            }
        }
        // Raced by other writers every time: report what is there now.
        let snap = self.read_snapshot(name).await?;
        let decoded = snap.decode(name)?;
        Ok(CasOutcome::Conflict(self.current(name, decoded)))
    }

    fn hold(&self, name: &LeaseName, held: Held<ZkSession, Ver>) {
        let deadline = held.deadline;
        self.book().hold(name, held);
        if self.reaper_started.set(()).is_ok() {
            tokio::spawn(expire_due(self.me.clone(), self.reaper_kick.clone()));
        }
        kick_for(&self.reaper_kick, deadline);
    }

    pub(crate) async fn renew(&self, name: &LeaseName, version: &Version, record: &LeaseRecord) -> Result<CasOutcome> {
        let call = Instant::now();
        let v = Ver::parse(version)?;
        let held = {
            let book = self.book();
            book.get(name)
                .map(|h| (h.version, h.record.clone(), h.session.clone(), h.expired(call)))
        };
        let Some((held_version, held_record, session, expired)) = held else {
            // Not a record this store keeps alive: renew it the ordinary way (a multi).
            return self.write(name, &Precondition::Version(version.clone()), record).await;
        };
        if held_version != Some(v) {
            return Ok(CasOutcome::Conflict(match held_version {
                Some(hv) => Current::Present(self.stored(name, hv, held_record)),
                None => Current::Unknown,
            }));
        }
        if held_record.holder != record.holder || held_record.token != record.token {
            return Ok(CasOutcome::Conflict(Current::Present(self.stored(
                name,
                v,
                held_record,
            ))));
        }
        if expired || session.is_dead_now() {
            return Ok(CasOutcome::Conflict(Current::Absent));
        }
        if session::class_of(record.ttl.get()) != session::class_of(held_record.ttl.get())
            && record.ttl.get() > held_record.ttl.get()
        {
            // A longer TTL needs a session of a longer class: move the record.
            return self.write(name, &Precondition::Version(version.clone()), record).await;
        }
        // One request on the holder's session: the server answers only while the
        // session lives (and counts it as the session's heartbeat), and the answer shows
        // whether the record is still this one.
        let path = self.paths(name).record;
        self.stats.renewal();
        let stat = match self
            .bounded("renewal", Effect::Read, session.client.check_stat(&path))
            .await
        {
            Ok(s) => s,
            Err(e) => {
                if session.is_dead_now() {
                    return Ok(CasOutcome::Conflict(Current::Absent));
                }
                return Err(e);
            }
        };
        let ours = stat.is_some_and(|s| s.ephemeral_owner == session.id && s.version == v.record);
        if !ours {
            self.book().unhold(name);
            self.forget(name);
            return Ok(CasOutcome::Conflict(Current::Unknown));
        }
        session.answered(call);
        let ttl = held_record.ttl.get();
        if !self.book().extend(name, v, call, call + ttl) {
            return Ok(CasOutcome::Conflict(Current::Absent));
        }
        // Usually later than before and further off than the expiry task's longest sleep.
        kick_for(&self.reaper_kick, call + ttl);
        // The server that answered may be a follower whose report of this heartbeat has
        // not reached the leader: the renewal is good for as long as the leader surely
        // keeps the session (see `session::Heard`).
        Ok(CasOutcome::Written(
            Stored::new(held_record, version.clone()).with_remaining(Some(session.lives_after(call))),
        ))
    }

    /// Deletes the record znode at `version` in one `multi`, which checks the fence
    /// counter's version too (the counter stays, so that tokens go on).
    pub(crate) async fn delete(&self, name: &LeaseName, version: &Version) -> Result<DeleteOutcome> {
        match self.remove(name, version, Removal::Record).await? {
            Removed::Done => Ok(DeleteOutcome::Deleted),
            Removed::RecordMissing | Removed::Refused => self.conflict(name).await,
        }
    }

    /// Deletes the record and its fence counter znodes at `version`: nothing of the
    /// name is left. One `multi` of both; of the counter alone when the last read showed
    /// the record gone (its store deleted it at its TTL, which leaves the counter's
    /// version as it was), with the record's absence proved in the same `multi`. A
    /// record found gone only by the `multi` costs a second one, of the counter alone.
    /// Any write of the name since raised the counter's version, so the counter is
    /// deleted only if nothing was written under the name since `version`; a refused
    /// second `multi` is answered [`Current::Unknown`], without a third request.
    pub(crate) async fn purge(&self, name: &LeaseName, version: &Version) -> Result<DeleteOutcome> {
        let record_gone = self
            .seen()
            .get(name)
            .is_some_and(|s| s.record.is_none() && s.counter.is_some());
        let first = if record_gone { Removal::Counter } else { Removal::Both };
        match self.remove(name, version, first).await? {
            Removed::Done => return Ok(DeleteOutcome::Deleted),
            Removed::Refused => return self.conflict(name).await,
            Removed::RecordMissing => {}
        }
        // Found gone by the first `multi`: the counter alone. A refusal of this second
        // one is answered without a third request.
        match self.remove(name, version, Removal::Counter).await? {
            Removed::Done => Ok(DeleteOutcome::Deleted),
            Removed::RecordMissing | Removed::Refused => Ok(DeleteOutcome::Conflict(Current::Unknown)),
        }
    }

    /// A removal's conflict: what the name shows now, read afresh.
    async fn conflict(&self, name: &LeaseName) -> Result<DeleteOutcome> {
        let snap = self.read_snapshot(name).await?;
        let d = snap.decode(name)?;
        Ok(DeleteOutcome::Conflict(self.current(name, d)))
    }

    /// Makes the held record at `version` outlive its writer's session, until a purge:
    /// one `multi` that raises the fence counter's version (so the record gets a new
    /// version), deletes the EPHEMERAL record znode at its version and creates it
    /// PERSISTENT with the same record, marked kept ([`nodes::KEPT_PREFIX`]). The name
    /// is read first: two round trips. A vacant or kept record at `version` is kept
    /// already.
    pub(crate) async fn keep(&self, name: &LeaseName, version: &Version) -> Result<ExpireOutcome> {
        let v = Ver::parse(version)?;
        let paths = self.paths(name);
        let snap = self.read_snapshot(name).await?;
        let counter = snap.counter(name)?;
        match snap.decode(name)? {
            Decoded::Present(now, r) if now == v && !r.is_vacant() => {}
            Decoded::Present(now, _) | Decoded::Kept(now, _) if now == v => return Ok(ExpireOutcome::Kept),
            d => return Ok(ExpireOutcome::Conflict(self.current(name, d))),
        }
        // A record decodes only beside its counter.
        let (Some(counter), Some(node)) = (counter, &snap.record) else {
            return Ok(ExpireOutcome::Conflict(Current::Unknown));
        };
        let kept_bytes = [nodes::KEPT_PREFIX, &node.bytes].concat();
        let client = self.main_client().await?;
        let sent = self
            .send_multi(&client, "keep", |w| {
                w.add_set_data(&paths.fence, &nodes::encode_fence(counter.token), Some(counter.version))?;
                w.add_delete(&paths.record, Some(v.record))?;
                w.add_create(
                    &paths.record,
                    &kept_bytes,
                    &zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all()),
                )
            })
            .await;
        match sent {
            Ok(_) => {
                self.book().unhold(name);
                self.forget(name);
                Ok(ExpireOutcome::Kept)
            }
            // Answered without a third request: the name changed since the read.
            Err(MultiFailureOut(MultiFailure::Op(..))) => Ok(ExpireOutcome::Conflict(Current::Unknown)),
            Err(MultiFailureOut(MultiFailure::Request(e))) => {
                self.forget(name);
                Err(e)
            }
        }
    }

    /// Removes what `removal` says in one `multi` at `version`.
    async fn remove(&self, name: &LeaseName, version: &Version, removal: Removal) -> Result<Removed> {
        let v = Ver::parse(version)?;
        let paths = self.paths(name);
        let client = self.main_client().await?;
        let what = if removal == Removal::Record { "delete" } else { "purge" };
        let sent = self
            .send_multi(&client, what, |w| match removal {
                Removal::Record => {
                    w.add_delete(&paths.record, Some(v.record))?;
                    w.add_check_version(&paths.fence, v.counter)
                }
                Removal::Both => {
                    w.add_delete(&paths.record, Some(v.record))?;
                    w.add_delete(&paths.fence, Some(v.counter))
                }
                // The record's absence proved in the same `multi`: created (refused if
                // it is there) and deleted again, so the counter goes only from a name
                // that has no record.
                Removal::Counter => {
                    let opts = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
                    w.add_create(&paths.record, b"", &opts)?;
                    w.add_delete(&paths.record, Some(0))?;
                    w.add_delete(&paths.fence, Some(v.counter))
                }
            })
            .await;
        match sent {
            Ok(_) => {
                self.book().unhold(name);
                if removal == Removal::Record {
                    if let Some(s) = self.seen().get_mut(name) {
                        s.record = None;
                    }
                } else {
                    self.forget(name);
                }
                Ok(Removed::Done)
            }
            Err(MultiFailureOut(MultiFailure::Op(0, zk::Error::NoNode))) => Ok(Removed::RecordMissing),
            Err(MultiFailureOut(MultiFailure::Op(..))) => Ok(Removed::Refused),
            Err(MultiFailureOut(MultiFailure::Request(e))) => {
                self.forget(name);
                Err(e)
            }
        }
    }

    pub(crate) async fn read(&self, name: &LeaseName) -> Result<Option<Stored>> {
        let snap = self.read_snapshot(name).await?;
        snap.counter(name)?;
        match snap.decode(name)? {
            Decoded::Absent => Ok(None),
            Decoded::Present(v, r) => Ok(Some(self.stored(name, v, r))),
            Decoded::Kept(v, r) => Ok(Some(kept(v, r))),
        }
    }

    pub(crate) async fn list(&self, prefix: &NamePrefix) -> Result<Vec<LeaseName>> {
        let client = self.main_client().await?;
        self.stats.read();
        let Some(children) = self
            .bounded_node("list", Effect::Read, client.list_children(self.config.root()))
            .await?
        else {
            return Err(self.missing_root());
        };
        let mut names: Vec<LeaseName> = children
            .iter()
            .filter_map(|c| nodes::name_of(c))
            .filter(|n| prefix.matches(n))
            .collect();
        names.sort_by(|a, b| a.as_str().cmp(b.as_str()));
        names.dedup();
        Ok(names)
    }
}

/// A kept record as read: no time left is known on the store's clock (none bounds it;
/// a purge removes it), so a reader judges it by its wall-clock expiry.
fn kept(v: Ver, record: LeaseRecord) -> Stored {
    Stored::new(record, v.to_version())
}

fn results_len(plan: &Plan) -> usize {
    2 + usize::from(plan.base.record.is_some())
}

/// A `multi`'s failure (a newtype so that the enum stays private to this module).
pub(crate) struct MultiFailureOut(MultiFailure);

impl MultiFailureOut {
    /// The failure as an error: a failed operation is `on_op(index, error)`.
    pub(crate) fn into_error(self, on_op: impl FnOnce(usize, zk::Error) -> Error) -> Error {
        match self.0 {
            MultiFailure::Op(i, e) => on_op(i, e),
            MultiFailure::Request(e) => e,
        }
    }
}

fn invalid_request(what: &str, e: zk::Error) -> Error {
    Error::invalid("ZooKeeper request", format!("{what}: {e}"))
}

fn unexpected_read(got: Option<zk::MultiReadResult>) -> Error {
    match got {
        Some(zk::MultiReadResult::Error { err }) => error::map("read", Effect::Read, err),
        other => Error::Unavailable {
            message: format!("ZooKeeper read: unexpected answer {other:?}"),
            source: None,
        },
    }
}

#[async_trait]
impl Expire for Inner {
    type Version = Ver;

    fn take_due(&self, now: Instant) -> (Vec<Expiry<Ver>>, Option<Instant>) {
        self.book().take_due(now)
    }

    /// Deletes a held record whose holder stopped renewing it.
    async fn expire(&self, expiry: &Expiry<Ver>) {
        let paths = self.paths(&expiry.name);
        self.stats.expiry_delete();
        let done = match self.expire_one(&paths, expiry).await {
            Ok(deleted) => {
                if deleted {
                    self.forget(&expiry.name);
                }
                true
            }
            Err(e) => {
                tracing::debug!(lease = %expiry.name, error = %e, "expiry delete failed; retrying");
                false
            }
        };
        self.book().expired(expiry, done, Instant::now() + EXPIRY_RETRY);
    }
}

impl Inner {
    /// One expiry delete: guarded on the version when known, else on the bytes and the
    /// session (a read, then a delete on the data version it showed). `Ok(deleted)` when
    /// the record is gone or was replaced.
    async fn expire_one(&self, paths: &Paths, expiry: &Expiry<Ver>) -> Result<bool> {
        let client = self.main_client().await?;
        let (counter, record) = match expiry.version {
            Some(v) => (Some(v.counter), v.record),
            None => {
                self.stats.read();
                match self
                    .bounded_node("expiry read", Effect::Read, client.get_data(&paths.record))
                    .await?
                {
                    Some((data, stat)) if data == expiry.bytes && stat.ephemeral_owner == expiry.session => {
                        (None, stat.version)
                    }
                    _ => return Ok(false),
                }
            }
        };
        // A record whose token an operator raised above the counter carries the raise
        // into the counter as it goes, so no later grant issues a token at or below it.
        let raised = record_codec::decode(&expiry.name, &expiry.bytes).ok().and_then(|r| {
            let known = self.last_seen(&expiry.name)?.counter?;
            (r.token > known.token).then_some(r.token)
        });

        let sent = self
            .send_multi(&client, "expiry delete", |w| {
                match (counter, raised) {
                    (Some(c), Some(token)) => w.add_set_data(&paths.fence, &nodes::encode_fence(token), Some(c))?,
                    (Some(c), None) => w.add_check_version(&paths.fence, c)?,
                    (None, _) => {}
                }
                w.add_delete(&paths.record, Some(record))
            })
            .await;
        match sent {
            Ok(_) => {
                tracing::debug!(lease = %expiry.name, "deleted a held record its holder stopped renewing");
                Ok(true)
            }
            Err(f) => match f.0 {
                MultiFailure::Op(..) => Ok(false),
                MultiFailure::Request(e) => Err(e),
            },
        }
    }
}

/// Adds to `w` a write of `data` to the persistent znode `path`: a `setData` on
/// `version` if it exists, a create if it does not (`None`). As the first operation of a
/// `multi`, [`first_version`] reads the data version it left.
pub(crate) fn add_set_or_create(
    w: &mut zk::MultiWriter<'_>,
    path: &str,
    data: &[u8],
    version: Option<i32>,
) -> std::result::Result<(), zk::Error> {
    match version {
        Some(v) => w.add_set_data(path, data, Some(v)),
        None => w.add_create(
            path,
            data,
            &zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all()),
        ),
    }
}

/// The data version the first operation of a `multi` left, written by
/// [`add_set_or_create`]: a `setData`'s new version, 0 for a create.
pub(crate) fn first_version(results: &[zk::MultiWriteResult]) -> i32 {
    match results.first() {
        Some(zk::MultiWriteResult::SetData { stat }) => stat.version,
        _ => 0,
    }
}

#[async_trait]
impl CasStore for ZooKeeperStore {
    fn capabilities(&self) -> Capabilities {
        CAPABILITIES
    }

    async fn read(&self, name: &LeaseName) -> Result<Option<Stored>> {
        self.inner.read(name).await
    }

    async fn write(&self, name: &LeaseName, expect: &Precondition, record: &LeaseRecord) -> Result<CasOutcome> {
        self.inner.write(name, expect, record).await
    }

    async fn delete(&self, name: &LeaseName, version: &Version) -> Result<DeleteOutcome> {
        self.inner.delete(name, version).await
    }

    /// Deletes the record and its fence counter znode (kept after a plain delete, so
    /// that tokens go on), in one `multi` at the record's version.
    async fn purge(&self, name: &LeaseName, version: &Version) -> Result<DeleteOutcome> {
        self.inner.purge(name, version).await
    }

    /// ZooKeeper has no expiry of its own for a znode: the held record is made to
    /// outlive its writer's session (a PERSISTENT znode, marked kept) and stays until
    /// the caller purges it, as [`ExpireOutcome::Kept`] says; `after` is not used. Two
    /// round trips.
    async fn expire(&self, name: &LeaseName, version: &Version, after: Duration) -> Result<ExpireOutcome> {
        let _ = after;
        self.inner.keep(name, version).await
    }

    async fn renew(&self, name: &LeaseName, version: &Version, record: &LeaseRecord) -> Result<CasOutcome> {
        self.inner.renew(name, version, record).await
    }

    /// The children of the root znode (one request), fence counters left out.
    async fn list(&self, prefix: &NamePrefix) -> Result<Vec<LeaseName>> {
        self.inner.list(prefix).await
    }

    async fn wait_for_change(&self, name: &LeaseName, seen: Option<&Version>, wait: Wait) -> Result<()> {
        crate::watch::wait(&self.inner, name, seen, wait).await
    }
}

impl Linearizable for ZooKeeperStore {}
