//! The lease client: acquires leases from one store and keeps them renewed.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::decision::{self, AcquireStep, Known, Policy, SkewBound};
use crate::driver::{self, DriverCtx, release_write};
use crate::finish::FinishOnDrop;
use crate::held::{Gate, HeldNames};
use crate::lease::{HeldState, LeaseShared};
use crate::lease_set::{LeaseSet, release_all};
use crate::mailbox::Mailbox;
use crate::options::{AcquireOptions, check_max_hold};
use crate::{
    Error, FencingToken, HolderId, Lease, LeaseName, Result, Ttl,
    clock::{SystemWallClock, WallClock},
    store::{
        Capabilities, CasOutcome, CasStore, ClockSource, Current, Grade, LeaseRecord, Linearizable, Precondition,
        Stored, Version, Wait,
    },
};

/// Options of a [`LeaseClient`]; `Default` is right for most uses, and
/// [`ClientConfig::builder`] sets the others.
///
/// ```
/// use std::time::Duration;
/// use leasehold_core::ClientConfig;
///
/// let config = ClientConfig::builder()
///     .label("payout-worker")
///     .max_acquire_backoff(Duration::from_secs(1))
///     .build()?;
/// assert_eq!(config.label.as_deref(), Some("payout-worker"));
/// assert!(ClientConfig::builder().margin_permille(600).build().is_err());
/// # Ok::<(), leasehold_core::Error>(())
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub struct ClientConfig {
    /// Prefix of this client's holder ids (default: `pid-<pid>`). Each grant's holder id
    /// is `<label>#<unique>`. At most 100 bytes of the characters [`HolderId`] allows.
    pub label: Option<String>,
    /// Safety margin in thousandths of the TTL (see [`Policy::margin_permille`]).
    pub margin_permille: u32,
    /// Opt-in bounded wall-clock skew rule for observation stores ([`SkewBound`]).
    pub skew_bound: Option<SkewBound>,
    /// The wall clock (replace it to test skew).
    pub wall_clock: Arc<dyn WallClock>,
    /// How many renewal requests the driver keeps in flight at once (a request renews
    /// one lease, or up to the store's [`crate::store::CasStore::renewal_batch`]).
    pub max_renewals_in_flight: usize,
    /// The longest single wait between acquire attempts in [`LeaseClient::acquire`].
    pub max_acquire_backoff: Duration,
    /// Seeds the client's jitter and holder-id nonces (for simulations that must replay
    /// exactly). `None`: seeded from the OS.
    pub rng_seed: Option<u64>,
    /// The cap on every hold of this client's grants that do not set their own
    /// ([`AcquireOptions::max_hold`], which replaces it): past it, the lease is no
    /// longer renewed and ends with [`crate::LossCause::MaxHoldReached`]. `None` (the
    /// default): a lease is held as long as it is renewed.
    pub max_hold: Option<Duration>,
}

impl Default for ClientConfig {
    fn default() -> Self {
        Self {
            label: None,
            margin_permille: Policy::DEFAULT_MARGIN_PERMILLE,
            skew_bound: None,
            wall_clock: Arc::new(SystemWallClock),
            max_renewals_in_flight: 256,
            max_acquire_backoff: Duration::from_secs(5),
            rng_seed: None,
            max_hold: None,
        }
    }
}

impl ClientConfig {
    /// A builder starting from the defaults.
    pub fn builder() -> ClientConfigBuilder {
        ClientConfigBuilder {
            config: Self::default(),
        }
    }

    /// Checks every option; [`LeaseClient`] checks them again when built.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming the option.
    pub fn validate(&self) -> Result<()> {
        if let Some(l) = &self.label {
            if l.len() > 100 {
                return Err(Error::invalid("client label", "longer than 100 bytes"));
            }
            HolderId::new(l)?;
        }
        if self.margin_permille >= 500 {
            return Err(Error::invalid("margin_permille", "must be below 500 (half the TTL)"));
        }
        if self.max_renewals_in_flight == 0 {
            return Err(Error::invalid("max_renewals_in_flight", "must be at least 1"));
        }
        check_max_hold(self.max_hold)?;
        Ok(())
    }
}

/// Builds a [`ClientConfig`]; each method sets the option of the same name.
#[derive(Debug, Clone)]
#[must_use]
pub struct ClientConfigBuilder {
    config: ClientConfig,
}

impl ClientConfigBuilder {
    /// See [`ClientConfig::label`].
    pub fn label(mut self, label: impl Into<String>) -> Self {
        self.config.label = Some(label.into());
        self
    }

    /// See [`ClientConfig::margin_permille`].
    pub fn margin_permille(mut self, margin_permille: u32) -> Self {
        self.config.margin_permille = margin_permille;
        self
    }

    /// See [`ClientConfig::skew_bound`].
    pub fn skew_bound(mut self, bound: SkewBound) -> Self {
        self.config.skew_bound = Some(bound);
        self
    }

    /// See [`ClientConfig::wall_clock`].
    pub fn wall_clock(mut self, clock: Arc<dyn WallClock>) -> Self {
        self.config.wall_clock = clock;
        self
    }

    /// See [`ClientConfig::max_renewals_in_flight`].
    pub fn max_renewals_in_flight(mut self, n: usize) -> Self {
        self.config.max_renewals_in_flight = n;
        self
    }

    /// See [`ClientConfig::max_acquire_backoff`].
    pub fn max_acquire_backoff(mut self, backoff: Duration) -> Self {
        self.config.max_acquire_backoff = backoff;
        self
    }

    /// See [`ClientConfig::rng_seed`].
    pub fn rng_seed(mut self, seed: u64) -> Self {
        self.config.rng_seed = Some(seed);
        self
    }

    /// See [`ClientConfig::max_hold`].
    pub fn max_hold(mut self, max_hold: Duration) -> Self {
        self.config.max_hold = Some(max_hold);
        self
    }

    /// The configuration, checked.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming the option that is out of range.
    pub fn build(self) -> Result<ClientConfig> {
        self.config.validate()?;
        Ok(self.config)
    }
}

impl fmt::Debug for ClientConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientConfig")
            .field("label", &self.label)
            .field("margin_permille", &self.margin_permille)
            .field("skew_bound", &self.skew_bound)
            .field("max_renewals_in_flight", &self.max_renewals_in_flight)
            .field("max_acquire_backoff", &self.max_acquire_backoff)
            .field("max_hold", &self.max_hold)
            .finish_non_exhaustive()
    }
}

/// The result of one acquire attempt.
#[derive(Debug)]
pub enum AcquireOutcome {
    /// The lease is ours.
    Granted(Lease),
    /// Someone else holds it.
    Held {
        /// The current holder.
        holder: Option<HolderId>,
        /// Its token.
        token: FencingToken,
        /// When another attempt may succeed.
        retry_after: Duration,
    },
}

impl AcquireOutcome {
    /// The lease, if granted.
    pub fn granted(self) -> Option<Lease> {
        match self {
            Self::Granted(l) => Some(l),
            Self::Held { .. } => None,
        }
    }
}

use crate::seen::{Seen, SeenCache};

struct Inner {
    store: Arc<dyn CasStore>,
    caps: Capabilities,
    policy: Policy,
    label: String,
    /// `<label>#<client sequence in hex>.`: what every holder id of this client starts
    /// with ([`Inner::holder_id`]).
    holder_prefix: String,
    config: ClientConfig,
    next_id: AtomicU64,
    seen: Arc<SeenCache>,
    held: Arc<HeldNames>,
    jitter: Arc<crate::backoff::Jitter>,
    driver: OnceLock<(Mailbox, Arc<DriverCtx>)>,
}

/// Hands out leases on one store and renews them all from one driver task.
///
/// Cheap to clone (an `Arc`). Create one per process and store.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use std::time::Duration;
/// use leasehold_core::{AcquireOutcome, LeaseClient, MemoryStore};
///
/// let store = MemoryStore::new();
/// let a = LeaseClient::new(store.clone());
/// let b = LeaseClient::new(store);
/// let lease = a.acquire("reconcile:2026-11-30", Duration::from_secs(30)).await?;
/// // b is refused while a holds it, and learns who holds it and for how long.
/// match b.try_acquire("reconcile:2026-11-30", Duration::from_secs(30)).await? {
///     AcquireOutcome::Held { token, .. } => assert_eq!(token, lease.token()),
///     AcquireOutcome::Granted(_) => unreachable!(),
/// }
/// # Ok::<(), leasehold_core::Error>(()) }).unwrap();
/// ```
///
/// ## A client never waits on itself
/// [`acquire`](Self::acquire), [`try_acquire`](Self::try_acquire) and
/// [`acquire_timeout`](Self::acquire_timeout) of a name this client already holds
/// answer at once with [`Error::AlreadyHeld`] (naming the lease and its token), without
/// sending anything: waiting would last until that lease is released, or until its TTL
/// if its guard was leaked. Two tasks of one client acquiring one name at once never
/// deadlock either: the client runs its attempts on a name one at a time, so exactly
/// one is granted and the other gets [`Error::AlreadyHeld`] as soon as the first attempt
/// is over (while another client holds the name, both wait as usual, and the first
/// granted wins). Once the lease is released, dropped or lost, the name can be acquired
/// again.
///
/// Reentrancy is not offered, on purpose. A fenced lease is a token, not a thread's
/// property: what it protects is every write that carries [`Lease::token`], whoever in
/// the process sends it, and it ends when the store says so, not when a call stack
/// unwinds. A reentrant "acquire again" would have to hand out a second guard for the
/// same token, and then a release (or loss) through either guard would end the lease
/// under the other's feet while it still believed it held it. A second acquire is
/// therefore a bug to report, and the caller who needs the lease twice passes the one
/// [`Lease`] (or its token) along.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use std::time::Duration;
/// use leasehold_core::{Error, LeaseClient, MemoryStore};
///
/// let client = LeaseClient::new(MemoryStore::new());
/// let lease = client.acquire("compactor", Duration::from_secs(30)).await?;
/// match client.acquire("compactor", Duration::from_secs(30)).await {
///     Err(Error::AlreadyHeld { name, token }) => {
///         assert_eq!((name.as_str(), token), ("compactor", lease.token()));
///     }
///     other => panic!("expected AlreadyHeld, got {other:?}"),
/// }
/// lease.release().await?;
/// let again = client.acquire("compactor", Duration::from_secs(30)).await?;
/// assert_eq!(again.token().get(), 2);
/// # Ok::<(), leasehold_core::Error>(()) }).unwrap();
/// ```
#[derive(Clone)]
pub struct LeaseClient {
    inner: Arc<Inner>,
}

impl fmt::Debug for LeaseClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaseClient")
            .field("store", &self.inner.store)
            .field("label", &self.inner.label)
            .field("policy", &self.inner.policy)
            .finish_non_exhaustive()
    }
}

static CLIENT_SEQ: AtomicU64 = AtomicU64::new(0);

impl LeaseClient {
    /// A client for correctness leases on a linearizable store, with default options.
    ///
    /// Efficiency-only stores (Redis) do not implement [`Linearizable`], so this does
    /// not compile with them; use [`LeaseClient::efficiency_only`] by name.
    pub fn new<S: Linearizable>(store: S) -> Self {
        Self::build(Arc::new(store), ClientConfig::default()).unwrap_or_else(|_| unreachable_default())
    }

    /// A client for correctness leases with options.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for an invalid label or margin.
    pub fn with_config<S: Linearizable>(store: S, config: ClientConfig) -> Result<Self> {
        Self::build(Arc::new(store), config)
    }

    /// A client on any store, for **efficiency** leases: they avoid duplicate work but
    /// can be lost or reissued by the store (see [`Grade::EfficiencyOnly`]). The tokens
    /// still fence writes, but a store that loses its counter can stall a resource.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for an invalid label or margin.
    pub fn efficiency_only<S: CasStore>(store: S, config: ClientConfig) -> Result<Self> {
        Self::build(Arc::new(store), config)
    }

    /// A client on a type-erased store. Refuses an efficiency-only store (use
    /// [`LeaseClient::efficiency_only`] for those).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for an efficiency-only store, an invalid label or margin.
    pub fn from_dyn(store: Arc<dyn CasStore>, config: ClientConfig) -> Result<Self> {
        if store.capabilities().grade != Grade::Linearizable {
            return Err(Error::invalid(
                "store",
                "is efficiency-only; use LeaseClient::efficiency_only to accept that",
            ));
        }
        Self::build(store, config)
    }

    fn build(store: Arc<dyn CasStore>, config: ClientConfig) -> Result<Self> {
        let caps = store.capabilities();
        config.validate()?;
        let label = config
            .label
            .clone()
            .unwrap_or_else(|| format!("pid-{}", std::process::id()));
        let rng_seed = config.rng_seed;
        let client_seq = CLIENT_SEQ.fetch_add(1, Ordering::Relaxed);
        let holder_prefix = format!("{label}#{client_seq:x}.");
        let policy = Policy {
            clock: caps.clock,
            margin_permille: config.margin_permille,
            skew: config.skew_bound,
        };
        Ok(Self {
            inner: Arc::new(Inner {
                store,
                caps,
                policy,
                label,
                holder_prefix,
                config,
                next_id: AtomicU64::new(1),
                seen: Arc::new(SeenCache::default()),
                held: Arc::new(HeldNames::default()),
                jitter: Arc::new(crate::backoff::Jitter::new(rng_seed)),
                driver: OnceLock::new(),
            }),
        })
    }

    /// The store's capabilities.
    pub fn capabilities(&self) -> Capabilities {
        self.inner.caps
    }

    /// The rules this client applies.
    pub fn policy(&self) -> Policy {
        self.inner.policy
    }

    /// The store this client uses.
    pub fn store(&self) -> &Arc<dyn CasStore> {
        &self.inner.store
    }

    /// Waits until no attempt of this client on `name` is under way. An attempt whose
    /// caller went away after its write was sent (a dropped [`LeaseClient::acquire`] or
    /// [`LeaseClient::try_acquire`]) finishes that write on a task of its own and gives
    /// back what it granted; this returns once that is done. A program about to exit
    /// after abandoning an acquire (a signal, a deadline of its own) awaits it, within a
    /// bound of its own, so that its exit does not cut that task short and leave the
    /// grant held until its TTL. Holding `name` is not waited for: a lease this client
    /// holds stays held.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a bad name.
    pub async fn settle(&self, name: impl AsRef<str>) -> Result<()> {
        let name = LeaseName::new(name)?;
        // The gate is held by an attempt, abandoned or not, until it has given back
        // what it granted (`send`); a live grant of this client is no attempt.
        match self.inner.held.enter(&name).await {
            Ok(_) | Err(Error::AlreadyHeld { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// One attempt to acquire `name` for `ttl`: one write for a free, released or (on
    /// store-clock stores) expired lease, and two for a takeover, when nobody else
    /// writes the record meanwhile. At most four writes in all: a write refused by a
    /// record it did not expect is decided again on what the refusal showed, and a write
    /// whose outcome was unknown is settled by a read and, if it applied, confirmed by
    /// another write.
    ///
    /// Dropping the returned future at any point never leaves a lease held with nobody
    /// renewing or releasing it, and never sends anything the attempt had not sent yet.
    /// Dropped before its write is sent (while it waits for this client's other attempt
    /// on the name, or reads the record), it sends nothing. Dropped once a write is sent,
    /// only that write (and the read that settles it) is finished, on a task of its own,
    /// which then releases whatever it granted, or what an earlier write of the attempt
    /// is known to have granted (and the client's next attempt on the name waits for
    /// that). An attempt that ends on an error gives back such a grant too.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a bad name or TTL; [`Error::AlreadyHeld`] if this
    /// client holds `name` already; [`Error::Shutdown`], with nothing sent, if the
    /// client's renewal driver is gone (the runtime it ran on ended; a grant whose write
    /// was in flight then is released before the error is returned); store errors
    /// otherwise, among them [`Error::Indeterminate`] when every write had an unknown
    /// outcome and the last read found the lease free (vacant, gone, or its holder's
    /// time run out: the store is not taking writes).
    /// Losing the race is `Ok(AcquireOutcome::Held { .. })`.
    pub async fn try_acquire(&self, name: impl AsRef<str>, ttl: Duration) -> Result<AcquireOutcome> {
        self.try_acquire_with(name, &AcquireOptions::new(ttl)).await
    }

    /// One attempt, as [`LeaseClient::try_acquire`], with [`AcquireOptions`] (a cap on
    /// the hold; the timeout is ignored: one attempt does not wait).
    ///
    /// # Errors
    /// As [`LeaseClient::try_acquire`]; [`Error::InvalidInput`] for a zero `max_hold`.
    pub async fn try_acquire_with(&self, name: impl AsRef<str>, options: &AcquireOptions) -> Result<AcquireOutcome> {
        let name = LeaseName::new(name)?;
        let ttl = Ttl::new(options.ttl)?;
        let max_hold = options.max_hold.or(self.inner.config.max_hold);
        check_max_hold(max_hold)?;
        self.inner.held.check(&name)?;
        let (driver, ctx) = self.driver()?;
        // A driver that is gone would renew nothing: refuse before anything is sent.
        if driver.is_closed() {
            return Err(Error::Shutdown);
        }
        let span = tracing::debug_span!("acquire", lease = %name);
        // The attempt runs in the caller's task. Dropped before a write is sent, it
        // leaves nothing behind; a write once sent is finished on a task of its own if
        // the caller goes away, and releases what it granted before the gate opens for
        // the client's next attempt on the name (`send`).
        async {
            // One attempt per name at a time in this client; the check under the gate is
            // the one that counts (a sibling attempt may have been granted meanwhile).
            let gate = self.inner.held.enter(&name).await?;
            attempt(&self.inner, driver, ctx, name, ttl, max_hold, gate).await
        }
        .instrument(span)
        .await
    }

    /// Acquires `name`, waiting as long as it takes (cancel by dropping the future).
    ///
    /// Waits on the store's notification where it has one, otherwise with jittered
    /// backoff until the holder's lease can have run out.
    ///
    /// # Errors
    /// As [`LeaseClient::try_acquire`], except that store unavailability is retried.
    pub async fn acquire(&self, name: impl AsRef<str>, ttl: Duration) -> Result<Lease> {
        self.acquire_with(name, &AcquireOptions::new(ttl)).await
    }

    /// Acquires `name` as [`LeaseClient::acquire`] (or, with
    /// [`AcquireOptions::timeout`], as [`LeaseClient::acquire_timeout`]), with a cap on
    /// the hold if [`AcquireOptions::max_hold`] (or [`ClientConfig::max_hold`]) sets one.
    ///
    /// # Errors
    /// As [`LeaseClient::acquire_timeout`]; [`Error::InvalidInput`] for a zero
    /// `max_hold`.
    pub async fn acquire_with(&self, name: impl AsRef<str>, options: &AcquireOptions) -> Result<Lease> {
        let deadline = deadline_after(options.timeout);
        self.acquire_inner(name.as_ref(), options, deadline).await
    }

    /// Acquires `name`, giving up with [`Error::Timeout`] after `timeout` (one too long
    /// for the clock to represent, such as `Duration::MAX`, means no deadline). The
    /// deadline also ends an attempt under way, however long the store holds its writes;
    /// a zero timeout makes one attempt, bounded by the store's own timeouts.
    ///
    /// # Errors
    /// As [`LeaseClient::acquire`], plus [`Error::Timeout`].
    pub async fn acquire_timeout(&self, name: impl AsRef<str>, ttl: Duration, timeout: Duration) -> Result<Lease> {
        self.acquire_with(name, &AcquireOptions::new(ttl).timeout(timeout))
            .await
    }

    /// Acquires every name of `names` for `ttl`, waiting as long as it takes, and
    /// gives back all the leases or none: a [`LeaseSet`] whose one loss signal fires
    /// when any of them is lost.
    ///
    /// The names are taken in one canonical order (sorted, duplicates dropped), so two
    /// callers asking for overlapping sets in any order cannot deadlock: whoever holds a
    /// name waits only for names after it, which nobody waits for it to take. If an
    /// acquire fails (or the future is dropped), the leases already taken are released.
    /// A lease of the set lost while later names were waited for shows as the set's
    /// loss at once.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for no names, a bad name or TTL; [`Error::AlreadyHeld`]
    /// (before anything is sent) if this client holds one of the names; otherwise as
    /// [`LeaseClient::acquire`]. Nothing stays held after an error.
    pub async fn acquire_all<I>(&self, names: I, ttl: Duration) -> Result<LeaseSet>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        self.acquire_all_with(names, &AcquireOptions::new(ttl)).await
    }

    /// [`LeaseClient::acquire_all`], giving up with [`Error::Timeout`] if the whole set
    /// is not held within `timeout` (the leases taken by then are released).
    ///
    /// # Errors
    /// As [`LeaseClient::acquire_all`], plus [`Error::Timeout`].
    pub async fn acquire_all_timeout<I>(&self, names: I, ttl: Duration, timeout: Duration) -> Result<LeaseSet>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        self.acquire_all_with(names, &AcquireOptions::new(ttl).timeout(timeout))
            .await
    }

    /// [`LeaseClient::acquire_all`] with [`AcquireOptions`]: each lease gets the TTL and
    /// cap asked for, and the timeout (if any) bounds the whole set.
    ///
    /// # Errors
    /// As [`LeaseClient::acquire_all_timeout`].
    pub async fn acquire_all_with<I>(&self, names: I, options: &AcquireOptions) -> Result<LeaseSet>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        let deadline = deadline_after(options.timeout);
        let mut sorted = names.into_iter().map(LeaseName::new).collect::<Result<Vec<_>>>()?;
        if sorted.is_empty() {
            return Err(Error::invalid("lease names", "acquire_all needs at least one name"));
        }
        sorted.sort_unstable();
        sorted.dedup();
        Ttl::new(options.ttl)?;
        check_max_hold(options.max_hold.or(self.inner.config.max_hold))?;
        // Refuse at once rather than hold some names while finding out about a later one.
        for name in &sorted {
            self.inner.held.check(name)?;
        }
        let mut leases = Vec::with_capacity(sorted.len());
        for name in &sorted {
            match self.acquire_inner(name.as_str(), options, deadline).await {
                Ok(lease) => leases.push(lease),
                Err(e) => {
                    if let Err(release) = release_all(leases).await {
                        tracing::warn!(error = %release, "releasing a partly acquired set failed; those leases expire on their own");
                    }
                    return Err(e);
                }
            }
        }
        Ok(LeaseSet::new(leases))
    }

    async fn acquire_inner(&self, name: &str, options: &AcquireOptions, deadline: Option<Instant>) -> Result<Lease> {
        let lease_name = LeaseName::new(name)?;
        let mut failures = 0u32;
        // What a timeout says of the last attempt: held (`None`), or how the store failed.
        let mut last_failure = Some(no_answer_yet());
        loop {
            let attempt = self.try_acquire_with(name, options);
            let outcome = match deadline {
                // An attempt begun before the deadline ends with it (a store that holds
                // each write for its request timeout must not stretch the caller's
                // timeout): dropped, it sends nothing more, and what a write it sent
                // granted is released (`FinishOnDrop`). One begun at or after the
                // deadline (a zero timeout, or the last look after a wait ran out) is
                // bounded by the store's own timeouts.
                Some(d) if Instant::now() < d => match tokio::time::timeout_at(d, attempt).await {
                    Ok(outcome) => outcome,
                    Err(_) => return Err(Error::timeout(name, last_failure)),
                },
                _ => attempt.await,
            };
            let wait = match outcome {
                Ok(AcquireOutcome::Granted(lease)) => return Ok(lease),
                Ok(AcquireOutcome::Held { retry_after, .. }) => {
                    failures = 0;
                    last_failure = None;
                    self.inner
                        .jitter
                        .jittered(retry_after.min(self.inner.config.max_acquire_backoff))
                }
                Err(e) if e.is_retryable() || e.is_indeterminate() => {
                    failures += 1;
                    tracing::debug!(lease = name, error = %e, "acquire attempt failed; backing off");
                    last_failure = Some(e);
                    self.inner.jitter.exponential(
                        failures,
                        Duration::from_millis(10),
                        self.inner.config.max_acquire_backoff,
                    )
                }
                Err(e) => return Err(e),
            };
            if deadline.is_some_and(|d| d <= Instant::now()) {
                return Err(Error::timeout(name, last_failure));
            }
            // After a failed attempt, back off for real: a wait on a stale version would
            // return at once and turn a failing store into a tight loop.
            let waited = async {
                if failures == 0 {
                    // The store decides how to wait: a push, or a poll of its own
                    // interval (S3, DynamoDB).
                    let wait = self.wait_to_claim(wait);
                    let seen = self.seen_version(&lease_name);
                    self.inner.store.wait_for_change(&lease_name, seen.as_ref(), wait).await
                } else {
                    tokio::time::sleep(wait).await;
                    Ok(())
                }
            };
            // A grant of the name to another task of this client ends the wait too:
            // the next attempt answers `AlreadyHeld` without a store call.
            let waited = async {
                tokio::select! {
                    r = waited => r,
                    () = self.inner.held.held_here(&lease_name) => Ok(()),
                }
            };
            match deadline {
                // The deadline ends the wait; the loop then tries once more and, still
                // held, answers `Timeout`.
                Some(d) => {
                    if let Ok(r) = tokio::time::timeout_at(d, waited).await {
                        r?;
                    }
                }
                None => waited.await?,
            }
        }
    }

    pub(crate) fn seen_version(&self, name: &LeaseName) -> Option<Version> {
        match self.inner.seen.get(name) {
            Some(Seen::Present { stored, .. }) => Some(stored.version.clone()),
            _ => None,
        }
    }

    fn driver(&self) -> Result<&(Mailbox, Arc<DriverCtx>)> {
        if let Some(d) = self.inner.driver.get() {
            return Ok(d);
        }
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| Error::invalid("runtime", "LeaseClient must be used inside a Tokio runtime"))?;
        let d = self.inner.driver.get_or_init(|| {
            let (mailbox, rx, board) = Mailbox::new();
            let ctx = Arc::new(DriverCtx {
                store: self.inner.store.clone(),
                policy: self.inner.policy,
                wall: self.inner.config.wall_clock.clone(),
                seen: self.inner.seen.clone(),
                jitter: self.inner.jitter.clone(),
                max_in_flight: self.inner.config.max_renewals_in_flight,
            });
            runtime.spawn(driver::run(ctx.clone(), rx, board));
            (mailbox, ctx)
        });
        Ok(d)
    }
}

/// What a timeout says when the deadline came before the store answered any attempt:
/// not that the lease is held, since nothing said so.
pub(crate) fn no_answer_yet() -> Error {
    Error::Indeterminate {
        message: "the store answered no attempt before the deadline".into(),
        source: None,
    }
}

/// What a caller that waits as [`LeaseClient::acquire`] does needs of its client (the
/// semaphore, [`crate::Semaphore`]): whether its store pushes its changes, and the
/// client's jittered waits.
impl LeaseClient {
    /// Whether the store wakes waiters on a change ([`Capabilities::notifies_waiters`]).
    pub(crate) fn notifies_waiters(&self) -> bool {
        self.inner.caps.notifies_waiters
    }

    /// How a waiter to claim a lease waits for `wait`: on a store clock, in line with
    /// the store's other claimers of the name (only the first looks again at `wait`,
    /// the holder's time left); judged by observation, every renewal restarts the watch
    /// of the record, so every change matters.
    pub(crate) fn wait_to_claim(&self, wait: Duration) -> Wait {
        match self.inner.caps.clock {
            ClockSource::Store => Wait::Claim(wait),
            _ => Wait::Change(wait),
        }
    }

    /// The wait after an attempt refused with `retry_after`, as `acquire` waits.
    pub(crate) fn wait_when_held(&self, retry_after: Duration) -> Duration {
        self.inner
            .jitter
            .jittered(retry_after.min(self.inner.config.max_acquire_backoff))
    }

    /// The wait after `failures` failed attempts in a row, as `acquire` backs off.
    pub(crate) fn wait_after_failures(&self, failures: u32) -> Duration {
        self.inner.jitter.exponential(
            failures,
            Duration::from_millis(10),
            self.inner.config.max_acquire_backoff,
        )
    }

    /// A random start among `n` choices (at least 1), from the client's seedable source.
    pub(crate) fn random_below(&self, n: usize) -> usize {
        usize::try_from(self.inner.jitter.nonce()).unwrap_or(0) % n.max(1)
    }
}

/// The deadline `timeout` from now; none for no timeout, or for one too long for the
/// clock to represent (as good as waiting for ever).
pub(crate) fn deadline_after(timeout: Option<Duration>) -> Option<Instant> {
    timeout.and_then(|t| Instant::now().checked_add(t))
}

fn unreachable_default() -> LeaseClient {
    // The default config is always valid; `build` cannot fail on it.
    unreachable!("default ClientConfig is valid")
}

impl Inner {
    fn remember(&self, name: &LeaseName, current: Option<&Stored>, at: Instant) {
        self.seen.remember(name, current, at);
    }

    fn known(&self, name: &LeaseName) -> Option<Seen> {
        self.seen.get(name)
    }

    /// A holder id of its own for one attempt: `<label>#<client>.<attempt>.<nonce>`,
    /// the last three in hex (the nonce as 8 digits). Written digit by digit after the
    /// prefix the client keeps: it is on every acquire's path.
    fn holder_id(&self) -> Result<HolderId> {
        let n = self.next_id.fetch_add(1, Ordering::Relaxed);
        let nonce = self.jitter.nonce();
        let mut id = String::with_capacity(self.holder_prefix.len() + 16 + 1 + 8);
        id.push_str(&self.holder_prefix);
        push_hex(&mut id, n, 1);
        id.push('.');
        push_hex(&mut id, u64::from(nonce), 8);
        HolderId::new(id)
    }
}

/// Appends `v` in lower-case hex, zero-padded to at least `width` digits (as
/// `format!("{v:0width$x}")`).
fn push_hex(out: &mut String, v: u64, width: u32) {
    let digits = (u64::BITS - v.leading_zeros()).div_ceil(4).max(width).max(1);
    for i in (0..digits).rev() {
        let nibble = u8::try_from((v >> (4 * i)) & 0xf).unwrap_or(0);
        out.push(char::from(b"0123456789abcdef"[usize::from(nibble)]));
    }
}

/// The most rounds (writes) of one acquire attempt.
const ROUNDS: usize = 4;

/// One acquire attempt: at most [`ROUNDS`] writes, one a round (a write refused by a
/// record it did not expect is decided again on what the refusal showed; a write whose
/// outcome was unknown is settled by a read, then confirmed by another write if it
/// applied), each round with at most one read. If the last one applied unconfirmed,
/// what it wrote is released before the attempt gives up; so is what an earlier write
/// is known to have written when the attempt ends on an error ([`give_up`]).
///
/// The attempt owns the name's `gate`, and lends it to each write it sends ([`send`]):
/// a write abandoned by the caller keeps it closed until what it granted is released.
async fn attempt(
    inner: &Arc<Inner>,
    driver: &Mailbox,
    ctx: &Arc<DriverCtx>,
    name: LeaseName,
    ttl: Ttl,
    max_hold: Option<Duration>,
    mut gate: Gate,
) -> Result<AcquireOutcome> {
    let me = inner.holder_id()?;
    let store = &inner.store;
    // Whether this attempt has heard from the store yet: a "held" verdict is only ever
    // given on a fresh answer, never on what an earlier attempt cached.
    let mut fresh = false;
    // Whether a write of this attempt may have applied: a later failure is then no
    // proof that nothing happened, and must not say so.
    let mut in_doubt = false;
    // When the first write of this attempt whose outcome was unknown was sent: a grant
    // that confirms what it wrote is held (for its cap) from then.
    let mut doubt_since: Option<Instant> = None;
    let doubt = |in_doubt: bool| move |e: Error| if in_doubt { still_in_doubt(e) } else { e };
    // The writes of unknown outcome since the last refusal, and why the last one had no
    // answer: if the rounds run out after one (the read after it found the lease not
    // ours), the store is failing, not contended.
    let mut last_doubt: Option<(usize, String)> = None;
    for _ in 0..ROUNDS {
        let known = if inner.caps.clock == ClockSource::Store && !fresh {
            // Claimable lets the store judge; the cache could only be staler.
            None
        } else {
            inner.known(&name)
        };
        let now = Instant::now();
        let k = match &known {
            None => Known::Nothing,
            Some(Seen::Absent) => Known::Absent,
            Some(Seen::Present { stored, first_seen }) => Known::Present {
                stored,
                first_seen: first_seen.into_std(),
            },
        };
        let step = decision::acquire(
            &inner.policy,
            inner.caps.claims_vacant,
            &me,
            ttl,
            now.into_std(),
            inner.config.wall_clock.now_ms(),
            k,
        );
        let (expect, record) = match step {
            AcquireStep::Wait { .. } if !fresh => {
                let current = store.read(&name).await?;
                inner.remember(&name, current.as_ref(), Instant::now());
                fresh = true;
                continue;
            }
            AcquireStep::Wait {
                holder,
                token,
                retry_after,
            } => {
                return Ok(AcquireOutcome::Held {
                    holder,
                    token,
                    retry_after,
                });
            }
            // Decided on what this attempt heard from the store, never on the cache.
            AcquireStep::Exhausted { .. } if !fresh => {
                let current = store.read(&name).await?;
                inner.remember(&name, current.as_ref(), Instant::now());
                fresh = true;
                continue;
            }
            AcquireStep::Exhausted { .. } => {
                return Err(doubt(in_doubt)(Error::TokensExhausted {
                    name: name.as_str().to_owned(),
                }));
            }
            AcquireStep::Write { expect, record } => (expect, record),
        };
        // A takeover, for the metric: the last record this client saw was someone's.
        let takeover = inner.seen.held_by_other(&name, &me);
        // The write confirms an earlier one of this attempt, found to have applied.
        let confirms = matches!(&known, Some(Seen::Present { stored, .. })
            if stored.record.holder.as_ref() == Some(&me));
        // A driver gone while this attempt waited would renew nothing: send nothing,
        // and give back an earlier write of this attempt found to have applied.
        if driver.is_closed() {
            if let (true, Some(Seen::Present { stored, .. })) = (confirms, known) {
                let _ = give_back(ctx, &name, &me, stored, gate).await;
            }
            return Err(Error::Shutdown);
        }
        metrics::counter!(crate::observe::ACQUIRE_ATTEMPTS).increment(1);
        let sent_at = Instant::now();
        // What an earlier write of this attempt is known to have written: still ours to
        // release if the caller goes away and this write does not apply.
        let applied = match (&known, confirms) {
            (Some(Seen::Present { stored, .. }), true) => Some(stored.clone()),
            _ => None,
        };
        let (answer, returned) = send(ctx, &name, &me, expect, record, gate, applied.clone()).await;
        gate = returned;
        let outcome = match answer {
            Answer::Written(Ok(o)) => o,
            Answer::Written(Err(e)) => return Err(give_up(ctx, &name, &me, applied, gate, in_doubt, e).await),
            Answer::InDoubt { error, read } => {
                tracing::debug!(%error, "acquire write outcome unknown; read to settle it");
                let in_a_row = last_doubt.as_ref().map_or(0, |(n, _)| *n);
                last_doubt = Some((in_a_row + 1, error.to_string()));
                // The write may have applied: if the record names us, the next round
                // confirms it with a write on its version.
                in_doubt = true;
                doubt_since.get_or_insert(sent_at);
                let current = match read {
                    Ok(current) => current,
                    Err(e) => return Err(give_up(ctx, &name, &me, applied, gate, true, e).await),
                };
                inner.remember(&name, current.as_ref(), Instant::now());
                fresh = true;
                continue;
            }
        };
        fresh = true;
        match outcome {
            CasOutcome::Written(stored) => {
                if stored.record.holder.as_ref() != Some(&me) {
                    return Err(Error::corrupt(
                        name.as_str(),
                        "store returned a record not naming the writer",
                    ));
                }
                inner.remember(&name, Some(&stored), sent_at);
                metrics::counter!(crate::observe::GRANTS).increment(1);
                if takeover {
                    metrics::counter!(crate::observe::TAKEOVERS).increment(1);
                }
                tracing::debug!(token = %stored.record.token, "granted");
                // A store that cannot honour the TTL asked for holds the lease for the
                // TTL its record shows (etcd: whole seconds, at least its minimum): the
                // lease is renewed, trusted and reported (`Lease::ttl`) for that one.
                let ttl = if stored.record.ttl == ttl {
                    ttl
                } else {
                    tracing::info!(asked = ?ttl.get(), held = ?stored.record.ttl.get(), "the store holds this lease for another TTL");
                    stored.record.ttl
                };
                let window = Policy::window(ttl, stored.remaining);
                // The cap counts from the write that made the grant: an earlier one whose
                // outcome was unknown, when this write confirms it. Validity counts from
                // this write, which renewed the record (rule 3 of docs/DESIGN.md).
                let held_since = if confirms {
                    doubt_since.unwrap_or(sent_at)
                } else {
                    sent_at
                };
                let shared = Arc::new(LeaseShared {
                    id: inner.next_id.fetch_add(1, Ordering::Relaxed),
                    name: name.clone(),
                    holder: me,
                    token: stored.record.token,
                    ttl,
                    hold_until: max_hold.and_then(|m| held_since.checked_add(m)),
                    lost: CancellationToken::new(),
                    cause: OnceLock::new(),
                    state: Mutex::new(HeldState {
                        valid_until: Instant::from_std(inner.policy.valid_within(sent_at.into_std(), ttl, window)),
                        renew_at: Instant::from_std(inner.policy.renew_within(sent_at.into_std(), window)),
                        version: stored.version,
                        record: stored.record,
                    }),
                    held: Arc::downgrade(&inner.held),
                });
                // Counted before the driver may see it: a driver ending meanwhile ends
                // it (`driver::EndOnDrop`), and each end uncounts it once.
                metrics::gauge!(crate::observe::HELD).increment(1.0);
                if let Err(e) = driver.register(shared.clone(), driver::first_wake(&shared)) {
                    // The driver went away while the write was in flight: nobody would
                    // renew the grant. Give it back here, in the caller's task.
                    shared.end(crate::LossCause::DriverStopped);
                    let st = shared.state();
                    let stored = Stored {
                        version: st.version,
                        record: st.record,
                        remaining: None,
                    };
                    let _ = give_back(ctx, &name, &shared.holder, stored, gate).await;
                    return Err(e);
                }
                gate.register(&shared);
                return Ok(AcquireOutcome::Granted(Lease {
                    shared,
                    driver: driver.clone(),
                    ctx: ctx.clone(),
                    released: false,
                }));
            }
            CasOutcome::Conflict(current) => {
                last_doubt = None;
                let current = match current {
                    Current::Present(s) => Some(s),
                    Current::Absent => None,
                    // Not met here: `send` reads after such a refusal (kept so that a
                    // refusal without its record is always settled by a read).
                    Current::Unknown => match store.read(&name).await {
                        Ok(current) => current,
                        Err(e) => return Err(give_up(ctx, &name, &me, applied, gate, in_doubt, e).await),
                    },
                };
                // Decide again on what the conflict showed (top of the loop): a takeover
                // of an expired or vacant lease costs this one extra write.
                inner.remember(&name, current.as_ref(), Instant::now());
            }
        }
    }
    // The last write's outcome was unknown and a read showed it applied: the record is
    // this attempt's, with nobody to renew it. It is released before giving up.
    if let Some(Seen::Present { stored, .. }) = inner.known(&name) {
        if in_doubt && stored.record.holder.as_ref() == Some(&me) {
            let message =
                format!("acquire of {name}: {ROUNDS} writes in a row had unknown outcomes or met changed records");
            return Err(if give_back(ctx, &name, &me, stored, gate).await {
                Error::Unavailable {
                    message: format!("{message}; what applied was released"),
                    source: None,
                }
            } else {
                Error::Indeterminate {
                    message: format!("{message}; what applied could not be released and expires on its own"),
                    source: None,
                }
            });
        }
    }
    let known = inner.known(&name);
    // Whether the record last seen is a live lease of someone else's (decided as a
    // write would be): an expired one is as free as a vacant one.
    let held = match &known {
        Some(Seen::Present { stored, first_seen }) => matches!(
            decision::acquire(
                &inner.policy,
                inner.caps.claims_vacant,
                &me,
                ttl,
                Instant::now().into_std(),
                inner.config.wall_clock.now_ms(),
                Known::Present {
                    stored,
                    first_seen: first_seen.into_std(),
                },
            ),
            AcquireStep::Wait { .. }
        ),
        _ => false,
    };
    if let Some((in_a_row, why)) = last_doubt
        && !held
    {
        // The last write's outcome was unknown, and the read after it found the lease
        // free (vacant, gone, or its holder's time run out): the store did not take the
        // writes (a file locked by another process, a row another transaction keeps
        // locked, a server that does not answer them). Not "held by someone else".
        return Err(Error::Indeterminate {
            message: format!(
                "acquire of {name}: {in_a_row} writes in a row had unknown outcomes and none is known to have applied (one that applies late expires on its own); the last: {why}"
            ),
            source: None,
        });
    }
    // Every write met a record changed since it was decided on: heavy contention.
    match known {
        Some(Seen::Present { stored, .. }) => Ok(AcquireOutcome::Held {
            holder: stored.record.holder.clone(),
            token: stored.record.token,
            retry_after: Duration::from_millis(10),
        }),
        _ => Ok(AcquireOutcome::Held {
            holder: None,
            token: FencingToken::ZERO,
            retry_after: Duration::from_millis(10),
        }),
    }
}

/// Releases `stored`, a grant of `me` that nobody will renew (the renewal driver is
/// gone, or the attempt gave up on it), in the caller's task; finished on a task of its
/// own if the caller drops the future meanwhile, and only then opens the name's `gate`. False if the release failed (logged):
/// the grant then expires on its own.
async fn give_back(ctx: &Arc<DriverCtx>, name: &LeaseName, me: &HolderId, stored: Stored, gate: Gate) -> bool {
    let (ctx, at, me) = (ctx.clone(), name.clone(), me.clone());
    let release = FinishOnDrop::new(async move {
        let token = stored.record.token;
        let released = release_write(&ctx, &at, &me, token, stored.version, stored.record).await;
        // Only now may the client's next attempt on the name begin: it meets a settled record.
        drop(gate);
        released
    });
    match release.await {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!(lease = %name, error = %e, "releasing a grant nobody will renew failed; it will expire on its own");
            false
        }
    }
}

/// Ends an attempt with `e`, after giving back `applied`, what an earlier write of it is
/// known to have written, if any (the name's `gate` opens after it): nobody would renew
/// it. Given back, `e` is the answer
/// as it is; otherwise, if a write of the attempt may have applied (`in_doubt`), the
/// answer says so ([`still_in_doubt`]).
async fn give_up(
    ctx: &Arc<DriverCtx>,
    name: &LeaseName,
    me: &HolderId,
    applied: Option<Stored>,
    gate: Gate,
    in_doubt: bool,
    e: Error,
) -> Error {
    let given_back = match applied {
        Some(stored) => give_back(ctx, name, me, stored, gate).await,
        None => false,
    };
    if in_doubt && !given_back { still_in_doubt(e) } else { e }
}

/// The answer to one write of an acquire attempt.
enum Answer {
    /// The store answered, or failed the write without it applying.
    Written(Result<CasOutcome>),
    /// The write's outcome is unknown (`error`); `read` is what a read showed after it.
    InDoubt { error: Error, read: Result<Option<Stored>> },
}

/// Sends one write of `me`'s acquire attempt and settles its outcome (a read after a
/// write whose outcome was unknown, or after a refusal that did not carry the current
/// record); hands back the answer and the name's `gate`.
///
/// Polled in the caller's task. Dropped once sent (the caller gave up), the write is
/// finished on a task of its own, which then releases whatever it granted, or what an
/// earlier write of the attempt is known to have written (`applied`) if this one did
/// not apply ([`release_abandoned`]), and only then opens the gate: nothing else is sent
/// for the abandoned attempt, and the client's next attempt on the name meets a settled
/// record.
fn send(
    ctx: &Arc<DriverCtx>,
    name: &LeaseName,
    me: &HolderId,
    expect: Precondition,
    record: LeaseRecord,
    gate: Gate,
    applied: Option<Stored>,
) -> FinishOnDrop<(Answer, Gate)> {
    let (store, at) = (ctx.store.clone(), name.clone());
    let write = async move {
        let answer = match store.write(&at, &expect, &record).await {
            Err(error) if error.is_indeterminate() => Answer::InDoubt {
                error,
                read: store.read(&at).await,
            },
            // A refusal without the current record: the read that tells what refused it
            // belongs to the write, so that a caller gone meanwhile still gives back
            // what an earlier write of the attempt wrote (`release_abandoned`).
            Ok(CasOutcome::Conflict(Current::Unknown)) => Answer::Written(
                store
                    .read(&at)
                    .await
                    .map(|current| CasOutcome::Conflict(current.map_or(Current::Absent, Current::Present))),
            ),
            answered => Answer::Written(answered),
        };
        (answer, gate)
    };
    let (ctx, name, me) = (ctx.clone(), name.clone(), me.clone());
    FinishOnDrop::or_on_drop(write, move |(answer, gate)| async move {
        release_abandoned(&ctx, &name, &me, answer, applied).await;
        drop(gate);
    })
}

/// Releases what a write of `me`'s attempt granted once its caller had gone away: the
/// record it wrote, or, when its outcome was unknown, the record a read shows if it
/// names `me` (the read is tried up to four times). For a write that was refused or
/// certainly did not apply, only what an earlier write of the attempt is known to have
/// written (`applied`: the record this write was to confirm), which [`release_write`]
/// releases if it is still ours.
async fn release_abandoned(ctx: &DriverCtx, name: &LeaseName, me: &HolderId, answer: Answer, applied: Option<Stored>) {
    let granted = match answer {
        Answer::Written(Ok(CasOutcome::Written(stored))) => Some(stored),
        Answer::Written(_) => applied,
        Answer::InDoubt { mut read, .. } => {
            let mut tries = 1;
            loop {
                match read {
                    Ok(current) => break current,
                    Err(e) if tries < 4 && (e.is_retryable() || e.is_indeterminate()) => {
                        tokio::time::sleep(ctx.jitter.exponential(
                            tries,
                            Duration::from_millis(20),
                            Duration::from_millis(500),
                        ))
                        .await;
                        tries += 1;
                        read = ctx.store.read(name).await;
                    }
                    Err(e) => {
                        tracing::warn!(lease = %name, error = %e, "an abandoned acquire's write may have applied and could not be checked; it will expire on its own");
                        return;
                    }
                }
            }
        }
    };
    let Some(stored) = granted.filter(|s| s.record.holder.as_ref() == Some(me)) else {
        return;
    };
    tracing::debug!(lease = %name, token = %stored.record.token, "releasing a grant whose acquire was abandoned");
    let token = stored.record.token;
    if let Err(e) = release_write(ctx, name, me, token, stored.version, stored.record).await {
        tracing::warn!(lease = %name, error = %e, "releasing an abandoned grant failed; it will expire on its own");
    }
}

/// A failure after a write of the same call whose outcome is unknown: a "did not apply"
/// ([`Error::Unavailable`]) is no longer true of the call, which may have written.
fn still_in_doubt(e: Error) -> Error {
    if e.is_retryable() {
        Error::Indeterminate {
            message: format!("an earlier write of this acquire may have applied; then: {e}"),
            source: Some(Box::new(e)),
        }
    } else {
        e
    }
}

impl ClockSource {
    /// True when the store keeps time itself.
    pub fn is_store(self) -> bool {
        matches!(self, Self::Store)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MemoryStore;

    #[tokio::test(start_paused = true)]
    async fn the_table_of_held_names_empties_as_leases_end() {
        let client = LeaseClient::new(MemoryStore::new());
        let ttl = Duration::from_secs(30);
        let mut leases = Vec::new();
        for i in 0..100 {
            leases.push(client.acquire(format!("n/{i}"), ttl).await.expect("acquire"));
        }
        assert_eq!(client.inner.held.len(), 100);
        for (i, lease) in leases.into_iter().enumerate() {
            if i % 2 == 0 {
                lease.release().await.expect("release");
            } else {
                drop(lease);
            }
        }
        assert_eq!(
            client.inner.held.len(),
            0,
            "released and dropped leases stayed on the table"
        );
        // A refused attempt leaves nothing behind either.
        let lease = client.acquire("x", ttl).await.expect("x");
        assert!(matches!(
            client.try_acquire("x", ttl).await,
            Err(Error::AlreadyHeld { .. })
        ));
        assert_eq!(client.inner.held.len(), 1);
        drop(lease);
        assert_eq!(client.inner.held.len(), 0);
    }

    #[test]
    fn holder_ids_are_written_as_format_would() {
        for (v, width) in [
            (0u64, 1),
            (1, 1),
            (0xa, 1),
            (0xff, 1),
            (0x1234_5678, 8),
            (7, 8),
            (0, 8),
            (u64::MAX, 1),
        ] {
            let mut hex = String::new();
            push_hex(&mut hex, v, width);
            assert_eq!(hex, format!("{v:0w$x}", w = width as usize), "{v} to {width} digits");
        }
        let client = LeaseClient::new(MemoryStore::new());
        let id = client.inner.holder_id().expect("holder id");
        let (prefix, rest) = id.as_str().rsplit_once('.').expect("a nonce");
        assert_eq!(rest.len(), 8, "the nonce is 8 hex digits: {id}");
        assert!(prefix.starts_with(&client.inner.holder_prefix[..client.inner.holder_prefix.len() - 1]));
        assert_ne!(
            client.inner.holder_id().expect("holder id"),
            id,
            "each attempt has its own id"
        );
    }

    /// A client that grants and releases faster than its driver turns (MemoryStore: a
    /// µs or two a pair, on a runtime whose driver runs on another thread) seldom wakes
    /// the driver: a grant released before the driver saw it still sets the driver's
    /// deadline, so the next grant, due later, finds the driver asleep until before it.
    #[test]
    fn acquire_and_release_pairs_seldom_wake_the_driver() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async {
            let client = LeaseClient::new(MemoryStore::new());
            let pairs = 4_000;
            for i in 0..pairs {
                let name = format!("pairs/{}", i % 8);
                let AcquireOutcome::Granted(lease) = client
                    .try_acquire(&name, Duration::from_secs(30))
                    .await
                    .expect("acquire")
                else {
                    panic!("{name} is held");
                };
                lease.release().await.expect("release");
            }
            let (mailbox, _) = client.inner.driver.get().expect("the driver runs");
            let wakes = mailbox.wakes_sent();
            // One for each batch of released leases (`mailbox::FORGET_BATCH`), and a few
            // while the driver starts.
            assert!(
                wakes <= pairs / 256 + 10,
                "{wakes} wake-ups of the driver for {pairs} acquire + release pairs"
            );
        });
    }
}
