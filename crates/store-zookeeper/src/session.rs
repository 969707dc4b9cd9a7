//! The store's ZooKeeper sessions: one main session for reads, watches and vacant
//! records, and one per TTL class for held records (a held record is an EPHEMERAL znode
//! of the session of its class, which lives as long as the session).
//!
//! A TTL class is the record's TTL rounded up to whole seconds; its session is opened
//! with that session timeout, and the timeout the ensemble negotiates (clamped to its
//! `minSessionTimeout`..`maxSessionTimeout`) is the record's real TTL: a held record is
//! written with it and the grant reports it.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use tokio::time::Instant;

use leasehold_core::store::session::Session;
use leasehold_core::{Result, Ttl};
use zookeeper_client as zk;

use crate::error::{self, Effect};

/// The main session's timeout.
pub(crate) const MAIN_SESSION_TIMEOUT: Duration = Duration::from_secs(10);

/// How often a session's state task checks that its session is still in use.
const STATE_IDLE: Duration = Duration::from_secs(1);

/// One ZooKeeper session (one connection to the ensemble).
#[derive(Debug)]
pub(crate) struct ZkSession {
    pub(crate) client: zk::Client,
    pub(crate) id: i64,
    /// The negotiated session timeout.
    pub(crate) timeout: Duration,
    dead: AtomicBool,
    /// What the ensemble's leader has surely heard of this session.
    heard: Mutex<Heard>,
    /// How long a follower may take to pass a heartbeat it answered on to the leader.
    report_lag: Duration,
}

/// What the leader has surely heard of a session, as far as this process can tell.
///
/// The leader alone expires sessions, from the heartbeats it saw: those of clients
/// connected to it, and those a follower reports in its answer to the leader's next
/// ping (every half tick). A request a follower answered proves the session alive *to
/// the follower*; it reaches the leader only with that report, and not at all if the
/// follower dies or is cut off first. A request that the follower forwards to the
/// leader (`sync`, a `multi`) travels on the same connection as those reports, after
/// them: once one is answered that was sent at least the session's report lag after
/// an earlier request was answered, that earlier heartbeat reached the leader, and the
/// session lives at least until that earlier request's send time plus the timeout.
#[derive(Debug)]
struct Heard {
    /// The send time of the latest request whose heartbeat surely reached the leader
    /// (at first, the session handshake's: the leader created the session after it).
    since: Instant,
    /// Requests answered on the session whose heartbeat may not have reached the leader
    /// yet: (sent, answered), oldest first.
    unconfirmed: VecDeque<(Instant, Instant)>,
    /// When the latest of the store's own requests (not a heartbeat `sync`) was
    /// answered: a `sync` sent a report lag after it confirms it.
    last_request: Option<Instant>,
}

/// The most unconfirmed requests a session remembers, the newest (with one per
/// sixteenth of the report lag at most, they span at least four lags, so a request
/// through the leader always finds some answered a lag before it).
const UNCONFIRMED_MAX: usize = 64;

impl Session for ZkSession {
    fn id(&self) -> i64 {
        self.id
    }
    fn is_dead(&self) -> bool {
        self.dead.load(Ordering::SeqCst) || self.client.state().is_terminated()
    }
}

impl ZkSession {
    /// True once the session ended (expired, closed) by the server's word or ours.
    pub(crate) fn is_dead_now(&self) -> bool {
        Session::is_dead(self)
    }

    pub(crate) fn mark_dead(&self) {
        self.dead.store(true, Ordering::SeqCst);
    }

    /// The TTL of the records held on this session: its negotiated timeout.
    pub(crate) fn ttl(&self) -> Result<Ttl> {
        Ttl::from_millis(u64::try_from(self.timeout.as_millis()).unwrap_or(u64::MAX))
    }

    fn heard(&self) -> std::sync::MutexGuard<'_, Heard> {
        self.heard.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A request sent at `sent` was answered now: the connected server heard the
    /// session's heartbeat.
    pub(crate) fn answered(&self, sent: Instant) {
        let now = Instant::now();
        let mut heard = self.heard();
        heard.answered(sent, now, self.report_lag / 16);
        heard.last_request = Some(now);
    }

    /// The heartbeat `sync` sent at `sent` was answered: a heartbeat the next request
    /// through the leader confirms, and itself such a request.
    fn synced(&self, sent: Instant) {
        let mut heard = self.heard();
        heard.answered(sent, Instant::now(), self.report_lag / 16);
        heard.through_leader(sent, self.report_lag);
    }

    /// A request sent at `sent` went through the leader and was answered: every
    /// heartbeat answered at least the report lag before `sent` reached the leader.
    pub(crate) fn through_leader(&self, sent: Instant) {
        self.heard().through_leader(sent, self.report_lag);
    }

    /// How long after `from` the leader keeps the session at least (zero if it may
    /// have expired it already): the window a grant or renewal sent at `from` may be
    /// trusted for.
    pub(crate) fn lives_after(&self, from: Instant) -> Duration {
        (self.heard().since + self.timeout).saturating_duration_since(from)
    }
}

impl Heard {
    /// Nothing heard yet but the session handshake, sent at `handshake`.
    fn new(handshake: Instant) -> Self {
        Self {
            since: handshake,
            unconfirmed: VecDeque::new(),
            last_request: None,
        }
    }

    /// Remembers a request answered at `answered`, unless one answered less than
    /// `grain` earlier is remembered already (keeping the earlier one: the session's
    /// known life only comes out shorter). A full list forgets its oldest request: the
    /// next request through the leader confirms the newest it can, and a busy session
    /// (a request every few ms) would otherwise keep only the first requests after each
    /// confirmation, one confirmation interval older than needed.
    fn answered(&mut self, sent: Instant, answered: Instant, grain: Duration) {
        let close = self
            .unconfirmed
            .back()
            .is_some_and(|&(_, last)| answered < last + grain);
        if close {
            return;
        }
        if self.unconfirmed.len() == UNCONFIRMED_MAX {
            self.unconfirmed.pop_front();
        }
        self.unconfirmed.push_back((sent, answered));
    }

    fn through_leader(&mut self, sent: Instant, lag: Duration) {
        let Some(cutoff) = sent.checked_sub(lag) else { return };
        while let Some(&(s, answered)) = self.unconfirmed.front() {
            if answered > cutoff {
                break;
            }
            self.since = self.since.max(s);
            self.unconfirmed.pop_front();
        }
    }
}

/// How long a follower may take to pass a heartbeat on to the leader: it answers the
/// leader's pings (every half tick) with the sessions it heard from, so half a tick,
/// plus a quarter tick for the two servers' scheduling. Without the ensemble's tick
/// ([`crate::ZooKeeperConfig::with_tick_time`]), the longest tick a session of
/// `timeout` allows under ZooKeeper's default `minSessionTimeout` of two ticks.
pub(crate) fn report_lag(tick: Option<Duration>, timeout: Duration) -> Duration {
    tick.unwrap_or(timeout / 2) * 3 / 4
}

/// The class of `ttl`: whole seconds, rounded up.
pub(crate) fn class_of(ttl: Duration) -> Duration {
    let secs = ttl.as_secs() + u64::from(ttl.subsec_nanos() > 0);
    Duration::from_secs(secs.max(1))
}

/// What a session's state task reports to its store.
pub(crate) trait SessionHost: Send + Sync + 'static {
    /// The server says the session is gone (expired, closed, refused).
    fn session_gone(&self, id: i64);
    /// A heartbeat was sent on a session.
    fn heartbeat_sent(&self);
}

/// How a session is opened.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Opening {
    /// The session timeout asked for.
    pub(crate) timeout: Duration,
    /// The bound on the handshake and on each heartbeat.
    pub(crate) bound: Duration,
    /// The ensemble's tick, if known.
    pub(crate) tick: Option<Duration>,
    /// Send a `sync` through the leader every eighth of the timeout, so that what the
    /// leader heard of the session stays known (sessions that hold records).
    pub(crate) heartbeat: bool,
}

/// Opens a session to `cluster`; the task it starts marks the session dead and tells
/// `host` when the server ends it.
pub(crate) async fn open<H: SessionHost>(cluster: &str, how: Opening, host: Weak<H>) -> Result<Arc<ZkSession>> {
    let Opening { timeout, bound, .. } = how;
    let handshake = Instant::now();
    let connect = zk::Client::connector()
        .with_session_timeout(timeout)
        .with_connection_timeout(bound)
        .connect(cluster);
    let client = match tokio::time::timeout(bound, connect).await {
        Err(_) => {
            // The client retries a refused connection until its bound, then says only
            // that it timed out: one connection attempt to each server tells why.
            let why = servers_unanswered(cluster, (bound / 5).min(PROBE_LIMIT)).await;
            return Err(error::handshake_unanswered(bound, &why));
        }
        Ok(r) => r.map_err(|e| error::map("session handshake", Effect::Read, e))?,
    };
    let negotiated = client.session_timeout();
    let session = Arc::new(ZkSession {
        id: client.session_id().0,
        timeout: negotiated,
        client,
        dead: AtomicBool::new(false),
        heard: Mutex::new(Heard::new(handshake)),
        report_lag: report_lag(how.tick, negotiated),
    });
    tracing::debug!(
        session = session.id,
        timeout_ms = session.timeout.as_millis(),
        "opened a ZooKeeper session"
    );
    let host_for_heartbeat = host.clone();
    tokio::spawn(watch_state(
        Arc::downgrade(&session),
        session.client.state_watcher(),
        host,
    ));
    if how.heartbeat {
        tokio::spawn(heartbeat(Arc::downgrade(&session), bound, host_for_heartbeat));
    }
    Ok(session)
}

/// The longest a server of the ensemble is waited for when asking why a handshake got
/// no answer (and at most a fifth of the request timeout).
const PROBE_LIMIT: Duration = Duration::from_secs(1);

/// Why the servers of `cluster` (`host:port[,host:port...][/chroot]`) gave a handshake no
/// answer: one TCP connection attempt to each, all at once, each waited for at most
/// `within` (a refusal answers in milliseconds): `127.0.0.1:2181: Connection refused (os
/// error 111)`, or that it accepts connections, for each server.
async fn servers_unanswered(cluster: &str, within: Duration) -> String {
    let hosts = cluster.split('/').next().unwrap_or(cluster);
    let attempts = hosts
        .split(',')
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .map(|host| async move {
            match tokio::time::timeout(within, tokio::net::TcpStream::connect(host)).await {
                Ok(Ok(_)) => format!("{host}: accepts connections, no session handshake answered"),
                Ok(Err(e)) => format!("{host}: {e}"),
                Err(_) => format!("{host}: no connection within {within:?}"),
            }
        });
    futures::future::join_all(attempts).await.join("; ")
}

/// Sends a `sync` on `session` while it lives: every eighth of its timeout, and on a
/// busy session sooner, a report lag after the store's latest request was answered (at
/// most one per [`busy_period`]). The follower answers a `sync` only after forwarding it
/// to the leader, so each answer confirms the heartbeats answered a report lag before it
/// was sent ([`ZkSession::through_leader`]): without the sooner ones, a session renewing
/// thousands of leases was confirmed up to two eighths of its timeout late, and every
/// renewal was trusted for that much less (and sent that much sooner).
async fn heartbeat<H: SessionHost>(session: Weak<ZkSession>, bound: Duration, host: Weak<H>) {
    let (every, busy, lag) = match session.upgrade() {
        Some(s) => {
            let every = (s.timeout / 8).max(Duration::from_millis(10));
            (every, busy_period(s.timeout, s.report_lag).min(every), s.report_lag)
        }
        None => return,
    };
    let mut last = Instant::now();
    loop {
        tokio::time::sleep_until((Instant::now() + busy).min(last + every)).await;
        let Some(s) = session.upgrade() else { return };
        if s.is_dead_now() {
            return;
        }
        let now = Instant::now();
        if !sync_due(now, last, every, busy, lag, s.heard().last_request) {
            continue;
        }
        if let Some(h) = host.upgrade() {
            h.heartbeat_sent();
        }
        last = now;
        if let Ok(Ok(())) = tokio::time::timeout(bound, s.client.sync("/")).await {
            s.synced(now);
        }
    }
}

/// How often a busy session may send a `sync`: a thirty-second of its timeout, and not
/// more often than its report lag (a `sync` confirms nothing answered within a lag).
fn busy_period(timeout: Duration, lag: Duration) -> Duration {
    (timeout / 32).max(lag).max(Duration::from_millis(10))
}

/// Whether the heartbeat task sends a `sync` now (`last`: the previous one's send): an
/// eighth of the timeout (`every`) after the previous one, or, a `busy` period after
/// it, when a request of the store's own was answered at least a report lag ago and
/// after the previous `sync` could confirm it.
fn sync_due(
    now: Instant,
    last: Instant,
    every: Duration,
    busy: Duration,
    lag: Duration,
    request: Option<Instant>,
) -> bool {
    if now >= last + every {
        return true;
    }
    now >= last + busy && request.is_some_and(|answered| answered + lag > last && now >= answered + lag)
}

async fn watch_state<H: SessionHost>(session: Weak<ZkSession>, mut states: zk::StateWatcher, host: Weak<H>) {
    loop {
        tokio::select! {
            state = states.changed() => {
                if state.is_terminated() {
                    let Some(s) = session.upgrade() else { return };
                    s.mark_dead();
                    tracing::debug!(session = s.id, ?state, "ZooKeeper session ended");
                    if let Some(h) = host.upgrade() {
                        h.session_gone(s.id);
                    }
                    return;
                }
            }
            () = tokio::time::sleep(STATE_IDLE) => {
                if session.strong_count() == 0 {
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn only_heartbeats_answered_a_lag_before_a_request_through_the_leader_count() {
        let t0 = Instant::now();
        let mut heard = Heard::new(t0);
        let lag = ms(75);
        let grain = ms(4);
        heard.answered(t0 + ms(100), t0 + ms(110), grain);
        heard.answered(t0 + ms(200), t0 + ms(210), grain);
        // Answered within the grain of the last one: not remembered.
        heard.answered(t0 + ms(205), t0 + ms(212), grain);
        // A request through the leader sent 60 ms after the second answer: only the
        // first heartbeat (answered 150 ms before) surely reached the leader.
        heard.through_leader(t0 + ms(270), lag);
        assert_eq!(heard.since, t0 + ms(100));
        assert_eq!(heard.unconfirmed.len(), 1);
        // Answers alone, however many, confirm nothing.
        heard.answered(t0 + ms(300), t0 + ms(301), grain);
        assert_eq!(heard.since, t0 + ms(100));
        heard.through_leader(t0 + ms(400), lag);
        assert_eq!(heard.since, t0 + ms(300));
        assert!(heard.unconfirmed.is_empty());
        // Never backwards.
        heard.answered(t0 + ms(50), t0 + ms(420), grain);
        heard.through_leader(t0 + ms(500), lag);
        assert_eq!(heard.since, t0 + ms(300));
    }

    /// A busy session answers far more requests than the list keeps between two
    /// requests through the leader: the list keeps the newest, so the confirmation
    /// advances the session's known life to just a lag before it, not to the first
    /// requests after the previous confirmation.
    #[test]
    fn a_busy_session_is_confirmed_up_to_a_lag_before_the_request_through_the_leader() {
        let t0 = Instant::now();
        let mut heard = Heard::new(t0);
        let (lag, grain) = (ms(75), ms(4));
        // A request answered every 5 ms for 1.9 s (380 of them; the list keeps 64).
        for i in 0..380 {
            heard.answered(t0 + ms(5 * i), t0 + ms(5 * i + 1), grain);
        }
        assert_eq!(heard.unconfirmed.len(), UNCONFIRMED_MAX);
        // A sync sent at 1.9 s: every request answered by 1.825 s reached the leader.
        heard.through_leader(t0 + ms(1_900), lag);
        assert_eq!(heard.since, t0 + ms(1_820), "the newest request answered a lag before");
        // The requests answered within the lag stay, for the next confirmation.
        assert_eq!(heard.unconfirmed.len(), 15);
    }

    /// An idle session sends a `sync` every eighth of its timeout; a busy one a lag after
    /// its latest answered request, no more often than its busy period, and not again
    /// for a request the previous `sync` already confirms.
    #[test]
    fn a_sync_comes_sooner_only_for_a_request_no_sync_confirms_yet() {
        let t0 = Instant::now();
        let (every, lag) = (ms(2_000), ms(75));
        let busy = busy_period(Duration::from_secs(16), lag);
        assert_eq!(busy, ms(500));
        let due = |now: u64, last: u64, request: Option<u64>| {
            sync_due(
                t0 + ms(now),
                t0 + ms(last),
                every,
                busy,
                lag,
                request.map(|r| t0 + ms(r)),
            )
        };
        // Idle: only the regular one.
        assert!(!due(1_999, 0, None));
        assert!(due(2_000, 0, None));
        // A request answered at 600 ms: a sync from 675 ms on (busy period passed).
        assert!(!due(600, 0, Some(600)));
        assert!(due(675, 0, Some(600)));
        // Not before the busy period since the previous sync.
        assert!(!due(400, 0, Some(100)));
        assert!(due(500, 0, Some(100)));
        // A sync sent at 700 ms confirmed it: nothing sooner until a newer request.
        assert!(!due(1_500, 700, Some(600)));
        assert!(due(2_700, 700, Some(600)));
        // A request answered just before that sync (within the lag): the next one confirms it.
        assert!(due(1_200, 700, Some(690)));
        // The report lag of a long tick bounds the busy period from below.
        assert_eq!(busy_period(Duration::from_secs(1), ms(75)), ms(75));
    }

    #[test]
    fn the_lag_is_three_quarters_of_a_tick() {
        assert_eq!(report_lag(Some(ms(100)), ms(1000)), ms(75));
        // Unknown tick: the longest a session of that timeout allows (timeout / 2).
        assert_eq!(report_lag(None, ms(1000)), ms(375));
        assert_eq!(report_lag(None, Duration::from_secs(4)), ms(1500));
    }

    #[test]
    fn classes() {
        assert_eq!(class_of(Duration::from_millis(300)), Duration::from_secs(1));
        assert_eq!(class_of(Duration::from_secs(1)), Duration::from_secs(1));
        assert_eq!(class_of(Duration::from_millis(2500)), Duration::from_secs(3));
        assert_eq!(class_of(Duration::from_millis(10)), Duration::from_secs(1));
    }
}
