//! [`EtcdStore`]: the [`CasStore`] over an etcd client.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use async_trait::async_trait;
use etcd_client::{Compare, CompareOp, GetOptions, PutOptions, Txn, TxnOp, TxnOpResponse, TxnResponse};
use leasehold_core::{
    Error, FencingToken, LeaseName, NamePrefix, Result, Ttl,
    store::{
        Capabilities, CasOutcome, CasStore, ClockSource, Current, DeleteOutcome, ExpireOutcome, FinishOnDrop, Grade,
        LeaseRecord, Linearizable, Precondition, Stored, Version, Wait, record_codec,
    },
};
use tokio::sync::Notify;
use tokio::time::Instant;

use leasehold_core::store::session::{Expire, expire_due, kick_for};

use crate::config::EtcdConfig;
use crate::error::{self, Effect};
use crate::held_watch::{self, HeldHost, HeldWatch, Reread};
use crate::keys::{Keys, encode_fence};
use crate::session::{self, Cover, Session, SessionHost};
use crate::state::{Claim, Decoded, Held, Reap, Reaped, RecordCmp, RecordKv, Snapshot, State, decode, version_of};
use crate::stats::{EtcdStats, Stats};
use crate::watch::{self, Look, WatchHost, Watches};

/// Pause before retrying an expiry delete that failed.
const REAP_RETRY: Duration = Duration::from_millis(250);

/// Lease records in etcd: linearizable, expiry on etcd's clock through session leases,
/// conflicts answered with the current record, waiters woken by a watch.
///
/// Cheap to clone (an `Arc`); clones share sessions, caches and counters. Background
/// tasks (session keep-alives, expiry of abandoned records, watches) start on first use
/// on the current Tokio runtime and stop when the last clone is dropped. See the crate
/// docs for the protocol, the keys, and the cost of each operation.
#[derive(Clone)]
pub struct EtcdStore {
    pub(crate) inner: Arc<Inner>,
}

/// What the etcd store offers: expiry on etcd's clock (session leases), a conflict's
/// else-branch answers the current record, and a watch wakes waiters.
const CAPABILITIES: Capabilities = Capabilities::new(ClockSource::Store, Grade::Linearizable)
    .with_conflict_returns_current(true)
    .with_notifies_waiters(true)
    .with_held_outlives_writer(false);

pub(crate) struct Inner {
    pub(crate) client: etcd_client::Client,
    pub(crate) config: EtcdConfig,
    pub(crate) stats: Stats,
    pub(crate) watches: Watches,
    held_watch: HeldWatch,
    state: Mutex<State>,
    sessions: tokio::sync::Mutex<HashMap<u64, Arc<Session>>>,
    reaper_kick: Arc<Notify>,
    reaper_started: std::sync::OnceLock<()>,
    me: Weak<Inner>,
    /// A test's hook, run once after the next held write applies ([`tests::AfterTxn`]).
    #[cfg(test)]
    after_txn: Mutex<Option<tests::AfterTxn>>,
}

impl fmt::Debug for EtcdStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EtcdStore")
            .field("prefix", &self.inner.config.prefix())
            .field("request_timeout", &self.inner.config.request_timeout())
            .field("stats", &self.inner.stats.snapshot())
            .finish_non_exhaustive()
    }
}

/// Why a request got no usable answer.
pub(crate) enum Failure {
    Timeout,
    Etcd(etcd_client::Error),
}

impl EtcdStore {
    /// A store over the `client` you configured (endpoints, TLS, authentication,
    /// timeouts), with `config` (`EtcdConfig::default()`: keys under `leasehold/`).
    /// Nothing is sent; [`EtcdStore::verify`] checks that the cluster answers and the
    /// prefix may be read.
    pub fn new(client: etcd_client::Client, config: EtcdConfig) -> Self {
        Self {
            inner: Arc::new_cyclic(|me| Inner {
                client,
                config,
                stats: Stats::default(),
                watches: Watches::default(),
                held_watch: HeldWatch::default(),
                state: Mutex::new(State::default()),
                sessions: tokio::sync::Mutex::new(HashMap::new()),
                reaper_kick: Arc::new(Notify::new()),
                reaper_started: std::sync::OnceLock::new(),
                me: me.clone(),
                #[cfg(test)]
                after_txn: Mutex::new(None),
            }),
        }
    }

    /// Creates what the store needs: nothing on etcd (keys are created by the first
    /// grant, sessions by the first lease). Checks instead, as [`EtcdStore::verify`]
    /// on a store built from `client` and `config`, so that every store's setup reads
    /// the same.
    ///
    /// # Errors
    /// As [`EtcdStore::verify`].
    pub async fn provision(client: &etcd_client::Client, config: &EtcdConfig) -> Result<()> {
        Self::new(client.clone(), config.clone()).verify().await
    }

    /// Checks that the cluster answers within the request timeout and that this
    /// client may read the store's prefix: one count-only range request.
    ///
    /// # Errors
    /// [`leasehold_core::Error::Unavailable`] when etcd does not answer;
    /// [`leasehold_core::Error::Misconfigured`] when the client is not permitted.
    pub async fn verify(&self) -> Result<()> {
        let inner = &self.inner;
        let prefix = inner.config.prefix().as_bytes().to_vec();
        let opts = GetOptions::new().with_prefix().with_count_only();
        let mut kv = inner.client.kv_client();
        inner.stats.range();
        inner
            .bounded("verify", Effect::Read, kv.get(prefix, Some(opts)))
            .await
            .map(drop)
    }

    /// The etcd client this store uses.
    pub fn client(&self) -> &etcd_client::Client {
        &self.inner.client
    }

    /// The options this store was built with.
    pub fn config(&self) -> &EtcdConfig {
        &self.inner.config
    }

    /// The key holding `name`'s lease record.
    pub fn record_key(&self, name: &LeaseName) -> Vec<u8> {
        self.inner.keys(name).record
    }

    /// The key holding `name`'s fence counter (the highest token issued).
    pub fn fence_key(&self, name: &LeaseName) -> Vec<u8> {
        self.inner.keys(name).fence
    }

    /// The requests this store has sent so far.
    pub fn stats(&self) -> EtcdStats {
        self.inner.stats.snapshot()
    }
}

impl SessionHost for Inner {
    fn lease_client(&self) -> etcd_client::LeaseClient {
        self.client.lease_client()
    }
    fn request_timeout(&self) -> Duration {
        self.config.request_timeout()
    }
    fn count_keepalive(&self) {
        self.stats.keepalive();
    }
    fn session_gone(&self, id: i64) {
        Inner::session_gone(self, id);
    }
}

#[async_trait]
impl WatchHost for Inner {
    fn watches(&self) -> &Watches {
        &self.watches
    }
    fn record_key(&self, name: &LeaseName) -> Vec<u8> {
        self.keys(name).record
    }
    fn last_seen(&self, name: &LeaseName) -> Option<Look> {
        Inner::last_seen(self, name)
    }
    async fn read_state(&self, name: &LeaseName) -> Result<Look> {
        Inner::read_state(self, name).await
    }
    fn watch_client(&self) -> etcd_client::WatchClient {
        self.stats.watch();
        self.client.watch_client()
    }
    fn observe_event(&self, name: &LeaseName, rev: i64, kv: Option<&RecordKv>) {
        Inner::observe_event(self, name, rev, kv);
    }
}

#[async_trait]
impl Reread for Inner {
    fn watched_names(&self) -> Vec<LeaseName> {
        self.lock().watched_names()
    }
    async fn refresh(&self, name: &LeaseName) -> Result<i64> {
        Ok(Inner::read_state(self, name).await?.rev)
    }
    fn unconfirm(&self, name: &LeaseName) {
        self.lock().unconfirm(name);
    }
}

impl HeldHost for Inner {
    fn held_watch(&self) -> &HeldWatch {
        &self.held_watch
    }
    fn prefix(&self) -> &str {
        self.config.prefix()
    }
    fn watch_client(&self) -> etcd_client::WatchClient {
        WatchHost::watch_client(self)
    }
    fn holds_any(&self) -> bool {
        self.lock().holds_any()
    }
    fn observe_held(&self, name: &LeaseName, rev: i64, kv: Option<&RecordKv>) {
        let mut st = self.lock();
        if st.watches(name) {
            st.observe_event(name, rev, kv);
        }
    }
}

/// A held write in flight on a name, registered with [`State::begin_write`] until it is
/// dropped (on every way out of the write).
struct Writing<'a> {
    inner: &'a Inner,
    name: &'a LeaseName,
}

impl Drop for Writing<'_> {
    fn drop(&mut self) {
        self.inner.lock().end_write(self.name);
    }
}

impl Inner {
    pub(crate) fn keys(&self, name: &LeaseName) -> Keys {
        Keys::new(self.config.prefix(), name)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) async fn send_txn(&self, txn: Txn) -> std::result::Result<TxnResponse, Failure> {
        self.stats.txn();
        let mut kv = self.client.kv_client();
        match tokio::time::timeout(self.config.request_timeout(), kv.txn(txn)).await {
            Err(_) => Err(Failure::Timeout),
            Ok(r) => r.map_err(Failure::Etcd),
        }
    }

    /// `request` bounded by the request timeout, its failure mapped for `what`.
    pub(crate) async fn bounded<T>(
        &self,
        what: &str,
        op: Effect,
        request: impl std::future::Future<Output = std::result::Result<T, etcd_client::Error>>,
    ) -> Result<T> {
        match tokio::time::timeout(self.config.request_timeout(), request).await {
            Err(_) => Err(error::timed_out(what, op, self.config.request_timeout())),
            Ok(r) => r.map_err(|e| error::map(what, op, e)),
        }
    }

    pub(crate) fn failure(&self, what: &str, op: Effect, f: Failure) -> Error {
        match f {
            Failure::Timeout => error::timed_out(what, op, self.config.request_timeout()),
            Failure::Etcd(e) => error::map(what, op, e),
        }
    }

    /// Reads both keys of `name` in one range request.
    async fn read_snapshot(&self, name: &LeaseName) -> Result<(Keys, Snapshot)> {
        let keys = self.keys(name);
        self.stats.range();
        let mut kv = self.client.kv_client();
        let opts = GetOptions::new().with_range(keys.range_end.clone());
        let resp = self
            .bounded("range read", Effect::Read, kv.get(keys.record.clone(), Some(opts)))
            .await?;
        let rev = resp.header().map_or(0, |h| h.revision());
        let snap = Snapshot::from_kvs(&keys, rev, resp.kvs());
        Ok((keys, snap))
    }

    /// Reads the record key's state for a new watch.
    pub(crate) async fn read_state(&self, name: &LeaseName) -> Result<Look> {
        let (_, snap) = self.read_snapshot(name).await?;
        let d = decode(name, &snap);
        self.lock().observe(name, &snap, &d);
        Ok(match &d.record {
            None => Look {
                version: None,
                free: true,
                rev: snap.rev,
            },
            Some((version, _, r)) => Look {
                version: Some(*version),
                free: r.as_ref().is_ok_and(LeaseRecord::is_vacant),
                rev: snap.rev,
            },
        })
    }

    /// The record key's state as this store last saw it.
    pub(crate) fn last_seen(&self, name: &LeaseName) -> Option<Look> {
        let st = self.lock();
        st.known(name).map(|k| match &k.record {
            crate::state::RecordSeen::Absent => Look {
                version: None,
                free: true,
                rev: k.rev,
            },
            crate::state::RecordSeen::Present { version, record } => Look {
                version: Some(*version),
                free: record.as_ref().is_some_and(LeaseRecord::is_vacant),
                rev: k.rev,
            },
        })
    }

    /// Tells the waiters what a write through this store showed of `name`: a wake-up
    /// handed out for an older change did its work if that is a newer record.
    fn claimed(&self, name: &LeaseName, outcome: &CasOutcome) {
        if let CasOutcome::Written(s) | CasOutcome::Conflict(Current::Present(s)) = outcome {
            if let Ok(v) = parse_version(&s.version) {
                self.watches.claimed(name, v);
            }
        }
    }

    pub(crate) fn observe_event(&self, name: &LeaseName, rev: i64, kv: Option<&RecordKv>) {
        self.lock().observe_event(name, rev, kv);
    }

    pub(crate) fn session_gone(&self, session: i64) {
        self.lock().session_gone(session);
    }

    /// The live session for records of `ttl`, granting one if needed (one round trip).
    async fn session_for(&self, ttl: Ttl) -> Result<Arc<Session>> {
        let class = session::class_of(ttl.get());
        let mut sessions = self.sessions.lock().await;
        if let Some(s) = sessions.get(&class) {
            if !s.is_dead() {
                return Ok(s.clone());
            }
        }
        let secs = i64::try_from(class).map_err(|_| Error::invalid("ttl", "too long for an etcd lease"))?;
        self.stats.lease_grant();
        let sent = Instant::now();
        let mut lease = self.client.lease_client();
        // A grant that failed or timed out leaves at most an unused lease that expires on
        // its own; the record write it was for was not sent, so this is `Unavailable`.
        let resp = self
            .bounded("lease grant", Effect::Read, lease.grant(secs, None))
            .await?;
        let granted = u64::try_from(resp.ttl()).unwrap_or(0);
        if granted < class {
            return Err(Error::Unavailable {
                message: format!(
                    "etcd granted a session lease of {}s for a {class}s class: {}",
                    resp.ttl(),
                    resp.error()
                ),
                source: None,
            });
        }
        let s = Arc::new(Session::new(resp.id(), Duration::from_secs(granted), sent));
        tokio::spawn(session::keep_alive(self.me.clone(), s.clone()));
        sessions.insert(class, s.clone());
        tracing::debug!(session = s.id, ttl_s = granted, "granted an etcd session lease");
        Ok(s)
    }

    /// Runs the test's hook set with `tests::after_txn`, if any (once).
    #[cfg(test)]
    async fn after_txn(&self, name: &LeaseName, rev: i64) {
        let hook = self
            .after_txn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(hook) = hook {
            hook(name.clone(), rev).await;
        }
    }

    fn start_reaper(&self) {
        if self.reaper_started.set(()).is_ok() {
            tokio::spawn(expire_due(self.me.clone(), self.reaper_kick.clone()));
        }
    }

    /// Registers a held entry ([`State::hold`]: refused if the record changed since the
    /// write) and makes sure it expires and that changes to it are seen.
    fn hold(&self, name: &LeaseName, held: Held) {
        let confirmed = held.version.map(|_| held.seen_at);
        let deadline = held.deadline;
        let registered = self.lock().hold(name, held);
        // Refused, it may still have left an orphan to expire.
        self.start_reaper();
        kick_for(&self.reaper_kick, deadline);
        if let (Some(rev), true) = (confirmed, registered) {
            // From the revision of the write that made this store a holder: a foreign
            // change after it is seen, even one made before the watch opened.
            held_watch::ensure(&self.me, self, rev);
        }
    }

    /// The current record as a conflict reports it, from an else-branch snapshot.
    fn current_of(&self, name: &LeaseName, d: &Decoded) -> Result<Current> {
        match &d.record {
            None => Ok(Current::Absent),
            Some((_, _, Err(e))) => Err(clone_corrupt(name, e)),
            Some((version, _, Ok(r))) => {
                let st = self.lock();
                Ok(Current::Present(st.stored(name, *version, r.clone(), Instant::now())))
            }
        }
    }

    /// Whether a claim would apply to what `d` shows (absent, vacant, or held by this
    /// store and expired).
    fn claimable(&self, name: &LeaseName, d: &Decoded) -> Result<bool> {
        d.fence.as_ref().map_err(|e| clone_corrupt(name, e))?;
        Ok(match &d.record {
            None => true,
            Some((_, _, Err(e))) => return Err(clone_corrupt(name, e)),
            Some((version, _, Ok(r))) => r.is_vacant() || self.lock().own_expired(name, *version, Instant::now()),
        })
    }

    /// Runs [`Inner::write_to_end`] in the caller's task, and to its end even when the
    /// caller drops the call (a timeout, a `select!`, a dropped acquire; it then finishes
    /// on a task: [`FinishOnDrop`]): a held record lives on a session this store keeps alive, so a claim that applied while
    /// nobody was left to register it would be held for as long as the store exists.
    /// Registered, it is expired at its deadline like any record nobody renews.
    async fn write(&self, name: &LeaseName, expect: &Precondition, record: &LeaseRecord) -> Result<CasOutcome> {
        // What this store's write handles, all of it before anything is sent.
        if !matches!(
            expect,
            Precondition::Absent | Precondition::Version(_) | Precondition::Claimable
        ) {
            return Err(leasehold_core::store::not_taken("etcd", expect));
        }
        let Some(me) = self.me.upgrade() else {
            return Err(Error::Unavailable {
                message: "the etcd store is being dropped".into(),
                source: None,
            });
        };
        let (name, expect, record) = (name.clone(), expect.clone(), record.clone());
        FinishOnDrop::new(async move {
            let outcome = me.write_to_end(&name, &expect, &record).await;
            if let Ok(o) = &outcome {
                me.claimed(&name, o);
            }
            outcome
        })
        .await
    }

    async fn write_to_end(&self, name: &LeaseName, expect: &Precondition, record: &LeaseRecord) -> Result<CasOutcome> {
        let call = Instant::now();
        let claim = matches!(expect, Precondition::Claimable);
        if !claim && record.token == FencingToken::ZERO {
            return Err(Error::invalid("fencing token", "token 0 is never issued"));
        }
        let expected_version = match expect {
            Precondition::Version(v) => Some(parse_version(v)?),
            _ => None,
        };
        let keys = self.keys(name);
        let mut session = match record.holder {
            Some(_) => Some(self.session_for(record.ttl).await?),
            None => None,
        };
        // A held write: changes to the record from now on are kept, so that one made after
        // the write applies is not lost before the write is registered (`State::hold`).
        let _writing = session.is_some().then(|| {
            self.lock().begin_write(name);
            Writing { inner: self, name }
        });
        // A held record lives as long as its session when its process stops: the
        // session's TTL (whole seconds, at least etcd's minimum) is the lease's real TTL.
        // The record says so, and the grant reports it (`Lease::ttl`), rather than
        // keeping a shorter TTL that etcd would quietly stretch.
        let raised;
        let record = match &session {
            Some(s) if s.ttl > record.ttl.get() => {
                let mut r = record.clone();
                r.ttl = Ttl::new(s.ttl)?;
                raised = r;
                &raised
            }
            _ => record,
        };
        // The grant's validity counts from `call`, and the session must live on etcd at
        // least as long as the holder trusts it (rule 3 of docs/DESIGN.md). When the last
        // answered keep-alive leaves the session at least half the TTL from `call`, the
        // grant is given for that much (`Stored::remaining`; the holder renews within a
        // third of it, and that renewal's keep-alive extends it): no keep-alive on the
        // caller's path. Otherwise a keep-alive sent now, in parallel with the Txn, proves
        // the session outlives the whole TTL (see below).
        let mut known_life = None;
        if let Some(s) = &session {
            let ttl = record.ttl.get();
            if !s.covers(call, ttl) {
                match s.life_from(call) {
                    Some(life) if life >= ttl / 2 => known_life = Some(life),
                    _ => s.request(call),
                }
            }
        }
        let mut claims_left = 2;
        let mut lease_retry = true;
        loop {
            let (txn, to_write) = match expect {
                Precondition::Claimable => {
                    let c = self.lock().claim(name, call);
                    let mut r = record.clone();
                    // The counter is the store's own (the fence key): at its end, the
                    // store says so, and sends nothing.
                    r.token = c.token.ok_or_else(|| Error::TokensExhausted {
                        name: name.as_str().to_owned(),
                    })?;
                    (claim_txn(&keys, &c, &r, session.as_deref()), r)
                }
                Precondition::Absent => (
                    explicit_txn(
                        &keys,
                        Compare::create_revision(keys.record.clone(), CompareOp::Equal, 0),
                        record,
                        session.as_deref(),
                    ),
                    record.clone(),
                ),
                Precondition::Version(_) => (
                    explicit_txn(
                        &keys,
                        Compare::mod_revision(keys.record.clone(), CompareOp::Equal, expected_version.unwrap_or(0)),
                        record,
                        session.as_deref(),
                    ),
                    record.clone(),
                ),
                _ => return Err(leasehold_core::store::not_taken("etcd", expect)),
            };
            let bytes = record_codec::encode(&to_write);
            match self.send_txn(txn).await {
                Ok(resp) if resp.succeeded() => {
                    let rev = header_revision(&resp)?;
                    #[cfg(test)]
                    self.after_txn(name, rev).await;
                    let remaining = {
                        let mut st = self.lock();
                        st.wrote(name, rev, &to_write, claim);
                        if session.is_none() {
                            st.unhold(name);
                        }
                        if to_write.is_vacant() {
                            Duration::ZERO
                        } else {
                            known_life.map_or(to_write.ttl.get(), |life| life.min(to_write.ttl.get()))
                        }
                    };
                    if let Some(s) = &session {
                        self.hold(
                            name,
                            Held::new(
                                Some(rev),
                                bytes,
                                to_write.clone(),
                                s.clone(),
                                call + to_write.ttl.get(),
                                rev,
                            ),
                        );
                        // The holder will trust the grant until `call + remaining - margin`:
                        // the session must live on etcd at least that long (rule 3 of
                        // docs/DESIGN.md). Known already, or proved by the keep-alive sent
                        // with the Txn.
                        let cover = match known_life {
                            Some(_) => Cover::Covered,
                            None => s.cover(self, call, to_write.ttl.get()).await,
                        };
                        match cover {
                            Cover::Covered => {}
                            Cover::Dead => {
                                return Err(Error::Indeterminate {
                                    message: "etcd applied the write, but its session lease has expired since".into(),
                                    source: None,
                                });
                            }
                            Cover::Failed(why) => {
                                return Err(Error::Indeterminate {
                                    message: format!(
                                        "etcd applied the write, but no keep-alive proved its session outlives the TTL: {why}"
                                    ),
                                    source: None,
                                });
                            }
                        }
                    }
                    return Ok(CasOutcome::Written(
                        Stored::new(to_write, version_of(rev)).with_remaining(Some(remaining)),
                    ));
                }
                Ok(resp) => {
                    let snap = else_snapshot(&keys, &resp);
                    let d = decode(name, &snap);
                    self.lock().observe(name, &snap, &d);
                    claims_left -= 1;
                    if claim && claims_left > 0 && self.claimable(name, &d)? {
                        // What this store remembered was stale; the answer is fresh.
                        continue;
                    }
                    if claim {
                        // A corrupt fence counter must fail the claim loudly.
                        d.fence.as_ref().map_err(|e| clone_corrupt(name, e))?;
                    }
                    return Ok(CasOutcome::Conflict(self.current_of(name, &d)?));
                }
                Err(Failure::Etcd(e)) if lease_retry && session.is_some() && error::is_lease_not_found(&e) => {
                    // The session expired under us; etcd rejected the whole transaction.
                    lease_retry = false;
                    if let Some(s) = &session {
                        s.mark_dead();
                        self.session_gone(s.id);
                    }
                    // Granted after `call`, the new session covers the whole TTL.
                    known_life = None;
                    session = Some(self.session_for(record.ttl).await?);
                }
                Err(f) => {
                    let e = self.failure("transaction", Effect::Write, f);
                    if e.is_indeterminate() {
                        let mut st = self.lock();
                        st.forget(name);
                        drop(st);
                        if let Some(s) = &session {
                            // If it applied, the record is on our session: expire it on time.
                            self.hold(
                                name,
                                Held::new(None, bytes, to_write, s.clone(), call + record.ttl.get(), 0),
                            );
                        }
                    }
                    return Err(e);
                }
            }
        }
    }

    async fn renew(&self, name: &LeaseName, version: &Version, record: &LeaseRecord) -> Result<CasOutcome> {
        let call = Instant::now();
        let v = parse_version(version)?;
        let held = self.lock().renewable(name).cloned();
        let Some(h) = held else {
            // Not a record this store keeps alive, or one that may have changed unseen:
            // renew it the ordinary way (a Txn).
            return self.write(name, &Precondition::Version(version.clone()), record).await;
        };
        match h.version {
            Some(hv) if hv == v => {}
            Some(hv) => {
                let st = self.lock();
                return Ok(CasOutcome::Conflict(Current::Present(st.stored(
                    name,
                    hv,
                    h.record.clone(),
                    call,
                ))));
            }
            None => return Ok(CasOutcome::Conflict(Current::Unknown)),
        }
        if h.record.holder != record.holder || h.record.token != record.token {
            let st = self.lock();
            return Ok(CasOutcome::Conflict(Current::Present(st.stored(
                name,
                v,
                h.record.clone(),
                call,
            ))));
        }
        if h.expired(call) {
            // Its holder let it run out; the expiry delete is due or in flight.
            return Ok(CasOutcome::Conflict(Current::Absent));
        }
        if record.ttl.get() > h.session.ttl {
            // A longer TTL needs a longer session: move the record with a Txn.
            return self.write(name, &Precondition::Version(version.clone()), record).await;
        }
        match h.session.cover(self, call, record.ttl.get()).await {
            Cover::Covered => {}
            Cover::Dead => return Ok(CasOutcome::Conflict(Current::Absent)),
            Cover::Failed(why) => {
                return Err(Error::Unavailable {
                    message: format!("etcd session keep-alive failed: {why}"),
                    source: None,
                });
            }
        }
        let extended = self.lock().extend(name, v, call, call + record.ttl.get());
        if !extended {
            return Ok(CasOutcome::Conflict(Current::Absent));
        }
        // Usually later than before and further off than the expiry task's longest sleep.
        kick_for(&self.reaper_kick, call + record.ttl.get());
        Ok(CasOutcome::Written(
            Stored::new(h.record, version.clone()).with_remaining(Some(record.ttl.get())),
        ))
    }

    /// Leaves the record vacant if it is still at `version`: one Txn of one compare and
    /// one put, no heavier than etcd's own unlock (a delete). The fence counter is not
    /// touched: the record at `version` carries a token the counter already counts
    /// (every write of a token raises it), and vacating keeps that token. Runs in the
    /// caller's task: a vacant record lives on no session, so a release dropped half
    /// way leaves nothing this store must look after (the held entry, if the Txn did
    /// not apply, is expired by the reaper as before).
    async fn release(&self, name: &LeaseName, version: &Version, held: &LeaseRecord) -> Result<CasOutcome> {
        if held.is_vacant() {
            return Err(Error::invalid("record", "a release names the holder it releases"));
        }
        let v = parse_version(version)?;
        let keys = self.keys(name);
        let vacant = held.vacated();
        let txn = Txn::new()
            .when([Compare::mod_revision(keys.record.clone(), CompareOp::Equal, v)])
            .and_then([put_record(&keys, &vacant, None)])
            .or_else([range_op(&keys)]);
        let outcome = match self.send_txn(txn).await {
            Ok(resp) if resp.succeeded() => {
                let rev = header_revision(&resp)?;
                let mut st = self.lock();
                st.wrote(name, rev, &vacant, false);
                st.unhold(name);
                drop(st);
                CasOutcome::Written(Stored::new(vacant, version_of(rev)).with_remaining(Some(Duration::ZERO)))
            }
            Ok(resp) => {
                let snap = else_snapshot(&keys, &resp);
                let d = decode(name, &snap);
                self.lock().observe(name, &snap, &d);
                CasOutcome::Conflict(self.current_of(name, &d)?)
            }
            Err(f) => {
                let e = self.failure("release", Effect::Write, f);
                if e.is_indeterminate() {
                    self.lock().forget(name);
                }
                return Err(e);
            }
        };
        self.claimed(name, &outcome);
        Ok(outcome)
    }

    async fn delete(&self, name: &LeaseName, version: &Version) -> Result<DeleteOutcome> {
        self.delete_keys(name, version, false).await
    }

    /// Deletes the record at `version`, and with `purge` its fence counter too, in one
    /// transaction.
    async fn delete_keys(&self, name: &LeaseName, version: &Version, purge: bool) -> Result<DeleteOutcome> {
        let v = parse_version(version)?;
        let keys = self.keys(name);
        let mut ops = vec![TxnOp::delete(keys.record.clone(), None)];
        let mut otherwise = vec![range_op(&keys)];
        if purge {
            ops.push(TxnOp::delete(keys.fence.clone(), None));
            // The record gone already (expired): its fence counter goes if nothing was
            // written under the name since `version`.
            otherwise.insert(
                0,
                TxnOp::txn(
                    Txn::new()
                        .when([
                            Compare::version(keys.record.clone(), CompareOp::Equal, 0),
                            Compare::mod_revision(keys.fence.clone(), CompareOp::Less, v.saturating_add(1)),
                        ])
                        .and_then([TxnOp::delete(keys.fence.clone(), None)]),
                ),
            );
        }
        let txn = Txn::new()
            .when([Compare::mod_revision(keys.record.clone(), CompareOp::Equal, v)])
            .and_then(ops)
            .or_else(otherwise);
        match self.send_txn(txn).await {
            Ok(resp) if resp.succeeded() => {
                let rev = header_revision(&resp)?;
                let mut st = self.lock();
                st.deleted(name, rev);
                st.unhold(name);
                Ok(DeleteOutcome::Deleted)
            }
            Ok(resp) => {
                let snap = else_snapshot(&keys, &resp);
                let d = decode(name, &snap);
                self.lock().observe(name, &snap, &d);
                Ok(DeleteOutcome::Conflict(self.current_of(name, &d)?))
            }
            Err(f) => {
                let e = self.failure("delete", Effect::Write, f);
                if e.is_indeterminate() {
                    self.lock().forget(name);
                }
                Err(e)
            }
        }
    }

    /// Native expiry: a lease of its own (`after`, rounded up to whole seconds), then one
    /// Txn attaching the record and its fence counter to it, values unchanged, if the
    /// record is at `version` (or, the record being gone, attaching the counter if
    /// nothing was written under the name since `version`). Two round trips.
    async fn expire_keys(&self, name: &LeaseName, version: &Version, after: Duration) -> Result<ExpireOutcome> {
        let v = parse_version(version)?;
        let keys = self.keys(name);
        let secs = i64::try_from(after.as_millis().div_ceil(1000).max(1))
            .map_err(|_| Error::invalid("after", "too long for an etcd lease"))?;
        self.stats.lease_grant();
        let mut leases = self.client.lease_client();
        let lease = self
            .bounded("lease grant", Effect::Read, leases.grant(secs, None))
            .await?
            .id();
        let attach = || PutOptions::new().with_ignore_value().with_lease(lease);
        let counter_exists = Compare::create_revision(keys.fence.clone(), CompareOp::Greater, 0);
        let txn = Txn::new()
            .when([
                Compare::mod_revision(keys.record.clone(), CompareOp::Equal, v),
                counter_exists.clone(),
            ])
            .and_then([
                TxnOp::put(keys.record.clone(), [], Some(attach())),
                TxnOp::put(keys.fence.clone(), [], Some(attach())),
            ])
            .or_else([
                TxnOp::txn(
                    Txn::new()
                        .when([
                            Compare::version(keys.record.clone(), CompareOp::Equal, 0),
                            Compare::mod_revision(keys.fence.clone(), CompareOp::Less, v.saturating_add(1)),
                            counter_exists,
                        ])
                        .and_then([TxnOp::put(keys.fence.clone(), [], Some(attach()))]),
                ),
                range_op(&keys),
            ]);
        let resp = self.send_txn(txn).await;
        // Whatever the answer, what this store knew of the name no longer holds.
        self.lock().forget(name);
        match resp {
            Ok(resp) if resp.succeeded() => {
                self.lock().unhold(name);
                Ok(ExpireOutcome::Scheduled)
            }
            Ok(resp) => {
                let counter_attached = resp.op_responses().first().is_some_and(|r| match r {
                    TxnOpResponse::Txn(t) => t.succeeded(),
                    _ => false,
                });
                if counter_attached {
                    return Ok(ExpireOutcome::Scheduled);
                }
                let snap = else_snapshot(&keys, &resp);
                let d = decode(name, &snap);
                self.lock().observe(name, &snap, &d);
                Ok(ExpireOutcome::Conflict(self.current_of(name, &d)?))
            }
            Err(f) => Err(self.failure("expire", Effect::Write, f)),
        }
    }

    async fn read(&self, name: &LeaseName) -> Result<Option<Stored>> {
        let (_, snap) = self.read_snapshot(name).await?;
        let d = decode(name, &snap);
        self.lock().observe(name, &snap, &d);
        match self.current_of(name, &d)? {
            Current::Present(s) => Ok(Some(s)),
            _ => Ok(None),
        }
    }
}

#[async_trait]
impl Expire for Inner {
    type Version = i64;

    fn take_due(&self, now: Instant) -> (Vec<Reap>, Option<Instant>) {
        self.lock().take_due(now)
    }

    /// Deletes a held record whose holder stopped renewing it.
    async fn expire(&self, reap: &Reap) {
        let keys = self.keys(&reap.name);
        let guard = match reap.version {
            Some(v) => vec![Compare::mod_revision(keys.record.clone(), CompareOp::Equal, v)],
            None => vec![
                Compare::value(keys.record.clone(), CompareOp::Equal, reap.bytes.clone()),
                Compare::lease(keys.record.clone(), CompareOp::Equal, reap.session),
            ],
        };
        let txn = Txn::new()
            .when(guard)
            .and_then([TxnOp::delete(keys.record.clone(), None)]);
        self.stats.expiry_delete();
        let outcome = match self.send_txn(txn).await {
            Ok(resp) if resp.succeeded() => {
                tracing::debug!(lease = %reap.name, "deleted a held record its holder stopped renewing");
                Reaped::Deleted(resp.header().map_or(0, |h| h.revision()))
            }
            // The record is not the one written: replaced or deleted by someone, and not
            // read; what it is now is learnt by the next read or claim.
            Ok(_) => Reaped::Replaced,
            Err(f) => {
                let e = self.failure("expiry delete", Effect::Write, f);
                tracing::debug!(lease = %reap.name, error = %e, "expiry delete failed; retrying");
                Reaped::Failed
            }
        };
        self.lock().reaped(reap, outcome, Instant::now() + REAP_RETRY);
    }
}

fn clone_corrupt(name: &LeaseName, e: &Error) -> Error {
    match e {
        Error::CorruptRecord { name, reason } => Error::corrupt(name.clone(), reason.clone()),
        other => Error::corrupt(name.as_str(), other.to_string()),
    }
}

fn parse_version(v: &Version) -> Result<i64> {
    match v.as_str().parse::<i64>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(Error::invalid(
            "version",
            format!("{:?} is not an etcd mod revision (a positive integer)", v.as_str()),
        )),
    }
}

fn header_revision(resp: &TxnResponse) -> Result<i64> {
    resp.header().map(|h| h.revision()).ok_or_else(|| Error::Indeterminate {
        message: "etcd answered a transaction without a header".to_owned(),
        source: None,
    })
}

fn range_op(keys: &Keys) -> TxnOp {
    TxnOp::get(
        keys.record.clone(),
        Some(GetOptions::new().with_range(keys.range_end.clone())),
    )
}

fn put_record(keys: &Keys, record: &LeaseRecord, session: Option<&Session>) -> TxnOp {
    let opts = session.map(|s| PutOptions::new().with_lease(s.id));
    TxnOp::put(keys.record.clone(), record_codec::encode(record), opts)
}

/// Raises the fence counter to at least `token` (creating it if absent), in a nested
/// transaction so that explicit-token writes keep "the counter is the highest token".
fn raise_fence(keys: &Keys, token: FencingToken) -> TxnOp {
    let enc = encode_fence(token);
    let if_lower = Txn::new()
        .when([Compare::value(keys.fence.clone(), CompareOp::Less, enc.clone())])
        .and_then([TxnOp::put(keys.fence.clone(), enc.clone(), None)]);
    TxnOp::txn(
        Txn::new()
            .when([Compare::create_revision(keys.fence.clone(), CompareOp::Equal, 0)])
            .and_then([TxnOp::put(keys.fence.clone(), enc, None)])
            .or_else([TxnOp::txn(if_lower)]),
    )
}

/// An `Absent` or `Version` write: the caller's record and token, the counter raised.
fn explicit_txn(keys: &Keys, guard: Compare, record: &LeaseRecord, session: Option<&Session>) -> Txn {
    Txn::new()
        .when([guard])
        .and_then([put_record(keys, record, session), raise_fence(keys, record.token)])
        .or_else([range_op(keys)])
}

/// A claim: the record as predicted (absent, or this vacant / expired version) and the
/// counter as predicted; the new record carries counter + 1, written with the counter.
fn claim_txn(keys: &Keys, c: &Claim, record: &LeaseRecord, session: Option<&Session>) -> Txn {
    let record_cmp = match c.record {
        RecordCmp::Absent => Compare::create_revision(keys.record.clone(), CompareOp::Equal, 0),
        RecordCmp::At(v) => Compare::mod_revision(keys.record.clone(), CompareOp::Equal, v),
    };
    let fence_cmp = match c.fence {
        None => Compare::create_revision(keys.fence.clone(), CompareOp::Equal, 0),
        Some(f) => Compare::value(keys.fence.clone(), CompareOp::Equal, encode_fence(FencingToken::new(f))),
    };
    Txn::new()
        .when([record_cmp, fence_cmp])
        .and_then([
            put_record(keys, record, session),
            TxnOp::put(keys.fence.clone(), encode_fence(record.token), None),
        ])
        .or_else([range_op(keys)])
}

/// The snapshot an else branch's range read returned.
fn else_snapshot(keys: &Keys, resp: &TxnResponse) -> Snapshot {
    let rev = resp.header().map_or(0, |h| h.revision());
    for r in resp.op_responses() {
        if let TxnOpResponse::Get(g) = r {
            return Snapshot::from_kvs(keys, rev, g.kvs());
        }
    }
    Snapshot::from_kvs(keys, rev, &[])
}

#[async_trait]
impl CasStore for EtcdStore {
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

    /// Deletes the record and its fence counter (kept after a plain delete), in one
    /// transaction on the record's version.
    async fn purge(&self, name: &LeaseName, version: &Version) -> Result<DeleteOutcome> {
        self.inner.delete_keys(name, version, true).await
    }

    /// Native expiry: the record and its fence counter attached to an etcd lease of
    /// `after` (see `Inner::expire_keys`). Two round trips.
    async fn expire(&self, name: &LeaseName, version: &Version, after: Duration) -> Result<ExpireOutcome> {
        self.inner.expire_keys(name, version, after).await
    }

    async fn renew(&self, name: &LeaseName, version: &Version, record: &LeaseRecord) -> Result<CasOutcome> {
        self.inner.renew(name, version, record).await
    }

    /// One Txn: the record vacated if still at `version` (see the crate docs' cost table).
    async fn release(&self, name: &LeaseName, version: &Version, held: &LeaseRecord) -> Result<CasOutcome> {
        self.inner.release(name, version, held).await
    }

    /// Keys-only range reads of `<prefix><name prefix>`, 1000 keys a page, at one
    /// revision; fence counters (kept after a record is deleted) are not listed.
    async fn list(&self, prefix: &NamePrefix) -> Result<Vec<LeaseName>> {
        self.inner.list(prefix).await
    }

    async fn wait_for_change(&self, name: &LeaseName, seen: Option<&Version>, wait: Wait) -> Result<()> {
        let seen = match seen {
            None => None,
            Some(v) => match parse_version(v) {
                Ok(v) => Some(v),
                // Not one of ours: it has certainly changed from the caller's view.
                Err(_) => return Ok(()),
            },
        };
        watch::wait(&self.inner, name, seen, wait).await
    }
}

impl Linearizable for EtcdStore {}

/// Tests of the store's internals against the tests' etcd (`scripts/stores.sh start
/// etcd`, `eval "$(scripts/stores.sh env)"`), where the public API cannot reach a race.
#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::Pin;

    use etcd_client::DeleteOptions;
    use leasehold_core::HolderId;

    use super::*;

    /// A hook run once after the next held write applies at the given revision, before
    /// the store registers it.
    pub(crate) type AfterTxn = Box<dyn FnOnce(LeaseName, i64) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send>;

    async fn store(tag: &str) -> EtcdStore {
        let endpoints = leasehold_testkit::etcd_endpoints();
        let opts = etcd_client::ConnectOptions::new().with_connect_timeout(Duration::from_secs(2));
        let client = etcd_client::Client::connect(&endpoints, Some(opts))
            .await
            .unwrap_or_else(|e| panic!("cannot connect to etcd at {endpoints:?}: {e}"));
        let prefix = format!("lh-test/store-etcd/unit-{tag}/{}/", leasehold_testkit::unique_suffix());
        EtcdStore::new(
            client,
            EtcdConfig::new(prefix).unwrap_or_else(|e| panic!("config: {e}")),
        )
    }

    async fn cleanup(store: &EtcdStore) {
        let mut c = store.client().clone();
        let _ = c
            .delete(store.config().prefix(), Some(DeleteOptions::new().with_prefix()))
            .await;
    }

    fn name(n: &str) -> LeaseName {
        LeaseName::new(n).unwrap_or_else(|e| panic!("{e}"))
    }

    fn held_by(holder: &str) -> LeaseRecord {
        LeaseRecord::held(
            HolderId::new(holder).unwrap_or_else(|e| panic!("{e}")),
            FencingToken::FIRST,
            Ttl::new(Duration::from_secs(30)).unwrap_or_else(|e| panic!("{e}")),
        )
    }

    fn vacant(token: u64) -> LeaseRecord {
        LeaseRecord {
            holder: None,
            token: FencingToken::new(token),
            ttl: Ttl::new(Duration::from_secs(30)).unwrap_or_else(|e| panic!("{e}")),
            wall_expires_at_ms: None,
        }
    }

    async fn granted(store: &EtcdStore, n: &LeaseName, record: &LeaseRecord) -> Stored {
        match store.write(n, &Precondition::Claimable, record).await {
            Ok(CasOutcome::Written(s)) => s,
            other => panic!("claim of {n}: {other:?}"),
        }
    }

    /// Polls `done` until it holds, failing after 10 s.
    async fn until(what: &str, mut done: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !done() {
            assert!(Instant::now() < deadline, "not within 10 s: {what}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// An operator's write that lands just after a grant applied, and that the store's
    /// held-record watch (already running for another name) delivers before the grant is
    /// registered, still costs the holder its lease: the first renewal is a Txn.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_foreign_write_seen_before_a_grant_is_registered_is_not_lost() {
        let store = store("grant-race").await;
        let (a, b) = (name("race/a"), name("race/b"));
        // b is held: the held-record watch runs.
        granted(&store, &b, &held_by("me")).await;
        let weak = Arc::downgrade(&store.inner);
        let hook: AfterTxn = Box::new(move |granted_name, rev| {
            Box::pin(async move {
                let Some(inner) = weak.upgrade() else { return };
                tracing::debug!(lease = %granted_name, rev, "an operator's put just after the grant");
                let mut c = inner.client.clone();
                // The operator's put of a's record, just after the grant...
                c.put(
                    inner.keys(&granted_name).record,
                    record_codec::encode(&vacant(100)),
                    None,
                )
                .await
                .unwrap_or_else(|e| panic!("put: {e}"));
                // ... and one of b's, after it: once the watch dropped b, it has
                // delivered the change of a too (one watch, in revision order).
                c.put(
                    inner.keys(&name("race/b")).record,
                    record_codec::encode(&vacant(100)),
                    None,
                )
                .await
                .unwrap_or_else(|e| panic!("put: {e}"));
                until("the watch delivers both puts", || {
                    inner.lock().held(&name("race/b")).is_none()
                })
                .await;
            })
        });
        *store
            .inner
            .after_txn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(hook);
        let grant = granted(&store, &a, &held_by("me")).await;
        let before = store.stats();
        let renewal = store.renew(&a, &grant.version, &grant.record).await;
        let sent = store.stats().since(&before);
        match renewal {
            Ok(CasOutcome::Conflict(Current::Present(s))) => assert_eq!(s.record, vacant(100)),
            other => panic!("the renewal after an operator's put: {other:?}"),
        }
        assert_eq!(sent.txns, 1, "the renewal is a Txn: {sent:?}");
        cleanup(&store).await;
    }

    /// An expiry delete whose compare failed does not tell the store the record is
    /// absent: it is not the record the delete was sent for, and may be anything.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failed_expiry_delete_learns_nothing() {
        let store = store("reap").await;
        let n = name("reap/a");
        let mut c = store.client().clone();
        c.put(store.record_key(&n), record_codec::encode(&vacant(5)), None)
            .await
            .unwrap_or_else(|e| panic!("put: {e}"));
        let seen = store.read(&n).await.unwrap_or_else(|e| panic!("read: {e}"));
        let v = parse_version(&seen.unwrap_or_else(|| panic!("no record")).version).unwrap_or(0);
        // The delete of a record this store wrote before: replaced since.
        let mut reap = Reap {
            name: n.clone(),
            version: Some(v - 1),
            bytes: Vec::new(),
            session: 0,
            orphan: false,
        };
        Expire::expire(&*store.inner, &reap).await;
        let look = store.inner.last_seen(&n);
        assert_eq!(look.and_then(|l| l.version), Some(v), "{look:?}");
        // One that applies says it is gone.
        reap.version = Some(v);
        Expire::expire(&*store.inner, &reap).await;
        let look = store.inner.last_seen(&n);
        assert!(look.is_some_and(|l| l.version.is_none() && l.rev > v), "{look:?}");
        cleanup(&store).await;
    }
}
