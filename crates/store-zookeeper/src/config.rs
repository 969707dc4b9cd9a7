//! Options of a [`ZooKeeperStore`](crate::ZooKeeperStore): where its znodes live and how
//! long a request may take.

use std::time::Duration;

use leasehold_core::{Error, Result};

/// Options of a [`ZooKeeperStore`](crate::ZooKeeperStore); `Default` is right for most uses.
///
/// ```
/// use std::time::Duration;
/// use leasehold_zookeeper::ZooKeeperConfig;
/// let config = ZooKeeperConfig::new("/jobs/leases")?.with_request_timeout(Duration::from_secs(2))?;
/// assert_eq!(config.root(), "/jobs/leases");
/// assert!(ZooKeeperConfig::new("no-slash").is_err());
/// assert!(ZooKeeperConfig::new("/trailing/").is_err());
/// # Ok::<(), leasehold_core::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZooKeeperConfig {
    root: String,
    request_timeout: Duration,
    tick_time: Option<Duration>,
}

impl ZooKeeperConfig {
    /// The default root znode.
    pub const DEFAULT_ROOT: &'static str = "/leasehold";
    /// The default time a request may take before its outcome is declared unknown.
    pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
    /// The longest root path accepted, in bytes.
    pub const MAX_ROOT_LEN: usize = 200;

    /// Options with every znode under `root` (for example `"/leasehold"`).
    ///
    /// The root is an absolute znode path of 2 to [`ZooKeeperConfig::MAX_ROOT_LEN`]
    /// bytes: `/`-separated segments of the characters a [`leasehold_core::LeaseName`]
    /// allows except `/` (ASCII letters, digits and `- _ . : @ = #`), no empty segment,
    /// no `.` or `..` segment, no trailing `/`. [`crate::ZooKeeperStore::provision`]
    /// creates it.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a badly formed root.
    pub fn new(root: impl Into<String>) -> Result<Self> {
        let root = root.into();
        validate_root(&root)?;
        Ok(Self {
            root,
            ..Self::default()
        })
    }

    /// Sets how long one request to ZooKeeper may take. A write whose answer has not
    /// arrived by then fails with [`Error::Indeterminate`] (it may have applied); a read
    /// fails with [`Error::Unavailable`]. A session handshake is bounded by it too; one
    /// that gets no answer takes at most a fifth of it more (and at most a second) to
    /// say why, from one connection attempt to each server ([`Error::Unavailable`]).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a zero timeout or one longer than an hour.
    pub fn with_request_timeout(mut self, timeout: Duration) -> Result<Self> {
        self.request_timeout = leasehold_core::store::request_timeout(timeout)?;
        Ok(self)
    }

    /// Tells the store the ensemble's `tickTime` (its `zoo.cfg`), so that a lease is
    /// trusted for longer. A lease is trusted only as long as the ensemble's leader
    /// surely keeps its session, and a follower reports the heartbeats it answers to
    /// the leader once per half tick: the store counts three quarters of a tick for
    /// that report. Without this setting it assumes the longest tick the session's
    /// timeout allows (half of it, under ZooKeeper's default `minSessionTimeout` of two
    /// ticks): by this rule a 1 s lease on a 100 ms-tick ensemble is then trusted 300 ms
    /// less (derived; docs/STORES.md has the measured trust with the tick). Never set a tick shorter than the ensemble's: a lease could
    /// then be trusted after the leader expired its session.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a zero tick or one longer than a minute.
    pub fn with_tick_time(mut self, tick: Duration) -> Result<Self> {
        if tick.is_zero() || tick > Duration::from_secs(60) {
            return Err(Error::invalid(
                "ZooKeeper tickTime",
                format!("{tick:?} is not between 1 ms and 60 s"),
            ));
        }
        self.tick_time = Some(tick);
        Ok(self)
    }

    /// The ensemble's tick, if it was set ([`ZooKeeperConfig::with_tick_time`]).
    pub fn tick_time(&self) -> Option<Duration> {
        self.tick_time
    }

    /// The root znode.
    pub fn root(&self) -> &str {
        &self.root
    }

    /// The per-request timeout.
    pub fn request_timeout(&self) -> Duration {
        self.request_timeout
    }
}

impl Default for ZooKeeperConfig {
    fn default() -> Self {
        Self {
            root: Self::DEFAULT_ROOT.to_owned(),
            request_timeout: Self::DEFAULT_REQUEST_TIMEOUT,
            tick_time: None,
        }
    }
}

fn validate_root(root: &str) -> Result<()> {
    let bad = |reason: String| Err(Error::invalid("root znode", reason));
    if root.len() < 2 || root.len() > ZooKeeperConfig::MAX_ROOT_LEN {
        return bad(format!(
            "{} bytes is not between 2 and {}",
            root.len(),
            ZooKeeperConfig::MAX_ROOT_LEN
        ));
    }
    let Some(rest) = root.strip_prefix('/') else {
        return bad(format!("{root:?} does not start with '/'"));
    };
    for segment in rest.split('/') {
        if segment.is_empty() || segment == "." || segment == ".." {
            return bad(format!("{root:?} has an empty, '.' or '..' segment"));
        }
        if let Some(c) = segment
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':' | '@' | '=' | '#')))
        {
            return bad(format!("character {c:?} is not allowed"));
        }
    }
    if rest == "zookeeper" || rest.starts_with("zookeeper/") {
        return bad("/zookeeper is ZooKeeper's own subtree".to_owned());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roots() {
        for ok in ["/a", "/svc/leases", "/x.y/z-1"] {
            assert!(ZooKeeperConfig::new(ok).is_ok(), "{ok:?} refused");
        }
        for bad in [
            "",
            "/",
            "a",
            "/a/",
            "//a",
            "/a//b",
            "/a b",
            "/é",
            "/.",
            "/a/..",
            "/zookeeper",
            "/zookeeper/q",
        ] {
            assert!(ZooKeeperConfig::new(bad).is_err(), "{bad:?} accepted");
        }
        assert!(ZooKeeperConfig::new(format!("/{}", "x".repeat(200))).is_err());
        assert_eq!(ZooKeeperConfig::default().root(), "/leasehold");
    }

    #[test]
    fn timeouts() {
        let c = ZooKeeperConfig::default();
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
