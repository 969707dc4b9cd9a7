//! The timing rules a client judges by: the safety margin, how long a holder may trust
//! a grant, how long a challenger watches, when to renew; and the opt-in skew bound.

use std::time::{Duration, Instant};

use crate::Ttl;
use crate::store::ClockSource;

/// An explicit bound on how far any two participants' wall clocks may disagree.
///
/// Opting in lets a challenger on an observation store take over a lease whose holder's
/// wall-clock expiry, plus this bound, is in the past, without first watching it for a
/// whole TTL (for callers that try once, like scheduled jobs). If real clocks disagree by
/// more than the bound, two holders can overlap: the fence still protects the resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SkewBound(pub Duration);

/// The rules a client applies; the same for every lease it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Where expiry is judged (from the store's [`crate::store::Capabilities`]).
    pub clock: ClockSource,
    /// The safety margin, in thousandths of the TTL, taken off the holder's validity
    /// and added to a challenger's observation window (clock-rate drift, scheduling).
    pub margin_permille: u32,
    /// Opt-in wall-clock rule for observation stores.
    pub skew: Option<SkewBound>,
}

impl Policy {
    /// The default margin: 5% of the TTL.
    pub const DEFAULT_MARGIN_PERMILLE: u32 = 50;

    /// A policy for a store with the given clock, default margin, no skew rule.
    pub fn new(clock: ClockSource) -> Self {
        Self {
            clock,
            margin_permille: Self::DEFAULT_MARGIN_PERMILLE,
            skew: None,
        }
    }

    /// The safety margin for a TTL (at least 1 ms).
    pub fn margin(&self, ttl: Ttl) -> Duration {
        (ttl.get() * self.margin_permille / 1000).max(Duration::from_millis(1))
    }

    /// Until when a grant or renewal sent at `sent_at` for `ttl` may be trusted.
    pub fn valid_until(&self, sent_at: Instant, ttl: Ttl) -> Instant {
        self.valid_within(sent_at, ttl, ttl.get())
    }

    /// How long after its send a grant or renewal of `ttl` may be relied on: the TTL,
    /// or less when the store's answer says its record lives less long (`remaining`,
    /// [`crate::store::Stored::remaining`], counted from the store's receipt, so from
    /// after the send). ZooKeeper answers less than the TTL: an ensemble's leader
    /// expires a session from the heartbeats a follower reported to it, which lag the
    /// ones the follower answered.
    pub fn window(ttl: Ttl, remaining: Option<Duration>) -> Duration {
        remaining.map_or(ttl.get(), |r| r.min(ttl.get()))
    }

    /// Until when a grant or renewal sent at `sent_at` may be trusted when the store
    /// keeps its record for `window` ([`Policy::window`]) of the lease's `ttl`.
    pub fn valid_within(&self, sent_at: Instant, ttl: Ttl, window: Duration) -> Instant {
        sent_at + window.saturating_sub(self.margin(ttl))
    }

    /// When to renew a lease granted or renewed at `sent_at` for `window`
    /// ([`Policy::window`]): a third of it.
    pub fn renew_within(&self, sent_at: Instant, window: Duration) -> Instant {
        sent_at + window / 3
    }

    /// How long a challenger on an observation store must see one version unchanged
    /// before it may take over a lease with this TTL.
    pub fn observation_window(&self, ttl: Ttl) -> Duration {
        ttl.get() + self.margin(ttl)
    }

    /// When to renew a lease granted (or last renewed) at `sent_at`: a third of the TTL.
    pub fn renew_at(&self, sent_at: Instant, ttl: Ttl) -> Instant {
        self.renew_within(sent_at, ttl.get())
    }
}
