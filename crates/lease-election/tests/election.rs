//! Leader election on `MemoryStore`, with paused time (exact, instant, and able to fail)
//! but for the frozen leader, which blocks a real-time runtime.
#![allow(missing_docs, clippy::unwrap_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use leasehold_core::store::CasStore as _;
use leasehold_core::testing::{CountingStore, FaultPlan, FaultStore};
use leasehold_core::{FencingToken, LeaseClient, LossCause, MemoryStore};
use leasehold_election::{Callbacks, Election, Leader};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

const TTL: Duration = Duration::from_secs(1);

fn election(client: LeaseClient) -> Election {
    Election::new(client, "it/leader", TTL).expect("election")
}

/// A protected resource that keeps the highest token it has seen and refuses older
/// ones (the check a fenced SQL write makes in its WHERE clause).
#[derive(Default)]
struct Resource {
    high: FencingToken,
    accepted: Vec<(FencingToken, Instant)>,
}

impl Resource {
    fn write(&mut self, token: FencingToken) -> bool {
        if token < self.high {
            return false;
        }
        self.high = token;
        self.accepted.push((token, Instant::now()));
        true
    }
}

#[tokio::test(start_paused = true)]
async fn campaign_resign_and_next_leader_takes_the_next_token() {
    let store = MemoryStore::new();
    let a = election(LeaseClient::new(store.clone()));
    let b = election(LeaseClient::new(store.clone()));
    let la = a.campaign().await.expect("a leads");
    assert_eq!(la.token(), FencingToken::new(1));
    assert!(la.is_leader());
    assert!(b.try_campaign().await.expect("b tries").is_none(), "two leaders");
    assert_eq!(b.leader().await.expect("read"), Some(la.leader()));

    let waiting = tokio::spawn(async move { b.campaign().await.map(|l| (Instant::now(), l)) });
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!waiting.is_finished(), "b was granted while a leads and renews");
    let ctx = la.context();
    let resigned_at = Instant::now();
    la.resign().await.expect("resign");
    assert!(!ctx.is_leading(), "resign must cancel the leader context");
    let (granted_at, lb) = waiting.await.expect("task").expect("b leads");
    assert_eq!(lb.token(), FencingToken::new(2));
    assert!(
        granted_at - resigned_at < Duration::from_millis(50),
        "handoff after resign took {:?}",
        granted_at - resigned_at
    );
    assert_eq!(a.leader().await.expect("read"), Some(lb.leader()));
    lb.resign().await.expect("resign b");
    assert_eq!(a.leader().await.expect("read"), None);
}

/// The leader's store stops answering (a partition, a hung connection): its context
/// is cancelled before the challenger is granted, by at least the margin, on a store
/// with a clock and on one judged by observation. The challenger's writes then fence
/// out the old leader's.
#[tokio::test(start_paused = true)]
async fn loss_cancels_context_before_successor_is_granted() {
    for (label, mem) in [
        ("store clock", MemoryStore::new()),
        ("observation", MemoryStore::observation()),
    ] {
        let hung = FaultStore::new(mem.clone(), 7);
        let a = election(LeaseClient::new(hung.clone()));
        let b = election(LeaseClient::new(mem.clone()));
        let resource = Arc::new(Mutex::new(Resource::default()));

        let la = a.campaign().await.expect("a leads");
        let ctx = la.context();
        let cancelled_at = tokio::spawn({
            let ctx = ctx.clone();
            async move {
                ctx.cancelled().await;
                Instant::now()
            }
        });
        // The leader writes every 10 ms while its context says it leads.
        let writer = tokio::spawn({
            let ctx = ctx.clone();
            let resource = resource.clone();
            async move {
                let mut refused = 0;
                while ctx.is_leading() {
                    if !resource.lock().unwrap().write(ctx.token()) {
                        refused += 1;
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                refused
            }
        });
        let challenger = tokio::spawn(async move { b.campaign().await.map(|l| (Instant::now(), l)) });

        tokio::time::sleep(Duration::from_millis(2_500)).await;
        assert!(la.is_leader(), "{label}: a lost while its store answered");
        assert!(!challenger.is_finished(), "{label}: challenger granted while a renews");
        hung.set_plan(FaultPlan::hang());

        let (granted_at, lb) = challenger.await.expect("task").expect("b leads");
        let cancelled_at = cancelled_at.await.expect("task");
        let margin = TTL / 20;
        assert!(
            cancelled_at + margin <= granted_at,
            "{label}: a's context cancelled at {:?}, b granted at {:?}: not a margin apart",
            cancelled_at.elapsed(),
            granted_at.elapsed()
        );
        assert!(
            granted_at - cancelled_at < TTL,
            "{label}: takeover took too long after the loss: {:?}",
            granted_at - cancelled_at
        );
        assert_eq!(lb.token(), la.token().next(), "{label}");
        assert!(matches!(
            la.loss_cause(),
            Some(LossCause::OutcomeUnknown | LossCause::StoreUnreachable)
        ));
        assert_eq!(
            writer.await.expect("writer"),
            0,
            "{label}: the leader was refused while leading"
        );

        // Every write the old leader made happened before the successor was granted.
        let last_a = resource
            .lock()
            .unwrap()
            .accepted
            .iter()
            .filter(|(t, _)| *t == la.token())
            .map(|(_, at)| *at)
            .max()
            .expect("a wrote");
        assert!(last_a < granted_at, "{label}: old leader wrote after the takeover");
        // The new leader writes; a stale write from the old one is refused by the fence.
        assert!(resource.lock().unwrap().write(lb.token()));
        assert!(
            !resource.lock().unwrap().write(la.token()),
            "{label}: stale token accepted"
        );
        lb.resign().await.expect("resign");
    }
}

#[tokio::test(start_paused = true)]
async fn observe_yields_changes_only() {
    let store = MemoryStore::new();
    let watcher = election(LeaseClient::new(store.clone()));
    let a = election(LeaseClient::new(store.clone()));
    let b = election(LeaseClient::new(store.clone()));
    let seen: Arc<Mutex<Vec<Option<Leader>>>> = Arc::default();
    let observer = tokio::spawn({
        let seen = seen.clone();
        let stream = watcher.observe();
        async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(item) = stream.next().await {
                seen.lock().unwrap().push(item.expect("observe"));
            }
        }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let la = a.campaign().await.expect("a");
    // Several renewals: none of them is a change of leader.
    tokio::time::sleep(Duration::from_secs(3)).await;
    la.resign().await.expect("resign");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let lb = b.campaign().await.expect("b");
    tokio::time::sleep(Duration::from_secs(2)).await;
    // Dropping the handle resigns in the background.
    let b_leader = lb.leader();
    drop(lb);
    tokio::time::sleep(Duration::from_secs(2)).await;
    observer.abort();

    let seen = seen.lock().unwrap().clone();
    let a_leader = Leader {
        holder: la_holder(&seen, FencingToken::new(1)),
        token: FencingToken::new(1),
    };
    assert_eq!(
        seen,
        vec![None, Some(a_leader), None, Some(b_leader), None],
        "observed sequence"
    );
}

/// Two observers of one name on one store both hear a new leader when it is granted,
/// not one of them at its next read.
#[tokio::test(start_paused = true)]
async fn every_observer_hears_a_new_leader_at_once() {
    let store = MemoryStore::new();
    let candidate = election(LeaseClient::new(store.clone()));
    let interval = leasehold_election::ElectionConfig::new(TTL).observe_interval;
    let soon = Duration::from_millis(20);
    assert!(
        soon < interval / 4,
        "the case needs a read interval well above {soon:?}"
    );
    // Each observer runs on its own, so both wait on the store when the grant comes.
    let mut heard = Vec::new();
    let mut observers = Vec::new();
    for _ in 0..2 {
        let watcher = election(LeaseClient::new(store.clone()));
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        observers.push(tokio::spawn(async move {
            let mut stream = std::pin::pin!(watcher.observe());
            while let Some(item) = stream.next().await {
                let _ = tx.send(item.expect("observe"));
            }
        }));
        heard.push(rx);
    }
    for rx in &mut heard {
        assert_eq!(rx.recv().await.expect("first item"), None, "nobody leads yet");
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let leading = candidate.campaign().await.expect("campaign");
    for (i, rx) in heard.iter_mut().enumerate() {
        let leader = tokio::time::timeout(soon, rx.recv())
            .await
            .unwrap_or_else(|_| panic!("observer {i} did not hear the new leader within {soon:?}"));
        assert_eq!(leader.expect("item"), Some(leading.leader()));
    }
    for o in observers {
        o.abort();
    }
    leading.resign().await.expect("resign");
}

fn la_holder(seen: &[Option<Leader>], token: FencingToken) -> leasehold_core::HolderId {
    seen.iter()
        .flatten()
        .find(|l| l.token == token)
        .map(|l| l.holder.clone())
        .expect("leader with that token observed")
}

/// Without a store clock, an observer reports a frozen leader gone only after watching
/// its record unchanged for the TTL plus the margin.
#[tokio::test(start_paused = true)]
async fn observe_without_a_clock_waits_a_full_window() {
    let mem = MemoryStore::observation();
    let hung = FaultStore::new(mem.clone(), 3);
    let watcher = election(LeaseClient::new(mem.clone()));
    let a = election(LeaseClient::new(hung.clone()));
    let la = a.campaign().await.expect("a");
    let mut stream = std::pin::pin!(watcher.observe());
    assert_eq!(stream.next().await.expect("item").expect("ok"), Some(la.leader()));
    hung.set_plan(FaultPlan::hang());
    let frozen_at = Instant::now();
    assert_eq!(stream.next().await.expect("item").expect("ok"), None);
    let gone_after = frozen_at.elapsed();
    assert!(
        gone_after >= TTL + TTL / 20 && gone_after <= TTL + TTL / 2,
        "reported gone after {gone_after:?}"
    );
}

/// Once a leader's lease has run out and nobody has taken it, an observer reads at its
/// interval, not in a loop: the record that still names the old holder gives no
/// horizon to look again at (it used to give a zero one, and a read every millisecond).
#[tokio::test(start_paused = true)]
async fn observers_of_an_expired_leader_read_at_their_interval() {
    for mem in [MemoryStore::new(), MemoryStore::observation()] {
        let counting = CountingStore::new(mem.clone());
        let hung = FaultStore::new(mem.clone(), 5);
        let watcher = election(LeaseClient::new(counting.clone()));
        let a = election(LeaseClient::new(hung.clone()));
        let la = a.campaign().await.expect("a");
        let mut stream = Box::pin(watcher.observe());
        assert_eq!(stream.next().await.expect("item").expect("ok"), Some(la.leader()));
        hung.set_plan(FaultPlan::hang());
        assert_eq!(stream.next().await.expect("item").expect("ok"), None);
        let watching = tokio::spawn(async move { while stream.next().await.is_some() {} });
        let before = counting.counts().reads;
        let span = 4 * TTL;
        tokio::time::sleep(span).await;
        let reads = counting.counts().reads - before;
        let interval = leasehold_election::ElectionConfig::new(TTL).observe_interval;
        let most = u64::try_from(span.as_millis() / interval.as_millis()).unwrap() + 2;
        assert!(
            reads <= most,
            "{reads} reads in {span:?} (at most {most}): {:?}",
            mem.capabilities().clock
        );
        watching.abort();
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Event {
    Started(&'static str, u64),
    Stopped(&'static str, String),
    NewLeader(&'static str, Option<u64>),
}

/// client-go style: two candidates, the leader's store hangs, the other one takes
/// over; callbacks arrive in order and the old leader's work stops first.
#[tokio::test(start_paused = true)]
async fn callbacks_follow_client_go_order() {
    let mem = MemoryStore::new();
    let hung = FaultStore::new(mem.clone(), 11);
    let events: Arc<Mutex<Vec<(Instant, Event)>>> = Arc::default();
    let shutdown = CancellationToken::new();

    let mk = |who: &'static str| {
        let ev = events.clone();
        let ev2 = events.clone();
        let ev3 = events.clone();
        Callbacks::new(move |ctx| {
            let ev = ev.clone();
            async move {
                ev.lock()
                    .unwrap()
                    .push((Instant::now(), Event::Started(who, ctx.token().get())));
                ctx.cancelled().await;
            }
        })
        .on_stopped_leading(move |cause| {
            ev2.lock()
                .unwrap()
                .push((Instant::now(), Event::Stopped(who, cause.label().to_owned())))
        })
        .on_new_leader(move |l| {
            ev3.lock()
                .unwrap()
                .push((Instant::now(), Event::NewLeader(who, l.map(|l| l.token.get()))))
        })
    };
    let a = election(LeaseClient::new(hung.clone()));
    let b = election(LeaseClient::new(mem.clone()));
    let ra = tokio::spawn({
        let cb = mk("a");
        let s = shutdown.clone();
        async move { a.run(cb, s).await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let rb = tokio::spawn({
        let cb = mk("b");
        let s = shutdown.clone();
        async move { b.run(cb, s).await }
    });
    tokio::time::sleep(Duration::from_secs(2)).await;
    hung.set_plan(FaultPlan::hang());
    tokio::time::sleep(Duration::from_secs(3)).await;
    shutdown.cancel();
    rb.await.expect("task").expect("b run");
    // a's run returns too: its campaign on the hung store is abandoned at shutdown.
    tokio::time::timeout(Duration::from_secs(5), ra)
        .await
        .expect("a's run returns at shutdown")
        .expect("task")
        .expect("a run");

    let ev = events.lock().unwrap();
    let pos = |e: &Event| {
        ev.iter()
            .position(|(_, x)| x == e)
            .unwrap_or_else(|| panic!("missing {e:?}: {ev:?}"))
    };
    let a_started = pos(&Event::Started("a", 1));
    let a_stopped = ev
        .iter()
        .position(|(_, x)| matches!(x, Event::Stopped("a", c) if c == "outcome_unknown" || c == "store_unreachable"))
        .unwrap_or_else(|| panic!("a never stopped: {ev:?}"));
    let b_started = pos(&Event::Started("b", 2));
    let b_stopped = pos(&Event::Stopped("b", "released".into()));
    assert!(
        a_started < a_stopped && a_stopped < b_started && b_started < b_stopped,
        "{ev:?}"
    );
    assert!(ev[a_stopped].0 < ev[b_started].0, "a stopped after b started: {ev:?}");
    // b observed a, then itself.
    let b_saw: Vec<Option<u64>> = ev
        .iter()
        .filter_map(|(_, x)| match x {
            Event::NewLeader("b", t) => Some(*t),
            _ => None,
        })
        .collect();
    let firsts: Vec<_> = b_saw.iter().copied().filter(Option::is_some).collect();
    assert_eq!(firsts, vec![Some(1), Some(2)], "b's observations: {b_saw:?}");
    for w in b_saw.windows(2) {
        assert_ne!(w[0], w[1], "observation repeated: {b_saw:?}");
    }
}

/// At shutdown the leader's work stops before the lease is released: work that takes
/// 300 ms to wind down after its context is cancelled has ended before the next
/// candidate's work starts (the release used to go first, so the two ran side by side).
#[tokio::test(start_paused = true)]
async fn at_shutdown_the_work_stops_before_the_next_leader_starts() {
    let mem = MemoryStore::new();
    let log: Arc<Mutex<Vec<(Instant, &'static str)>>> = Arc::default();
    let (stop_a, stop_b) = (CancellationToken::new(), CancellationToken::new());
    let mk = |who: &'static str, ended: &'static str| {
        let log = log.clone();
        Callbacks::new(move |ctx| {
            let log = log.clone();
            async move {
                log.lock().unwrap().push((Instant::now(), who));
                ctx.cancelled().await;
                tokio::time::sleep(Duration::from_millis(300)).await;
                log.lock().unwrap().push((Instant::now(), ended));
            }
        })
    };
    let a = election(LeaseClient::new(mem.clone()));
    let b = election(LeaseClient::new(mem.clone()));
    let ra = tokio::spawn({
        let (cb, s) = (mk("a started", "a ended"), stop_a.clone());
        async move { a.run(cb, s).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let rb = tokio::spawn({
        let (cb, s) = (mk("b started", "b ended"), stop_b.clone());
        async move { b.run(cb, s).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    stop_a.cancel();
    ra.await.expect("task").expect("a run");
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop_b.cancel();
    rb.await.expect("task").expect("b run");
    let log = log.lock().unwrap();
    let at = |what: &str| {
        log.iter()
            .find(|(_, w)| *w == what)
            .map(|(t, _)| *t)
            .unwrap_or_else(|| panic!("no {what}: {log:?}"))
    };
    assert!(
        at("a ended") <= at("b started"),
        "b started while a's work ran: {log:?}"
    );
}

/// Leader work that panics: the panic reaches the caller of `run` once the lease is
/// released and `on_stopped_leading` called, instead of a loop of grants, panics and
/// releases (which also starved the other candidates).
#[tokio::test(start_paused = true)]
async fn a_panic_in_the_leader_work_ends_run_with_it() {
    let mem = MemoryStore::new();
    let starts = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let stopped: Arc<Mutex<Vec<String>>> = Arc::default();
    let shutdown = CancellationToken::new();
    let cb = {
        let (starts, shutdown, stopped) = (starts.clone(), shutdown.clone(), stopped.clone());
        Callbacks::new(move |_ctx| {
            let n = starts.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
            if n > 5 {
                shutdown.cancel();
            }
            async move { panic!("leader work failed") }
        })
        .on_stopped_leading(move |cause| stopped.lock().unwrap().push(cause.label().to_owned()))
    };
    let a = election(LeaseClient::new(mem.clone()));
    let run = tokio::spawn(async move { a.run(cb, shutdown).await });
    let ended = tokio::time::timeout(Duration::from_secs(10), run)
        .await
        .expect("run ends");
    assert!(
        ended.as_ref().is_err_and(|e| e.is_panic()),
        "run did not end on the panic: {ended:?}"
    );
    assert_eq!(
        starts.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "led again after a panic"
    );
    assert_eq!(*stopped.lock().unwrap(), ["released"]);
    let free = election(LeaseClient::new(mem));
    let next = free.campaign().await.expect("the lease was released");
    assert!(next.is_leader());
}

/// Leader work that returns at once does not take the lease straight back: another
/// candidate gets turns too.
#[tokio::test(start_paused = true)]
async fn work_that_returns_at_once_lets_others_lead() {
    let mem = MemoryStore::new();
    let turns: Arc<Mutex<Vec<&'static str>>> = Arc::default();
    let shutdown = CancellationToken::new();
    let mk = |who: &'static str| {
        let (turns, shutdown) = (turns.clone(), shutdown.clone());
        Callbacks::new(move |_ctx| {
            let mut turns = turns.lock().unwrap();
            turns.push(who);
            if turns.len() >= 200 {
                // A loop that never lets time pass: end it, for the assertion below.
                shutdown.cancel();
            }
            async {}
        })
    };
    let a = election(LeaseClient::new(mem.clone()));
    let b = election(LeaseClient::new(mem.clone()));
    let ra = tokio::spawn({
        let (cb, s) = (mk("a"), shutdown.clone());
        async move { a.run(cb, s).await }
    });
    let rb = tokio::spawn({
        let (cb, s) = (mk("b"), shutdown.clone());
        async move { b.run(cb, s).await }
    });
    tokio::time::sleep(Duration::from_secs(5)).await;
    shutdown.cancel();
    ra.await.expect("task").expect("a run");
    rb.await.expect("task").expect("b run");
    let turns = turns.lock().unwrap();
    let (na, nb) = (
        turns.iter().filter(|w| **w == "a").count(),
        turns.iter().filter(|w| **w == "b").count(),
    );
    assert!(na >= 2 && nb >= 2, "turns: a {na}, b {nb}");
    assert!(turns.len() < 200, "{} tenures in 5 s: a loop", turns.len());
}

/// `run` dropped while it leads (a `select!` or a timeout around it) aborts the leader
/// work's task: no work runs on without the lease, which is released.
#[tokio::test(start_paused = true)]
async fn dropping_run_while_leading_aborts_the_work() {
    struct Flag(Arc<std::sync::atomic::AtomicBool>);
    impl Drop for Flag {
        fn drop(&mut self) {
            self.0.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }
    let mem = MemoryStore::new();
    let ended = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let started = Arc::new(tokio::sync::Notify::new());
    let cb = {
        let (ended, started) = (ended.clone(), started.clone());
        Callbacks::new(move |_ctx| {
            let flag = Flag(ended.clone());
            started.notify_one();
            async move {
                let _flag = flag;
                // Work that never looks at its context.
                std::future::pending::<()>().await;
            }
        })
    };
    let a = election(LeaseClient::new(mem.clone()));
    let run = a.run(cb, CancellationToken::new());
    tokio::select! {
        _ = run => panic!("run ended"),
        () = started.notified() => {}
    }
    tokio::task::yield_now().await;
    assert!(
        ended.load(std::sync::atomic::Ordering::SeqCst),
        "the work runs on after run was dropped"
    );
    let b = election(LeaseClient::new(mem));
    let lb = tokio::time::timeout(Duration::from_secs(1), b.campaign())
        .await
        .expect("the lease was released")
        .expect("b");
    assert!(lb.is_leader());
}

/// A leader frozen past its validity deadline (here its whole runtime blocked, as a
/// stopped process is) reads that it no longer leads the moment it runs again, before
/// its renewal driver has had a turn to cancel the context: the freeze the library
/// exists for. Real time on one thread: nothing else runs while it is blocked.
#[tokio::test]
async fn a_leader_frozen_past_its_validity_is_not_leading_when_it_wakes() {
    let client = LeaseClient::new(MemoryStore::new());
    let election = Election::new(client, "it/frozen", Duration::from_secs(1)).expect("election");
    let leadership = election.campaign().await.expect("leads");
    let ctx = leadership.context();
    assert!(ctx.is_leading() && leadership.is_leader());
    let deadline = ctx.valid_until();
    assert_eq!(deadline, leadership.valid_until());
    // The freeze: no task of this runtime runs until the deadline has passed.
    std::thread::sleep(deadline.saturating_duration_since(Instant::now()) + Duration::from_millis(5));
    assert!(!ctx.cancellation().is_cancelled(), "the driver ran during the freeze");
    assert!(
        !leadership.is_leader(),
        "the leadership trusts a lease past its deadline"
    );
    assert!(!ctx.is_leading(), "the leader context trusts a lease past its deadline");
    // The first `false` ends the tenure for the work: it stays ended whatever a late
    // renewal answer does, and work waiting on the cancellation is told now.
    assert!(
        ctx.cancellation().is_cancelled(),
        "the context was not cancelled by its own expiry"
    );
    assert!(!ctx.clone().is_leading(), "a clone of the context trusts it");
}
