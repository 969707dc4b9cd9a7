//! Sessions: the etcd leases that keep this store's held records alive.
//!
//! One session per TTL class (the record TTL rounded up to whole seconds) per store.
//! Every held record this store writes with that TTL is attached to it; a keep-alive
//! task renews it every third of its TTL, and sooner when a renewal asks for it. When
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
    /// answered keep-alive already covers it, otherwise by waiting (at most `timeout`)
    /// for a keep-alive sent at or after `call`.
    pub(crate) async fn cover(&self, call: Instant, ttl: Duration, timeout: Duration) -> Cover {
        if ttl > self.ttl {
            return Cover::Failed(format!("a TTL of {ttl:?} is longer than the session's {:?}", self.ttl));
        }
        if self.covers(call, ttl) {
            return Cover::Covered;
        }
        if self.is_dead() {
            return Cover::Dead;
        }
        self.request(call);
        let mut rx = self.state.subscribe();
        let waited = tokio::time::timeout(
            timeout,
            rx.wait_for(|s| s.dead || s.last_ok_sent >= call || s.last_failed_sent.is_some_and(|f| f >= call)),
        )
        .await;
        match waited {
            Err(_) => Cover::Failed(format!("no keep-alive answer within {timeout:?}")),
            Ok(Err(_)) => Cover::Failed("the keep-alive task has stopped".to_owned()),
            Ok(Ok(s)) if s.dead => Cover::Dead,
            Ok(Ok(s)) if s.last_ok_sent >= call => Cover::Covered,
            Ok(Ok(s)) => Cover::Failed(s.last_error.clone().unwrap_or_else(|| "keep-alive failed".to_owned())),
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

/// Keeps `session` alive until etcd says it is gone or the store is dropped.
pub(crate) async fn keep_alive<H: SessionHost>(inner: Weak<H>, session: std::sync::Arc<Session>) {
    let period = session.ttl / 3;
    let retry = (session.ttl / 10).min(Duration::from_millis(250));
    let mut stream: Option<(LeaseKeeper, LeaseKeepAliveStream)> = None;
    let mut last_sent = Instant::now();
    let mut next_periodic = last_sent + period;
    loop {
        if session.is_dead() {
            return;
        }
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
        let mut lease = store.lease_client();
        store.count_keepalive();
        drop(store);
        let sent_at = Instant::now();
        last_sent = sent_at;
        let outcome = tokio::time::timeout(timeout, async {
            if let Some((keeper, responses)) = stream.as_mut() {
                keeper.keep_alive().await?;
                match responses.message().await? {
                    Some(r) => Ok(r.ttl() > 0),
                    None => Err(etcd_client::Error::LeaseKeepAliveError(
                        "keep-alive stream closed".into(),
                    )),
                }
            } else {
                // Opening the stream sends the first keep-alive and waits for its answer.
                stream = Some(lease.keep_alive(session.id).await?);
                Ok(true)
            }
        })
        .await;
        match outcome {
            Ok(Ok(true)) => {
                session.state.send_modify(|s| {
                    s.last_ok_sent = s.last_ok_sent.max(sent_at);
                    s.last_failed_sent = None;
                    s.last_error = None;
                });
                next_periodic = sent_at + period;
            }
            Ok(Ok(false)) => return session_gone(&inner, &session),
            Ok(Err(e)) if error::is_lease_not_found(&e) => return session_gone(&inner, &session),
            Ok(Err(e)) => {
                stream = None;
                let e = error::map("lease keep-alive", Effect::Read, e);
                tracing::debug!(session = session.id, error = %e, "keep-alive failed");
                fail(&session, sent_at, e.to_string());
                next_periodic = Instant::now() + retry;
            }
            Err(_) => {
                stream = None;
                fail(&session, sent_at, format!("no keep-alive answer within {timeout:?}"));
                next_periodic = Instant::now() + retry;
            }
        }
    }
}

fn fail(session: &Session, sent_at: Instant, why: String) {
    session.state.send_modify(|s| {
        s.last_failed_sent = Some(sent_at);
        s.last_error = Some(why);
    });
}

fn session_gone<H: SessionHost>(inner: &Weak<H>, session: &Session) {
    tracing::warn!(
        session = session.id,
        "etcd session lease expired; its held records are gone"
    );
    session.mark_dead();
    if let Some(store) = inner.upgrade() {
        store.session_gone(session.id);
    }
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
        s.mark_dead();
        assert!(!s.covers(t0, Duration::from_millis(10)));
        assert_eq!(
            s.cover(t0, Duration::from_millis(10), Duration::from_secs(1)).await,
            Cover::Dead
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_renewal_waits_for_a_keep_alive_sent_after_it() {
        let t0 = Instant::now();
        let s = std::sync::Arc::new(Session::new(1, Duration::from_secs(2), t0));
        tokio::time::advance(Duration::from_secs(1)).await;
        let call = Instant::now();
        let waiter = {
            let s = s.clone();
            tokio::spawn(async move { s.cover(call, Duration::from_secs(2), Duration::from_secs(5)).await })
        };
        tokio::task::yield_now().await;
        // An answer to a keep-alive sent before the call does not count.
        s.state
            .send_modify(|st| st.last_ok_sent = call - Duration::from_millis(1));
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        s.state.send_modify(|st| st.last_ok_sent = call);
        assert_eq!(waiter.await.ok(), Some(Cover::Covered));
        // A failure of a keep-alive sent after the call fails the renewal.
        let call2 = Instant::now() + Duration::from_millis(10);
        tokio::time::advance(Duration::from_millis(10)).await;
        let s2 = s.clone();
        let w2 = tokio::spawn(async move { s2.cover(call2, Duration::from_secs(2), Duration::from_secs(5)).await });
        tokio::task::yield_now().await;
        s.state.send_modify(|st| {
            st.last_failed_sent = Some(call2);
            st.last_error = Some("down".into());
        });
        assert_eq!(w2.await.ok(), Some(Cover::Failed("down".into())));
    }
}
