//! How a waiter on a store that cannot push its changes (S3, DynamoDB) looks again.

use std::time::Duration;

use leasehold_core::store::Wait;
use leasehold_core::{Error, Result};

/// The default longest wait between two looks of a waiter in
/// [`leasehold_core::LeaseClient::acquire`]: a release is seen within about a second,
/// at one read request per waiter per second: a handoff after a release stays within
/// about a second, while a waiter costs 86,400 requests a day at most. A holder that
/// dies without releasing is still only replaced after its observation window (the
/// TTL), however often a waiter looks.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(1);

/// Checks a poll interval given to a store's config.
///
/// # Errors
/// [`Error::InvalidInput`] for zero (a waiter would not wait at all).
pub fn poll_interval(interval: Duration) -> Result<Duration> {
    if interval.is_zero() {
        return Err(Error::invalid("poll interval", "must be above zero"));
    }
    Ok(interval)
}

/// A polling store's wait: until the caller's time to look again, or the poll
/// interval, whichever comes first.
pub async fn poll(wait: Wait, interval: Duration) {
    tokio::time::sleep(wait.after().min(interval)).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_poll_ends_at_the_interval_or_the_callers_time() {
        assert!(poll_interval(Duration::ZERO).is_err());
        let start = tokio::time::Instant::now();
        poll(Wait::Claim(Duration::from_secs(30)), Duration::from_secs(1)).await;
        assert_eq!(start.elapsed(), Duration::from_secs(1));
        poll(Wait::Change(Duration::from_millis(200)), Duration::from_secs(1)).await;
        assert_eq!(start.elapsed(), Duration::from_millis(1200));
    }
}
