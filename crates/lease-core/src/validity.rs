//! A lease's validity, apart from its guard: for work that carries the token.

use std::fmt;
use std::sync::Arc;

use tokio::time::Instant;

use crate::lease::LeaseShared;

/// Whether a lease may still be trusted, readable without the [`crate::Lease`] guard:
/// cheap to clone, to hand to the work that carries the lease's token (a job's or a
/// leader's context) while the guard stays with whoever releases it.
///
/// It answers from the clock, not only from the loss signal: a holder that froze past
/// its validity deadline (a stopped process, a starved runtime) reads `false` as soon
/// as it runs again, before its renewal driver has had a turn to end the lease.
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
/// # Ok::<(), leasehold_core::Error>(()) }).unwrap();
/// # fn tokio_test_block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f) }
/// ```
#[derive(Clone)]
pub struct Validity {
    shared: Arc<LeaseShared>,
}

impl Validity {
    pub(crate) fn new(shared: Arc<LeaseShared>) -> Self {
        Self { shared }
    }

    /// True if the lease has not ended and its validity deadline is ahead (as
    /// [`crate::Lease::is_valid`]). A `true` answer can be stale by the time work runs:
    /// the fence decides.
    pub fn is_valid(&self) -> bool {
        self.shared.is_valid()
    }

    /// Until when the holder may trust the lease (as [`crate::Lease::valid_until`]).
    pub fn valid_until(&self) -> Instant {
        self.shared.valid_until_capped()
    }
}

impl fmt::Debug for Validity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Validity")
            .field("lease", &self.shared.name)
            .field("token", &self.shared.token)
            .field("valid", &self.is_valid())
            .finish()
    }
}
