//! A lease's validity, apart from its guard: for work that carries the token.

use std::fmt;
use std::sync::Arc;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::lease::LeaseShared;

/// Whether a lease may still be trusted, readable without the [`crate::Lease`] guard:
/// cheap to clone, to hand to the work that carries the lease's token (a job's or a
/// leader's context) while the guard stays with whoever releases it.
///
/// It answers from the clock, not only from the loss signal: a holder that froze past
/// its validity deadline (a stopped process, a starved runtime) reads `false` as soon
/// as it runs again, before its renewal driver has had a turn to end the lease. That
/// first `false` also cancels the validity's cancellation (shared by its clones), so
/// the answer never turns back to `true` (as it could, should a renewal sent before the
/// deadline be answered after it) and work waiting on [`Validity::cancelled`] is told
/// at once.
///
/// ```
/// # tokio_test_block_on(async {
/// use std::time::Duration;
/// use leasehold_core::{LeaseClient, MemoryStore};
/// let client = LeaseClient::new(MemoryStore::new());
/// let lease = client.acquire("jobs/report", Duration::from_secs(10)).await?;
/// let validity = lease.validity();
/// assert!(validity.is_valid());
/// lease.release().await?;
/// assert!(!validity.is_valid());
/// assert!(validity.cancellation().is_cancelled());
/// # Ok::<(), leasehold_core::Error>(()) }).unwrap();
/// # fn tokio_test_block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f) }
/// ```
#[derive(Clone)]
pub struct Validity {
    shared: Arc<LeaseShared>,
    cancel: CancellationToken,
}

impl Validity {
    pub(crate) fn new(shared: Arc<LeaseShared>) -> Self {
        let cancel = shared.lost.child_token();
        Self { shared, cancel }
    }

    /// This validity with another cancellation: one the work's owner may also cancel
    /// itself (a leader's context, cancelled when it resigns). Make it a child of the
    /// lease's ([`crate::Lease::cancellation`]) so that it fires when the lease ends.
    #[must_use]
    pub fn with_cancellation(self, cancel: CancellationToken) -> Self {
        Self { cancel, ..self }
    }

    /// True if the cancellation has not fired, the lease has not ended and its validity
    /// deadline is ahead (as [`crate::Lease::is_valid`]). The first `false` cancels the
    /// cancellation, so it stays `false`. A `true` answer can be stale by the time work
    /// runs: the fence decides.
    pub fn is_valid(&self) -> bool {
        if self.cancel.is_cancelled() {
            return false;
        }
        if self.shared.is_valid() {
            return true;
        }
        self.cancel.cancel();
        false
    }

    /// Until when the holder may trust the lease (as [`crate::Lease::valid_until`]):
    /// it moves on with every renewal, never past [`crate::Lease::hold_until`]. Once
    /// the lease has ended it may still lie ahead: [`Validity::is_valid`] decides.
    pub fn valid_until(&self) -> Instant {
        self.shared.valid_until_capped()
    }

    /// The cancellation: fires when the lease ends, at the first `false` of
    /// [`Validity::is_valid`], or when its owner cancels it.
    pub fn cancellation(&self) -> &CancellationToken {
        &self.cancel
    }

    /// Completes when the cancellation fires.
    pub async fn cancelled(&self) {
        self.cancel.cancelled().await;
    }
}

impl fmt::Debug for Validity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Validity")
            .field("lease", &self.shared.name)
            .field("token", &self.shared.token)
            .field("cancelled", &self.cancel.is_cancelled())
            .finish()
    }
}
