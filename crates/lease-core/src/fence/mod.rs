//! The fenced-write contract: how a protected resource refuses a stale lease holder.
//!
//! A lease only limits who *starts*; the fence decides who *succeeds*. The protected
//! resource keeps the highest token that has written it, its **high-water mark** (one per
//! resource). Every write carries the writer's [`FencingToken`], and the guard on the
//! token is part of the same store operation as the effect, so there is no window
//! between the check and the write. Every store crate offers this contract on its own kind
//! of resource, under one naming scheme:
//!
//! | store | guard | resource |
//! |---|---|---|
//! | Postgres, MySQL (MariaDB), SQLite | `RowFence` (from a [`FencedUpdate`]) | a row of the caller's table |
//! | DynamoDB | `ItemFence` | an item of the caller's table |
//! | Redis | `HashFence` | a hash key |
//! | etcd | `KeyFence` (and `TxnFence`, on the lease record itself) | an etcd key |
//! | ZooKeeper | `NodeFence` (and `TenureFence`, the tenure's guard on a `multi` of the caller's) | a znode marked with the token |
//! | S3 | `ManifestFence` | a manifest object |
//!
//! and each one keeps the same three promises, which the conformance suite checks on
//! every store against its real server:
//!
//! - **The mode.** [`FenceMode::NotOlder`] (the default, `mark <= token`) lets one tenure
//!   write many times with its one token; [`FenceMode::Newer`] (strict, `mark < token`)
//!   is for resources written once per grant. A write that passes sets the mark to the
//!   writer's token.
//! - **The outcome.** A write whose guard passed returns a [`FencedOutcome`]. A refused
//!   guard is [`Error::FenceRejected`]: the resource has seen a newer token (or, strict,
//!   this one), nothing was written, and the writer has lost its lease and must stop. It
//!   is never retried. Where the store answers it in the same round trip, the error
//!   carries the resource's mark. A write that wrote nothing for another reason says
//!   so instead: [`Error::FenceTargetMissing`] (no resource under the key: a plain SQL
//!   update of a missing row) or [`Error::FenceMarkInvalid`] (the mark is `NULL`, not a
//!   number, not a fence value); neither means the lease was lost.
//! - **The cost.** Guard and effect are one round trip to the store.
//!
//! A store without a native fence for some resource can still protect it with
//! [`FencedUpdate`] (SQL) or by keeping the mark beside the data and writing both under
//! one compare-and-swap.

mod sql;

pub use sql::{Dialect, FencedStatement, FencedUpdate, Ident, Param};

#[doc(inline)]
pub use crate::fence_mode_setters;

use crate::{Error, FencingToken, Result};

/// The guard's comparison of the resource's high-water mark with the writer's token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum FenceMode {
    /// `mark <= token`: many writes per tenure (the default).
    #[default]
    NotOlder,
    /// `mark < token`: one write per grant (strict).
    Newer,
}

impl FenceMode {
    /// The comparison operator, as SQL and most expression languages write it: `<=` or `<`.
    ///
    /// ```
    /// use leasehold_core::fence::FenceMode;
    /// assert_eq!(FenceMode::NotOlder.operator(), "<=");
    /// assert_eq!(FenceMode::Newer.operator(), "<");
    /// ```
    pub fn operator(self) -> &'static str {
        match self {
            Self::NotOlder => "<=",
            Self::Newer => "<",
        }
    }

    /// Whether a write carrying `token` passes a resource whose mark is `mark`
    /// ([`FencingToken::ZERO`]: never written).
    ///
    /// ```
    /// use leasehold_core::{FencingToken, fence::FenceMode};
    /// let (two, three) = (FencingToken::new(2), FencingToken::new(3));
    /// assert!(FenceMode::NotOlder.admits(three, three));
    /// assert!(!FenceMode::Newer.admits(three, three));
    /// assert!(!FenceMode::NotOlder.admits(three, two));
    /// ```
    pub fn admits(self, mark: FencingToken, token: FencingToken) -> bool {
        match self {
            Self::NotOlder => mark <= token,
            Self::Newer => mark < token,
        }
    }
}

/// `token`, or [`Error::InvalidInput`] for token 0, which no grant carries: every fence
/// refuses it before anything is sent.
///
/// ```
/// use leasehold_core::{Error, FencingToken, fence::issued};
/// assert_eq!(issued(FencingToken::new(3))?, FencingToken::new(3));
/// assert!(matches!(issued(FencingToken::ZERO), Err(Error::InvalidInput { .. })));
/// # Ok::<(), Error>(())
/// ```
///
/// # Errors
/// [`Error::InvalidInput`] for [`FencingToken::ZERO`].
pub fn issued(token: FencingToken) -> Result<FencingToken> {
    if token == FencingToken::ZERO {
        return Err(Error::invalid("fencing token", "token 0 is never issued"));
    }
    Ok(token)
}

/// The two mode setters every store's fence has, `strict()` and `mode(mode)`, for a
/// fence type whose guard mode is in the field named here (an implementor's helper:
/// each fence keeps them as inherent methods, with no trait to import).
///
/// ```
/// use leasehold_core::fence::FenceMode;
/// struct MyFence { mode: FenceMode }
/// impl MyFence { leasehold_core::fence::fence_mode_setters!(mode); }
/// assert_eq!(MyFence { mode: FenceMode::NotOlder }.strict().mode, FenceMode::Newer);
/// ```
#[doc(hidden)] // at the crate root, where `macro_export` puts it; documented here
#[macro_export]
macro_rules! fence_mode_setters {
    ($field:ident) => {
        /// Uses the strict guard `mark < token`: one write per grant.
        #[must_use]
        pub fn strict(self) -> Self {
            self.mode($crate::fence::FenceMode::Newer)
        }

        /// Uses the given guard mode (`FenceMode::NotOlder`, `mark <= token`, unless set).
        #[must_use]
        pub fn mode(mut self, mode: $crate::fence::FenceMode) -> Self {
            self.$field = mode;
            self
        }
    };
}

/// What a fenced write did when its guard passed. A refused guard is never an outcome:
/// it is [`Error::FenceRejected`].
///
/// `O` is what the store's write returns (rows affected, a response, the new manifest);
/// `C` is what a store that lets the caller add a condition of their own reports when
/// that condition failed (DynamoDB: the item as it was).
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub enum FencedOutcome<O, C = ()> {
    /// The write applied; the resource's high-water mark is now the writer's token.
    Applied(O),
    /// The guard passed, but the caller's own condition did not hold; nothing changed.
    ConditionFailed(C),
}

impl<O, C> FencedOutcome<O, C> {
    /// The store's output, if the write applied.
    pub fn applied(self) -> Option<O> {
        match self {
            Self::Applied(o) => Some(o),
            Self::ConditionFailed(_) => None,
        }
    }

    /// Whether the write applied.
    pub fn is_applied(&self) -> bool {
        matches!(self, Self::Applied(_))
    }

    /// The output, with the caller's failed condition as an error of the caller's choice.
    ///
    /// # Errors
    /// `f(c)` when the caller's own condition failed.
    pub fn or_else<E>(self, f: impl FnOnce(C) -> E) -> std::result::Result<O, E> {
        match self {
            Self::Applied(o) => Ok(o),
            Self::ConditionFailed(c) => Err(f(c)),
        }
    }
}

/// The refusal of a write carrying `token` by a resource whose mark the store did not
/// report: [`Error::FenceRejected`] without a mark. See [`rejected_by`].
///
/// ```
/// use leasehold_core::{Error, FencingToken, fence::rejected};
/// assert!(matches!(rejected(FencingToken::new(3)), Error::FenceRejected { mark: None, .. }));
/// ```
pub fn rejected(token: FencingToken) -> Error {
    refusal(token, None)
}

/// The refusal of a write carrying `token` by a resource whose high-water mark is
/// `mark`: [`Error::FenceRejected`], counted in the `leasehold_fence_rejections_total`
/// metric. Every store's fence refuses through this or [`rejected`].
///
/// ```
/// use leasehold_core::{Error, FencingToken, fence::rejected_by};
/// let e = rejected_by(FencingToken::new(3), FencingToken::new(5));
/// assert!(matches!(e, Error::FenceRejected { mark: Some(m), .. } if m.get() == 5));
/// assert!(e.to_string().ends_with("token 3 is older than the resource's high-water mark 5"), "{e}");
/// // Only the strict guard refuses the mark's own token: the words say so.
/// let strict = rejected_by(FencingToken::new(5), FencingToken::new(5)).to_string();
/// assert!(strict.contains("token 5 is not newer than the resource's high-water mark 5 (the strict guard"), "{strict}");
/// ```
pub fn rejected_by(token: FencingToken, mark: FencingToken) -> Error {
    refusal(token, Some(mark))
}

fn refusal(token: FencingToken, mark: Option<FencingToken>) -> Error {
    metrics::counter!(crate::observe::FENCE_REJECTIONS).increment(1);
    Error::FenceRejected { token, mark }
}

/// What a fenced write's guard found when it did not pass, for stores that read the
/// resource's mark in the same round trip as the guard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// No resource under the write's key.
    Missing,
    /// The resource's mark, as stored (`None`: `NULL` or absent).
    Mark(Option<String>),
}

/// The error for a fenced write carrying `token` to `resource` that did not apply, from
/// what the store read: [`Error::FenceTargetMissing`] for no resource,
/// [`Error::FenceMarkInvalid`] for a mark that is not a token, and
/// [`Error::FenceRejected`] with the mark otherwise (without it when the mark read
/// admits the token: a concurrent writer moved it after the read).
///
/// ```
/// use leasehold_core::{Error, FencingToken, fence::{FenceMode, Refusal, refusal_error}};
/// let t = FencingToken::new(4);
/// let e = |r| refusal_error(r, FenceMode::NotOlder, t, "accounts id=7");
/// assert!(matches!(e(Refusal::Missing), Error::FenceTargetMissing { .. }));
/// assert!(matches!(e(Refusal::Mark(None)), Error::FenceMarkInvalid { .. }));
/// assert!(matches!(e(Refusal::Mark(Some("x".into()))), Error::FenceMarkInvalid { .. }));
/// assert!(matches!(e(Refusal::Mark(Some("9".into()))), Error::FenceRejected { mark: Some(m), .. } if m.get() == 9));
/// assert!(matches!(e(Refusal::Mark(Some("3".into()))), Error::FenceRejected { mark: None, .. }));
/// ```
pub fn refusal_error(refusal: Refusal, mode: FenceMode, token: FencingToken, resource: &str) -> Error {
    let invalid = |reason: String| Error::FenceMarkInvalid {
        resource: resource.to_owned(),
        reason,
    };
    match refusal {
        Refusal::Missing => Error::FenceTargetMissing {
            resource: resource.to_owned(),
        },
        Refusal::Mark(None) => invalid("it is NULL (declare the column NOT NULL DEFAULT 0)".to_owned()),
        Refusal::Mark(Some(text)) => match text.trim().parse::<u64>() {
            Ok(m) if i64::try_from(m).is_ok() => {
                let mark = FencingToken::new(m);
                if mode.admits(mark, token) {
                    rejected(token)
                } else {
                    rejected_by(token, mark)
                }
            }
            _ => invalid(format!("{text:?}")),
        },
    }
}

/// Turns a fenced write's rows-affected count into its outcome: zero rows means the
/// resource has seen a newer token (or the row does not exist, for a plain update).
///
/// ```
/// use leasehold_core::{fence::{FencedOutcome, check_rows}, Error, FencingToken};
/// assert_eq!(check_rows(1, FencingToken::new(3))?, FencedOutcome::Applied(1));
/// assert!(matches!(check_rows(0, FencingToken::new(3)), Err(Error::FenceRejected { .. })));
/// # Ok::<(), Error>(())
/// ```
///
/// # Errors
/// [`Error::FenceRejected`] for zero rows.
pub fn check_rows(rows_affected: u64, token: FencingToken) -> Result<FencedOutcome<u64>> {
    if rows_affected == 0 {
        return Err(rejected(token));
    }
    Ok(FencedOutcome::Applied(rows_affected))
}
