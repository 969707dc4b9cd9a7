//! The lease guard a client hands out, and why a lease ends.

use std::fmt;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::driver::{DriverCtx, release_shared};
use crate::finish::FinishOnDrop;
use crate::held::HeldNames;
use crate::mailbox::Mailbox;
use crate::validity::Validity;
use crate::{
    FencingToken, HolderId, LeaseName, Result, Ttl,
    store::{LeaseRecord, Version},
};

/// Why a lease ended for its holder.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LossCause {
    /// No renewal succeeded before the validity deadline, and the store answered
    /// (a renewal conflicted with the lease gone: on etcd, ZooKeeper and Redis the
    /// store deletes a record at its TTL).
    Expired,
    /// Another holder was granted the lease.
    TakenOver {
        /// The new holder, if known.
        holder: Option<HolderId>,
        /// The new holder's token.
        token: FencingToken,
    },
    /// The store did not answer renewals before the validity deadline.
    StoreUnreachable,
    /// Renewals were sent but their outcome stayed unknown until the deadline.
    OutcomeUnknown,
    /// The store reported an error no retry can fix (corrupt record, misconfiguration).
    StoreError(String),
    /// The holder released it (or dropped the guard).
    Released,
    /// Someone else released this grant while it was held: a renewal found the record
    /// vacant with this lease's own token (an operator's `leasehold release --force`,
    /// [`crate::admin::Admin::force_release`]). Nobody holds the lease now, and the
    /// next grant gets a higher token.
    ReleasedByOther,
    /// The hold reached its cap (`max_hold`, see [`crate::AcquireOptions::max_hold`]):
    /// the driver stopped renewing and ended the lease, although the store still
    /// answered, and this signal fires before anyone else can take the lease over. The
    /// driver leaves the record to expire on its own, so while the guard is kept nobody
    /// else can take the lease before its TTL (from the last renewal) has run out;
    /// releasing or dropping the guard writes the vacant record, which frees the lease
    /// at once (as after every other cause but [`LossCause::TakenOver`]).
    MaxHoldReached,
    /// The client's renewal driver stopped while the lease was held: the Tokio runtime
    /// it ran on (the one of the client's first acquire) shut down. Nothing renews the
    /// lease any more, so it ends at once rather than when its validity runs out; the
    /// record expires on the store after its TTL unless the guard is released (which
    /// still writes, on the runtime at hand).
    DriverStopped,
}

impl LossCause {
    /// A short label, used as the `cause` metric label.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Expired => "expired",
            Self::TakenOver { .. } => "taken_over",
            Self::StoreUnreachable => "store_unreachable",
            Self::OutcomeUnknown => "outcome_unknown",
            Self::StoreError(_) => "store_error",
            Self::Released => "released",
            Self::ReleasedByOther => "released_by_other",
            Self::MaxHoldReached => "max_hold_reached",
            Self::DriverStopped => "driver_stopped",
        }
    }
}

/// Words that fit in a sentence ("lost the lease: {cause}"); [`LossCause::label`] is the
/// metric label.
impl fmt::Display for LossCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Expired => f.write_str("expired"),
            Self::TakenOver { holder: Some(h), token } => write!(f, "taken over by {h} with token {token}"),
            Self::TakenOver { holder: None, token } => write!(f, "taken over by someone else with token {token}"),
            Self::StoreUnreachable => f.write_str("the store did not answer its renewals in time"),
            Self::OutcomeUnknown => f.write_str("the outcome of its renewals stayed unknown until its deadline"),
            Self::StoreError(e) => write!(f, "store error: {e}"),
            Self::Released => f.write_str("released"),
            Self::ReleasedByOther => f.write_str("released by someone else"),
            Self::MaxHoldReached => f.write_str("its maximum hold was reached"),
            Self::DriverStopped => f.write_str("its renewal driver stopped (the runtime it ran on shut down)"),
        }
    }
}

/// What the driver tracks of a held lease; shared with its guard.
#[derive(Debug)]
pub(crate) struct LeaseShared {
    pub(crate) id: u64,
    pub(crate) name: LeaseName,
    pub(crate) holder: HolderId,
    pub(crate) token: FencingToken,
    pub(crate) ttl: Ttl,
    /// The end of the hold's cap (`max_hold` after the grant was sent), if it has one.
    pub(crate) hold_until: Option<Instant>,
    pub(crate) lost: CancellationToken,
    pub(crate) cause: OnceLock<LossCause>,
    pub(crate) state: Mutex<HeldState>,
    /// The client's table of held names, which this grant leaves when it ends.
    pub(crate) held: Weak<HeldNames>,
}

/// The mutable part: changes on every renewal.
#[derive(Debug, Clone)]
pub(crate) struct HeldState {
    pub(crate) version: Version,
    pub(crate) record: LeaseRecord,
    pub(crate) valid_until: Instant,
    /// When the driver renews it next (a third of the window the store vouched for).
    pub(crate) renew_at: Instant,
}

impl LeaseShared {
    pub(crate) fn state(&self) -> HeldState {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The state's validity deadline alone (no clone of its version and record).
    pub(crate) fn valid_until(&self) -> Instant {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .valid_until
    }

    /// The validity deadline, never past the hold's cap.
    pub(crate) fn valid_until_capped(&self) -> Instant {
        let renewed = self.valid_until();
        self.hold_until.map_or(renewed, |h| renewed.min(h))
    }

    /// Not ended, and the validity deadline ahead.
    pub(crate) fn is_valid(&self) -> bool {
        !self.lost.is_cancelled() && Instant::now() < self.valid_until_capped()
    }

    pub(crate) fn set_state(&self, s: HeldState) {
        *self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = s;
    }

    /// Ends the lease for its holder: records the cause (first one wins) and fires the
    /// loss signal. Returns true if this call ended it.
    pub(crate) fn end(&self, cause: LossCause) -> bool {
        self.leave_held();
        let first = self.cause.set(cause.clone()).is_ok();
        if first {
            if cause != LossCause::Released {
                tracing::warn!(lease = %self.name, token = %self.token, cause = cause.label(), detail = %cause, "lease lost");
            }
            metrics::counter!(crate::observe::LOSSES, "cause" => cause.label()).increment(1);
            metrics::gauge!(crate::observe::HELD).decrement(1.0);
        }
        self.lost.cancel();
        first
    }

    /// Takes this grant off its client's table of held names: the client may acquire
    /// the name again.
    pub(crate) fn leave_held(&self) {
        if let Some(held) = self.held.upgrade() {
            held.forget(&self.name, self.id);
        }
    }
}

/// A held lease: exclusive ownership of a name until it is released or lost.
///
/// The client's renewal driver renews it at about a third of its TTL. Check
/// [`Lease::is_valid`] before starting work, carry [`Lease::token`] on every protected
/// write, and stop when [`Lease::lost`] completes. Dropping the guard releases the
/// lease in the background; [`Lease::release`] does it and waits.
///
/// ```
/// # tokio_test_block_on(async {
/// use std::time::Duration;
/// use leasehold_core::{AcquireOutcome, LeaseClient, MemoryStore};
/// let client = LeaseClient::new(MemoryStore::new());
/// let lease = client.acquire("jobs/payout", Duration::from_secs(10)).await?;
/// assert_eq!(lease.token().get(), 1);
/// assert!(lease.is_valid());
/// lease.release().await?;
/// // Released leases keep their token sequence: the next grant gets 2.
/// let AcquireOutcome::Granted(next) = client.try_acquire("jobs/payout", Duration::from_secs(10)).await? else { unreachable!() };
/// assert_eq!(next.token().get(), 2);
/// # Ok::<(), leasehold_core::Error>(()) }).unwrap();
/// # fn tokio_test_block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f) }
/// ```
pub struct Lease {
    pub(crate) shared: Arc<LeaseShared>,
    pub(crate) driver: Mailbox,
    pub(crate) ctx: Arc<DriverCtx>,
    pub(crate) released: bool,
}

impl fmt::Debug for Lease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lease")
            .field("name", &self.shared.name)
            .field("holder", &self.shared.holder)
            .field("token", &self.shared.token)
            .field("lost", &self.shared.cause.get())
            .finish()
    }
}

impl Lease {
    /// The lease name.
    pub fn name(&self) -> &LeaseName {
        &self.shared.name
    }

    /// The fencing token of this grant: carry it on every protected write.
    pub fn token(&self) -> FencingToken {
        self.shared.token
    }

    /// This grant's holder id (unique per grant).
    pub fn holder(&self) -> &HolderId {
        &self.shared.holder
    }

    /// The TTL it is held (and renewed) for: the one asked for, unless the store can
    /// only honour another (an etcd lease is whole seconds, at least etcd's minimum TTL),
    /// which the grant then reports here.
    pub fn ttl(&self) -> Duration {
        self.shared.ttl.get()
    }

    /// The store's version of this lease's record as its grant or last renewal wrote it
    /// (a SQL version, an etcd mod revision, an ETag): opaque, for a store's own fences
    /// that guard on the record itself (etcd's `TxnFence`).
    pub fn version(&self) -> Version {
        self.shared.state().version
    }

    /// Until when the holder may trust the lease, measured from when the last
    /// successful renewal was *sent* (rule 3 of docs/DESIGN.md), and never past
    /// [`Lease::hold_until`].
    pub fn valid_until(&self) -> Instant {
        self.shared.valid_until_capped()
    }

    /// The end of this hold's cap, if it was acquired with a `max_hold`
    /// ([`crate::AcquireOptions::max_hold`], [`crate::ClientConfig::max_hold`]):
    /// `max_hold` after the grant's write was sent (the first one, when a write whose
    /// outcome was unknown was confirmed by a second). The lease is not renewed past it
    /// and ends there with [`LossCause::MaxHoldReached`], at the latest.
    pub fn hold_until(&self) -> Option<Instant> {
        self.shared.hold_until
    }

    /// True if the lease has not been lost and its validity deadline is ahead.
    /// A `true` answer can be stale by the time work runs: the fence decides.
    pub fn is_valid(&self) -> bool {
        self.shared.is_valid()
    }

    /// This lease's validity, apart from the guard: hand it to the work that carries
    /// the token, and keep the guard to release it.
    pub fn validity(&self) -> Validity {
        Validity::new(self.shared.clone())
    }

    /// Completes when the lease is lost (or released), with the cause. Fires no later
    /// than [`Lease::valid_until`] if no renewal succeeds.
    pub async fn lost(&self) -> LossCause {
        self.shared.lost.cancelled().await;
        self.loss_cause().unwrap_or(LossCause::Expired)
    }

    /// The cause, once the lease has ended.
    pub fn loss_cause(&self) -> Option<LossCause> {
        self.shared.cause.get().cloned()
    }

    /// A cancellation token cancelled when the lease is lost: hand it to work that must
    /// stop then. Cancelling it yourself does not release the lease.
    pub fn cancellation(&self) -> CancellationToken {
        self.shared.lost.child_token()
    }

    /// Releases the lease and waits for the store's answer.
    ///
    /// Owner-checked: the vacant record is written on the version last seen, guarded on
    /// this grant's holder and token, so it never vacates a record someone else holds.
    /// If the lease was taken over ([`LossCause::TakenOver`]), nothing is written and
    /// this is `Ok`. After any other loss ([`LossCause::Expired`],
    /// [`LossCause::ReleasedByOther`], [`LossCause::StoreUnreachable`], [`LossCause::OutcomeUnknown`],
    /// [`LossCause::StoreError`], [`LossCause::MaxHoldReached`], [`LossCause::DriverStopped`]) the record may still be
    /// this grant's, so the write is sent all the same: it frees the lease at once if
    /// the record still names this grant, and is `Ok` if it turns out vacant, gone or
    /// someone else's. Dropping the guard does the same in the background.
    ///
    /// # Errors
    /// A store error if the release write failed, and [`crate::Error::Indeterminate`]
    /// if every try met a newer version of the record still naming this grant; the
    /// lease then expires on its own, unrenewed. A client whose renewal driver is gone
    /// (its runtime ended) still writes the release here, and does not report it.
    pub async fn release(mut self) -> Result<()> {
        self.released = true;
        self.shared.leave_held();
        // The driver stops renewing; the release is written here, in the caller's task
        // (and finished on a task of its own if this future is dropped half-way). A
        // renewal still in flight is no harm: the release then meets its newer version,
        // finds the record still ours, and writes on that version. A driver that is
        // gone renews nothing: there is nothing to stop, and the write is ours anyway.
        let taken = matches!(self.shared.cause.get(), Some(LossCause::TakenOver { .. }));
        let _ = self.driver.forget(self.shared.clone());
        self.shared.end(LossCause::Released);
        if taken {
            return Ok(());
        }
        let (ctx, shared) = (self.ctx.clone(), self.shared.clone());
        let st = shared.state();
        FinishOnDrop::new(async move { release_shared(&ctx, &shared, st.version, st.record).await }).await
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        self.shared.leave_held();
        // Ended here, as `release` ends it: whatever was handed the lease's validity or
        // cancellation stops trusting it now, not at the driver's next turn. A takeover
        // seen before keeps its cause (the first one wins), so nothing is written then.
        let taken = matches!(self.shared.cause.get(), Some(LossCause::TakenOver { .. }));
        self.shared.end(LossCause::Released);
        // Never blocks: the driver performs the release.
        if self.driver.release(self.shared.clone()).is_err() {
            // The driver is gone (the runtime it ran on ended): nobody renews the lease.
            // Release it on the runtime at hand, if any; without one the record expires
            // on its own.
            if let (false, Ok(runtime)) = (taken, tokio::runtime::Handle::try_current()) {
                let (ctx, shared) = (self.ctx.clone(), self.shared.clone());
                let st = shared.state();
                runtime.spawn(async move {
                    if let Err(e) = release_shared(&ctx, &shared, st.version, st.record).await {
                        tracing::warn!(lease = %shared.name, error = %e, "release failed; the lease will expire on its own");
                    }
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every cause reads as words in a sentence, never as its metric label.
    #[test]
    fn every_loss_cause_displays_as_words() {
        let token = FencingToken::new(7);
        let causes = [
            LossCause::Expired,
            LossCause::TakenOver { holder: None, token },
            LossCause::TakenOver {
                holder: Some(HolderId::new("h#1").expect("holder")),
                token,
            },
            LossCause::StoreUnreachable,
            LossCause::OutcomeUnknown,
            LossCause::StoreError("corrupt record".into()),
            LossCause::Released,
            LossCause::ReleasedByOther,
            LossCause::MaxHoldReached,
            LossCause::DriverStopped,
        ];
        for cause in &causes {
            let text = cause.to_string();
            assert!(!text.is_empty() && !text.contains('_'), "{cause:?}: {text}");
        }
    }
}
