//! The way into the renewal driver, without waking it on the caller's path.
//!
//! A grant that the driver should start renewing, and a lease released by its guard
//! that it should stop renewing, are left on a board ([`Board`]) that the driver reads
//! each time it wakes. The driver publishes when it will wake next; a caller wakes it
//! (a message on its channel) only when the new lease needs it sooner. A grant is
//! renewed a third of its TTL later, so the driver, already asleep until some other
//! lease's renewal (or, with none left to renew, until the renewal it had planned for
//! the last one released), is usually left alone: no cross-thread wake-up on an acquire
//! or a release.
//!
//! Why no wake-up is missed: the driver publishes its deadline *before* it looks at the
//! board a last time and goes to sleep, and a caller puts its lease on the board
//! *before* it reads that deadline. Neither the deadline's store nor its load is under
//! the board's lock: the deadline is an atomic, stored and loaded sequentially
//! consistent, and it is the board's mutex that orders the two sides. The driver's look
//! and the caller's push each take the lock, so one comes first. If the push does, the
//! look sees the lease. If the look does, its unlock happens before the caller's lock,
//! so the driver's store of its deadline (before its look) happens before the caller's
//! load (after its push), and the load sees that deadline or a later one: the lease is
//! compared with the deadline the driver sleeps until.
//!
//! A wake-up already on its way is not sent again: a caller that finds one pending
//! (sent, and the board not taken since) leaves it at that. The driver clears the
//! flag *before* each take of the board. A caller whose swap of the flag reads `true`
//! read the swap of another caller, made after the driver's last clear and followed by
//! that caller's wake-up; the driver receives it and takes the board again, clearing
//! the flag first. Either the first caller's push locked the board before that take,
//! which then (or an earlier one) takes its lease, or after it: then the clear came
//! before its swap, which could not have read the older `true`. Without this, a
//! driver that the machine keeps from running is sent one wake-up per grant until it
//! runs.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::lease::LeaseShared;
use crate::{Error, Result};

/// How many released leases may wait on the board before the driver is woken to drop
/// them from its schedule (it also drops each at its next wake-up on its own).
const FORGET_BATCH: usize = 256;

/// Messages on the driver's channel.
pub(crate) enum Command {
    /// Stop renewing this lease and release it (a dropped guard).
    Release(Arc<LeaseShared>),
    /// Look at the board now.
    Wake,
}

/// What callers leave for the driver, and when it wakes next.
#[derive(Debug)]
pub(crate) struct Board {
    queued: Mutex<Queued>,
    /// The driver's next wake-up, in nanoseconds since `epoch` (`u64::MAX`: none). It
    /// starts at 0: a driver spawned but not yet run looks at the board before it
    /// first sleeps, so a grant left before then needs no wake-up.
    wakes_at: AtomicU64,
    /// A wake-up was sent and the board not taken since: another is not needed.
    wake_pending: AtomicBool,
    epoch: Instant,
    /// Wake-ups sent to the driver (for tests).
    #[cfg(test)]
    wakes_sent: AtomicU64,
}

#[derive(Debug, Default)]
pub(crate) struct Queued {
    /// Grants to start renewing, oldest first.
    pub(crate) register: Vec<Arc<LeaseShared>>,
    /// Leases their guards released: stop renewing them.
    pub(crate) forget: Vec<Arc<LeaseShared>>,
}

impl Board {
    fn new() -> Self {
        Self {
            queued: Mutex::new(Queued::default()),
            wakes_at: AtomicU64::new(0),
            wake_pending: AtomicBool::new(false),
            epoch: Instant::now(),
            #[cfg(test)]
            wakes_sent: AtomicU64::new(0),
        }
    }

    fn nanos(&self, t: Instant) -> u64 {
        u64::try_from(t.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX - 1)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queued> {
        self.queued.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Everything left on the board, registrations first. A wake-up sent before this
    /// take has done its work: the next push that needs one sends it.
    pub(crate) fn take(&self) -> Queued {
        self.wake_pending.store(false, Ordering::SeqCst);
        std::mem::take(&mut *self.lock())
    }

    /// The driver will sleep until `next` (`None`: until a message). Then, true when
    /// something was left on the board meanwhile: the driver takes it before sleeping.
    pub(crate) fn sleep_until(&self, next: Option<Instant>) -> bool {
        self.wakes_at
            .store(next.map_or(u64::MAX, |t| self.nanos(t)), Ordering::SeqCst);
        let q = self.lock();
        !q.register.is_empty() || !q.forget.is_empty()
    }
}

/// A handle on one client's renewal driver: cheap to clone (every guard has one).
#[derive(Debug, Clone)]
pub(crate) struct Mailbox {
    tx: mpsc::UnboundedSender<Command>,
    board: Arc<Board>,
}

impl Mailbox {
    /// A mailbox, the driver's end of its channel and its board.
    pub(crate) fn new() -> (Self, mpsc::UnboundedReceiver<Command>, Arc<Board>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let board = Arc::new(Board::new());
        (
            Self {
                tx,
                board: board.clone(),
            },
            rx,
            board,
        )
    }

    /// True once the driver is gone (its task ended, or the runtime it ran on did):
    /// nothing left on the board would be renewed.
    pub(crate) fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }

    /// Starts renewing `lease`, first at `first_wake`; the driver is woken only if it
    /// sleeps past that.
    pub(crate) fn register(&self, lease: Arc<LeaseShared>, first_wake: Instant) -> Result<()> {
        if self.tx.is_closed() {
            return Err(Error::Shutdown);
        }
        self.board.lock().register.push(lease);
        // The driver may have gone since the look above: then nothing takes the grant
        // off the board, unless its end did (`driver::EndOnDrop`, which closes the
        // channel before it takes the board); the caller gives it back either way.
        if self.tx.is_closed() {
            return Err(Error::Shutdown);
        }
        if self.board.nanos(first_wake) < self.board.wakes_at.load(Ordering::SeqCst) {
            self.wake()?;
        }
        Ok(())
    }

    /// Stops renewing `lease` (its guard releases it). The driver drops it from its
    /// schedule when it next wakes, or at once once [`FORGET_BATCH`] wait: the push that
    /// makes the batch full sends the one wake-up (the driver then takes every lease
    /// waiting, those pushed after it too, and the count starts again from zero).
    pub(crate) fn forget(&self, lease: Arc<LeaseShared>) -> Result<()> {
        if self.tx.is_closed() {
            return Err(Error::Shutdown);
        }
        let waiting = {
            let mut q = self.board.lock();
            q.forget.push(lease);
            q.forget.len()
        };
        if waiting == FORGET_BATCH {
            self.wake()?;
        }
        Ok(())
    }

    /// Has the driver stop renewing `lease` and release it (never blocks).
    pub(crate) fn release(&self, lease: Arc<LeaseShared>) -> Result<()> {
        self.tx.send(Command::Release(lease)).map_err(|_| Error::Shutdown)
    }

    /// How many wake-ups callers have sent the driver.
    #[cfg(test)]
    pub(crate) fn wakes_sent(&self) -> u64 {
        self.board.wakes_sent.load(Ordering::Relaxed)
    }

    /// Sends the driver a wake-up, unless one sent earlier has not yet made it take
    /// the board.
    fn wake(&self) -> Result<()> {
        if self.board.wake_pending.swap(true, Ordering::SeqCst) {
            // A driver that is gone answers no wake-up, sent or not: say so, as a send
            // would (the grant is then given back rather than left to expire).
            return if self.tx.is_closed() {
                Err(Error::Shutdown)
            } else {
                Ok(())
            };
        }
        #[cfg(test)]
        self.board.wakes_sent.fetch_add(1, Ordering::Relaxed);
        self.tx.send(Command::Wake).map_err(|_| Error::Shutdown)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::{LeaseClient, MemoryStore};

    /// A lease of `ttl` granted by a client of its own (only its shape matters here).
    async fn a_lease(ttl: Duration) -> Arc<LeaseShared> {
        let client = LeaseClient::new(MemoryStore::new());
        let lease = client.acquire("mailbox/test", ttl).await.expect("acquire");
        lease.shared.clone()
    }

    fn wakes(rx: &mut mpsc::UnboundedReceiver<Command>) -> usize {
        let mut n = 0;
        while let Ok(c) = rx.try_recv() {
            assert!(matches!(c, Command::Wake), "only wake-ups are sent");
            n += 1;
        }
        n
    }

    #[tokio::test(start_paused = true)]
    async fn a_grant_wakes_the_driver_only_when_it_sleeps_past_the_first_renewal() {
        let (mailbox, mut rx, board) = Mailbox::new();
        let lease = a_lease(Duration::from_secs(3)).await;
        let first = Instant::now() + Duration::from_secs(1);
        // A driver not yet run looks at the board before it first sleeps: no wake-up.
        mailbox.register(lease.clone(), first).expect("register");
        assert_eq!(wakes(&mut rx), 0);
        // A driver with nothing to do sleeps until a message: wake it.
        assert!(board.sleep_until(None), "the board holds the grant");
        board.take();
        mailbox.register(lease.clone(), first).expect("register");
        assert_eq!(wakes(&mut rx), 1);
        // Asleep until later than this grant's first renewal: wake it.
        assert!(
            board.sleep_until(Some(first + Duration::from_millis(1))),
            "the board holds the grant"
        );
        board.take();
        mailbox.register(lease.clone(), first).expect("register");
        assert_eq!(wakes(&mut rx), 1);
        // Asleep until no later than it: the driver finds it on the board then.
        board.take();
        assert!(!board.sleep_until(Some(first)));
        mailbox.register(lease.clone(), first).expect("register");
        assert_eq!(wakes(&mut rx), 0);
        assert_eq!(board.take().register.len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_grant_left_while_the_driver_looked_away_is_seen_before_it_sleeps() {
        let (mailbox, mut rx, board) = Mailbox::new();
        let lease = a_lease(Duration::from_secs(3)).await;
        let first = Instant::now() + Duration::from_secs(1);
        // The driver's last deadline was early (no wake-up sent), and it now means to
        // sleep longer: its look at the board before sleeping finds the grant.
        assert!(!board.sleep_until(Some(first - Duration::from_millis(500))));
        mailbox.register(lease, first).expect("register");
        assert_eq!(wakes(&mut rx), 0);
        assert!(board.sleep_until(Some(first + Duration::from_secs(10))));
    }

    #[tokio::test(start_paused = true)]
    async fn released_leases_wake_the_driver_once_a_batch_waits() {
        let (mailbox, mut rx, board) = Mailbox::new();
        let lease = a_lease(Duration::from_secs(3)).await;
        assert!(!board.sleep_until(Some(Instant::now() + Duration::from_secs(60))));
        for _ in 0..FORGET_BATCH - 1 {
            mailbox.forget(lease.clone()).expect("forget");
        }
        assert_eq!(wakes(&mut rx), 0);
        mailbox.forget(lease.clone()).expect("forget");
        assert_eq!(wakes(&mut rx), 1);
        // Released while the driver has not yet taken the batch: no more wake-ups.
        for _ in 0..10 {
            mailbox.forget(lease.clone()).expect("forget");
        }
        assert_eq!(wakes(&mut rx), 0, "one wake-up per batch, not one per release past it");
        assert_eq!(board.take().forget.len(), FORGET_BATCH + 10);
        // Taken: the next full batch wakes the driver again, once.
        for _ in 0..FORGET_BATCH {
            mailbox.forget(lease.clone()).expect("forget");
        }
        assert_eq!(wakes(&mut rx), 1);
        assert_eq!(board.take().forget.len(), FORGET_BATCH);
    }

    #[tokio::test(start_paused = true)]
    async fn a_wake_up_on_its_way_is_not_sent_again() {
        let (mailbox, mut rx, board) = Mailbox::new();
        let lease = a_lease(Duration::from_secs(3)).await;
        let first = Instant::now() + Duration::from_secs(1);
        // The driver sleeps until a message, and does not run for a while: the grants
        // left meanwhile send one wake-up between them.
        assert!(!board.sleep_until(None));
        for _ in 0..50 {
            mailbox.register(lease.clone(), first).expect("register");
        }
        assert_eq!(wakes(&mut rx), 1);
        // Its take answers that wake-up: the next grant it would sleep past sends one.
        assert_eq!(board.take().register.len(), 50);
        assert!(!board.sleep_until(None));
        mailbox.register(lease.clone(), first).expect("register");
        assert_eq!(wakes(&mut rx), 1);
        // A full batch of releases, while that wake-up is still on its way: no other.
        for _ in 0..FORGET_BATCH {
            mailbox.forget(lease.clone()).expect("forget");
        }
        assert_eq!(wakes(&mut rx), 0);
        let taken = board.take();
        assert_eq!((taken.register.len(), taken.forget.len()), (1, FORGET_BATCH));
    }

    #[tokio::test]
    async fn a_closed_driver_refuses_with_shutdown() {
        let (mailbox, rx, _board) = Mailbox::new();
        drop(rx);
        let lease = a_lease(Duration::from_secs(3)).await;
        assert!(matches!(
            mailbox.register(lease.clone(), Instant::now()),
            Err(Error::Shutdown)
        ));
        assert!(matches!(mailbox.forget(lease.clone()), Err(Error::Shutdown)));
        assert!(matches!(mailbox.release(lease), Err(Error::Shutdown)));
    }

    #[tokio::test]
    async fn a_wake_up_left_pending_by_a_driver_gone_still_says_shutdown() {
        let (mailbox, rx, board) = Mailbox::new();
        let lease = a_lease(Duration::from_secs(3)).await;
        // A wake-up is on its way to a driver that then goes.
        assert!(!board.sleep_until(None));
        mailbox.register(lease.clone(), Instant::now()).expect("register");
        drop(rx);
        // Past `register`'s own check (a driver gone between it and the wake-up).
        assert!(matches!(mailbox.wake(), Err(Error::Shutdown)));
    }
}
