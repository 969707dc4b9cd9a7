//! Noticing what others do to the records this store holds.
//!
//! A held record is renewed without a request (its session's keep-alive keeps it), so a
//! renewal alone would never see an operator's `etcdctl del` or `etcdctl put` of the
//! record. Instead, while a store holds any record, it keeps **one** etcd watch open on
//! its key prefix, from the revision of the write that made it a holder. An event on a
//! held name's record that is not the store's own write drops the held entry (the
//! core's `SessionBook`, guarded by the revision it was confirmed at), so the holder's
//! next renewal is a transaction again, finds the record changed, and the holder loses
//! the lease: within one renewal interval, at no request per renewal. Events on a name
//! with a held write in flight are kept too (the store registers the name before it
//! sends the write): a change that lands after the write but is seen before the write is
//! registered as held keeps it from being registered. Events on other names are ignored.
//!
//! A watch that breaks reopens after the last revision it saw. One that etcd cancels
//! because it compacted past it ([`recover`]) reads every watched record afresh, marks
//! the held entries of those it could not read unconfirmed (their next renewal is a
//! transaction), and reopens at the compaction revision, the oldest etcd still has: every
//! change from there on is seen, whichever names were registered meanwhile. The watch
//! closes once the store has held nothing for [`IDLE_CLOSE`].

use std::sync::{Mutex, MutexGuard, Weak};
use std::time::Duration;

use etcd_client::{EventType, WatchOptions};
use leasehold_core::{LeaseName, Result};

use crate::keys::FENCE_SUFFIX;
use crate::state::RecordKv;

/// How long the watch stays open after the store stopped holding anything.
const IDLE_CLOSE: Duration = Duration::from_secs(2);
/// Pause before reopening a watch that failed.
const REOPEN_PAUSE: Duration = Duration::from_millis(200);

/// Whether the store's held-record watch runs.
#[derive(Debug, Default)]
pub(crate) struct HeldWatch {
    running: Mutex<bool>,
}

impl HeldWatch {
    fn lock(&self) -> MutexGuard<'_, bool> {
        self.running.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// What the held-record watch needs from its store to recover from a compaction
/// ([`recover`]).
#[async_trait::async_trait]
pub(crate) trait Reread: Send + Sync {
    /// The names whose changes the watch must not miss: those the store holds, and
    /// those it has a held write in flight on.
    fn watched_names(&self) -> Vec<LeaseName>;
    /// Reads `name`'s record afresh (updating what the store holds); the revision read.
    async fn refresh(&self, name: &LeaseName) -> Result<i64>;
    /// `name`'s record could not be read afresh: it may have changed unseen, so its
    /// held entry (and the one a write in flight on it registers) must not be renewed
    /// without a request.
    fn unconfirm(&self, name: &LeaseName);
}

/// What the held-record watch needs from its store. The store implements it, so this
/// module does not depend on the store's internals.
pub(crate) trait HeldHost: Reread + 'static {
    /// The store's watch flag.
    fn held_watch(&self) -> &HeldWatch;
    /// The store's key prefix.
    fn prefix(&self) -> &str;
    /// A watch client of the store's etcd client (counted as one watch request).
    fn watch_client(&self) -> etcd_client::WatchClient;
    /// True while the store holds any record.
    fn holds_any(&self) -> bool;
    /// An event on `name`'s record at revision `rev` (`None`: deleted); ignored unless
    /// the name is one of [`Reread::watched_names`].
    fn observe_held(&self, name: &LeaseName, rev: i64, kv: Option<&RecordKv>);
}

/// Starts the store's held-record watch, from after revision `after` (the revision of a
/// write that made the store a holder), unless it runs already.
pub(crate) fn ensure<H: HeldHost>(inner: &Weak<H>, host: &H, after: i64) {
    let mut running = host.held_watch().lock();
    if *running {
        return;
    }
    *running = true;
    drop(running);
    tokio::spawn(run(inner.clone(), after));
}

/// The name whose record `key` is, if it is a record key under `prefix`.
fn record_name(prefix: &str, key: &[u8]) -> Option<LeaseName> {
    let rest = key.strip_prefix(prefix.as_bytes())?;
    if rest.ends_with(FENCE_SUFFIX) {
        return None;
    }
    LeaseName::new(std::str::from_utf8(rest).ok()?).ok()
}

/// Stops the watch if the store holds nothing. Decided under the flag's lock, after the
/// store registered its holds, so a hold registered before this finds the watch running
/// or starts a new one.
fn stop_if_idle<H: HeldHost>(host: &H, idle_since: &mut Option<tokio::time::Instant>) -> bool {
    if host.holds_any() {
        *idle_since = None;
        return false;
    }
    let since = *idle_since.get_or_insert_with(tokio::time::Instant::now);
    if since.elapsed() < IDLE_CLOSE {
        return false;
    }
    let mut running = host.held_watch().lock();
    if host.holds_any() {
        return false;
    }
    *running = false;
    true
}

/// After etcd cancelled the watch at `after`: when it compacted past it (`compacted`,
/// the oldest revision it keeps; 0 for a cancel of another kind, which loses nothing),
/// the changes before `compacted` are lost, so every watched record is read afresh, and
/// one that cannot be is [unconfirmed](Reread::unconfirm) rather than skipped. Returns
/// the revision after which the watch reopens: just before `compacted`, so the watch
/// sees every change from there on, including those to names registered after the reads
/// began (their writes came after the compaction). Reopening at the oldest revision etcd
/// keeps cannot be refused again unless etcd compacts again.
async fn recover<H: Reread + ?Sized>(host: &H, after: i64, compacted: i64) -> i64 {
    if compacted <= 0 {
        return after;
    }
    for name in host.watched_names() {
        if let Err(e) = host.refresh(&name).await {
            tracing::debug!(lease = %name, error = %e, "held record not re-read after a compaction");
            host.unconfirm(&name);
        }
    }
    after.max(compacted - 1)
}

/// The watch: runs while the store holds records.
async fn run<H: HeldHost>(inner: Weak<H>, mut after: i64) {
    let mut idle_since = None;
    loop {
        let Some(store) = inner.upgrade() else { return };
        if stop_if_idle(&*store, &mut idle_since) {
            return;
        }
        let prefix = store.prefix().to_owned();
        let mut client = store.watch_client();
        drop(store);
        let opts = WatchOptions::new().with_prefix().with_start_revision(after + 1);
        let Some(mut stream) = crate::watch::open(&mut client, prefix.clone().into_bytes(), opts, "held records").await
        else {
            continue;
        };
        loop {
            let stop = || inner.upgrade().is_none_or(|s| stop_if_idle(&*s, &mut idle_since));
            let Some(msg) = crate::watch::next_or_stop(&mut stream, stop).await else {
                return;
            };
            let Some(store) = inner.upgrade() else { return };
            match msg {
                Ok(Some(resp)) if resp.canceled() => {
                    // Compacted past our revision: what changed since is read afresh.
                    tracing::debug!(reason = resp.cancel_reason(), "held-record watch cancelled");
                    after = recover(&*store, after, resp.compact_revision()).await;
                    drop(store);
                    tokio::time::sleep(REOPEN_PAUSE).await;
                    break;
                }
                Ok(Some(resp)) => {
                    for ev in resp.events() {
                        let Some(kv) = ev.kv() else { continue };
                        let rev = kv.mod_revision();
                        after = after.max(rev);
                        let Some(name) = record_name(&prefix, kv.key()) else {
                            continue;
                        };
                        let record = match ev.event_type() {
                            EventType::Put => Some(RecordKv {
                                version: rev,
                                lease: kv.lease(),
                                bytes: kv.value().to_vec(),
                            }),
                            EventType::Delete => None,
                        };
                        store.observe_held(&name, rev, record.as_ref());
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

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use leasehold_core::Error;

    use super::*;

    fn name(n: &str) -> LeaseName {
        LeaseName::new(n).unwrap_or_else(|e| panic!("{e}"))
    }

    /// A store whose re-read of `fails` fails and of any other name reads revision 100.
    struct Rereads {
        names: Vec<LeaseName>,
        fails: LeaseName,
        read: Mutex<Vec<LeaseName>>,
        unconfirmed: Mutex<Vec<LeaseName>>,
    }

    #[async_trait::async_trait]
    impl Reread for Rereads {
        fn watched_names(&self) -> Vec<LeaseName> {
            self.names.clone()
        }
        async fn refresh(&self, name: &LeaseName) -> Result<i64> {
            self.read
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(name.clone());
            if *name == self.fails {
                return Err(Error::Unavailable {
                    message: "etcd is down".into(),
                    source: None,
                });
            }
            Ok(100)
        }
        fn unconfirm(&self, name: &LeaseName) {
            self.unconfirmed
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(name.clone());
        }
    }

    #[tokio::test]
    async fn a_record_not_reread_after_a_compaction_is_not_skipped() {
        let (a, b) = (name("a"), name("b"));
        let host = Rereads {
            names: vec![a.clone(), b.clone()],
            fails: a.clone(),
            read: Mutex::default(),
            unconfirmed: Mutex::default(),
        };
        // Compacted at 50 while the watch was at 10: both records are read again; the
        // one whose read failed is unconfirmed (its next renewal is a Txn), and the
        // watch reopens at 50, not after the newest revision read (100), so changes to
        // any record between 50 and 100 are seen.
        assert_eq!(recover(&host, 10, 50).await, 49);
        assert_eq!(
            *host.read.lock().unwrap_or_else(std::sync::PoisonError::into_inner),
            [a.clone(), b]
        );
        assert_eq!(
            *host
                .unconfirmed
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
            [a]
        );
        // A cancel of another kind loses nothing: nothing is read, the position stays.
        host.read
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clear();
        assert_eq!(recover(&host, 10, 0).await, 10);
        assert!(
            host.read
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .is_empty()
        );
    }

    #[test]
    fn only_record_keys_under_the_prefix_name_a_lease() {
        let name = |k: &str| record_name("lh/", k.as_bytes()).map(|n| n.as_str().to_owned());
        assert_eq!(name("lh/jobs/a").as_deref(), Some("jobs/a"));
        assert_eq!(name("lh/jobs/a!fence"), None);
        assert_eq!(name("other/jobs/a"), None);
        assert_eq!(name("lh/"), None);
    }
}
