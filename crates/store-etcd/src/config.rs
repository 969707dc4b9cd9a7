//! Options of an [`EtcdStore`](crate::EtcdStore): where its keys live and how long a
//! request may take.

use std::time::Duration;

use leasehold_core::{Error, Result};

/// Options of an [`EtcdStore`](crate::EtcdStore); `Default` is right for most uses.
///
/// ```
/// use std::time::Duration;
/// use leasehold_etcd::EtcdConfig;
/// let config = EtcdConfig::new("jobs/leases/")?.with_request_timeout(Duration::from_secs(2))?;
/// assert_eq!(config.prefix(), "jobs/leases/");
/// assert!(EtcdConfig::new("bad prefix!").is_err());
/// # Ok::<(), leasehold_core::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdConfig {
    prefix: String,
    request_timeout: Duration,
}

impl EtcdConfig {
    /// The default key prefix.
    pub const DEFAULT_PREFIX: &'static str = "leasehold/";
    /// The default time a request may take before its outcome is declared unknown.
    pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
    /// The longest prefix accepted, in bytes.
    pub const MAX_PREFIX_LEN: usize = 200;

    /// Options with keys under `prefix` (for example `"leasehold/"`).
    ///
    /// The prefix is 1 to [`EtcdConfig::MAX_PREFIX_LEN`] bytes of the characters a
    /// [`leasehold_core::LeaseName`] allows (ASCII letters, digits and `- _ . : / @ = #`).
    /// That keeps every key this store writes in a range no other name can fall into
    /// (see the crate docs, "Keys").
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for an empty, too long or badly formed prefix.
    pub fn new(prefix: impl Into<String>) -> Result<Self> {
        let prefix = prefix.into();
        validate_prefix(&prefix)?;
        Ok(Self {
            prefix,
            request_timeout: Self::DEFAULT_REQUEST_TIMEOUT,
        })
    }

    /// Sets how long one request to etcd may take. A write whose answer has not arrived
    /// by then fails with [`Error::Indeterminate`] (it may have applied); a read fails
    /// with [`Error::Unavailable`].
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a zero timeout or one longer than an hour.
    pub fn with_request_timeout(mut self, timeout: Duration) -> Result<Self> {
        self.request_timeout = leasehold_core::store::request_timeout(timeout)?;
        Ok(self)
    }

    /// The key prefix.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The per-request timeout.
    pub fn request_timeout(&self) -> Duration {
        self.request_timeout
    }
}

impl Default for EtcdConfig {
    fn default() -> Self {
        Self {
            prefix: Self::DEFAULT_PREFIX.to_owned(),
            request_timeout: Self::DEFAULT_REQUEST_TIMEOUT,
        }
    }
}

fn validate_prefix(prefix: &str) -> Result<()> {
    if prefix.is_empty() {
        return Err(Error::invalid("key prefix", "must not be empty"));
    }
    if prefix.len() > EtcdConfig::MAX_PREFIX_LEN {
        return Err(Error::invalid(
            "key prefix",
            format!("{} bytes is longer than {}", prefix.len(), EtcdConfig::MAX_PREFIX_LEN),
        ));
    }
    if let Some(c) = prefix
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':' | '/' | '@' | '=' | '#')))
    {
        return Err(Error::invalid("key prefix", format!("character {c:?} is not allowed")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes() {
        assert!(EtcdConfig::new("a").is_ok());
        assert!(EtcdConfig::new("svc/leases/").is_ok());
        for bad in ["", "a b", "a!", "é", "a\0b"] {
            assert!(EtcdConfig::new(bad).is_err(), "{bad:?} accepted");
        }
        assert!(EtcdConfig::new("x".repeat(201)).is_err());
        assert_eq!(EtcdConfig::default().prefix(), "leasehold/");
    }

    #[test]
    fn timeouts() {
        let c = EtcdConfig::default();
        assert!(c.clone().with_request_timeout(Duration::ZERO).is_err());
        assert!(c.clone().with_request_timeout(Duration::from_secs(7200)).is_err());
        assert_eq!(
            c.with_request_timeout(Duration::from_millis(300))
                .ok()
                .map(|c| c.request_timeout()),
            Some(Duration::from_millis(300))
        );
    }
}
