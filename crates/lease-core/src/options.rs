//! Options of one acquire: the TTL, a cap on the hold, a timeout.

use std::time::Duration;

use crate::{Error, Result};

/// What [`LeaseClient::acquire_with`](crate::LeaseClient::acquire_with) and
/// [`LeaseClient::try_acquire_with`](crate::LeaseClient::try_acquire_with) ask for:
/// the TTL (as in `acquire(name, ttl)`), plus optional limits.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().unwrap().block_on(async {
/// use std::time::Duration;
/// use leasehold_core::{AcquireOptions, LeaseClient, LossCause, MemoryStore};
///
/// let client = LeaseClient::new(MemoryStore::new());
/// // Renewed every 10 s while held, but never held longer than two minutes.
/// let options = AcquireOptions::new(Duration::from_secs(30)).max_hold(Duration::from_secs(120));
/// let lease = client.acquire_with("reindex", &options).await?;
/// assert!(lease.hold_until().is_some());
/// // A run that is still busy at the cap is told to stop (then the record expires,
/// // or is freed at once when the guard is released or dropped).
/// assert_eq!(lease.lost().await, LossCause::MaxHoldReached);
/// assert!(!lease.is_valid());
/// # Ok::<(), leasehold_core::Error>(()) }).unwrap();
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct AcquireOptions {
    /// The lease TTL: the grant and every renewal hold it this long.
    pub ttl: Duration,
    /// The longest this grant is held, even while its holder is alive and the store
    /// answers, measured from when the grant's write was sent (when a write whose
    /// outcome was unknown turned out to have applied and a second write confirmed it,
    /// from when the first was sent). Past it the driver stops renewing, and the loss
    /// signal fires with [`crate::LossCause::MaxHoldReached`] before anyone else can
    /// take the lease over. The driver leaves the record to expire on its own (its TTL
    /// from the last renewal); renewals also stop as soon as the store keeps the grant
    /// until the cap anyway, so the lease becomes free at most one TTL after the cap,
    /// and at once if its guard is released or dropped (that writes the vacant record).
    /// `None`: the client's [`crate::ClientConfig::max_hold`].
    pub max_hold: Option<Duration>,
    /// For [`LeaseClient::acquire_with`](crate::LeaseClient::acquire_with): give up
    /// with [`Error::Timeout`] after this long (`None`, or a timeout too long for the
    /// clock to represent, such as `Duration::MAX`: wait as long as it takes).
    /// One attempt ([`LeaseClient::try_acquire_with`](crate::LeaseClient::try_acquire_with))
    /// does not wait, and ignores it.
    pub timeout: Option<Duration>,
}

impl AcquireOptions {
    /// The options of `acquire(name, ttl)`: no cap of its own, no timeout.
    pub fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            max_hold: None,
            timeout: None,
        }
    }

    /// Sets [`AcquireOptions::max_hold`].
    #[must_use]
    pub fn max_hold(mut self, max_hold: Duration) -> Self {
        self.max_hold = Some(max_hold);
        self
    }

    /// Sets [`AcquireOptions::timeout`].
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }
}

/// A cap must be a positive duration.
pub(crate) fn check_max_hold(max_hold: Option<Duration>) -> Result<()> {
    if max_hold.is_some_and(|d| d.is_zero()) {
        return Err(Error::invalid("max_hold", "must be longer than zero"));
    }
    Ok(())
}
