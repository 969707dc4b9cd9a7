//! Validated lease durations.

use std::time::Duration;

use crate::{Error, Result};

/// A lease's time to live: how long a grant or renewal stays valid without another.
///
/// Accepted: [`Ttl::MIN`] to [`Ttl::MAX`], in whole milliseconds (every store keeps
/// milliseconds).
///
/// ```
/// use std::time::Duration;
/// use leasehold_core::Ttl;
/// assert!(Ttl::new(Duration::from_secs(30)).is_ok());
/// assert!(Ttl::new(Duration::ZERO).is_err());
/// assert!(Ttl::new(Duration::from_secs(30 * 86_400)).is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ttl(Duration);

impl Ttl {
    /// The shortest TTL accepted: 10 ms.
    pub const MIN: Duration = Duration::from_millis(10);
    /// The longest TTL accepted: 7 days.
    pub const MAX: Duration = Duration::from_secs(7 * 86_400);

    /// Validates a TTL.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] outside [`Ttl::MIN`]..=[`Ttl::MAX`] or with a
    /// sub-millisecond part.
    pub fn new(ttl: Duration) -> Result<Self> {
        if ttl < Self::MIN {
            return Err(Error::invalid(
                "ttl",
                format!("{ttl:?} is shorter than {:?}", Self::MIN),
            ));
        }
        if ttl > Self::MAX {
            return Err(Error::invalid(
                "ttl",
                format!("{ttl:?} is longer than {:?} (7 days)", Self::MAX),
            ));
        }
        if ttl.subsec_nanos() % 1_000_000 != 0 {
            return Err(Error::invalid("ttl", "must be a whole number of milliseconds"));
        }
        Ok(Self(ttl))
    }

    /// A TTL from milliseconds.
    ///
    /// # Errors
    /// As [`Ttl::new`].
    pub fn from_millis(ms: u64) -> Result<Self> {
        Self::new(Duration::from_millis(ms))
    }

    /// The duration.
    pub fn get(self) -> Duration {
        self.0
    }

    /// Whole milliseconds (always fits: at most 7 days).
    pub fn as_millis(self) -> u64 {
        u64::try_from(self.0.as_millis()).unwrap_or(u64::MAX)
    }
}

impl From<Ttl> for Duration {
    fn from(t: Ttl) -> Duration {
        t.0
    }
}
