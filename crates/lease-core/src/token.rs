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
/// # An exhausted counter
/// The highest token is [`FencingToken::MAX`] (`i64::MAX - 1`), on every store: one
/// below the largest value each of them can keep (a SQL `BIGINT`, a Redis integer),
/// because `i64::MAX` itself is what an out-of-range value becomes when a store clamps it
/// (MySQL outside strict mode), and because a store's own `+ 1` on a token then never
/// overflows its column. A grant that
/// would issue a token above it is refused with [`crate::Error::TokensExhausted`]
/// (non-retryable, nothing changed): a name whose record shows `MAX` is never granted
/// to a new holder again, since the only token left to give would repeat one a
/// resource may have seen. The holder of `MAX` itself renews and releases as usual. A
/// token above `MAX` read from any store was written by someone else and is
/// [`crate::Error::CorruptRecord`] on every path.
///
/// ```
/// use leasehold_core::FencingToken;
/// let t = FencingToken::new(411);
/// assert!(t.next() > t);
/// assert_eq!(t.to_string(), "411");
/// assert_eq!(t.get(), 411);
/// assert_eq!(FencingToken::MAX.get(), i64::MAX as u64 - 1);
/// assert_eq!(FencingToken::new(i64::MAX as u64 - 2).checked_next(), Some(FencingToken::MAX));
/// assert_eq!(FencingToken::MAX.checked_next(), None);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default)]
#[serde(transparent)]
pub struct FencingToken(u64);

impl FencingToken {
    /// The high-water mark of a resource that has never seen a token.
    pub const ZERO: FencingToken = FencingToken(0);

    /// The token of the first grant of a lease name.
    pub const FIRST: FencingToken = FencingToken(1);

    /// The highest token a store issues or keeps: `i64::MAX - 1` (see
    /// [the type's docs](FencingToken#an-exhausted-counter)).
    pub const MAX: FencingToken = FencingToken(0x7fff_ffff_ffff_fffe);

    /// Wraps a raw value (as read back from a store or a resource).
    pub const fn new(value: u64) -> Self {
        Self(value)
    }

    /// The raw value.
    pub const fn get(self) -> u64 {
        self.0
    }

    /// The token a change of holder issues after this one, or `None` at (or above)
    /// [`FencingToken::MAX`]: the counter is exhausted. Grants use this.
    #[must_use]
    pub const fn checked_next(self) -> Option<Self> {
        if self.0 < Self::MAX.0 {
            Some(Self(self.0 + 1))
        } else {
            None
        }
    }

    /// The token after this one, saturating at [`FencingToken::MAX`] (for comparisons
    /// in tests and tools; a grant never issues a token twice, it uses
    /// [`FencingToken::checked_next`]).
    #[must_use]
    pub const fn next(self) -> Self {
        match self.checked_next() {
            Some(t) => t,
            None => Self::MAX,
        }
    }

    /// True when no token may follow this one ([`FencingToken::MAX`] or above).
    pub const fn is_exhausted(self) -> bool {
        self.0 >= Self::MAX.0
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
