//! The handle a candidate holds while it leads, and who leads as others see it.

use std::fmt;
use std::time::Duration;

use leasehold_core::{FencingToken, HolderId, Lease, LeaseName, LossCause, Result, Validity};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Who leads an election, as read from the store.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Leader {
    /// The leader's holder id (unique per grant: `<client label>#<grant>`).
    pub holder: HolderId,
    /// The fencing token of its tenure.
    pub token: FencingToken,
}

impl Leader {
    /// The leader's client label: its holder id up to the first `#` (by default
    /// `pid-<pid>`; set it with `leasehold_core::ClientConfig::label`).
    pub fn identity(&self) -> &str {
        let h = self.holder.as_str();
        h.split_once('#').map_or(h, |(label, _)| label)
    }
}

impl fmt::Display for Leader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (token {})", self.holder, self.token)
    }
}

/// Leadership of an election, won by [`crate::Election::campaign`].
///
/// It is a lease kept renewed in the background. Carry [`Leadership::token`] on every
/// write the leader makes, and stop leading when [`Leadership::cancellation`] fires:
/// it fires when the lease is lost, at the latest at the holder's validity deadline
/// (`sent_at + ttl - margin` of the last renewal that landed), which is before any
/// other candidate can be granted (see the crate docs).
///
/// Dropping the handle resigns in the background; [`Leadership::resign`] resigns and
/// waits for the store.
pub struct Leadership {
    lease: Lease,
    cancel: CancellationToken,
}

impl fmt::Debug for Leadership {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Leadership")
            .field("lease", &self.lease)
            .field("cancelled", &self.cancel.is_cancelled())
            .finish()
    }
}

impl Leadership {
    pub(crate) fn new(lease: Lease) -> Self {
        let cancel = lease.cancellation();
        Self { lease, cancel }
    }

    /// The election's lease name.
    pub fn name(&self) -> &LeaseName {
        self.lease.name()
    }

    /// The lease behind this leadership (its name, token, holder and validity).
    pub fn lease(&self) -> &Lease {
        &self.lease
    }

    /// The fencing token of this tenure: strictly greater than every earlier leader's.
    pub fn token(&self) -> FencingToken {
        self.lease.token()
    }

    /// This tenure's holder id.
    pub fn holder(&self) -> &HolderId {
        self.lease.holder()
    }

    /// This leader as observers see it.
    pub fn leader(&self) -> Leader {
        Leader {
            holder: self.lease.holder().clone(),
            token: self.lease.token(),
        }
    }

    /// The lease TTL.
    pub fn ttl(&self) -> Duration {
        self.lease.ttl()
    }

    /// Until when this candidate may trust that it leads (monotonic clock), measured
    /// from when the last successful renewal was sent.
    pub fn valid_until(&self) -> Instant {
        self.lease.valid_until()
    }

    /// True while the lease is held and its validity deadline is ahead. A `true` answer
    /// can be stale by the time work runs: the fence decides.
    pub fn is_leader(&self) -> bool {
        !self.cancel.is_cancelled() && self.lease.is_valid()
    }

    /// Completes when leadership is lost (or resigned), with the cause.
    pub async fn lost(&self) -> LossCause {
        self.lease.lost().await
    }

    /// Why leadership ended, once it has.
    pub fn loss_cause(&self) -> Option<LossCause> {
        self.lease.loss_cause()
    }

    /// A token cancelled when leadership ends (loss or resignation). Cancelling it
    /// yourself does not resign.
    pub fn cancellation(&self) -> CancellationToken {
        self.cancel.child_token()
    }

    /// A context for leader work: the token, the holder and the cancellation.
    pub fn context(&self) -> LeaderContext {
        LeaderContext {
            name: self.lease.name().clone(),
            holder: self.lease.holder().clone(),
            token: self.lease.token(),
            validity: self.lease.validity().with_cancellation(self.cancel.child_token()),
        }
    }

    /// Steps down: cancels the leader context first (so leader work stops before any
    /// successor can start), then releases the lease so the next candidate is granted
    /// at once, with the next token.
    ///
    /// # Errors
    /// A store error if the release write failed; the lease then expires on its own.
    pub async fn resign(self) -> Result<()> {
        self.cancel.cancel();
        self.lease.release().await
    }

    /// Cancels the leader context without resigning: leader work is told to stop while
    /// the lease is still held, so no successor can start beside it.
    pub(crate) fn cancel_context(&self) {
        self.cancel.cancel();
    }
}

/// What leader work receives: the tenure's fencing token and a cancellation that fires
/// when the tenure ends. The client-go equivalent of the `ctx` passed to
/// `OnStartedLeading`.
#[derive(Debug, Clone)]
pub struct LeaderContext {
    name: LeaseName,
    holder: HolderId,
    token: FencingToken,
    validity: Validity,
}

impl LeaderContext {
    /// The election's lease name.
    pub fn name(&self) -> &LeaseName {
        &self.name
    }

    /// This tenure's holder id.
    pub fn holder(&self) -> &HolderId {
        &self.holder
    }

    /// The fencing token to carry on every write this leader makes.
    pub fn token(&self) -> FencingToken {
        self.token
    }

    /// The cancellation: fires when the tenure ends (or [`LeaderContext::is_leading`]
    /// finds its deadline passed).
    pub fn cancellation(&self) -> &CancellationToken {
        self.validity.cancellation()
    }

    /// Completes when the tenure ends.
    pub async fn cancelled(&self) {
        self.validity.cancelled().await;
    }

    /// True while the tenure lasts: its cancellation has not fired and the lease's
    /// validity deadline is ahead. A leader that froze past that deadline reads `false`
    /// as soon as it runs again, before the renewal driver has had a turn to end the
    /// lease, and that first `false` cancels this context (and its clones): the tenure is
    /// over for the work, even should a renewal sent before the deadline be answered
    /// after it. A `true` answer can be stale by the time a write lands: the fence
    /// decides.
    pub fn is_leading(&self) -> bool {
        self.validity.is_valid()
    }

    /// Until when this leader may trust its lease (monotonic clock), as
    /// [`Leadership::valid_until`]: it moves on with every renewal, never past the
    /// lease's `hold_until`. After a resignation or a loss it may still lie ahead:
    /// [`LeaderContext::is_leading`] is what says whether the tenure lasts.
    pub fn valid_until(&self) -> Instant {
        self.validity.valid_until()
    }
}
