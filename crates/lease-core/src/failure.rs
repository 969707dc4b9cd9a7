//! One classification of a failed store call, used by every store: did it not apply
//! (safe to retry), may it have applied, or is the store not set up for it.

use std::time::Duration;

use crate::{BoxError, Error};

/// Whether a store call can change anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// A read (a get, a range, a schema check, a keep-alive): a failure never leaves
    /// an effect, so retrying is always safe.
    Read,
    /// A write (a lease write, a fenced write, a delete, a DDL): a failure after the
    /// request was sent may have applied.
    Write,
}

/// What a failed store call means to its caller, before it becomes an [`Error`].
///
/// Each store classifies its own driver's codes into one of these, through named
/// constants; the rule they share is [`ErrorClass::after_send`]. New classes may
/// join, as new kinds join [`Error`]: a `match` on a class needs a wildcard arm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorClass {
    /// Did not apply; retrying is safe ([`Error::Unavailable`]).
    Unavailable,
    /// May have applied ([`Error::Indeterminate`]).
    Indeterminate,
    /// The store is not set up for this caller; a retry cannot help until an operator
    /// acts ([`Error::Misconfigured`]).
    Misconfigured,
    /// What the caller needs does not exist yet (a table, bucket or root znode);
    /// the store's `provision` creates it ([`Error::NotProvisioned`]).
    NotProvisioned,
    /// The store refused the input ([`Error::InvalidInput`]).
    InvalidInput,
}

impl ErrorClass {
    /// A call that was sent and got no (usable) answer: a write may have applied, a
    /// read changed nothing.
    pub fn after_send(effect: Effect) -> Self {
        match effect {
            Effect::Read => Self::Unavailable,
            Effect::Write => Self::Indeterminate,
        }
    }

    /// The [`Error`] of this class, keeping `source`.
    pub fn error(self, message: impl Into<String>, source: impl Into<BoxError>) -> Error {
        let message = message.into();
        match self {
            Self::Unavailable => Error::unavailable(message, source),
            Self::Indeterminate => Error::indeterminate(message, source),
            Self::Misconfigured => Error::misconfigured(message, source),
            Self::NotProvisioned => Error::not_provisioned(message, source),
            Self::InvalidInput => Error::invalid("store request", format!("{message}: {}", source.into())),
        }
    }
}

/// A call that was sent and not answered within `after`: [`ErrorClass::after_send`].
pub fn no_answer(effect: Effect, what: &str, after: Duration) -> Error {
    let source = std::io::Error::new(std::io::ErrorKind::TimedOut, format!("no answer after {after:?}"));
    let message = match effect {
        Effect::Write => format!("{what}: sent, no answer within {after:?} (it may have applied)"),
        Effect::Read => format!("{what}: no answer within {after:?}"),
    };
    ErrorClass::after_send(effect).error(message, source)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lost_answer_is_indeterminate_for_writes_only() {
        assert_eq!(ErrorClass::after_send(Effect::Write), ErrorClass::Indeterminate);
        assert_eq!(ErrorClass::after_send(Effect::Read), ErrorClass::Unavailable);
        let w = no_answer(Effect::Write, "etcd claim", Duration::from_secs(1));
        assert!(w.is_indeterminate() && !w.is_retryable(), "{w}");
        let r = no_answer(Effect::Read, "etcd range", Duration::from_secs(1));
        assert!(r.is_retryable() && !r.is_indeterminate(), "{r}");
        assert!(matches!(
            ErrorClass::InvalidInput.error("put", "value too large"),
            Error::InvalidInput { .. }
        ));
    }
}
