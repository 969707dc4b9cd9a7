//! Watching who leads: one read at a time, changes only.

use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt as _};
use leasehold_core::{
    Error, LeaseName, Policy, Result,
    store::{CasStore, ClockSource, Stored, Version, Wait},
};
use tokio::time::Instant;

use crate::Leader;

/// Decides from successive reads whether the record names a live leader.
///
/// Stores with a clock say how much of the TTL is left. Stores without one are judged
/// by observation, as a challenger would: a record whose version stayed unchanged for
/// the TTL plus the margin has no live holder.
#[derive(Debug)]
pub(crate) struct Judge {
    policy: Policy,
    seen: Option<(Version, Instant)>,
}

impl Judge {
    pub(crate) fn new(policy: Policy) -> Self {
        Self { policy, seen: None }
    }

    /// The leader the record shows at `now` (when the read's answer arrived).
    pub(crate) fn leader(&mut self, current: Option<&Stored>, now: Instant) -> Option<Leader> {
        let Some(stored) = current else {
            self.seen = None;
            return None;
        };
        let first_seen = match &self.seen {
            Some((v, at)) if *v == stored.version => *at,
            _ => {
                self.seen = Some((stored.version.clone(), now));
                now
            }
        };
        let holder = stored.record.holder.clone()?;
        let live = match self.policy.clock {
            ClockSource::Store => stored.remaining.is_none_or(|r| !r.is_zero()),
            _ => now.saturating_duration_since(first_seen) < self.policy.observation_window(stored.record.ttl),
        };
        live.then_some(Leader {
            holder,
            token: stored.record.token,
        })
    }

    /// How long the leader shown by `current` can be trusted to stay, at most.
    pub(crate) fn horizon(&self, current: Option<&Stored>, now: Instant) -> Option<Duration> {
        let stored = current?;
        stored.record.holder.as_ref()?;
        match self.policy.clock {
            ClockSource::Store => stored.remaining,
            _ => {
                let (_, first) = self.seen.as_ref()?;
                let window = self.policy.observation_window(stored.record.ttl);
                Some(window.saturating_sub(now.saturating_duration_since(*first)))
            }
        }
    }
}

/// What an observer knows of who leads, at one moment ([`crate::Election::observe_states`]).
#[derive(Debug)]
#[non_exhaustive]
pub enum LeaderState {
    /// A read of the store shows this leader (`None`: nobody leads).
    Known(Option<Leader>),
    /// Reading the store failed (unreachable, or an answer in doubt), so who leads is
    /// not known: the last leader seen may have resigned or been replaced since. The
    /// observer keeps reading, with backoff; the next read that succeeds yields
    /// [`LeaderState::Known`], even if the leader is the one seen before.
    Unknown(Error),
}

struct State {
    store: Arc<dyn CasStore>,
    name: LeaseName,
    interval: Duration,
    judge: Judge,
    last: Option<Option<Leader>>,
    seen_version: Option<Version>,
    wait: Option<Duration>,
    failures: u32,
    /// Whether a failed read is yielded as [`LeaderState::Unknown`] (once per run of
    /// failures), or only retried.
    report_failures: bool,
    done: bool,
}

/// The `observe` stream: changes of leader only, failed reads retried unseen.
pub(crate) fn stream(
    store: Arc<dyn CasStore>,
    policy: Policy,
    name: LeaseName,
    interval: Duration,
) -> impl Stream<Item = Result<Option<Leader>>> + Send + 'static {
    states(store, policy, name, interval, false).filter_map(|item| {
        std::future::ready(match item {
            Ok(LeaderState::Known(leader)) => Some(Ok(leader)),
            Ok(LeaderState::Unknown(_)) => None,
            Err(e) => Some(Err(e)),
        })
    })
}

/// The `observe_states` stream: changes of leader, and the first failed read of each
/// run of failures as [`LeaderState::Unknown`] when `report_failures`.
pub(crate) fn states(
    store: Arc<dyn CasStore>,
    policy: Policy,
    name: LeaseName,
    interval: Duration,
    report_failures: bool,
) -> impl Stream<Item = Result<LeaderState>> + Send + 'static {
    let state = State {
        store,
        name,
        interval,
        judge: Judge::new(policy),
        last: None,
        seen_version: None,
        wait: None,
        failures: 0,
        report_failures,
        done: false,
    };
    futures::stream::unfold(state, |mut st| async move {
        if st.done {
            return None;
        }
        loop {
            if let Some(wait) = st.wait.take() {
                if st.store.capabilities().notifies_waiters && st.failures == 0 {
                    // A spurious or failed wait only means an earlier read.
                    let _ = st
                        .store
                        .wait_for_change(&st.name, st.seen_version.as_ref(), Wait::Change(wait))
                        .await;
                } else {
                    tokio::time::sleep(wait).await;
                }
            }
            match st.store.read(&st.name).await {
                Ok(current) => {
                    st.failures = 0;
                    let now = Instant::now();
                    let leader = st.judge.leader(current.as_ref(), now);
                    st.seen_version = current.as_ref().map(|s| s.version.clone());
                    let mut wait = st.interval;
                    // Look again just after a live leader's lease can have run out; a
                    // record whose holder's time is up gives no horizon (a zero one
                    // would make a read every millisecond until someone takes it).
                    if let (Some(_), Some(h)) = (&leader, st.judge.horizon(current.as_ref(), now)) {
                        wait = wait.min(h + Duration::from_millis(1));
                    }
                    st.wait = Some(wait);
                    if st.last.as_ref() != Some(&leader) {
                        st.last = Some(leader.clone());
                        return Some((Ok(LeaderState::Known(leader)), st));
                    }
                }
                Err(e) if e.is_retryable() || e.is_indeterminate() => {
                    st.failures = st.failures.saturating_add(1);
                    tracing::debug!(election = %st.name, error = %e, "observe read failed; backing off");
                    st.wait = Some(backoff(st.failures, st.interval));
                    if st.report_failures && st.failures == 1 {
                        // What was seen before is no longer known: the next read that
                        // succeeds says who leads, changed or not.
                        st.last = None;
                        return Some((Ok(LeaderState::Unknown(e)), st));
                    }
                }
                Err(e) => {
                    st.done = true;
                    return Some((Err(e), st));
                }
            }
        }
    })
}

/// Exponential backoff with jitter, from 10 ms up to `cap`.
fn backoff(attempt: u32, cap: Duration) -> Duration {
    let base = Duration::from_millis(10)
        .saturating_mul(1u32 << attempt.min(16))
        .min(cap);
    base / 2 + (base / 2).mul_f64(rand_unit())
}

fn rand_unit() -> f64 {
    rand::random::<f64>()
}
