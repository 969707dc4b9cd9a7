//! The store's ZooKeeper sessions: one main session for reads, watches and vacant
//! records, and one per TTL class for held records (a held record is an EPHEMERAL znode
//! of the session of its class, which lives as long as the session).
//!
//! A TTL class is the record's TTL rounded up to whole seconds; its session is opened
//! with that session timeout, and the timeout the ensemble negotiates (clamped to its
//! `minSessionTimeout`..`maxSessionTimeout`) is the record's real TTL: a held record is
//! written with it and the grant reports it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

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
}

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
}

/// Opens a session of `timeout` to `cluster` within `bound`; the task it starts marks
/// the session dead and tells `host` when the server ends it.
pub(crate) async fn open<H: SessionHost>(
    cluster: &str,
    timeout: Duration,
    bound: Duration,
    host: Weak<H>,
) -> Result<Arc<ZkSession>> {
    let connect = zk::Client::connector()
        .with_session_timeout(timeout)
        .with_connection_timeout(bound)
        .connect(cluster);
    let client = match tokio::time::timeout(bound, connect).await {
        Err(_) => return Err(error::timed_out("session handshake", Effect::Read, bound)),
        Ok(r) => r.map_err(|e| error::map("session handshake", Effect::Read, e))?,
    };
    let session = Arc::new(ZkSession {
        id: client.session_id().0,
        timeout: client.session_timeout(),
        client,
        dead: AtomicBool::new(false),
    });
    tracing::debug!(
        session = session.id,
        timeout_ms = session.timeout.as_millis(),
        "opened a ZooKeeper session"
    );
    tokio::spawn(watch_state(
        Arc::downgrade(&session),
        session.client.state_watcher(),
        host,
    ));
    Ok(session)
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

    #[test]
    fn classes() {
        assert_eq!(class_of(Duration::from_millis(300)), Duration::from_secs(1));
        assert_eq!(class_of(Duration::from_secs(1)), Duration::from_secs(1));
        assert_eq!(class_of(Duration::from_millis(2500)), Duration::from_secs(3));
        assert_eq!(class_of(Duration::from_millis(10)), Duration::from_secs(1));
    }
}
