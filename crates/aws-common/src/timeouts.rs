//! The bound a store puts on each of its own requests, on top of the client's timeouts.

use std::time::Duration;

use aws_smithy_types::timeout::TimeoutConfig;
use leasehold_core::{Error, Result};

/// The default bound on one request a store sends (send and answer): lease requests take
/// milliseconds to tens of milliseconds on S3 and DynamoDB, and a renewal that hangs
/// longer than about a quarter of the TTL risks the lease.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(3);

/// Checks a request bound given to a store's config.
///
/// # Errors
/// [`Error::InvalidInput`] for zero.
pub fn request_timeout(timeout: Duration) -> Result<Duration> {
    if timeout.is_zero() {
        return Err(Error::invalid("request timeout", "must be above zero"));
    }
    Ok(timeout)
}

/// The client's timeouts (`base`) with the operation and attempt timeouts replaced by
/// `request_timeout`; the client's connect timeout stays.
pub fn bounded(base: Option<&TimeoutConfig>, request_timeout: Duration) -> TimeoutConfig {
    let mut t = base.map_or_else(TimeoutConfig::builder, TimeoutConfig::to_builder);
    t.set_operation_timeout(Some(request_timeout));
    t.set_operation_attempt_timeout(Some(request_timeout));
    t.build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_store_bound_replaces_the_operation_timeouts_and_keeps_connect() {
        assert!(request_timeout(Duration::ZERO).is_err());
        let base = TimeoutConfig::builder().connect_timeout(Duration::from_secs(1)).build();
        let t = bounded(Some(&base), Duration::from_millis(300));
        assert_eq!(t.connect_timeout(), Some(Duration::from_secs(1)));
        assert_eq!(t.operation_timeout(), Some(Duration::from_millis(300)));
        assert_eq!(t.operation_attempt_timeout(), Some(Duration::from_millis(300)));
        assert_eq!(
            bounded(None, Duration::from_secs(2)).operation_timeout(),
            Some(Duration::from_secs(2))
        );
    }
}
