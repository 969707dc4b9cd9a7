//! What a caller of [`crate::store::CasStore::wait_for_change`] waits for.

use std::time::Duration;

/// What a wait in [`crate::store::CasStore::wait_for_change`] is for, and when its
/// caller looks again if nobody wakes it.
///
/// An acquirer only cares about a change that may have left the lease free; an observer
/// (an election's view of the leader) cares about every change. Stores that push their
/// changes through a [`crate::store::WakeHub`] use the difference to keep a handoff
/// at a few store calls however many wait; stores that cannot push sleep for
/// [`Wait::after`] either way.
///
/// Non-exhaustive: a store reads it through its methods ([`Wait::after`]), so that a new
/// kind of wait is not a breaking change for stores written outside this crate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Wait {
    /// Any change of the record (grant, renewal, release): return when one may have
    /// happened, or after this long.
    Change(Duration),
    /// A chance to take the lease: return when a change may have left it free (a
    /// release or a delete; a grant to someone else wakes nobody waiting to claim).
    ///
    /// The duration is when the caller wants to look whether the holder's lease ran out
    /// without a release (its time left). Only the **first in line** (the longest
    /// waiting claimer of the name on this store) looks then; the others wait until a
    /// release wakes them or until they come first in line, and look that long after.
    /// So N waiters cost one look per holder's TTL, not N. A caller with a deadline of
    /// its own bounds the wait itself (drop the future: it leaves the line, and the next
    /// waiter comes first).
    Claim(Duration),
}

impl Wait {
    /// How long a caller that nobody wakes waits before it looks again (for
    /// [`Wait::Claim`], the first in line; a store that cannot push sleeps this long).
    pub fn after(&self) -> Duration {
        match *self {
            Wait::Change(d) | Wait::Claim(d) => d,
        }
    }

    /// Whether this waits for a chance to take the lease ([`Wait::Claim`]); a store
    /// treats every other wait as [`Wait::Change`] (woken by any change).
    pub fn is_claim(&self) -> bool {
        matches!(self, Wait::Claim(_))
    }
}
