//! The hub of waiters for stores that push their changes: every observer hears every
//! change, one claimer is woken per release.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use tokio::sync::oneshot;

use crate::wait::Wait;

/// The most names remembered before those without waiters are forgotten.
const MAX_REMEMBERED: usize = 16_384;

/// How long a claimer woken while the lease is free has to claim it before the next
/// claimer is woken too (a read and a write take a millisecond or two on a healthy store).
pub const BATON_PASS: Duration = Duration::from_millis(500);

/// The longest a claimer behind the first in line waits without a wake-up before it
/// looks again anyway (a safety net: the first in line looks for an unreleased
/// expiry, and a release wakes the line).
pub const LINE_LIMIT: Duration = Duration::from_secs(30);

struct Waiter {
    id: u64,
    seen: u64,
    /// Whether it waits to claim ([`Wait::Claim`]): woken only by a change that left
    /// the lease free.
    claim: bool,
    wake: oneshot::Sender<()>,
    /// A claimer behind the first in line: told when it comes first.
    promote: Option<oneshot::Sender<()>>,
}

/// One name's waiters and what was announced for it.
#[derive(Default)]
struct Name {
    /// The position of the latest announced change.
    announced: u64,
    /// Whether that change left the lease free to take.
    free: bool,
    /// Whether that change removed the record (a waiter that saw no record, `seen` 0,
    /// has seen it).
    absent: bool,
    waiters: VecDeque<Waiter>,
    /// Bumped by every baton; a pass timer only acts if it is still current.
    baton: u64,
    /// Whether a woken waiter holds the baton (nobody has claimed since).
    baton_out: bool,
}

impl Name {
    /// Whether a waiter that saw position `seen` has seen the announced change.
    fn has_seen(&self, seen: u64) -> bool {
        seen >= self.announced || (seen == 0 && self.absent)
    }

    /// Wakes every observer ([`Wait::Change`]) that has not seen the announced change,
    /// and, when it left the lease free, the first claimer in line that has not seen it,
    /// with the baton: `Some(generation)` for the pass timer.
    fn wake(&mut self) -> Option<u64> {
        let mut i = 0;
        while i < self.waiters.len() {
            let w = &self.waiters[i];
            if w.claim || self.has_seen(w.seen) {
                i += 1;
            } else if let Some(w) = self.waiters.remove(i) {
                let _ = w.wake.send(());
            }
        }
        self.pass_baton()
    }

    /// When the announced change left the lease free, wakes the first claimer in line
    /// that has not seen it and hands it the baton: `Some(generation)` for the pass
    /// timer. Wakes nobody otherwise.
    fn pass_baton(&mut self) -> Option<u64> {
        self.baton_out = false;
        if !self.free {
            return None;
        }
        while let Some(i) = self.waiters.iter().position(|w| w.claim && !self.has_seen(w.seen)) {
            let Some(w) = self.waiters.remove(i) else { break };
            self.promote_first();
            if w.wake.send(()).is_ok() {
                self.baton += 1;
                self.baton_out = true;
                return Some(self.baton);
            }
        }
        None
    }

    /// Tells the first claimer in line that it is first now (it starts looking for an
    /// unreleased expiry). Idempotent.
    fn promote_first(&mut self) {
        if let Some(w) = self.waiters.iter_mut().find(|w| w.claim) {
            if let Some(p) = w.promote.take() {
                let _ = p.send(());
            }
        }
    }
}

#[derive(Default)]
struct Board {
    names: Mutex<HashMap<String, Name>>,
    next_id: AtomicU64,
}

impl Board {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Name>> {
        self.names.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Passes the baton of wake-up `generation` on if nobody claimed within `pass`.
    fn pass_later(self: &Arc<Self>, name: &str, generation: Option<u64>, pass: Duration) {
        let Some(generation) = generation else { return };
        let board: Weak<Self> = Arc::downgrade(self);
        let name = name.to_owned();
        tokio::spawn(async move {
            tokio::time::sleep(pass).await;
            let Some(board) = board.upgrade() else { return };
            let timer = {
                let mut names = board.lock();
                let Some(n) = names.get_mut(&name) else { return };
                if !(n.baton_out && n.baton == generation) {
                    return;
                }
                n.pass_baton()
            };
            board.pass_later(&name, timer, pass);
        });
    }

    /// Forgets waiter `id` (woken, timed out or cancelled), and the name too when
    /// nothing about it is left to remember.
    fn leave(&self, name: &str, id: u64) {
        let mut names = self.lock();
        if let Some(n) = names.get_mut(name) {
            n.waiters.retain(|w| w.id != id);
            n.promote_first();
            if n.waiters.is_empty() && n.announced == 0 && !n.baton_out {
                names.remove(name);
            }
        }
    }
}

/// The waiters of one store, for stores that push their changes (Postgres `NOTIFY`, an
/// etcd watch, Redis pub/sub, the in-process store): every observer hears every change,
/// and one claimer is woken per change that left the lease free.
///
/// A store feeds the hub what its change events say ([`WakeHub::announce`]: name, the
/// change's position in the name's history, and whether it left the lease free to take),
/// and each waiter waits in the hub ([`WakeHub::wait`]) with the version it last saw.
/// Each announced change wakes every waiter for any change ([`Wait::Change`]: an
/// election's view of the leader, an operator's `observe`) that has not seen it, and,
/// only when it left the lease free, **one** waiter to claim ([`Wait::Claim`]): the
/// first in line that has not seen it. N claimers in one process then cost O(1) store
/// calls per release instead of N (every one of them trying once, one winning), and no
/// observer misses a grant another waiter heard of. (A claimer on a store without a
/// clock of its own waits for any change, since every renewal restarts its watch of the
/// record: on such a store every claimer is woken per change. No store that pushes its
/// changes lacks a clock today; [`crate::MemoryStore::observation`] is the one case.)
///
/// Claimers of a name wait **in line**: only the first looks again at its
/// [`Wait::after`] (whether the holder's lease ran out without a release, which no store
/// announces); the others wait for a wake-up or until they come first (the one ahead
/// was woken or went away), and look that long after. N claimers then cost one look per
/// holder's TTL, not N ([`LINE_LIMIT`] bounds a wait behind the line's head anyway).
///
/// The claimer woken while the lease is **free** holds a baton: it should take the
/// lease. If it does not (its caller went away, or it waits again having seen the lease
/// free), the baton passes to the next claimer that has not seen the change: when it
/// waits again, or when nobody through this store has claimed the name [`BATON_PASS`]
/// after the wake-up. A write through the store that shows a newer position
/// ([`WakeHub::claimed`]), or a waiter that has seen one, ends it.
///
/// A waiter registers, then checks whether a change it has not seen was announced
/// already, so a change between its last read and its wait is not missed. When the feed
/// may have dropped events (a lost connection), [`WakeHub::wake_all`] wakes everyone.
/// Spurious wake-ups are allowed by the store contract; missed ones only cost up to
/// [`Wait::after`] (behind the first in line, [`LINE_LIMIT`]).
///
/// Cheap to clone; clones share the waiters.
#[derive(Clone)]
pub struct WakeHub {
    board: Arc<Board>,
    pass: Duration,
}

impl Default for WakeHub {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for WakeHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WakeHub")
            .field("names", &self.board.lock().len())
            .field("pass", &self.pass)
            .finish()
    }
}

/// Drop guard of one registered wait.
struct Leave<'a> {
    board: &'a Board,
    name: &'a str,
    id: u64,
}

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        self.board.leave(self.name, self.id);
    }
}

impl WakeHub {
    /// A hub that passes an unused baton on after [`BATON_PASS`].
    pub fn new() -> Self {
        Self::with_pass(BATON_PASS)
    }

    /// A hub that passes an unused baton on after `pass`.
    pub fn with_pass(pass: Duration) -> Self {
        Self {
            board: Arc::default(),
            pass,
        }
    }

    /// The store saw a change of `name` at position `at` (its version or revision: a
    /// number that grows with every change of the name), which left the lease `free`
    /// (released, deleted, expired) or not (granted, renewed). Wakes the waiters that
    /// have not seen it (every observer; one claimer, if it left the lease free); a
    /// position not above the last announced one is ignored (reported twice, or by a
    /// read that raced the feed). Needs a Tokio runtime (the baton's pass timer).
    pub fn announce(&self, name: &str, at: u64, free: bool) {
        self.announce_change(name, at, free, false);
    }

    /// The store saw `name`'s record removed at position `at` (deleted, or expired with
    /// its session): free to take, and a waiter that saw no record (`seen` 0) has seen it.
    pub fn announce_deleted(&self, name: &str, at: u64) {
        self.announce_change(name, at, true, true);
    }

    fn announce_change(&self, name: &str, at: u64, free: bool, absent: bool) {
        let timer = {
            let mut names = self.board.lock();
            if names.len() >= MAX_REMEMBERED && !names.contains_key(name) {
                names.retain(|_, n| !n.waiters.is_empty());
            }
            let n = names.entry(name.to_owned()).or_default();
            if at <= n.announced {
                // Seen already (a feed and a read both reporting one change), or older
                // (a read that raced the feed): nothing new to wake anyone for.
                return;
            }
            n.announced = at;
            n.free = free;
            n.absent = absent;
            n.wake()
        };
        self.board.pass_later(name, timer, self.pass);
    }

    /// The feed may have lost changes (its connection dropped): every waiter wakes and
    /// looks again.
    pub fn wake_all(&self) {
        for n in self.board.lock().values_mut() {
            n.baton_out = false;
            for w in n.waiters.drain(..) {
                let _ = w.wake.send(());
            }
        }
    }

    /// A write through this store showed `name` at position `at`: if that is newer than
    /// the announced change, the lease was claimed and the baton did its work.
    pub fn claimed(&self, name: &str, at: u64) {
        if let Some(n) = self.board.lock().get_mut(name) {
            if at > n.announced {
                n.baton_out = false;
            }
        }
    }

    /// How many waiters wait on `name` now (a store keeps a per-name subscription open
    /// while this is above zero).
    pub fn waiting(&self, name: &str) -> usize {
        self.board.lock().get(name).map_or(0, |n| n.waiters.len())
    }

    /// Waits until `name` may have changed from position `seen` (0: the caller saw no
    /// record) in the way `wait` asks for, or until it is time to look again
    /// ([`Wait::after`]; for a claimer behind the first in line, that long after it
    /// comes first). Returns at once if a change the caller has not seen was announced
    /// already.
    pub async fn wait(&self, name: &str, seen: u64, wait: Wait) {
        let start = tokio::time::Instant::now();
        let board = &self.board;
        let id = board.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        let mut behind: Option<oneshot::Receiver<()>> = None;
        let timer = {
            let mut names = board.lock();
            let n = names.entry(name.to_owned()).or_default();
            if !n.has_seen(seen) {
                // Changed after the caller looked: look again now.
                return;
            }
            let saw_it_free = n.free && ((seen == n.announced && seen > 0) || (seen == 0 && n.absent));
            let timer = if n.baton_out && saw_it_free && wait.is_claim() {
                // The claimer saw the free record and waits rather than claiming it: the
                // baton goes to the next claimer that has not seen it.
                n.pass_baton()
            } else {
                if seen > n.announced {
                    // The caller saw a newer record than the change: it was claimed.
                    n.baton_out = false;
                }
                None
            };
            let claim = wait.is_claim();
            let promote = if claim && n.waiters.iter().any(|w| w.claim) {
                let (p, rx) = oneshot::channel();
                behind = Some(rx);
                Some(p)
            } else {
                None
            };
            n.waiters.push_back(Waiter {
                id,
                seen,
                claim,
                wake: tx,
                promote,
            });
            timer
        };
        board.pass_later(name, timer, self.pass);
        // Removes the registration however this future ends, dropped included.
        let _leave = Leave { board, name, id };
        let after = wait.after();
        match behind {
            None => {
                let _ = tokio::time::timeout_at(start + after, rx).await;
            }
            Some(first) => {
                let come_first = async {
                    match first.await {
                        Ok(()) => tokio::time::sleep(after).await,
                        // Taken out of the line (woken, or every waiter woken): `rx` ends.
                        Err(_) => std::future::pending().await,
                    }
                };
                tokio::select! {
                    _ = rx => {}
                    () = come_first => {}
                    () = tokio::time::sleep_until(start + LINE_LIMIT.max(after)) => {}
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn settle() {
        for _ in 0..8 {
            tokio::task::yield_now().await;
        }
    }

    fn waiters(hub: &WakeHub, n: usize, seen: u64) -> Vec<tokio::task::JoinHandle<()>> {
        (0..n)
            .map(|_| {
                let hub = hub.clone();
                tokio::spawn(async move { hub.wait("a", seen, Wait::Change(Duration::from_secs(60))).await })
            })
            .collect()
    }

    fn done(tasks: &[tokio::task::JoinHandle<()>]) -> usize {
        tasks.iter().filter(|t| t.is_finished()).count()
    }

    #[tokio::test(start_paused = true)]
    async fn one_release_wakes_one_claimer_and_an_unused_baton_passes_on() {
        let hub = WakeHub::new();
        let line = claimers(&hub, 5, 3, Duration::from_secs(60));
        settle().await;
        assert_eq!(hub.waiting("a"), 5);
        hub.announce("a", 4, true);
        settle().await;
        assert_eq!(done(&line), 1, "one release, one wake-up");
        tokio::time::sleep(BATON_PASS + Duration::from_millis(1)).await;
        settle().await;
        assert_eq!(done(&line), 2, "nobody claimed: the baton passed to the next claimer");
        hub.claimed("a", 5);
        tokio::time::sleep(BATON_PASS * 4).await;
        settle().await;
        assert_eq!(done(&line), 2, "claimed: no further wake-ups");
    }

    #[tokio::test(start_paused = true)]
    async fn a_grant_wakes_every_observer_and_no_claimer() {
        let hub = WakeHub::new();
        let observers = waiters(&hub, 3, 7);
        let line = claimers(&hub, 2, 7, Duration::from_secs(60));
        settle().await;
        hub.announce("a", 8, false);
        settle().await;
        assert_eq!(
            (done(&observers), done(&line)),
            (3, 0),
            "every observer hears a grant; no claimer is woken by it"
        );
        tokio::time::sleep(BATON_PASS * 4).await;
        settle().await;
        assert_eq!(done(&line), 0, "a change that left the lease held hands out no baton");
        // A caller that saw version 7 waits after 8 was announced: it returns at once.
        tokio::time::timeout(
            Duration::from_millis(1),
            hub.wait("a", 7, Wait::Change(Duration::from_secs(60))),
        )
        .await
        .expect("returns at once");
        hub.wake_all();
        settle().await;
        assert_eq!(done(&line), 2, "wake_all wakes everyone");
        assert_eq!(hub.waiting("a"), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_release_wakes_every_observer_and_the_first_claimer() {
        let hub = WakeHub::new();
        // The observers wait longest: they still take no claimer's wake-up.
        let observers = waiters(&hub, 2, 3);
        settle().await;
        let line = claimers(&hub, 2, 3, Duration::from_secs(60));
        settle().await;
        hub.announce("a", 4, true);
        settle().await;
        assert_eq!(
            (done(&observers), done(&line)),
            (2, 1),
            "every observer and one claimer"
        );
        assert!(line[0].is_finished(), "the first in line");
        // An observer waits again having seen the lease free: the baton stays out.
        let again = waiters(&hub, 1, 4);
        settle().await;
        assert_eq!((done(&line), done(&again)), (1, 0));
        // The woken claimer waits again having seen it free: the baton passes at once.
        let claimer_again = claimers(&hub, 1, 4, Duration::from_secs(60));
        settle().await;
        assert_eq!(done(&line), 2, "the baton went to the next claimer at once");
        assert_eq!(done(&claimer_again), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiter_that_saw_no_record_has_seen_the_delete() {
        let hub = WakeHub::new();
        let before = waiters(&hub, 1, 5);
        settle().await;
        hub.announce_deleted("a", 6);
        settle().await;
        assert_eq!(done(&before), 1, "the delete wakes a waiter that saw the record");
        // Read after the delete: no record. It must wait, not return at once (a spin).
        let after = waiters(&hub, 1, 0);
        settle().await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        settle().await;
        assert_eq!(done(&after), 0, "a waiter that saw no record has seen the delete");
        hub.announce("a", 7, false);
        settle().await;
        assert_eq!(done(&after), 1, "the next change wakes it");
    }

    #[tokio::test(start_paused = true)]
    async fn a_change_reported_twice_or_late_wakes_nobody_more() {
        let hub = WakeHub::new();
        let tasks = claimers(&hub, 3, 1, Duration::from_secs(60));
        settle().await;
        hub.announce("a", 4, true);
        hub.announce("a", 4, true);
        hub.announce("a", 2, false);
        settle().await;
        assert_eq!(done(&tasks), 1, "one change, one wake-up, however often reported");
        tokio::time::sleep(BATON_PASS + Duration::from_millis(1)).await;
        settle().await;
        assert_eq!(done(&tasks), 2, "the late older report did not end the baton");
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_ends_at_its_deadline_and_leaves_nothing_behind() {
        let hub = WakeHub::new();
        hub.wait("a", 0, Wait::Change(Duration::from_millis(50))).await;
        assert_eq!(hub.waiting("a"), 0);
        assert_eq!(
            hub.board.lock().len(),
            0,
            "a name with nothing to remember is forgotten"
        );
    }

    fn claimers(hub: &WakeHub, n: usize, seen: u64, after: Duration) -> Vec<tokio::task::JoinHandle<()>> {
        (0..n)
            .map(|_| {
                let hub = hub.clone();
                tokio::spawn(async move { hub.wait("a", seen, Wait::Claim(after)).await })
            })
            .collect()
    }

    #[tokio::test(start_paused = true)]
    async fn only_the_first_claimer_in_line_looks_again_at_its_time() {
        let hub = WakeHub::new();
        let mut line = Vec::new();
        for _ in 0..5 {
            line.extend(claimers(&hub, 1, 3, Duration::from_millis(100)));
            settle().await;
        }
        tokio::time::sleep(Duration::from_millis(101)).await;
        settle().await;
        assert_eq!(done(&line), 1, "only the first in line looks again at its time");
        assert!(line[0].is_finished(), "the first in line is the longest waiting");
        tokio::time::sleep(Duration::from_millis(50)).await;
        settle().await;
        assert_eq!(done(&line), 1, "the next, first now, waits its own time from then");
        tokio::time::sleep(Duration::from_millis(51)).await;
        settle().await;
        assert_eq!(done(&line), 2);
        assert!(line[1].is_finished());
        tokio::time::sleep(LINE_LIMIT).await;
        settle().await;
        assert_eq!(done(&line), 5, "nobody waits past the line's limit");
    }

    #[tokio::test(start_paused = true)]
    async fn a_grant_wakes_no_claimer_and_a_release_wakes_the_first() {
        let hub = WakeHub::new();
        let observer = waiters(&hub, 1, 3);
        settle().await;
        let line = claimers(&hub, 3, 3, Duration::from_secs(10));
        settle().await;
        hub.announce("a", 4, false);
        settle().await;
        assert_eq!(
            (done(&observer), done(&line)),
            (1, 0),
            "a grant wakes an observer, no claimer"
        );
        hub.announce("a", 5, true);
        settle().await;
        assert_eq!(done(&line), 1, "a release wakes one claimer");
        assert!(line[0].is_finished(), "the first in line");
        // The woken one claims; the next in line is first now and looks at its own time.
        hub.claimed("a", 6);
        tokio::time::sleep(Duration::from_secs(10) + Duration::from_millis(1)).await;
        settle().await;
        assert_eq!(done(&line), 2, "the new first in line looked at its time");
        assert!(line[1].is_finished());
    }

    #[tokio::test(start_paused = true)]
    async fn a_claimer_that_goes_away_hands_the_head_of_the_line_on() {
        let hub = WakeHub::new();
        let first = claimers(&hub, 1, 3, Duration::from_millis(100));
        settle().await;
        let second = claimers(&hub, 1, 3, Duration::from_millis(100));
        settle().await;
        first[0].abort();
        settle().await;
        tokio::time::sleep(Duration::from_millis(101)).await;
        settle().await;
        assert_eq!(done(&second), 1, "the second came first when the first went away");
        assert_eq!(hub.waiting("a"), 0);
    }
}
