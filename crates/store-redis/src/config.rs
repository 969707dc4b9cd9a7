//! Options of a [`crate::RedisStore`] and the key layout they produce.

use std::fmt;
use std::time::Duration;

use leasehold_core::{Error, LeaseName, Result};

/// Options of a [`crate::RedisStore`]; `Default` is right for most uses.
#[derive(Clone)]
pub struct RedisConfig {
    /// Prepended to every key and channel the store uses (default `"leasehold:"`), so
    /// several applications can share one Redis. At most [`RedisConfig::MAX_PREFIX_LEN`]
    /// bytes, without `{` or `}` (the lease name is the key's hash tag).
    pub key_prefix: String,
    /// A client for a dedicated pub/sub connection. With it, a release publishes on the
    /// lease's channel and [`leasehold_core::store::CasStore::wait_for_change`] wakes a waiter at once
    /// ([`leasehold_core::store::Capabilities::notifies_waiters`] is then true); without it waiters
    /// poll with jittered backoff. [`crate::RedisStore::connect`] fills it in.
    pub notify_client: Option<redis::Client>,
    /// Upper bound on one script call, on top of the connection's own response timeout
    /// (default 5 s). A write that runs out of time is
    /// [`Error::Indeterminate`](leasehold_core::Error::Indeterminate).
    pub request_timeout: Option<Duration>,
    /// Upper bound on [`crate::RedisStore::connect`] establishing its connection
    /// (default 3 s): a refused or silent server gives
    /// [`Error::Unavailable`](leasehold_core::Error::Unavailable) within it, and each
    /// reconnection attempt of the connection manager later is bounded by it too.
    pub connect_timeout: Duration,
}

impl RedisConfig {
    /// The longest key prefix accepted, in bytes.
    pub const MAX_PREFIX_LEN: usize = 100;

    /// The default key prefix.
    pub const DEFAULT_PREFIX: &'static str = "leasehold:";

    /// The default bound on one script call.
    pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

    /// The default bound on connecting.
    pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

    /// This config with another key prefix.
    #[must_use]
    pub fn with_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.key_prefix = prefix.into();
        self
    }

    /// This config with another bound on connecting ([`RedisConfig::connect_timeout`]).
    #[must_use]
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// This config with a pub/sub client for waiters.
    #[must_use]
    pub fn with_notify_client(mut self, client: redis::Client) -> Self {
        self.notify_client = Some(client);
        self
    }

    pub(crate) fn validate(&self) -> Result<()> {
        if self.key_prefix.len() > Self::MAX_PREFIX_LEN {
            return Err(Error::invalid(
                "redis key prefix",
                format!("longer than {} bytes", Self::MAX_PREFIX_LEN),
            ));
        }
        if self.key_prefix.contains(['{', '}']) {
            return Err(Error::invalid(
                "redis key prefix",
                "must not contain '{' or '}' (the lease name is the hash tag)",
            ));
        }
        if self.request_timeout.is_some_and(|d| d.is_zero()) {
            return Err(Error::invalid("request_timeout", "must be above zero"));
        }
        if self.connect_timeout.is_zero() {
            return Err(Error::invalid("connect_timeout", "must be above zero"));
        }
        Ok(())
    }
}

impl Default for RedisConfig {
    fn default() -> Self {
        Self {
            key_prefix: Self::DEFAULT_PREFIX.to_owned(),
            notify_client: None,
            request_timeout: Some(Self::DEFAULT_REQUEST_TIMEOUT),
            connect_timeout: Self::DEFAULT_CONNECT_TIMEOUT,
        }
    }
}

impl fmt::Debug for RedisConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisConfig")
            .field("key_prefix", &self.key_prefix)
            .field("notify", &self.notify_client.is_some())
            .field("request_timeout", &self.request_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .finish()
    }
}

/// Where the store keeps a lease name's data (`P` is the key prefix, `N` the name):
///
/// | key / channel   | type    | expiry             | holds                                   |
/// |-----------------|---------|--------------------|-----------------------------------------|
/// | `P{N}`          | hash    | `PX` = the TTL     | the record: `h` holder (`""` = vacant), `t` token, `ttl` ms, `w` wall expiry ms (optional), `v` version |
/// | `P{N}:meta`     | hash    | none (persistent)  | `f` the highest token issued, `n` the write counter (raised by every write and delete), `e` the epoch (server time when created) |
/// | `P{N}:released` | channel | —                  | a message on each release or delete: the version after it (`e:n`) |
///
/// Versions are `e:n`: the write counter never goes back while the meta hash lives, and
/// a recreated meta hash (after a restart without persistence) gets a new epoch, so a
/// version is never reused. The name in braces is the Redis Cluster hash tag: both keys
/// of a name live in one slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyLayout {
    prefix: String,
}

impl KeyLayout {
    /// The layout under `prefix` (validated by [`crate::RedisStore::new`]).
    pub(crate) fn new(prefix: &str) -> Self {
        Self {
            prefix: prefix.to_owned(),
        }
    }

    /// The key prefix.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The key of the lease record of `name`.
    pub fn record(&self, name: &LeaseName) -> String {
        self.key(name, "")
    }

    /// The key of the persistent counters (token, version) of `name`.
    pub fn meta(&self, name: &LeaseName) -> String {
        self.key(name, ":meta")
    }

    /// The pub/sub channel announcing releases of `name`.
    pub fn channel(&self, name: &LeaseName) -> String {
        self.key(name, ":released")
    }

    /// `P{N}` followed by `suffix`, built in one allocation (every call of the store
    /// names two or three of these).
    fn key(&self, name: &LeaseName, suffix: &str) -> String {
        let name = name.as_str();
        let mut key = String::with_capacity(self.prefix.len() + name.len() + 2 + suffix.len());
        key.push_str(&self.prefix);
        key.push('{');
        key.push_str(name);
        key.push('}');
        key.push_str(suffix);
        key
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_of_different_names_never_collide() {
        let k = KeyLayout::new("p:");
        let a = LeaseName::new("a").expect("name");
        let a_meta = LeaseName::new("a:meta").expect("name");
        assert_eq!(k.record(&a), "p:{a}");
        assert_eq!(k.meta(&a), "p:{a}:meta");
        assert_eq!(k.channel(&a), "p:{a}:released");
        assert_ne!(k.record(&a_meta), k.meta(&a));
        assert_ne!(k.meta(&a_meta), k.meta(&a));
    }

    #[test]
    fn prefix_rules() {
        assert!(RedisConfig::default().validate().is_ok());
        assert!(RedisConfig::default().with_prefix("").validate().is_ok());
        assert!(RedisConfig::default().with_prefix("a{b").validate().is_err());
        assert!(RedisConfig::default().with_prefix("x".repeat(101)).validate().is_err());
        let zero = RedisConfig {
            request_timeout: Some(Duration::ZERO),
            ..RedisConfig::default()
        };
        assert!(zero.validate().is_err());
        let zero = RedisConfig::default().with_connect_timeout(Duration::ZERO);
        assert!(zero.validate().is_err());
    }
}
