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

    /// The store is reachable but not set up for leases: the lease table, the DynamoDB
    /// table, the S3 bucket or the ZooKeeper root znode does not exist, or a SQL table
    /// of an earlier version lacks a column. Nothing was changed. The store crate's
    /// `provision` (or `leasehold stores check --create URL`) creates what is missing;
    /// retrying without it will not help. A tool can match on this kind to offer that
    /// step, which no other [`Error::Misconfigured`] cause (credentials, a replica, a
    /// wrong engine) is fixed by.
    #[error("store not set up: {message}")]
    NotProvisioned {
        /// What is missing, and how to create it.
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

    /// The store is not set up for leasing in a way `provision` cannot fix: wrong
    /// columns, missing permissions, a replica, refused credentials. (What `provision`
    /// creates, a missing table, bucket or root znode, is [`Error::NotProvisioned`].)
    /// Retrying will not help until an operator acts.
    #[error("store misconfigured: {message}")]
    Misconfigured {
        /// What is wrong.
        message: String,
        /// The driver's error.
        #[source]
        source: Option<BoxError>,
    },

    /// A fenced write was refused: the resource has already seen a newer token (or, with
    /// the strict guard, [`crate::fence::FenceMode::Newer`], this one). With the default
    /// guard the caller has lost the lease and must stop; with the strict one, a second
    /// write of the same tenure is refused too, while the lease may still be held. Never
    /// retried.
    #[error("fenced write refused: {}", refusal_text(*.token, *.mark))]
    FenceRejected {
        /// The stale token the write carried.
        token: FencingToken,
        /// The resource's high-water mark that refused it, where the store answered it in
        /// the same round trip (`None`: not known, e.g. moved by a concurrent writer).
        mark: Option<FencingToken>,
    },

    /// A fenced write found nothing to guard: no row, item, key or object under the key
    /// it names. Nothing was written. Not a lost lease: the caller's key (or its setup)
    /// is wrong.
    #[error("fenced write found no resource: {resource}")]
    FenceTargetMissing {
        /// The resource the write named (table and key, key name, object).
        resource: String,
    },

    /// The resource's high-water mark is not a token (`NULL`, not a number, out of
    /// range), so no write can be judged against it. Nothing was written. An operator
    /// must repair the resource; retrying will not help.
    #[error("fenced write refused: the high-water mark of {resource} is not a token: {reason}")]
    FenceMarkInvalid {
        /// The resource the write named.
        resource: String,
        /// What is stored instead of a token.
        reason: String,
    },

    /// `acquire` gave up at its deadline without being granted the lease.
    ///
    /// `last_error` tells a failing store from a held lease: `None` when the store's
    /// last answer said someone holds it (the deadline ended a wait for the holder, or
    /// an attempt begun after that answer); the store's error when its last attempt
    /// failed ([`Error::Unavailable`], [`Error::Indeterminate`]), or an
    /// [`Error::Indeterminate`] saying so when the store had answered no attempt before
    /// the deadline (a store down or slower than the timeout). The message carries that
    /// error's words too.
    #[error("timed out waiting for lease {name:?}{}", last_error_text(last_error.as_deref()))]
    Timeout {
        /// The lease name.
        name: String,
        /// Why the attempts failed, when they did not end on "held".
        #[source]
        last_error: Option<Box<Error>>,
    },

    /// This client already holds the lease it was asked to acquire (`acquire`,
    /// `try_acquire` and `acquire_timeout` answer at once instead of waiting on a lease
    /// the caller's own client holds). Nothing was sent. Not retryable: use the lease
    /// already held, or release it first. Leases are not reentrant; see
    /// [`crate::LeaseClient`].
    #[error("lease {name:?} is already held by this client (token {token})")]
    AlreadyHeld {
        /// The lease name.
        name: String,
        /// The token of the grant this client holds.
        token: FencingToken,
    },

    /// The lease's fencing tokens are used up: its record shows
    /// [`FencingToken::MAX`], so a grant to a new holder would have no greater token to
    /// issue. Nothing changed. Not retryable, and not a corrupt record (the holder of
    /// the last token renews and releases it as usual): give the work another lease
    /// name, or have an operator reset the name's record together with every resource's
    /// high-water mark it fences.
    #[error(
        "lease {name:?} has issued its last fencing token ({}): no new holder can be granted it",
        FencingToken::MAX
    )]
    TokensExhausted {
        /// The lease name.
        name: String,
    },

    /// The store does not offer this operation (for example listing lease names).
    /// Nothing was sent.
    #[error("{store} does not support {operation}")]
    Unsupported {
        /// The operation (for example `"listing lease names"`).
        operation: &'static str,
        /// The store (for example `"this store"`).
        store: &'static str,
    },

    /// The client (or its renewal driver) has shut down.
    #[error("lease client is shut down")]
    Shutdown,
}

fn refusal_text(token: FencingToken, mark: Option<FencingToken>) -> String {
    match mark {
        // Only the strict guard refuses its own token.
        Some(m) if m == token => {
            format!(
                "token {token} is not newer than the resource's high-water mark {m} (the strict guard: one write per token)"
            )
        }
        Some(m) => format!("token {token} is older than the resource's high-water mark {m}"),
        None => format!("token {token} is older than the resource's high-water mark"),
    }
}

fn last_error_text(last: Option<&Error>) -> String {
    last.map(|e| format!(": {e}")).unwrap_or_default()
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

    /// An [`Error::NotProvisioned`] with a source.
    pub fn not_provisioned(message: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Self::NotProvisioned {
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

    /// An [`Error::Timeout`] of `name`, with the last attempt's error if it failed.
    pub fn timeout(name: impl Into<String>, last_error: Option<Error>) -> Self {
        Self::Timeout {
            name: name.into(),
            last_error: last_error.map(Box::new),
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
