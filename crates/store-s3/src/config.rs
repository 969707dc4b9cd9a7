//! Where the store keeps its records (bucket, key prefix), how lease names become object
//! keys, and the request options the store applies to every call.

use std::time::Duration;

use aws_sdk_s3::config::timeout::TimeoutConfig;
use leasehold_core::{Error, LeaseName, MAX_NAME_LEN, Result};

/// The longest S3 object key, in bytes.
pub const MAX_KEY_LEN: usize = 1024;

/// The longest key prefix accepted, in bytes: every valid lease name
/// ([`leasehold_core::MAX_NAME_LEN`] bytes) must still fit under it, after the `/`.
pub const MAX_PREFIX_LEN: usize = MAX_KEY_LEN - 1 - MAX_NAME_LEN;

/// The default bound on one S3 request (send and answer): the bound every AWS store
/// of leasehold puts on its requests.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = leasehold_aws::DEFAULT_REQUEST_TIMEOUT;

/// The default longest wait between two looks of a waiter in `acquire` (S3 cannot push
/// a release): see [`S3Config::with_poll_interval`].
pub const DEFAULT_POLL_INTERVAL: Duration = leasehold_aws::DEFAULT_POLL_INTERVAL;

/// The default number of times a conditional write is re-sent after S3 answered
/// `409 ConditionalRequestConflict` (another conditional write on the key in flight).
pub const DEFAULT_CONFLICT_RETRIES: u32 = 4;

/// The default first wait before re-sending after a 409 (doubled each time, jittered).
pub const DEFAULT_CONFLICT_BACKOFF: Duration = Duration::from_millis(20);

/// Where an [`crate::S3Store`] keeps its records, and how it sends requests.
///
/// ```
/// use leasehold_s3::S3Config;
/// let config = S3Config::new("my-bucket", "leases/prod")?;
/// let name = leasehold_core::LeaseName::new("payouts:2026-11-30")?;
/// assert_eq!(config.key_for(&name), "leases/prod/payouts:2026-11-30");
/// assert!(S3Config::new("my-bucket", "a/../b").is_err());
/// assert!(S3Config::new("Not_A_Bucket", "leases").is_err());
/// # Ok::<(), leasehold_core::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct S3Config {
    bucket: String,
    prefix: String,
    request_timeout: Duration,
    poll_interval: Duration,
    conflict_retries: u32,
    conflict_backoff: Duration,
}

impl S3Config {
    /// Records under `<prefix>/<lease name>` in `bucket`.
    ///
    /// The bucket must be a DNS-compatible S3 bucket name (3 to 63 bytes of lowercase
    /// letters, digits, `.` and `-`, starting and ending with a letter or digit, no `..`).
    /// The prefix follows the lease-name rules (ASCII letters, digits and `- _ . : / @ = #`,
    /// `/`-separated segments, none empty, `.` or `..`, no leading or trailing `/`), up to
    /// [`MAX_PREFIX_LEN`] bytes, so that every key stays within S3's 1024 bytes.
    /// Every object under the prefix is read as a lease record: give the store a prefix
    /// of its own.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for an invalid bucket name or prefix.
    pub fn new(bucket: impl Into<String>, prefix: impl Into<String>) -> Result<Self> {
        let bucket = bucket.into();
        let prefix = prefix.into();
        validate_bucket(&bucket)?;
        validate_key_path("key prefix", &prefix, MAX_PREFIX_LEN)?;
        Ok(Self {
            bucket,
            prefix,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            poll_interval: DEFAULT_POLL_INTERVAL,
            conflict_retries: DEFAULT_CONFLICT_RETRIES,
            conflict_backoff: DEFAULT_CONFLICT_BACKOFF,
        })
    }

    /// Bounds every request the store sends (default [`DEFAULT_REQUEST_TIMEOUT`]). It
    /// replaces the client's operation and attempt timeouts for the store's requests; the
    /// client's connect timeout stays. A write that times out is
    /// [`Error::Indeterminate`]: keep this well below the lease TTL.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a zero timeout.
    pub fn with_request_timeout(mut self, timeout: Duration) -> Result<Self> {
        self.request_timeout = leasehold_aws::request_timeout(timeout)?;
        Ok(self)
    }

    /// The longest a waiter in [`leasehold_core::LeaseClient::acquire`] waits before it
    /// looks again (default [`DEFAULT_POLL_INTERVAL`], 1 s). S3 cannot push a release, so
    /// this is how long a released lease may stay free before a waiter sees it, and each
    /// waiter costs one `GET` per interval while the lease is held. A holder that dies
    /// without releasing is replaced after its observation window (the TTL) whatever
    /// the interval.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for zero.
    pub fn with_poll_interval(mut self, interval: Duration) -> Result<Self> {
        self.poll_interval = leasehold_aws::poll_interval(interval)?;
        Ok(self)
    }

    /// The longest wait between two looks of a waiter.
    pub fn poll_interval(&self) -> Duration {
        self.poll_interval
    }

    /// How many times a conditional write is re-sent after `409 ConditionalRequestConflict`
    /// before the store gives up with [`Error::Unavailable`] (default
    /// [`DEFAULT_CONFLICT_RETRIES`]), and the first wait between them (doubled each time,
    /// with jitter).
    #[must_use]
    pub fn with_conflict_retries(mut self, retries: u32, first_backoff: Duration) -> Self {
        self.conflict_retries = retries;
        self.conflict_backoff = first_backoff;
        self
    }

    /// The bucket.
    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// The key prefix (without the trailing `/`).
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The bound on one request.
    pub fn request_timeout(&self) -> Duration {
        self.request_timeout
    }

    /// Re-sends after a 409, and the first wait between them.
    pub fn conflict_retry_policy(&self) -> (u32, Duration) {
        (self.conflict_retries, self.conflict_backoff)
    }

    /// The object key of a lease: `<prefix>/<name>`. Always at most [`MAX_KEY_LEN`]
    /// bytes (the prefix length was checked against the longest name).
    pub fn key_for(&self, name: &LeaseName) -> String {
        format!("{}/{}", self.prefix, name.as_str())
    }

    /// The timeouts the store applies on top of the client's own.
    pub(crate) fn timeouts(&self, base: Option<&TimeoutConfig>) -> TimeoutConfig {
        leasehold_aws::bounded(base, self.request_timeout)
    }
}

/// Checks an S3 bucket name (the DNS-compatible rules of general purpose buckets).
fn validate_bucket(bucket: &str) -> Result<()> {
    let bad = |reason: &str| Err(Error::invalid("bucket name", format!("{bucket:?}: {reason}")));
    if !(3..=63).contains(&bucket.len()) {
        return bad("must be 3 to 63 bytes long");
    }
    if let Some(c) = bucket
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '-')))
    {
        return bad(&format!(
            "character {c:?} is not allowed (lowercase letters, digits, '.', '-')"
        ));
    }
    let edge_ok = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    if !edge_ok(bucket.chars().next()) || !edge_ok(bucket.chars().last()) {
        return bad("must start and end with a letter or digit");
    }
    if bucket.contains("..") {
        return bad("must not contain '..'");
    }
    Ok(())
}

/// Checks a key path (a prefix or a manifest key): lease-name characters, `/`-separated
/// non-empty segments that are not `.` or `..`, no leading or trailing `/`.
pub(crate) fn validate_key_path(what: &'static str, path: &str, max: usize) -> Result<()> {
    if path.is_empty() {
        return Err(Error::invalid(what, "must not be empty"));
    }
    if path.len() > max {
        return Err(Error::invalid(
            what,
            format!("{} bytes is longer than {max}", path.len()),
        ));
    }
    if let Some(c) = path
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':' | '/' | '@' | '=' | '#')))
    {
        return Err(Error::invalid(what, format!("character {c:?} is not allowed")));
    }
    for segment in path.split('/') {
        match segment {
            "" => return Err(Error::invalid(what, "empty path segment (leading, trailing or '//')")),
            "." | ".." => return Err(Error::invalid(what, "'.' and '..' segments are not allowed")),
            _ => {}
        }
    }
    Ok(())
}

/// A client for an S3-compatible emulator or local server (moto, MinIO) at `endpoint`:
/// static dummy credentials, region `us-east-1`, path-style addressing, a 2 s connect
/// timeout and [`DEFAULT_REQUEST_TIMEOUT`] per operation. It never reads the environment,
/// profiles or the instance metadata service.
///
/// For AWS itself build the client from `aws_config::load_defaults` instead (see the
/// crate documentation).
///
/// ```
/// let client = leasehold_s3::local_client("http://127.0.0.1:55000");
/// assert_eq!(client.config().region().map(|r| r.as_ref()), Some("us-east-1"));
/// ```
pub fn local_client(endpoint: &str) -> aws_sdk_s3::Client {
    leasehold_aws::local_client!(aws_sdk_s3, endpoint, force_path_style(true))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes() {
        for ok in ["leases", "a/b/c", "x:y@z=1#2", &"p".repeat(MAX_PREFIX_LEN)] {
            assert!(S3Config::new("bucket-1", ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "/a",
            "a/",
            "a//b",
            "a/./b",
            "..",
            "a b",
            "a%2Fb",
            "ü",
            &"p".repeat(MAX_PREFIX_LEN + 1),
        ] {
            assert!(
                matches!(S3Config::new("bucket-1", bad), Err(Error::InvalidInput { .. })),
                "{bad:?} accepted"
            );
        }
    }

    #[test]
    fn buckets() {
        for ok in ["abc", "my.bucket-1", &"b".repeat(63)] {
            assert!(S3Config::new(ok, "p").is_ok(), "{ok}");
        }
        for bad in ["ab", "-abc", "abc-", "a..b", "ABC", "a_b", "a/b", &"b".repeat(64)] {
            assert!(
                matches!(S3Config::new(bad, "p"), Err(Error::InvalidInput { .. })),
                "{bad:?} accepted"
            );
        }
    }

    #[test]
    fn longest_name_under_longest_prefix_fits_a_key() {
        let config = S3Config::new("bucket-1", "p".repeat(MAX_PREFIX_LEN)).expect("config");
        let name = LeaseName::new("n".repeat(MAX_NAME_LEN)).expect("name");
        assert_eq!(config.key_for(&name).len(), MAX_KEY_LEN);
    }

    #[test]
    fn zero_timeout_is_refused() {
        let config = S3Config::new("bucket-1", "p").expect("config");
        assert!(config.clone().with_request_timeout(Duration::ZERO).is_err());
        let config = config
            .with_request_timeout(Duration::from_millis(300))
            .expect("timeout");
        assert_eq!(
            config.timeouts(None).operation_timeout(),
            Some(Duration::from_millis(300))
        );
    }
}
