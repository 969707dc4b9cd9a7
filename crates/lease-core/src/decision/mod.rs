//! The lease decision: a pure function of what was read, what is asked and the time.
//!
//! No I/O, no async, no clock reads: the caller passes the monotonic `now` (and, only
//! for the opt-in [`SkewBound`] rule, its wall-clock reading). The [`crate::LeaseClient`]
//! performs what these functions return; tests drive them directly with made-up times.
//!
//! # How expiry is judged (rule 2 of docs/DESIGN.md)
//! - [`ClockSource::Store`]: the store reports the time left on its own clock
//!   ([`Stored::remaining`]) and evaluates [`Precondition::Claimable`] itself.
//! - [`ClockSource::Observation`]: a challenger may take over only after it has seen the
//!   *same version* unchanged for the record's TTL plus the safety margin, measured on
//!   its own monotonic clock from the moment it first saw that version.
//! - Wall clocks of two machines are compared only under an explicit [`SkewBound`].
//!
//! # How long a holder may trust its lease (rule 3 of docs/DESIGN.md)
//! A grant or renewal *sent* at monotonic `t` is trusted until
//! `t + ttl - margin` ([`Policy::valid_until`]), never from when the reply arrived.
//! Every way a challenger can judge expiry starts its count at or after the moment the
//! store applied the write, which is after `t`; the margin absorbs clock *rate* drift.

use std::time::{Duration, Instant};

pub(crate) use crate::policy::{Policy, SkewBound};
use crate::store::{ClockSource, LeaseRecord, Precondition, Stored};
use crate::{FencingToken, HolderId, Ttl};

/// What this client knows of the record before deciding.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Known<'a> {
    /// Nothing yet (no read, no earlier conflict).
    Nothing,
    /// The store said no record exists.
    Absent,
    /// This record, which this client has seen unchanged since `first_seen` (monotonic).
    Present {
        /// The record and its version.
        stored: &'a Stored,
        /// When this client first saw this exact version.
        first_seen: Instant,
    },
}

/// What an acquire attempt should do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AcquireStep {
    /// Send this conditional write; if it applies, the lease is granted with the token
    /// of the record the store returns.
    Write {
        /// The write's precondition.
        expect: Precondition,
        /// The record to write.
        record: LeaseRecord,
    },
    /// The grant would need a token above [`FencingToken::MAX`]: the name's counter is
    /// exhausted ([`crate::Error::TokensExhausted`]). Nothing is to be sent.
    Exhausted {
        /// The token the record shows.
        token: FencingToken,
    },
    /// Someone else holds it: retry no sooner than `retry_after`.
    Wait {
        /// The current holder.
        holder: Option<HolderId>,
        /// The current token.
        token: FencingToken,
        /// When a retry may succeed (the holder's remaining time, or the rest of the
        /// observation window).
        retry_after: Duration,
    },
}

/// Decides an acquire attempt by `me` for `ttl`.
///
/// `wall_now_ms` is read only under [`Policy::skew`]; it is also written into the
/// record (for other clients that opted into the skew rule). `claims_vacant`: the store
/// takes [`Precondition::Vacant`] ([`crate::store::Capabilities::claims_vacant`]).
pub(crate) fn acquire(
    policy: &Policy,
    claims_vacant: bool,
    me: &HolderId,
    ttl: Ttl,
    now: Instant,
    wall_now_ms: u64,
    known: Known<'_>,
) -> AcquireStep {
    let fresh = |token: FencingToken| LeaseRecord {
        holder: Some(me.clone()),
        token,
        ttl,
        wall_expires_at_ms: Some(wall_now_ms.saturating_add(ttl.as_millis())),
    };
    // A grant to a new holder issues the token after the record's: at the end of the
    // counter there is none, and nothing is sent.
    let grant = |expect: Precondition, token: FencingToken| match token.checked_next() {
        Some(next) => AcquireStep::Write {
            expect,
            record: fresh(next),
        },
        None => AcquireStep::Exhausted { token },
    };
    let claim_or = |expect: Precondition| match policy.clock {
        ClockSource::Store => Precondition::Claimable,
        _ => expect,
    };
    match known {
        // Knowing nothing on a store without a clock: a released record is as free as
        // none, and the store judges which it has, in one round trip.
        Known::Nothing if claims_vacant && policy.clock != ClockSource::Store => AcquireStep::Write {
            expect: Precondition::Vacant,
            record: fresh(FencingToken::FIRST),
        },
        Known::Nothing | Known::Absent => AcquireStep::Write {
            expect: claim_or(Precondition::Absent),
            record: fresh(FencingToken::FIRST),
        },
        Known::Present { stored, first_seen } => {
            let rec = &stored.record;
            let version = || Precondition::Version(stored.version.clone());
            match &rec.holder {
                // Our own record: an earlier write whose outcome was unknown applied.
                // Confirm it with a renewal on its version (same token); the grant's
                // validity then counts from this write.
                Some(h) if h == me => AcquireStep::Write {
                    expect: version(),
                    record: fresh(rec.token),
                },
                None => grant(claim_or(version()), rec.token),
                Some(other) => {
                    let wait = |retry_after: Duration| AcquireStep::Wait {
                        holder: Some(other.clone()),
                        token: rec.token,
                        retry_after,
                    };
                    match policy.clock {
                        ClockSource::Store => {
                            // A store-clock read always reports `remaining`; if one did
                            // not, assume the whole TTL is left (never "free").
                            let remaining = stored.remaining.unwrap_or(rec.ttl.get());
                            if remaining.is_zero() {
                                grant(Precondition::Claimable, rec.token)
                            } else {
                                wait(remaining)
                            }
                        }
                        _ => {
                            if let (Some(SkewBound(skew)), Some(exp)) = (policy.skew, rec.wall_expires_at_ms) {
                                let skew_ms = u64::try_from(skew.as_millis()).unwrap_or(u64::MAX);
                                if wall_now_ms > exp.saturating_add(skew_ms) {
                                    return grant(version(), rec.token);
                                }
                            }
                            let window = policy.observation_window(rec.ttl);
                            let watched = now.saturating_duration_since(first_seen);
                            if watched >= window {
                                grant(version(), rec.token)
                            } else {
                                wait(window - watched)
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The record a renewal writes: same holder, same token, fresh TTL.
pub(crate) fn renewal(held: &LeaseRecord, ttl: Ttl, wall_now_ms: u64) -> LeaseRecord {
    held.renewed(ttl, wall_now_ms)
}

/// How a holder reads a conflict on its renewal or release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ConflictVerdict {
    /// The record is still ours with our token under a newer version (an earlier
    /// attempt whose outcome was unknown applied): retry on that version.
    StillOurs(Stored),
    /// Someone else was granted the lease.
    TakenOver {
        /// The new holder (`None`: released by someone acting for us).
        holder: Option<HolderId>,
        /// Its token.
        token: FencingToken,
    },
    /// The record is gone: our lease ended without a successor yet (on stores that
    /// delete a record at its TTL, it expired).
    Gone,
    /// The record is vacant with our token: someone else released our grant (a forced
    /// release), or our own release applied; no successor yet.
    Vacated,
    /// The store did not say what is there now; read it.
    Unknown,
}

/// Judges a conflict on a write by the holder `me` of `token`.
pub(crate) fn judge_conflict(me: &HolderId, token: FencingToken, current: &crate::store::Current) -> ConflictVerdict {
    match current {
        crate::store::Current::Unknown => ConflictVerdict::Unknown,
        crate::store::Current::Absent => ConflictVerdict::Gone,
        crate::store::Current::Present(s) => match &s.record.holder {
            Some(h) if h == me && s.record.token == token => ConflictVerdict::StillOurs(s.clone()),
            None if s.record.token == token => ConflictVerdict::Vacated,
            holder => ConflictVerdict::TakenOver {
                holder: holder.clone(),
                token: s.record.token,
            },
        },
    }
}

#[cfg(test)]
mod tests_exact;
#[cfg(test)]
mod tests_props;
