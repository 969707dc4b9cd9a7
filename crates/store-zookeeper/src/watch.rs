//! Waiting for a release: one `exists` watch per name while the name has waiters in
//! this store, feeding the core's [`WakeHub`](leasehold_core::store::WakeHub).
//!
//! A name's watch task arms the watch first and then reads both znodes, so a change
//! after the read always fires the watch. What the read shows is announced to the hub
//! as a change at the record's position ([`Ver::position`]): the counter's version, which
//! every write of the name raises, doubled; a record gone (released by delete, expired
//! with its session, deleted by an expiry) is the odd position after the last record's.
//! The hub wakes **one** acquirer per change that left the lease free, and every observer
//! per change. A watch event
//! (ZooKeeper's watches are one-shot) re-arms and reads again. A lost connection wakes
//! every waiter (events may have been missed) and the task tries again a moment later.
//! The task ends when the name has had no waiter for a second.

use std::sync::{Arc, PoisonError, Weak};
use std::time::Duration;

use leasehold_core::store::{Version, Wait};
use leasehold_core::{LeaseName, Result};

use crate::error::Effect;
use crate::nodes::{Decoded, Snapshot, Ver};
use crate::store::Inner;

/// How often an armed watch task checks that its name still has waiters.
const IDLE_CHECK: Duration = Duration::from_secs(1);

/// Pause before arming again after a failure.
const RETRY: Duration = Duration::from_millis(200);

/// Waits until `name` may have changed from `seen`, as [`leasehold_core::store::CasStore::wait_for_change`].
pub(crate) async fn wait(inner: &Arc<Inner>, name: &LeaseName, seen: Option<&Version>, wait: Wait) -> Result<()> {
    let seen = match seen {
        None => 0,
        Some(v) => match Ver::parse(v) {
            Ok(v) => v.position(),
            // Not one of ours: it has certainly changed from the caller's view.
            Err(_) => return Ok(()),
        },
    };
    let fresh = inner
        .watching
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(name.clone());
    if fresh {
        tokio::spawn(watch_name(inner.me.clone(), name.clone()));
    }
    inner.hub.wait(name.as_str(), seen, wait).await;
    Ok(())
}

/// Announces what `snap` shows of `name` to the hub.
pub(crate) fn announce(inner: &Inner, name: &LeaseName, snap: &Snapshot) {
    match snap.decode(name) {
        Ok(Decoded::Present(v, r)) => inner.hub.announce(name.as_str(), v.position(), r.is_vacant()),
        Ok(Decoded::Kept(v, _)) => inner.hub.announce(name.as_str(), v.position(), false),
        Ok(Decoded::Absent) => {
            if let Some(c) = snap.counter {
                let at = Ver {
                    counter: c.version,
                    record: 0,
                }
                .position()
                    + 1;
                inner.hub.announce_deleted(name.as_str(), at);
            }
        }
        // A corrupt record wakes nobody: waiters look again at their deadline.
        Err(_) => {}
    }
}

async fn watch_name(me: Weak<Inner>, name: LeaseName) {
    let mut idle = false;
    loop {
        let watcher = {
            let Some(inner) = me.upgrade() else { return };
            {
                let mut watching = inner.watching.lock().unwrap_or_else(PoisonError::into_inner);
                if idle && inner.hub.waiting(name.as_str()) == 0 {
                    watching.remove(&name);
                    return;
                }
            }
            match arm(&inner, &name).await {
                Ok(w) => w,
                Err(e) => {
                    tracing::debug!(lease = %name, error = %e, "could not watch; waking the waiters");
                    inner.hub.wake_all();
                    drop(inner);
                    tokio::time::sleep(RETRY).await;
                    idle = true;
                    continue;
                }
            }
        };
        let changed = watcher.changed();
        tokio::pin!(changed);
        loop {
            tokio::select! {
                _ = &mut changed => {
                    idle = false;
                    break;
                }
                () = tokio::time::sleep(IDLE_CHECK) => {
                    let Some(inner) = me.upgrade() else { return };
                    let mut watching = inner.watching.lock().unwrap_or_else(PoisonError::into_inner);
                    if inner.hub.waiting(name.as_str()) == 0 {
                        watching.remove(&name);
                        return;
                    }
                }
            }
        }
    }
}

/// Arms an `exists` watch on the record znode, then reads and announces both znodes.
async fn arm(inner: &Inner, name: &LeaseName) -> Result<zookeeper_client::OneshotWatcher> {
    let client = inner.main_client().await?;
    let path = inner.paths(name).record;
    inner.stats.watch();
    let (_, watcher) = inner
        .bounded("watch", Effect::Read, client.check_and_watch_stat(&path))
        .await?;
    match inner.read_snapshot(name).await {
        Ok(snap) => announce(inner, name, &snap),
        // A corrupt znode wakes nobody (waiters look again at their deadline and get
        // the error); the watch still shows when it is fixed.
        Err(leasehold_core::Error::CorruptRecord { .. }) => {}
        Err(e) => return Err(e),
    }
    Ok(watcher)
}
