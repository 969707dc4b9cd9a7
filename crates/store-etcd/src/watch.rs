//! Waking waiters on an etcd watch, through the core's [`WakeHub`].
//!
//! All waiters of one name in one store wait in the store's hub, and share one etcd
//! watch on the record key, open while any of them waits (and [`IDLE_CLOSE`] longer).
//! The watch announces each change to the hub at the change's revision, free when the
//! record is gone (deleted by its holder, or by etcd when the holder's session expired)
//! or vacant (released); the hub wakes every observer and, for a free lease, **one**
//! acquirer, and passes that wake-up on to the next acquirer when it does not take it (see
//! [`WakeHub`]). The store tells the hub what its writes showed ([`Watches::claimed`]).
//!
//! A watch that breaks is reopened after [`REOPEN_PAUSE`] from the revision after the
//! last one it saw, so no change is lost and nobody is woken for the break. When etcd
//! cancels it (compacted past that revision) changes may have been lost: every waiter
//! wakes ([`WakeHub::wake_all`]) and the watch starts over from a
//! fresh read. While no watch can be opened (etcd down), waiters sleep until their
//! [`Wait::after`].
//!
//! A waiter that saw no record waits for a change after the absence it saw: the revision
//! at which the watch announced the record gone, or at which the store last read it
//! absent. So a waiter that saw the record deleted and waits again (an election
//! observer) waits for the next change, rather than being woken again at once.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::Poll;
use std::time::Duration;

use etcd_client::{EventType, WatchOptions};
use leasehold_core::store::{Wait, WakeHub, record_codec};
use leasehold_core::{LeaseName, Result};

use crate::state::RecordKv;

/// How long a watch with no waiters stays open (in case they come back).
const IDLE_CLOSE: Duration = Duration::from_secs(2);
/// How often an open watch with no events checks whether it still has waiters.
const IDLE_CHECK: Duration = Duration::from_millis(500);
/// Pause before reopening a watch that failed.
const REOPEN_PAUSE: Duration = Duration::from_millis(200);

/// What a name's record looked like to the store: its mod revision (`None`: absent),
/// whether it was free to claim (absent or vacant), and the store revision it was seen at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Look {
    pub(crate) version: Option<i64>,
    pub(crate) free: bool,
    pub(crate) rev: i64,
}

/// The state a name's watch announced last.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum Last {
    #[default]
    Nothing,
    /// Absent, announced at this position.
    Absent(u64),
    Present,
}

#[derive(Debug, Default)]
struct WatchState {
    running: bool,
    last: Last,
}

#[derive(Debug, Default)]
struct NameWatch {
    state: Mutex<WatchState>,
}

impl NameWatch {
    fn lock(&self) -> MutexGuard<'_, WatchState> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A store's waiters (in the hub) and its running watches, one per name.
#[derive(Debug, Default)]
pub(crate) struct Watches {
    hub: WakeHub,
    names: Mutex<HashMap<LeaseName, Arc<NameWatch>>>,
}

impl Watches {
    fn names(&self) -> MutexGuard<'_, HashMap<LeaseName, Arc<NameWatch>>> {
        self.names.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A write through this store showed `name` at mod revision `version`: a wake-up
    /// handed out for an older change did what it was for.
    pub(crate) fn claimed(&self, name: &LeaseName, version: i64) {
        self.hub.claimed(name.as_str(), position(version));
    }

    /// `name`'s watch, marked running; `None` if it runs already.
    fn start(&self, name: &LeaseName) -> Option<Arc<NameWatch>> {
        let mut names = self.names();
        let nw = names.entry(name.clone()).or_default();
        let mut st = nw.lock();
        if st.running {
            return None;
        }
        st.running = true;
        drop(st);
        Some(nw.clone())
    }

    /// Stops `nw` if `name` has no waiters. Decided under the names' lock, so a waiter
    /// registered in the hub before this finds its watch running or starts a new one.
    fn stop_if_idle(&self, name: &LeaseName, nw: &Arc<NameWatch>) -> bool {
        let mut names = self.names();
        if self.hub.waiting(name.as_str()) > 0 {
            return false;
        }
        nw.lock().running = false;
        if names.get(name).is_some_and(|e| Arc::ptr_eq(e, nw)) {
            names.remove(name);
        }
        true
    }

    /// Tells the hub that `name` changed at mod revision `at`: `absent` (deleted) or
    /// not, `free` to claim or not.
    fn announce(&self, nw: &NameWatch, name: &LeaseName, at: i64, absent: bool, free: bool) {
        let at = position(at);
        // Before the announcement: the waiter it wakes may read the absence and wait again.
        nw.lock().last = if absent { Last::Absent(at) } else { Last::Present };
        self.hub.announce(name.as_str(), at, free);
    }

    /// The position of the absence a waiter that saw no record saw (0: unknown).
    fn absence(&self, name: &LeaseName, last_seen: Option<Look>) -> u64 {
        let last = self.names().get(name).map_or(Last::Nothing, |nw| nw.lock().last);
        match last {
            Last::Absent(at) => at,
            // Announced present since: the caller's view is stale, it returns at once.
            Last::Present => 0,
            Last::Nothing => match last_seen {
                Some(Look { version: None, rev, .. }) => position(rev),
                _ => 0,
            },
        }
    }
}

/// A revision as a position in the hub (revisions are positive).
fn position(rev: i64) -> u64 {
    u64::try_from(rev).unwrap_or(0)
}

/// What a name's watch needs from the store that owns it: its waiters, the record's
/// key, what the store last saw of the record (or a fresh read), a watch client, and
/// to hear of each event. The store implements it, so this module does not depend on
/// the store's internals.
#[async_trait::async_trait]
pub(crate) trait WatchHost: Send + Sync + 'static {
    /// The store's waiters and watches.
    fn watches(&self) -> &Watches;
    /// The key of `name`'s lease record.
    fn record_key(&self, name: &LeaseName) -> Vec<u8>;
    /// What the store last saw of `name`'s record.
    fn last_seen(&self, name: &LeaseName) -> Option<Look>;
    /// Reads `name`'s record afresh.
    async fn read_state(&self, name: &LeaseName) -> Result<Look>;
    /// A watch client of the store's etcd client (counted as one watch request).
    fn watch_client(&self) -> etcd_client::WatchClient;
    /// An event on `name`'s record at revision `rev` (`None`: deleted).
    fn observe_event(&self, name: &LeaseName, rev: i64, kv: Option<&RecordKv>);
}

/// Waits until `name`'s record may have changed from mod revision `seen` (`None`:
/// absent) in the way `wait` asks for, or until it is time to look again.
pub(crate) async fn wait<H: WatchHost>(inner: &Arc<H>, name: &LeaseName, seen: Option<i64>, wait: Wait) -> Result<()> {
    let watches = inner.watches();
    let seen = match seen {
        Some(v) => position(v),
        None => watches.absence(name, inner.last_seen(name)),
    };
    let mut waiting = std::pin::pin!(watches.hub.wait(name.as_str(), seen, wait));
    // The first poll registers the waiter (or returns: a change it has not seen was
    // announced already). Registered first, it keeps the watch it finds running open.
    if poll_once(waiting.as_mut()).await.is_ready() {
        return Ok(());
    }
    if let Some(nw) = watches.start(name) {
        tokio::spawn(run(Arc::downgrade(inner), name.clone(), nw));
    }
    waiting.await;
    Ok(())
}

async fn poll_once<F: Future>(mut f: Pin<&mut F>) -> Poll<F::Output> {
    std::future::poll_fn(|cx| Poll::Ready(f.as_mut().poll(cx))).await
}

/// Where a watch (re)opens.
enum Start {
    /// From what the store last saw of the record, or a read if it saw nothing.
    Cached,
    /// From a fresh read.
    Read,
    /// After this revision: the watch saw everything up to it.
    After(i64),
}

/// One name's watch: runs while it has waiters.
async fn run<H: WatchHost>(inner: Weak<H>, name: LeaseName, nw: Arc<NameWatch>) {
    let mut idle_since: Option<tokio::time::Instant> = None;
    let mut start = Start::Cached;
    loop {
        let Some(store) = inner.upgrade() else { return };
        let watches = store.watches();
        if idle(watches, &name, &nw, &mut idle_since) {
            return;
        }
        let from = match start {
            Start::After(rev) => Some(rev),
            Start::Cached | Start::Read => {
                let look = match (&start, store.last_seen(&name)) {
                    (Start::Cached, Some(look)) => Some(look),
                    _ => store.read_state(&name).await.ok(),
                };
                look.map(|l| {
                    // The state the watch starts from is news to a waiter that saw an
                    // older one (the store may have seen a change while no watch ran).
                    let at = l.version.unwrap_or(l.rev);
                    watches.announce(&nw, &name, at, l.version.is_none(), l.free);
                    l.rev
                })
            }
        };
        let Some(from) = from else {
            drop(store);
            tokio::time::sleep(REOPEN_PAUSE).await;
            continue;
        };
        start = Start::After(from);
        let record_key = store.record_key(&name);
        let mut client = store.watch_client();
        drop(store);
        let opts = WatchOptions::new().with_start_revision(from + 1);
        let Some(mut stream) = open(&mut client, record_key, opts, name.as_str()).await else {
            continue;
        };
        loop {
            let stop = || {
                inner
                    .upgrade()
                    .is_none_or(|s| idle(s.watches(), &name, &nw, &mut idle_since))
            };
            let Some(msg) = next_or_stop(&mut stream, stop).await else {
                return;
            };
            let Some(store) = inner.upgrade() else { return };
            let watches = store.watches();
            match msg {
                Ok(Some(resp)) if resp.canceled() => {
                    // Compacted past our revision, or refused: changes may be lost.
                    tracing::debug!(lease = %name, reason = resp.cancel_reason(), "watch cancelled");
                    watches.hub.wake_all();
                    start = Start::Read;
                    drop(store);
                    tokio::time::sleep(REOPEN_PAUSE).await;
                    break;
                }
                Ok(Some(resp)) => {
                    let mut last = None;
                    for ev in resp.events() {
                        let Some(kv) = ev.kv() else { continue };
                        let rev = kv.mod_revision();
                        let (rkv, free) = match ev.event_type() {
                            EventType::Put => (
                                Some(RecordKv {
                                    version: rev,
                                    lease: kv.lease(),
                                    bytes: kv.value().to_vec(),
                                }),
                                record_codec::decode(&name, kv.value()).is_ok_and(|r| r.is_vacant()),
                            ),
                            EventType::Delete => (None, true),
                        };
                        store.observe_event(&name, rev, rkv.as_ref());
                        last = Some((rev, rkv.is_none(), free));
                    }
                    // One wake-up for the latest state, however many changes came at once.
                    if let Some((rev, absent, free)) = last {
                        start = Start::After(rev);
                        watches.announce(&nw, &name, rev, absent, free);
                    }
                }
                Ok(None) | Err(_) => {
                    // Broken: reopened after the last revision seen, nothing is lost.
                    drop(store);
                    tokio::time::sleep(REOPEN_PAUSE).await;
                    break;
                }
            }
        }
    }
}

/// The next message of `stream`; `None` once `stop` (asked every [`IDLE_CHECK`] while
/// no message comes) says the watch should end.
pub(crate) async fn next_or_stop(
    stream: &mut etcd_client::WatchStream,
    mut stop: impl FnMut() -> bool,
) -> Option<std::result::Result<Option<etcd_client::WatchResponse>, etcd_client::Error>> {
    loop {
        tokio::select! {
            m = stream.message() => return Some(m),
            () = tokio::time::sleep(IDLE_CHECK) => {
                if stop() {
                    return None;
                }
            }
        }
    }
}

/// Opens a watch on `key` with `opts`; `None` (after [`REOPEN_PAUSE`]) if it failed.
pub(crate) async fn open(
    client: &mut etcd_client::WatchClient,
    key: Vec<u8>,
    opts: WatchOptions,
    what: &str,
) -> Option<etcd_client::WatchStream> {
    match client.watch(key, Some(opts)).await {
        Ok(s) => Some(s),
        Err(e) => {
            tracing::debug!(watch = what, error = %e, "watch failed to open");
            tokio::time::sleep(REOPEN_PAUSE).await;
            None
        }
    }
}

/// Whether `name`'s watch has had no waiters for [`IDLE_CLOSE`], and so has stopped.
fn idle(
    watches: &Watches,
    name: &LeaseName,
    nw: &Arc<NameWatch>,
    idle_since: &mut Option<tokio::time::Instant>,
) -> bool {
    if watches.hub.waiting(name.as_str()) > 0 {
        *idle_since = None;
        return false;
    }
    let since = *idle_since.get_or_insert_with(tokio::time::Instant::now);
    since.elapsed() >= IDLE_CLOSE && watches.stop_if_idle(name, nw)
}
