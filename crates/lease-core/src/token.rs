//! The fencing token.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A fencing token: issued by the same atomic write that grants a lease, strictly
/// greater each time the holder of that lease name changes, unchanged by renewal.
///
/// Tokens of *different* lease names are unrelated; compare only tokens of one name.
/// The first grant of a name carries token 1; 0 is never issued, so a resource can use
/// 0 as its initial high-water mark.
///
/// ```
/// use leasehold_core::FencingToken;
/// let t = FencingToken::new(411);
/// assert!(t.next() > t);
/// assert_eq!(t.to_string(), "411");
/// assert_eq!(t.get(), 411);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default)]
#[serde(transparent)]
pub struct FencingToken(u64);

impl FencingToken {
    /// The high-water mark of a resource that has never seen a token.
    pub const ZERO: FencingToken = FencingToken(0);

    /// The token of the first grant of a lease name.
    pub const FIRST: FencingToken = FencingToken(1);

    /// Wraps a raw value (as read back from a store or a resource).
    pub const fn new(value: u64) -> Self {
        Self(value)
    }

    /// The raw value.
    pub const fn get(self) -> u64 {
        self.0
    }

    /// The token a change of holder issues after this one (saturating: a lease name
    /// would need 2^64 takeovers to reach the end).
    #[must_use]
    pub const fn next(self) -> Self {
        Self(self.0.saturating_add(1))
    }

    /// The value as a signed 64-bit integer, for SQL `BIGINT` columns.
    ///
    /// # Errors
    /// [`crate::Error::InvalidInput`] if the token does not fit (above `i64::MAX`).
    pub fn to_i64(self) -> crate::Result<i64> {
        i64::try_from(self.0)
            .map_err(|_| crate::Error::invalid("fencing token", "does not fit in a signed 64-bit column"))
    }

    /// Reads a token from a signed 64-bit column.
    ///
    /// # Errors
    /// [`crate::Error::InvalidInput`] for a negative value.
    pub fn from_i64(value: i64) -> crate::Result<Self> {
        u64::try_from(value)
            .map(Self)
            .map_err(|_| crate::Error::invalid("fencing token", format!("negative value {value}")))
    }
}

impl fmt::Display for FencingToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl From<FencingToken> for u64 {
    fn from(t: FencingToken) -> u64 {
        t.0
    }
}
