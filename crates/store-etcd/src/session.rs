//! Sessions: the etcd leases that keep this store's held records alive.
//!
//! One session per TTL class (the record TTL rounded up to whole seconds) per store.
//! Every held record this store writes with that TTL is attached to it; a keep-alive
//! task renews it every third of its TTL (sooner when a grant asks for it), and a renewal
//! that needs a keep-alive sends it on the session's stream in its own task. When
//! the process freezes or dies, the keep-alives stop and etcd deletes every attached
//! record on its own clock.
//!
//! What the store knows of a session is the **send time** of the last keep-alive etcd
//! answered with a positive TTL (`last_ok_sent`). etcd processed that keep-alive after it
//! was sent, so the session lives on etcd until at least `last_ok_sent + ttl` (DESIGN
//! rule 3; a rate drift of the two clocks is absorbed by the client's safety margin).

use std::sync::{Mutex, Weak};
use std::time::Duration;

use etcd_client::{LeaseKeepAliveStream, LeaseKeeper};
use tokio::sync::{Notify, watch};
use tokio::time::Instant;

use crate::error::{self, Effect};

/// What the keep-alive task last learned.
#[derive(Debug, Clone)]
pub(crate) struct KeepState {
    /// Send time of the last keep-alive (or the grant) etcd answered positively.
    pub(crate) last_ok_sent: Instant,
    /// Send time of the last keep-alive that failed, if it is newer than the last success.
    pub(crate) last_failed_sent: Option<Instant>,
    /// Why it failed.
    pub(crate) last_error: Option<String>,
    /// etcd said the lease no longer exists: every record attached to it is gone.
    pub(crate) dead: bool,
}

/// One etcd lease and its keep-alive state.
#[derive(Debug)]
pub(crate) struct Session {
    /// The etcd lease id.
    pub(crate) id: i64,
    /// The TTL etcd granted (at least the class; etcd raises it to its minimum).
    pub(crate) ttl: Duration,
    state: watch::Sender<KeepState>,
    /// A keep-alive must be sent at or after this instant (a renewal waits for it).
    want: Mutex<Option<Instant>>,
    kick: Notify,
    /// The keep-alive stream, taken out while a keep-alive is in flight: a send given up
    /// half way (a timeout, a dropped renewal) drops it, so an answer is never read as
    /// the answer to a later send. Whoever renews sends on it in their own task.
    stream: tokio::sync::Mutex<Option<(LeaseKeeper, LeaseKeepAliveStream)>>,
}

/// What one keep-alive of a session found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum KeepAlive {
    /// etcd answered with a positive TTL (this one, or one sent no earlier that another
    /// caller sent meanwhile).
    Alive,
    /// etcd no longer has the lease: its records are gone.
    Gone,
    /// It failed, or no answer came in time.
    Failed(String),
}

/// The result of asking a session to cover a renewal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Cover {
    /// The session lives on etcd at least until `call + ttl`.
    Covered,
    /// The session is gone: its records were deleted.
    Dead,
    /// No keep-alive sent after the call was answered in time.
    Failed(String),
}

impl Session {
    pub(crate) fn new(id: i64, ttl: Duration, granted_sent: Instant) -> Self {
        let (state, _) = watch::channel(KeepState {
            last_ok_sent: granted_sent,
            last_failed_sent: None,
            last_error: None,
            dead: false,
        });
        Self {
            id,
            ttl,
            state,
            want: Mutex::new(None),
            kick: Notify::new(),
            stream: tokio::sync::Mutex::new(None),
        }
    }

    pub(crate) fn is_dead(&self) -> bool {
        self.state.borrow().dead
    }

    pub(crate) fn mark_dead(&self) {
        self.state.send_modify(|s| s.dead = true);
        self.kick.notify_one();
    }

    /// True when the session certainly lives on etcd until `from + ttl`.
    pub(crate) fn covers(&self, from: Instant, ttl: Duration) -> bool {
        let s = self.state.borrow();
        !s.dead && s.last_ok_sent + self.ttl >= from + ttl
    }

    /// How long from `from` the session certainly lives on etcd, going by the last
    /// answered keep-alive; `None` once it is dead.
    pub(crate) fn life_from(&self, from: Instant) -> Option<Duration> {
        let s = self.state.borrow();
        (!s.dead).then(|| (s.last_ok_sent + self.ttl).saturating_duration_since(from))
    }

    /// Asks for a keep-alive sent at or after `call` (without waiting for it), so that a
    /// later [`Session::cover`] for `call` finds it already on its way.
    pub(crate) fn request(&self, call: Instant) {
        {
            let mut want = self.want.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            *want = Some(want.map_or(call, |w| w.max(call)));
        }
        self.kick.notify_one();
    }

    /// Makes sure the session lives on etcd until `call + ttl`: at once if the last
    /// answered keep-alive already covers it, otherwise with a keep-alive sent at or after
    /// `call`, in the caller's task (or one another caller sent meanwhile), answered
    /// within the host's request timeout.
    pub(crate) async fn cover<H: SessionHost>(&self, host: &H, call: Instant, ttl: Duration) -> Cover {
        if ttl > self.ttl {
            return Cover::Failed(format!("a TTL of {ttl:?} is longer than the session's {:?}", self.ttl));
        }
        if self.covers(call, ttl) {
            return Cover::Covered;
        }
        if self.is_dead() {
            return Cover::Dead;
        }
        match self.keep_alive(host, call, host.request_timeout()).await {
            KeepAlive::Alive => Cover::Covered,
            KeepAlive::Gone => Cover::Dead,
            KeepAlive::Failed(why) => Cover::Failed(why),
        }
    }

    /// Sends one keep-alive, at or after `after`, and waits at most `timeout` for its
    /// answer; the outcome is recorded (`KeepState`). Nothing is sent when one sent at or
    /// after `after` was answered (or failed) while this call waited for the stream.
    pub(crate) async fn keep_alive<H: SessionHost>(&self, host: &H, after: Instant, timeout: Duration) -> KeepAlive {
        let mut sent_at = None;
        let outcome = tokio::time::timeout(timeout, self.send_keep_alive(host, after, &mut sent_at)).await;
        match outcome {
            Ok(KeepAlive::Gone) => {
                tracing::warn!(
                    session = self.id,
                    "etcd session lease expired; its held records are gone"
                );
                self.mark_dead();
                host.session_gone(self.id);
                KeepAlive::Gone
            }
            Ok(k) => k,
            Err(_) => {
                let why = format!("no keep-alive answer within {timeout:?}");
                if let Some(at) = sent_at {
                    fail(self, at, why.clone());
                }
                KeepAlive::Failed(why)
            }
        }
    }

    /// What a keep-alive sent at or after `after` found, if one was answered (or failed):
    /// an answer to an earlier one never counts.
    fn answered_since(&self, after: Instant) -> Option<KeepAlive> {
        let s = self.state.borrow();
        if s.dead {
            Some(KeepAlive::Gone)
        } else if s.last_ok_sent >= after {
            Some(KeepAlive::Alive)
        } else if s.last_failed_sent.is_some_and(|f| f >= after) {
            Some(KeepAlive::Failed(
                s.last_error.clone().unwrap_or_else(|| "keep-alive failed".to_owned()),
            ))
        } else {
            None
        }
    }

    async fn send_keep_alive<H: SessionHost>(
        &self,
        host: &H,
        after: Instant,
        sent_at: &mut Option<Instant>,
    ) -> KeepAlive {
        let mut slot = self.stream.lock().await;
        if let Some(known) = self.answered_since(after) {
            return known;
        }
        host.count_keepalive();
        let at = Instant::now();
        *sent_at = Some(at);
        let answer = match slot.take() {
            Some((mut keeper, mut responses)) => {
                let answer = match keeper.keep_alive().await {
                    Ok(()) => match responses.message().await {
                        Ok(Some(r)) => Ok(r.ttl() > 0),
                        Ok(None) => Err(etcd_client::Error::LeaseKeepAliveError(
                            "keep-alive stream closed".into(),
                        )),
                        Err(e) => Err(e),
                    },
                    Err(e) => Err(e),
                };
                if answer.is_ok() {
                    *slot = Some((keeper, responses));
                }
                answer
            }
            // Opening the stream sends the first keep-alive and waits for its answer.
            None => match host.lease_client().keep_alive(self.id).await {
                Ok(opened) => {
                    *slot = Some(opened);
                    Ok(true)
                }
                Err(e) => Err(e),
            },
        };
        drop(slot);
        match answer {
            Ok(true) => {
                self.state.send_modify(|s| {
                    s.last_ok_sent = s.last_ok_sent.max(at);
                    s.last_failed_sent = None;
                    s.last_error = None;
                });
                KeepAlive::Alive
            }
            Ok(false) => KeepAlive::Gone,
            Err(e) if error::is_lease_not_found(&e) => KeepAlive::Gone,
            Err(e) => {
                let e = error::map("lease keep-alive", Effect::Read, e);
                tracing::debug!(session = self.id, error = %e, "keep-alive failed");
                fail(self, at, e.to_string());
                KeepAlive::Failed(e.to_string())
            }
        }
    }
}

impl leasehold_core::store::session::Session for Session {
    fn id(&self) -> i64 {
        self.id
    }
    fn is_dead(&self) -> bool {
        Session::is_dead(self)
    }
}

/// The TTL class of a record TTL: whole seconds, rounded up, at least one.
pub(crate) fn class_of(ttl: Duration) -> u64 {
    let secs = ttl.as_secs() + u64::from(ttl.subsec_nanos() > 0);
    secs.max(1)
}

/// What a session's keep-alive loop needs from the store that owns it: its client and
/// timeout, its request count, and to hear that the session is gone. The store
/// implements it, so this module does not depend on the store's internals.
pub(crate) trait SessionHost: Send + Sync + 'static {
    /// A lease client of the store's etcd client.
    fn lease_client(&self) -> etcd_client::LeaseClient;
    /// The store's bound on one request.
    fn request_timeout(&self) -> Duration;
    /// Counts one keep-alive request.
    fn count_keepalive(&self);
    /// The session with this id expired on etcd: its records are gone.
    fn session_gone(&self, id: i64);
}

/// Keeps `session` alive until etcd says it is gone or the store is dropped: a
/// keep-alive every third of its TTL, and at once when a grant asks for one
/// ([`Session::request`]).
pub(crate) async fn keep_alive<H: SessionHost>(inner: Weak<H>, session: std::sync::Arc<Session>) {
    let period = session.ttl / 3;
    let retry = (session.ttl / 10).min(Duration::from_millis(250));
    let mut last_sent = Instant::now();
    let mut next_periodic = last_sent + period;
    loop {
        if session.is_dead() {
            return;
        }
        // A keep-alive a renewal sent counts as this task's own.
        next_periodic = next_periodic.max(session.state.borrow().last_ok_sent + period);
        let wanted = *session.want.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let due = wanted.is_some_and(|w| w > last_sent) || Instant::now() >= next_periodic;
        if !due {
            tokio::select! {
                () = tokio::time::sleep_until(next_periodic) => {}
                () = session.kick.notified() => {}
            }
            continue;
        }
        let Some(store) = inner.upgrade() else { return };
        let timeout = store
            .request_timeout()
            .min(session.ttl / 2)
            .max(Duration::from_millis(50));
        let now = Instant::now();
        last_sent = now;
        match session.keep_alive(&*store, now, timeout).await {
            KeepAlive::Alive => next_periodic = session.state.borrow().last_ok_sent + period,
            KeepAlive::Gone => return,
            KeepAlive::Failed(_) => next_periodic = Instant::now() + retry,
        }
    }
}

fn fail(session: &Session, sent_at: Instant, why: String) {
    session.state.send_modify(|s| {
        s.last_failed_sent = Some(sent_at);
        s.last_error = Some(why);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes() {
        assert_eq!(class_of(Duration::from_millis(10)), 1);
        assert_eq!(class_of(Duration::from_millis(1000)), 1);
        assert_eq!(class_of(Duration::from_millis(1001)), 2);
        assert_eq!(class_of(Duration::from_secs(30)), 30);
    }

    #[tokio::test(start_paused = true)]
    async fn coverage_is_measured_from_the_send_time() {
        let t0 = Instant::now();
        let s = Session::new(1, Duration::from_secs(2), t0);
        assert!(s.covers(t0, Duration::from_secs(2)));
        assert!(s.covers(t0 + Duration::from_millis(500), Duration::from_millis(1500)));
        assert!(!s.covers(t0 + Duration::from_millis(501), Duration::from_millis(1500)));
        assert_eq!(
            s.life_from(t0 + Duration::from_millis(500)),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(s.life_from(t0 + Duration::from_secs(3)), Some(Duration::ZERO));
        s.mark_dead();
        assert!(!s.covers(t0, Duration::from_millis(10)));
        assert_eq!(s.life_from(t0), None);
    }

    #[tokio::test(start_paused = true)]
    async fn only_a_keep_alive_sent_at_or_after_the_call_counts() {
        let t0 = Instant::now();
        let s = Session::new(1, Duration::from_secs(2), t0);
        tokio::time::advance(Duration::from_secs(1)).await;
        let call = Instant::now();
        assert_eq!(s.answered_since(call), None);
        // An answer to a keep-alive sent before the call does not count.
        s.state
            .send_modify(|st| st.last_ok_sent = call - Duration::from_millis(1));
        assert_eq!(s.answered_since(call), None);
        s.state.send_modify(|st| st.last_ok_sent = call);
        assert_eq!(s.answered_since(call), Some(KeepAlive::Alive));
        // A failure of a keep-alive sent after a later call fails it.
        let call2 = call + Duration::from_millis(10);
        assert_eq!(s.answered_since(call2), None);
        s.state.send_modify(|st| {
            st.last_failed_sent = Some(call2);
            st.last_error = Some("down".into());
        });
        assert_eq!(s.answered_since(call2), Some(KeepAlive::Failed("down".into())));
        s.mark_dead();
        assert_eq!(s.answered_since(call2), Some(KeepAlive::Gone));
    }
}
