//! Waiting for a lease without a thundering herd.
//!
//! All waiters of one name in one store share one etcd watch on the record key. Each
//! change wakes **one** waiter (the longest waiting whose last seen version differs from
//! the new one): a release wakes one acquirer, whose grant (a change) wakes the next,
//! which finds it held and waits again. Fifty waiters cost one watch and O(1) requests
//! per change, not fifty.
//!
//! A wake-up while the lease is **free** (the record released to vacant, or deleted when
//! its holder's session expired) is a baton:
//! whoever gets it should take the lease, and taking it is a change that wakes the
//! next. Not every waiter takes it: an election observer (`wait_for_change` from a
//! read loop) shares the watch with the same process's acquirer. So the baton moves on
//! to the next waiter that has not seen the lease free when the woken one waits again
//! having seen it free (it did not take the lease), or when it is still free
//! [`BATON_PASS`] after the wake-up (the woken waiter went away). Without this, an
//! observer woken by a leader's expiry left its process's acquirer asleep for a whole
//! `max_wait`: the etcd leader-election test measured new leaders at 2 × TTL in 2 runs
//! of 10.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use etcd_client::{EventType, WatchOptions};
use leasehold_core::{LeaseName, Result, store::record_codec};
use tokio::sync::oneshot;

use crate::state::RecordKv;

/// How long a watch with no waiters stays open (in case they come back).
const IDLE_CLOSE: Duration = Duration::from_secs(2);
/// Pause before reopening a watch that failed.
const REOPEN_PAUSE: Duration = Duration::from_millis(200);
/// How long a waiter woken while the lease is free has to take it before the next
/// waiter is woken too: a read and a write take a few milliseconds on a healthy
/// cluster, so a second taker is woken only when the first has gone.
pub(crate) const BATON_PASS: Duration = Duration::from_millis(500);

/// The key's state as the watch knows it: `Some(None)` absent, `Some(Some(v))` present
/// at mod revision `v`, `None` not known yet.
type Current = Option<Option<i64>>;

struct Waiter {
    id: u64,
    seen: Option<i64>,
    wake: oneshot::Sender<()>,
}

#[derive(Default)]
struct WatchState {
    current: Current,
    /// The revision `current` was seen at; the watch resumes after it.
    rev: i64,
    /// Whether `current` is known to be free to claim: absent, or a vacant record.
    free: bool,
    waiters: VecDeque<Waiter>,
    running: bool,
    /// When the baton (a wake-up while the lease is free) is passed on if the lease is
    /// still free; `None` when no waiter holds it.
    baton_due: Option<tokio::time::Instant>,
}

#[derive(Default)]
pub(crate) struct NameWatch {
    state: Mutex<WatchState>,
}

impl NameWatch {
    fn lock(&self) -> std::sync::MutexGuard<'_, WatchState> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The per-store registry of watched names.
#[derive(Default)]
pub(crate) struct WaitHub {
    names: Mutex<HashMap<LeaseName, Arc<NameWatch>>>,
    next_id: AtomicU64,
}

impl std::fmt::Debug for WaitHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.names.lock().map(|m| m.len()).unwrap_or(0);
        f.debug_struct("WaitHub").field("watched_names", &n).finish()
    }
}

impl WaitHub {
    fn entry(&self, name: &LeaseName) -> Arc<NameWatch> {
        self.names
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(name.clone())
            .or_default()
            .clone()
    }

    fn remove_if(&self, name: &LeaseName, nw: &Arc<NameWatch>) {
        let mut names = self.names.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if names.get(name).is_some_and(|e| Arc::ptr_eq(e, nw)) {
            names.remove(name);
        }
    }
}

/// What a name's watch needs from the store that owns it: the wait hub, the record's
/// key, what the store last saw of the record (or a fresh read), a watch client, and
/// to hear of each event. The store implements it, so this module does not depend on
/// the store's internals.
#[async_trait::async_trait]
pub(crate) trait WatchHost: Send + Sync + 'static {
    /// The store's waiters, one entry per watched name.
    fn hub(&self) -> &WaitHub;
    /// The key of `name`'s lease record.
    fn record_key(&self, name: &LeaseName) -> Vec<u8>;
    /// What the store last saw of `name`'s record: `(mod revision or absent, revision)`.
    fn last_seen(&self, name: &LeaseName) -> Option<(Option<i64>, i64)>;
    /// Reads `name`'s record afresh: `(mod revision or absent, revision)`.
    async fn read_state(&self, name: &LeaseName) -> Result<(Option<i64>, i64)>;
    /// A watch client of the store's etcd client (counted as one watch request).
    fn watch_client(&self) -> etcd_client::WatchClient;
    /// An event on `name`'s record at revision `rev` (`None`: deleted).
    fn observe_event(&self, name: &LeaseName, rev: i64, kv: Option<&RecordKv>);
}

/// Waits until `name`'s record may have changed from `seen` (`None`: absent), or
/// `max_wait` passed.
pub(crate) async fn wait<H: WatchHost>(
    inner: &Arc<H>,
    name: &LeaseName,
    seen: Option<i64>,
    max_wait: Duration,
) -> Result<()> {
    let nw = inner.hub().entry(name);
    let id = inner.hub().next_id.fetch_add(1, Ordering::Relaxed);
    let (tx, rx) = oneshot::channel();
    let spawn = {
        let mut st = nw.lock();
        if let Some(cur) = st.current {
            if cur != seen {
                // It changed before we started waiting.
                return Ok(());
            }
        }
        st.waiters.push_back(Waiter { id, seen, wake: tx });
        if st.free && st.current == Some(seen) {
            // This caller saw the lease free and waits rather than taking it (an
            // observer): the baton it may hold goes to one that has not seen it free.
            wake_one(&mut st);
        }
        !std::mem::replace(&mut st.running, true)
    };
    if spawn {
        tokio::spawn(run(Arc::downgrade(inner), name.clone(), nw.clone()));
    }
    // Removes the registration however this future ends, dropped included.
    let _leave = Leave { nw: &nw, id };
    let _ = tokio::time::timeout(max_wait, rx).await;
    Ok(())
}

/// Drop guard of one registered wait.
struct Leave<'a> {
    nw: &'a NameWatch,
    id: u64,
}

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        self.nw.lock().waiters.retain(|w| w.id != self.id);
    }
}

/// Wakes the longest-waiting waiter that has not seen the current state. While the
/// lease is free that wake-up is the baton, passed on at `baton_due` if still free.
fn wake_one(st: &mut WatchState) {
    st.baton_due = None;
    let Some(cur) = st.current else { return };
    while let Some(i) = st.waiters.iter().position(|w| w.seen != cur) {
        if let Some(w) = st.waiters.remove(i) {
            if w.wake.send(()).is_ok() {
                if st.free {
                    st.baton_due = Some(tokio::time::Instant::now() + BATON_PASS);
                }
                return;
            }
        }
    }
}

/// What the watch loop sleeps until when no event comes: the baton's pass time, or
/// the next check (often enough that a baton handed out by `wait` meanwhile is passed
/// on within a tick of its due time).
fn next_tick(st: &WatchState) -> tokio::time::Instant {
    let check = tokio::time::Instant::now() + BATON_PASS / 4;
    st.baton_due.map_or(check, |due| due.min(check))
}

/// One name's watch: runs while it has waiters.
async fn run<H: WatchHost>(inner: Weak<H>, name: LeaseName, nw: Arc<NameWatch>) {
    let mut idle_since: Option<tokio::time::Instant> = None;
    let mut fresh_read = false;
    'reopen: loop {
        let Some(store) = inner.upgrade() else {
            nw.lock().running = false;
            return;
        };
        let record_key = store.record_key(&name);
        // Where to start: the state this store last saw, or a fresh read.
        let start = {
            let st = nw.lock();
            st.current.map(|c| (c, st.rev))
        };
        let start = match (start, fresh_read) {
            (Some(s), false) => Some(s),
            (None, false) if store.last_seen(&name).is_some() => store.last_seen(&name),
            _ => store.read_state(&name).await.ok(),
        };
        fresh_read = false;
        let Some((current, rev)) = start else {
            drop(store);
            tokio::time::sleep(REOPEN_PAUSE).await;
            continue;
        };
        {
            let mut st = nw.lock();
            if st.current.is_none() || st.rev < rev {
                st.current = Some(current);
                st.rev = rev;
                // A present record's vacancy is not known from here; no baton for it.
                st.free = current.is_none();
            }
            wake_one(&mut st);
        }
        let from = nw.lock().rev + 1;
        let mut client = store.watch_client();
        drop(store);
        let opened = client
            .watch(record_key.clone(), Some(WatchOptions::new().with_start_revision(from)))
            .await;
        let mut stream = match opened {
            Ok(s) => s,
            Err(e) => {
                tracing::debug!(lease = %name, error = %e, "watch failed to open");
                tokio::time::sleep(REOPEN_PAUSE).await;
                continue;
            }
        };
        loop {
            let tick = next_tick(&nw.lock());
            let msg = tokio::select! {
                m = stream.message() => m,
                () = tokio::time::sleep_until(tick) => {
                    let mut st = nw.lock();
                    if st.baton_due.is_some_and(|due| due <= tokio::time::Instant::now()) {
                        // Still free: whoever had the baton did not take the lease.
                        wake_one(&mut st);
                    }
                    if st.waiters.is_empty() {
                        let since = *idle_since.get_or_insert_with(tokio::time::Instant::now);
                        if since.elapsed() >= IDLE_CLOSE {
                            st.running = false;
                            drop(st);
                            if let Some(store) = inner.upgrade() {
                                store.hub().remove_if(&name, &nw);
                            }
                            return;
                        }
                    } else {
                        idle_since = None;
                    }
                    continue;
                }
            };
            match msg {
                Ok(Some(resp)) => {
                    if resp.canceled() {
                        // Compacted past our revision, or refused: start over from a read.
                        {
                            let mut st = nw.lock();
                            st.current = None;
                            st.free = false;
                        }
                        fresh_read = true;
                        tokio::time::sleep(REOPEN_PAUSE).await;
                        continue 'reopen;
                    }
                    let mut last = None;
                    for ev in resp.events() {
                        let Some(kv) = ev.kv() else { continue };
                        let (rev, state, rkv, free) = match ev.event_type() {
                            EventType::Put => (
                                kv.mod_revision(),
                                Some(kv.mod_revision()),
                                Some(RecordKv {
                                    version: kv.mod_revision(),
                                    lease: kv.lease(),
                                    bytes: kv.value().to_vec(),
                                }),
                                record_codec::decode(&name, kv.value()).is_ok_and(|r| r.is_vacant()),
                            ),
                            EventType::Delete => (kv.mod_revision(), None, None, true),
                        };
                        if let Some(store) = inner.upgrade() {
                            store.observe_event(&name, rev, rkv.as_ref());
                        }
                        last = Some((state, rev, free));
                    }
                    if let Some((state, rev, free)) = last {
                        let mut st = nw.lock();
                        st.current = Some(state);
                        st.rev = rev;
                        st.free = free;
                        wake_one(&mut st);
                    }
                }
                Ok(None) | Err(_) => {
                    tokio::time::sleep(REOPEN_PAUSE).await;
                    continue 'reopen;
                }
            }
        }
    }
}
