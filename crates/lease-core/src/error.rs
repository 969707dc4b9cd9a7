//! The one error type of the library, with semantic kinds.
//!
//! Losing a race is never an error: it is an outcome ([`crate::store::CasOutcome::Conflict`],
//! [`crate::AcquireOutcome::Held`]). Errors say what happened to the *request*:
//! it was refused as invalid, it certainly did not happen ([`Error::Unavailable`]),
//! it may have happened ([`Error::Indeterminate`]), or the store is unusable.

use std::error::Error as StdError;

use crate::FencingToken;

/// A boxed error from a store driver, kept as the source of an [`Error`].
pub type BoxError = Box<dyn StdError + Send + Sync + 'static>;

/// Everything that can go wrong, by what the caller should do about it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The input was rejected before anything was sent: a bad lease name, holder id,
    /// TTL, identifier or configuration value. Nothing changed.
    #[error("invalid {what}: {reason}")]
    InvalidInput {
        /// Which input (for example `"lease name"`).
        what: &'static str,
        /// Why it was rejected.
        reason: String,
    },

    /// The store could not be reached or refused the request before applying it
    /// (connection refused, throttled, 5xx before the write). The write **did not
    /// happen**: retrying is safe.
    #[error("store unavailable: {message}")]
    Unavailable {
        /// What failed.
        message: String,
        /// The driver's error.
        #[source]
        source: Option<BoxError>,
    },

    /// The request was sent but no answer came back (timeout, connection lost after
    /// sending). The write **may have happened**. For a lease write, re-read the record
    /// before acting; for a fenced write, treat the resource as possibly written.
    #[error("outcome unknown: {message}")]
    Indeterminate {
        /// What failed.
        message: String,
        /// The driver's error.
        #[source]
        source: Option<BoxError>,
    },

    /// A stored lease record could not be read as one. It is never treated as free.
    #[error("corrupt lease record for {name:?}: {reason}")]
    CorruptRecord {
        /// The lease name whose record is corrupt.
        name: String,
        /// What is wrong with it.
        reason: String,
    },

    /// The store is not set up for leasing: a missing table or bucket, wrong columns,
    /// missing permissions. Retrying will not help until an operator acts.
    #[error("store misconfigured: {message}")]
    Misconfigured {
        /// What is wrong.
        message: String,
        /// The driver's error.
        #[source]
        source: Option<BoxError>,
    },

    /// A fenced write was refused: the resource has already seen a newer token.
    /// The caller has lost the lease and must stop; this is never retried.
    #[error("fenced write refused: token {token} is older than the resource's high-water mark")]
    FenceRejected {
        /// The stale token the write carried.
        token: FencingToken,
    },

    /// `acquire` gave up at its deadline without being granted the lease.
    #[error("timed out waiting for lease {name:?}")]
    Timeout {
        /// The lease name.
        name: String,
    },

    /// The client (or its renewal driver) has shut down.
    #[error("lease client is shut down")]
    Shutdown,
}

impl Error {
    /// An [`Error::InvalidInput`].
    pub fn invalid(what: &'static str, reason: impl Into<String>) -> Self {
        Self::InvalidInput {
            what,
            reason: reason.into(),
        }
    }

    /// An [`Error::Unavailable`] with a source.
    pub fn unavailable(message: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Self::Unavailable {
            message: message.into(),
            source: Some(source.into()),
        }
    }

    /// An [`Error::Indeterminate`] with a source.
    pub fn indeterminate(message: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Self::Indeterminate {
            message: message.into(),
            source: Some(source.into()),
        }
    }

    /// An [`Error::Misconfigured`] with a source.
    pub fn misconfigured(message: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Self::Misconfigured {
            message: message.into(),
            source: Some(source.into()),
        }
    }

    /// An [`Error::CorruptRecord`].
    pub fn corrupt(name: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::CorruptRecord {
            name: name.into(),
            reason: reason.into(),
        }
    }

    /// True when the same request may simply be sent again: the store said it did not
    /// apply it ([`Error::Unavailable`]).
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Unavailable { .. })
    }

    /// True when the request may or may not have been applied.
    pub fn is_indeterminate(&self) -> bool {
        matches!(self, Self::Indeterminate { .. })
    }
}

/// The library's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
