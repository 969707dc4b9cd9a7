//! Fenced counting semaphores: at most N holders at a time, each permit with a fencing
//! token of its own slot.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::future::select_all;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::{
    AcquireOptions, AcquireOutcome, Error, FencingToken, HolderId, Lease, LeaseClient, LeaseName, LossCause, Result,
    Validity,
};

/// The most permits a [`Semaphore`] may have.
///
/// A try on a full semaphore asks every slot once (a round trip each, two for a
/// takeover), and a waiter on a store that pushes its changes waits on every slot at
/// once: the slots are meant to be few.
pub const MAX_PERMITS: u32 = 256;

/// "At most N at a time", fenced: a semaphore of `permits` permits on one name, each
/// permit a [`Permit`] with a loss signal, renewal and a fencing token, like a
/// [`Lease`].
///
/// A semaphore of N permits is N ordinary leases, its **slots**, named
/// `<name>/permit/<i>` for `i` in `0..N`. A permit is the lease of one slot, so:
///
/// - **Tokens per slot.** Each slot has its own strictly increasing token sequence (the
///   slot's lease's). A resource guarded per slot (keyed by [`Permit::slot`], or named
///   by [`Permit::name`]) refuses a stale permit holder exactly as a lease's fence
///   refuses a stale lease holder: with the store's fence, no new store operation.
///   Tokens of different slots are not comparable.
/// - **At most N.** Each slot has at most one holder (the lease guarantee), so at most N
///   hold permits, on every store.
/// - **Trying.** [`Semaphore::try_acquire`] tries the slots in turn, from a start that
///   rotates per try and is random per semaphore value (contenders do not all ask
///   slot 0 first), and answers [`PermitOutcome::Held`] when every slot is held: one
///   lease attempt per slot, so about N round trips on a full semaphore.
/// - **Waiting without a herd.** [`Semaphore::acquire`] waits as
///   [`LeaseClient::acquire`] does: on a store that pushes its changes it waits for a
///   change of *any* slot (one wait per slot, in the store's wake-up hub, which wakes one claimer per release),
///   so one release wakes one waiter of a process, which tries that slot only: a grant
///   after a release costs one store call (the grant wakes no other waiter to claim;
///   20 waiters on 3 permits in `tests/semaphore.rs`), not one per waiter or per slot,
///   and only the first waiter in each slot's line looks for an unreleased expiry
///   ([`crate::store::Wait::Claim`]). Other stores poll, at their own poll interval or
///   when a holder's lease can have run out, whichever is first.
/// - **A client may hold several permits.** Slots this client already holds are
///   skipped (a permit is one slot, never two permits of one slot). When this client
///   holds *every* slot, an acquire answers [`Error::AlreadyHeld`] at once (naming the
///   semaphore), since waiting would be waiting on itself.
///
/// ## Changing the number of permits
/// The number of permits is not stored: it is what each `Semaphore` value is built with,
/// so every user of a name should use the same. A semaphore built with a larger N uses
/// the extra slots at once. One built with a smaller N stops trying the slots at and
/// above it, but a holder of such a slot keeps its permit until it releases it or loses
/// it: until then (at most until the holder stops renewing, then one TTL) there may be
/// more holders than the new N, up to the largest N in use. A user who must not exceed
/// the new limit waits until the old slots are free (their records, [`Semaphore::slot_names`]
/// of the old semaphore, show no holder) before counting on it.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use std::time::Duration;
/// use leasehold_core::{LeaseClient, MemoryStore, PermitOutcome, Semaphore};
///
/// let store = MemoryStore::new();
/// let ttl = Duration::from_secs(30);
/// let a = Semaphore::new(LeaseClient::new(store.clone()), "exports", 2)?;
/// let b = Semaphore::new(LeaseClient::new(store), "exports", 2)?;
/// let first = a.acquire(ttl).await?;
/// let second = a.acquire(ttl).await?; // one client may hold several permits
/// assert_ne!(first.slot(), second.slot());
/// // Both permits are held: b is refused, and learns when to try again.
/// assert!(matches!(b.try_acquire(ttl).await?, PermitOutcome::Held { .. }));
/// let slot = first.slot();
/// let token = first.token(); // carry it on every write to the resource of its slot
/// first.release().await?;
/// let next = b.acquire(ttl).await?;
/// assert_eq!(next.slot(), slot);
/// assert!(next.token() > token); // the slot's next token: the old holder is fenced off
/// # Ok::<(), leasehold_core::Error>(()) }).unwrap();
/// ```
#[derive(Clone)]
pub struct Semaphore {
    client: LeaseClient,
    name: LeaseName,
    slots: Arc<[LeaseName]>,
    /// Where the next try starts.
    next: Arc<AtomicUsize>,
}

impl fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Semaphore")
            .field("name", &self.name)
            .field("permits", &self.slots.len())
            .finish_non_exhaustive()
    }
}

/// The result of one try for a permit.
#[derive(Debug)]
pub enum PermitOutcome {
    /// A permit is ours.
    Granted(Permit),
    /// Every permit is held (by others, or some by this client).
    Held {
        /// When another try may succeed: the soonest any slot's holder can lose it.
        retry_after: Duration,
    },
}

impl PermitOutcome {
    /// The permit, if granted.
    pub fn granted(self) -> Option<Permit> {
        match self {
            Self::Granted(p) => Some(p),
            Self::Held { .. } => None,
        }
    }
}

impl Semaphore {
    /// A semaphore of `permits` permits named `name`, on `client`'s store. Nothing is
    /// sent.
    ///
    /// ```
    /// use leasehold_core::{Error, LeaseClient, MemoryStore, Semaphore, MAX_PERMITS};
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let client = LeaseClient::new(MemoryStore::new());
    /// let s = Semaphore::new(client.clone(), "uploads", 3)?;
    /// assert_eq!(s.slot_names()[2].as_str(), "uploads/permit/2");
    /// for bad in [0, MAX_PERMITS + 1] {
    ///     assert!(matches!(Semaphore::new(client.clone(), "uploads", bad), Err(Error::InvalidInput { .. })));
    /// }
    /// assert!(Semaphore::new(client.clone(), "has space", 3).is_err());
    /// assert!(Semaphore::new(client, "x".repeat(195), 3).is_err()); // its slot names would be too long
    /// # Ok::<(), Error>(()) }).unwrap();
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for `permits` outside `1..=`[`MAX_PERMITS`], or a name that
    /// is not a [`LeaseName`] or whose slot names (`<name>/permit/<i>`) would not be.
    pub fn new(client: LeaseClient, name: impl AsRef<str>, permits: u32) -> Result<Self> {
        if !(1..=MAX_PERMITS).contains(&permits) {
            return Err(Error::invalid(
                "semaphore permits",
                format!("{permits} is not between 1 and {MAX_PERMITS}"),
            ));
        }
        let name = LeaseName::new(name)?;
        let slots = (0..permits)
            .map(|i| LeaseName::new(format!("{name}/permit/{i}")))
            .collect::<Result<Arc<[LeaseName]>>>()?;
        let start = client.random_below(slots.len());
        Ok(Self {
            client,
            name,
            slots,
            next: Arc::new(AtomicUsize::new(start)),
        })
    }

    /// The semaphore's name.
    pub fn name(&self) -> &LeaseName {
        &self.name
    }

    /// How many permits it has.
    pub fn permits(&self) -> u32 {
        u32::try_from(self.slots.len()).unwrap_or(MAX_PERMITS)
    }

    /// The lease name of each slot, by slot: `<name>/permit/<i>` (to read the records,
    /// list them, or release one by force with [`crate::admin`]).
    pub fn slot_names(&self) -> &[LeaseName] {
        &self.slots
    }

    /// The client it acquires with.
    pub fn client(&self) -> &LeaseClient {
        &self.client
    }

    /// One try for a permit held for `ttl`: each slot at most once, starting from a
    /// rotating slot.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a bad TTL; [`Error::AlreadyHeld`] if this client
    /// holds every slot; a store error that left no slot granted (an error a retry can
    /// fix is only returned when no slot was granted and some slot could not be asked).
    /// Every slot held is `Ok(PermitOutcome::Held { .. })`.
    pub async fn try_acquire(&self, ttl: Duration) -> Result<PermitOutcome> {
        self.try_acquire_with(&AcquireOptions::new(ttl)).await
    }

    /// One try, as [`Semaphore::try_acquire`], with [`AcquireOptions`] (a cap on the
    /// hold; the timeout is ignored: one try does not wait).
    ///
    /// # Errors
    /// As [`Semaphore::try_acquire`].
    pub async fn try_acquire_with(&self, options: &AcquireOptions) -> Result<PermitOutcome> {
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        self.try_slots(options, start, self.slots.len()).await
    }

    /// Acquires a permit held for `ttl`, waiting as long as it takes (cancel by
    /// dropping the future).
    ///
    /// # Errors
    /// As [`Semaphore::try_acquire`], except that store unavailability is retried.
    pub async fn acquire(&self, ttl: Duration) -> Result<Permit> {
        self.acquire_with(&AcquireOptions::new(ttl)).await
    }

    /// Acquires a permit, giving up with [`Error::Timeout`] (naming the semaphore)
    /// after `timeout` (one too long for the clock to represent, such as
    /// `Duration::MAX`, means no deadline).
    ///
    /// # Errors
    /// As [`Semaphore::acquire`], plus [`Error::Timeout`].
    pub async fn acquire_timeout(&self, ttl: Duration, timeout: Duration) -> Result<Permit> {
        self.acquire_with(&AcquireOptions::new(ttl).timeout(timeout)).await
    }

    /// Acquires a permit with [`AcquireOptions`]: its TTL, cap on the hold, and timeout
    /// (if any).
    ///
    /// # Errors
    /// As [`Semaphore::acquire_timeout`].
    pub async fn acquire_with(&self, options: &AcquireOptions) -> Result<Permit> {
        let deadline = crate::client::deadline_after(options.timeout);
        let mut failures = 0u32;
        // What a timeout says of the last attempt: held (`None`), or how the store failed.
        let mut last_failure: Option<Error>;
        let mut start = self.next.fetch_add(1, Ordering::Relaxed);
        // After a wake-up, only the slot that changed is tried: each slot's change wakes
        // a waiter of its own, and a grant (which wakes the next waiter of its slot)
        // then costs that waiter one call, not one per slot.
        let mut count = self.slots.len();
        loop {
            let wait = match self.try_slots(options, start, count).await {
                Ok(PermitOutcome::Granted(permit)) => return Ok(permit),
                Ok(PermitOutcome::Held { retry_after }) => {
                    failures = 0;
                    last_failure = None;
                    self.client.wait_when_held(retry_after)
                }
                Err(e) if e.is_retryable() || e.is_indeterminate() => {
                    failures += 1;
                    tracing::debug!(semaphore = %self.name, error = %e, "permit attempt failed; backing off");
                    last_failure = Some(e);
                    self.client.wait_after_failures(failures)
                }
                Err(e) => return Err(e),
            };
            if deadline.is_some_and(|d| d <= Instant::now()) {
                return Err(Error::timeout(self.name.as_str(), last_failure));
            }
            start = self.next.fetch_add(1, Ordering::Relaxed);
            count = self.slots.len();
            // As `LeaseClient::acquire`: after a failed attempt, back off for real; the
            // deadline ends any wait, and the loop then tries once more.
            let waited = async {
                if failures == 0 {
                    let waited = Instant::now();
                    let changed = self.wait_for_any_slot(wait).await?;
                    Ok(self.client.notifies_waiters() && waited.elapsed() < wait).map(|woken| woken.then_some(changed))
                } else {
                    tokio::time::sleep(wait).await;
                    Ok(None)
                }
            };
            let changed = match deadline {
                Some(d) => tokio::time::timeout_at(d, waited).await.unwrap_or(Ok(None))?,
                None => waited.await?,
            };
            if let Some(changed) = changed {
                (start, count) = (changed, 1);
            }
        }
    }

    /// Waits until a change of any slot wakes this waiter (or it is time to look
    /// again: `wait`, in line on each slot as `LeaseClient::acquire` waits); the slot
    /// that changed first.
    async fn wait_for_any_slot(&self, wait: Duration) -> Result<usize> {
        let store = self.client.store();
        let wait = self.client.wait_to_claim(wait);
        let waits = self.slots.iter().map(|slot| {
            let seen = self.client.seen_version(slot);
            Box::pin(async move { store.wait_for_change(slot, seen.as_ref(), wait).await })
        });
        let (result, index, _rest) = select_all(waits).await;
        result?;
        Ok(index)
    }

    /// Tries `count` slots once each, from `start` (taken modulo the slots) on.
    async fn try_slots(&self, options: &AcquireOptions, start: usize, count: usize) -> Result<PermitOutcome> {
        let n = self.slots.len();
        let mut retry_after: Option<Duration> = None;
        let mut own: Option<FencingToken> = None;
        let mut own_count = 0usize;
        let mut failure: Option<Error> = None;
        for k in 0..count.min(n) {
            let slot = (start + k) % n;
            match self.client.try_acquire_with(&self.slots[slot], options).await {
                Ok(AcquireOutcome::Granted(lease)) => {
                    return Ok(PermitOutcome::Granted(Permit {
                        lease,
                        slot: u32::try_from(slot).unwrap_or(u32::MAX),
                        semaphore: self.name.clone(),
                    }));
                }
                Ok(AcquireOutcome::Held { retry_after: r, .. }) => {
                    retry_after = Some(retry_after.map_or(r, |x| x.min(r)));
                }
                // A slot this client holds is skipped: never two permits of one slot.
                Err(Error::AlreadyHeld { token, .. }) => {
                    own_count += 1;
                    own = Some(token);
                }
                Err(e) if e.is_retryable() || e.is_indeterminate() => {
                    tracing::debug!(slot = %self.slots[slot], error = %e, "permit slot attempt failed");
                    // An outcome in doubt outweighs a plain "not sent".
                    if failure.as_ref().is_none_or(|f| !f.is_indeterminate()) {
                        failure = Some(e);
                    }
                }
                Err(e) => return Err(e),
            }
        }
        if let Some(e) = failure {
            return Err(e);
        }
        if own_count == n {
            return Err(Error::AlreadyHeld {
                name: self.name.as_str().to_owned(),
                token: own.unwrap_or(FencingToken::ZERO),
            });
        }
        Ok(PermitOutcome::Held {
            retry_after: retry_after.unwrap_or(Duration::from_millis(10)),
        })
    }
}

/// A held permit of a [`Semaphore`]: the [`Lease`] of one slot, renewed by the client's
/// driver, with that slot's fencing token and the lease's loss signal.
///
/// Carry [`Permit::token`] on every write to the resource of [`Permit::slot`], and stop
/// when [`Permit::lost`] completes. Dropping it releases the slot in the background;
/// [`Permit::release`] does it and waits.
#[derive(Debug)]
pub struct Permit {
    lease: Lease,
    slot: u32,
    semaphore: LeaseName,
}

impl Permit {
    /// The slot this permit holds, in `0..permits`.
    pub fn slot(&self) -> u32 {
        self.slot
    }

    /// The fencing token of this grant of the slot: strictly above every earlier
    /// grant's token of the same slot.
    pub fn token(&self) -> FencingToken {
        self.lease.token()
    }

    /// The slot's lease name (`<semaphore>/permit/<slot>`).
    pub fn name(&self) -> &LeaseName {
        self.lease.name()
    }

    /// The semaphore's name.
    pub fn semaphore(&self) -> &LeaseName {
        &self.semaphore
    }

    /// This grant's holder id.
    pub fn holder(&self) -> &HolderId {
        self.lease.holder()
    }

    /// The TTL it is held for ([`Lease::ttl`]).
    pub fn ttl(&self) -> Duration {
        self.lease.ttl()
    }

    /// Until when the holder may trust the permit ([`Lease::valid_until`]).
    pub fn valid_until(&self) -> Instant {
        self.lease.valid_until()
    }

    /// True if the permit has not been lost and its validity deadline is ahead
    /// ([`Lease::is_valid`]).
    pub fn is_valid(&self) -> bool {
        self.lease.is_valid()
    }

    /// Completes when the permit is lost (or released), with the cause
    /// ([`Lease::lost`]).
    pub async fn lost(&self) -> LossCause {
        self.lease.lost().await
    }

    /// The cause, once the permit has ended.
    pub fn loss_cause(&self) -> Option<LossCause> {
        self.lease.loss_cause()
    }

    /// A cancellation token cancelled when the permit is lost ([`Lease::cancellation`]).
    pub fn cancellation(&self) -> CancellationToken {
        self.lease.cancellation()
    }

    /// The permit's validity, apart from the guard ([`Lease::validity`]): hand it to the
    /// work that carries [`Permit::token`], and keep the permit to release it.
    pub fn validity(&self) -> Validity {
        self.lease.validity()
    }

    /// The slot's lease (for a store's fence that takes a [`Lease`]).
    pub fn lease(&self) -> &Lease {
        &self.lease
    }

    /// The slot's lease, giving up the permit wrapper.
    pub fn into_lease(self) -> Lease {
        self.lease
    }

    /// Releases the permit and waits for the store's answer ([`Lease::release`]).
    ///
    /// # Errors
    /// A store error if the release write failed; the slot then expires on its own.
    pub async fn release(self) -> Result<()> {
        self.lease.release().await
    }
}
