//! The Lease handle: one renewal driver for many leases, drop safety, unknown outcomes.
#![cfg(feature = "testing")]
#![allow(missing_docs)]

mod common;

use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use leasehold_core::store::{
    Capabilities, CasOutcome, Current, DeleteOutcome, LeaseRecord, Linearizable, Precondition, Stored, Version,
};
use leasehold_core::testing::{CountingStore, FaultPlan, FaultStore, process::poll_async};
use leasehold_core::{
    AcquireOptions, AcquireOutcome, Error, FencingToken, HolderId, Lease, LeaseClient, LeaseName, LossCause,
    MemoryStore, Result, Ttl, store::CasStore,
};
use tokio::time::Instant;

async fn vacant(store: &MemoryStore, name: &str) -> bool {
    let name = LeaseName::new(name).expect("name");
    matches!(store.read(&name).await, Ok(Some(s)) if s.record.holder.is_none())
}

/// The token of the next grant of `name`, which must be free.
async fn next_token(client: &LeaseClient, name: &str) -> u64 {
    let outcome = client
        .try_acquire(name, Duration::from_secs(60))
        .await
        .expect("acquire");
    outcome.granted().expect("the name is free").token().get()
}

/// Polls until `name` is vacant in `mem` (within `within`, or fails saying `left_held`),
/// then checks that the next grant of it is the second token: the first was released,
/// and nothing was granted in between.
async fn released_then_second_token(
    mem: &MemoryStore,
    client: &LeaseClient,
    name: &str,
    within: Duration,
    left_held: &str,
) {
    assert!(poll_async(within, || vacant(mem, name)).await, "{left_held}");
    assert_eq!(next_token(client, name).await, 2);
}

/// A lease on `name` for `ttl`, acquired through a store whose faults (seeded with
/// `seed`) the test then turns on.
async fn lease_on_faulty_store(seed: u64, name: &str, ttl: Duration) -> (FaultStore<MemoryStore>, Lease) {
    let store = FaultStore::new(MemoryStore::new(), seed);
    let lease = LeaseClient::new(store.clone())
        .acquire(name, ttl)
        .await
        .expect("acquire");
    (store, lease)
}

#[tokio::test(start_paused = true)]
async fn ten_thousand_leases_are_renewed_by_one_driver_task() {
    let store = CountingStore::new(MemoryStore::new());
    let client = LeaseClient::new(store.clone());
    let ttl = Duration::from_secs(30);
    let mut leases = Vec::with_capacity(10_000);
    for i in 0..10_000 {
        let l = client
            .try_acquire(format!("bulk/{i}"), ttl)
            .await
            .expect("acquire")
            .granted()
            .expect("granted");
        leases.push(l);
    }
    assert_eq!(store.counts().writes, 10_000);
    // Attempts finished; what is left is the test itself and one driver.
    let alive = tokio::runtime::Handle::current().metrics().num_alive_tasks();
    assert!(
        alive <= 1,
        "{alive} tasks alive besides the test while holding 10,000 leases"
    );
    store.reset();
    // Renewal every ttl/3 = 10 s: in 25 s, exactly two rounds, each sent in batches of
    // the store's `renewal_batch` (10,000 / 256: 40 requests a round).
    tokio::time::sleep(Duration::from_secs(25)).await;
    let n = store.counts();
    let per_round = 10_000_usize.div_ceil(MemoryStore::RENEWAL_BATCH) as u64;
    assert_eq!(n.renews, 2 * per_round, "{n:?}");
    assert_eq!(n.round_trips(), 2 * per_round, "{n:?}");
    assert!(leases.iter().all(|l| l.is_valid() && l.token().get() == 1));
    let alive = tokio::runtime::Handle::current().metrics().num_alive_tasks();
    assert!(alive <= 1, "{alive} tasks alive while renewing");
}

#[tokio::test(start_paused = true)]
async fn loss_fires_exactly_at_the_deadline_when_the_store_hangs() {
    let (store, lease) = lease_on_faulty_store(9, "hang", Duration::from_secs(9)).await;
    let deadline = lease.valid_until();
    assert_eq!(
        deadline - Instant::now(),
        Duration::from_millis(8_550),
        "9 s - 5% margin, from the send"
    );
    store.set_plan(FaultPlan::hang());
    let cause = lease.lost().await;
    assert_eq!(Instant::now(), deadline, "loss must fire at the deadline, not later");
    assert_eq!(store.injected(), 0, "a hang is not an injected failure");
    assert_eq!(cause, LossCause::OutcomeUnknown, "a renewal was in flight, unanswered");
    assert!(!lease.is_valid());
}

#[tokio::test(start_paused = true)]
async fn a_store_that_refuses_every_call_ends_the_lease_as_unreachable() {
    let (store, lease) = lease_on_faulty_store(9, "down", Duration::from_secs(3)).await;
    let deadline = lease.valid_until();
    store.set_plan(FaultPlan::down());
    let cause = lease.lost().await;
    assert!(Instant::now() <= deadline);
    assert_eq!(cause, LossCause::StoreUnreachable);
}

#[tokio::test(start_paused = true)]
async fn renewals_whose_outcome_is_unknown_are_retried_not_read_as_loss() {
    let (store, lease) = lease_on_faulty_store(42, "flaky", Duration::from_secs(3)).await;
    // 30% of all calls apply but lose their reply.
    store.set_plan(FaultPlan {
        apply_then_fail: 0.3,
        ..FaultPlan::none()
    });
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert!(store.injected() >= 5, "only {} faults injected", store.injected());
    assert!(
        lease.is_valid(),
        "lease lost after {} injected faults: {:?}",
        store.injected(),
        lease.loss_cause()
    );
    let name = LeaseName::new("flaky").expect("name");
    store.set_plan(FaultPlan::none());
    let rec = store.read(&name).await.expect("read").expect("present");
    assert_eq!(
        rec.record.token,
        lease.token(),
        "an unknown-outcome renewal changed the token"
    );
    assert_eq!(rec.record.holder.as_ref(), Some(lease.holder()));
}

#[tokio::test(start_paused = true)]
async fn dropping_the_guard_releases_in_the_background() {
    let store = MemoryStore::new();
    let client = LeaseClient::new(store.clone());
    let lease = client
        .acquire("dropped", Duration::from_secs(60))
        .await
        .expect("acquire");
    drop(lease);
    assert!(
        poll_async(Duration::from_secs(1), || vacant(&store, "dropped")).await,
        "not released after drop"
    );
    assert_eq!(next_token(&client, "dropped").await, 2);
}

/// Dropping the guard ends the lease at once for whatever was handed its validity or
/// its cancellation (a job's or a leader's context), as `release` does: not at the
/// renewal driver's next turn, which on this one-thread runtime has not come yet.
#[tokio::test(start_paused = true)]
async fn dropping_the_guard_ends_the_lease_at_once() {
    let client = LeaseClient::new(MemoryStore::new());
    let lease = client
        .acquire("dropped-now", Duration::from_secs(60))
        .await
        .expect("acquire");
    let (validity, cancel) = (lease.validity(), lease.cancellation());
    assert!(validity.is_valid());
    drop(lease);
    assert!(!validity.is_valid(), "a dropped lease still reads valid");
    assert!(cancel.is_cancelled(), "a dropped lease's cancellation has not fired");
}

#[tokio::test(start_paused = true)]
async fn dropping_an_acquire_mid_write_never_leaves_an_unrenewed_lease() {
    let (mem, slow, client) = common::slowed(1, Duration::from_millis(100));
    // Drop the future while its write is in flight (at 50 ms of a 100 ms call).
    let attempt = client.try_acquire("abandoned", Duration::from_secs(60));
    assert!(tokio::time::timeout(Duration::from_millis(50), attempt).await.is_err());
    // The write lands at 100 ms; nobody waits for the grant, so it is released.
    assert!(
        poll_async(Duration::from_secs(2), || vacant(&mem, "abandoned")).await,
        "an abandoned grant was left held"
    );
    // The same for the waiting `acquire` loop, dropped while it waits for a holder
    // (another client's: this one's own second acquire would be refused at once).
    let holder = LeaseClient::new(slow.clone())
        .acquire("busy", Duration::from_secs(60))
        .await
        .expect("holder");
    let waiting = client.acquire("busy", Duration::from_secs(60));
    assert!(tokio::time::timeout(Duration::from_millis(500), waiting).await.is_err());
    holder.release().await.expect("release");
    assert!(
        poll_async(Duration::from_secs(2), || vacant(&mem, "busy")).await,
        "the dropped waiter took the lease"
    );
}

#[tokio::test(start_paused = true)]
async fn an_acquire_dropped_before_its_write_sends_nothing() {
    let (mem, slow, client) = common::slowed(2, Duration::from_millis(100));
    let counting = CountingStore::new(slow);
    let counted = LeaseClient::new(counting.clone());
    // Never polled: nothing is sent, and nothing stays behind (the name is free again).
    drop(counted.try_acquire("never-sent", Duration::from_secs(60)));
    drop(client.acquire("never-sent", Duration::from_secs(60)));
    assert_eq!(
        counting.counts().round_trips(),
        0,
        "a dropped, unpolled acquire sent a call"
    );
    let name = LeaseName::new("never-sent").expect("name");
    assert!(mem.read(&name).await.expect("read").is_none(), "a record was written");
    assert_eq!(next_token(&counted, "never-sent").await, 1);
}

#[tokio::test(start_paused = true)]
async fn a_release_dropped_mid_write_still_releases() {
    let (mem, _slow, client) = common::slowed(3, Duration::from_millis(100));
    let lease = client
        .acquire("let-go", Duration::from_secs(60))
        .await
        .expect("acquire");
    // Dropped while its write is in flight (at 50 ms of a 100 ms call): it finishes on
    // its own, and nobody renews the lease meanwhile.
    assert!(
        tokio::time::timeout(Duration::from_millis(50), lease.release())
            .await
            .is_err()
    );
    released_then_second_token(
        &mem,
        &client,
        "let-go",
        Duration::from_secs(2),
        "a dropped release left the lease held",
    )
    .await;
}

#[tokio::test(start_paused = true)]
async fn an_acquire_whose_write_outcome_was_unknown_adopts_its_own_grant() {
    let mem = MemoryStore::new();
    let store = FaultStore::new(mem.clone(), 3);
    let client = LeaseClient::new(store.clone());
    // The first write applies but its reply is lost; the client reads, sees itself,
    // and confirms on the record's version with the same token.
    store.set_plan(FaultPlan {
        apply_then_fail: 1.0,
        ..FaultPlan::none()
    });
    let name = "unknown-outcome";
    let first = client.try_acquire(name, Duration::from_secs(10));
    let clear = async {
        // Let the first write (and its lost reply) happen, then heal the store.
        tokio::task::yield_now().await;
        store.set_plan(FaultPlan::none());
    };
    let (outcome, ()) = tokio::join!(first, clear);
    match outcome {
        Ok(AcquireOutcome::Granted(l)) => assert_eq!(l.token().get(), 1),
        Err(Error::Indeterminate { .. }) => {
            // The read also hit the fault: nothing was granted to anyone else, and the
            // record names an abandoned holder that expires on its own.
        }
        other => panic!("unexpected: {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn acquire_gives_up_at_its_deadline() {
    let store = MemoryStore::new();
    let _held = LeaseClient::new(store.clone())
        .acquire("taken", Duration::from_secs(60))
        .await
        .expect("holder");
    let client = LeaseClient::new(store);
    let started = Instant::now();
    let err = client
        .acquire_timeout("taken", Duration::from_secs(60), Duration::from_secs(3))
        .await
        .unwrap_err();
    // Held to the end: the timeout names no store error.
    assert!(matches!(err, Error::Timeout { last_error: None, .. }), "{err:?}");
    assert_eq!(err.to_string(), r#"timed out waiting for lease "taken""#);
    assert_eq!(Instant::now() - started, Duration::from_secs(3));
}

/// A deadline that ends a run of store failures says how the store failed, not that
/// someone holds the lease: the caller (and `leasehold run --timeout`) can tell an
/// outage from contention.
#[tokio::test(start_paused = true)]
async fn a_timeout_on_a_failing_store_says_how_it_failed() {
    let client = twisted(&MemoryStore::new(), Twist::GrantsNotTaken);
    let err = client
        .acquire_timeout("locked", Duration::from_secs(60), Duration::from_secs(3))
        .await
        .expect_err("no write applies");
    let Error::Timeout {
        last_error: Some(last), ..
    } = &err
    else {
        panic!("a timeout naming the store's failure, got {err:?}");
    };
    assert!(last.is_indeterminate(), "{last:?}");
    let text = err.to_string();
    assert!(
        text.starts_with(r#"timed out waiting for lease "locked": outcome unknown: "#),
        "{text}"
    );
    assert!(text.contains("no answer within the request timeout"), "{text}");
    assert!(
        std::error::Error::source(&err).is_some(),
        "the store's error is the source"
    );
}

/// A store whose writes are held until it stops waiting for them (a file another process
/// keeps locked): the attempt says the store failed, never that someone holds the lease,
/// and a deadline ends the attempt under way rather than after its last write.
#[tokio::test(start_paused = true)]
async fn writes_that_never_answer_are_a_store_failure_not_a_holder() {
    let mem = MemoryStore::new();
    let client = twisted(&mem, Twist::GrantsNotTaken);
    let err = client
        .try_acquire("locked", Duration::from_secs(60))
        .await
        .expect_err("no write applied, so no answer can say who holds it");
    assert!(err.is_indeterminate(), "{err:?}");
    assert!(
        err.to_string().contains("4 writes in a row had unknown outcomes"),
        "{err}"
    );
    assert!(err.to_string().contains("none is known to have applied"), "{err}");
    assert!(
        err.to_string().contains("no answer within the request timeout"),
        "{err}"
    );
    let name = LeaseName::new("locked").expect("name");
    assert!(mem.read(&name).await.expect("read").is_none(), "something was written");
}

/// A lease last held by someone whose time has run out, on a store that takes no
/// write (a row another transaction keeps locked): every read shows that expired
/// record, and the answer is still a store failure, not "held by" its old holder.
#[tokio::test(start_paused = true)]
async fn writes_that_never_answer_after_an_expired_holder_are_a_store_failure() {
    let mem = MemoryStore::new();
    let name = LeaseName::new("was-held").expect("name");
    let old = LeaseRecord::held(
        HolderId::new("old-holder").expect("holder"),
        FencingToken::FIRST,
        Ttl::new(Duration::from_secs(1)).expect("ttl"),
    );
    let planted = mem.write(&name, &Precondition::Absent, &old).await.expect("plant");
    assert!(matches!(planted, CasOutcome::Written(_)), "{planted:?}");
    tokio::time::advance(Duration::from_secs(2)).await;
    let client = twisted(&mem, Twist::GrantsNotTaken);
    let err = client
        .try_acquire("was-held", Duration::from_secs(60))
        .await
        .expect_err("no write applied, and the old holder's time has run out");
    assert!(err.is_indeterminate(), "{err:?}");
    assert!(err.to_string().contains("none is known to have applied"), "{err}");
}

/// A grant whose answer was lost, found ours by the read after it, then a write
/// confirming it that fails without applying: the attempt ends with that failure and
/// gives back the grant, instead of leaving it held with nobody renewing it.
#[tokio::test(start_paused = true)]
async fn a_failed_confirmation_gives_back_the_grant_it_confirmed() {
    let mem = MemoryStore::new();
    let client = twisted(&mem, Twist::ConfirmsFail);
    let err = client
        .try_acquire("confirm", Duration::from_secs(60))
        .await
        .expect_err("the confirmation failed");
    assert!(
        err.is_retryable(),
        "given back, the grant is no longer in doubt: {err:?}"
    );
    released_then_second_token(
        &mem,
        &LeaseClient::new(mem.clone()),
        "confirm",
        Duration::from_secs(5),
        "the grant of a failed confirmation was left held",
    )
    .await;
}

/// As above, but the confirmation is refused without the current record, and the
/// caller's deadline passes during the read that follows: that read is finished on its
/// own, and the grant given back.
#[tokio::test(start_paused = true)]
async fn a_deadline_in_the_read_after_a_refused_confirmation_gives_back_the_grant() {
    let mem = MemoryStore::new();
    let client = twisted(&mem, Twist::ConfirmsRefusedThenSlowReads);
    let err = client
        .acquire_timeout("confirm-read", Duration::from_secs(60), Duration::from_secs(1))
        .await
        .expect_err("the read outlasts the deadline");
    assert!(matches!(err, Error::Timeout { .. }), "{err:?}");
    released_then_second_token(
        &mem,
        &LeaseClient::new(mem.clone()),
        "confirm-read",
        Duration::from_secs(30),
        "the grant was left held when the caller went away during the read",
    )
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_deadline_ends_an_attempt_under_way() {
    // Every write applies at once and answers 10 s later; the caller gives it 1 s.
    let mem = MemoryStore::new();
    let client = twisted(&mem, Twist::SlowAnswers(Duration::from_secs(10)));
    let started = Instant::now();
    let err = client
        .acquire_timeout("slow", Duration::from_secs(60), Duration::from_secs(1))
        .await
        .expect_err("the answer comes after the deadline");
    // Nothing answered: the timeout does not claim the lease is held.
    assert!(
        matches!(
            err,
            Error::Timeout {
                last_error: Some(_),
                ..
            }
        ),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .contains("the store answered no attempt before the deadline"),
        "{err}"
    );
    assert_eq!(Instant::now() - started, Duration::from_secs(1));
    // The write the attempt sent is finished on its own, and what it granted released.
    released_then_second_token(
        &mem,
        &client,
        "slow",
        Duration::from_secs(30),
        "the grant of an attempt cut by the deadline was left held",
    )
    .await;
    // A zero timeout still makes one attempt, bounded by the store alone.
    let started = Instant::now();
    let lease = client
        .acquire_timeout("slow-zero", Duration::from_secs(60), Duration::ZERO)
        .await
        .expect("one attempt, answered after 10 s");
    assert_eq!(Instant::now() - started, Duration::from_secs(10));
    assert_eq!(lease.token().get(), 1);
}

#[tokio::test]
async fn bad_input_is_a_typed_error_and_changes_nothing() {
    let store = CountingStore::new(MemoryStore::new());
    let client = LeaseClient::new(store.clone());
    for (name, ttl) in [
        ("", Duration::from_secs(1)),
        ("a//b", Duration::from_secs(1)),
        ("../x", Duration::from_secs(1)),
        ("ok", Duration::ZERO),
        ("ok", Duration::from_secs(8 * 86_400)),
        ("ok", Duration::from_micros(10_500)),
    ] {
        let err = client.try_acquire(name, ttl).await.unwrap_err();
        assert!(matches!(err, Error::InvalidInput { .. }), "{name:?} {ttl:?}: {err:?}");
    }
    assert_eq!(store.counts().round_trips(), 0, "invalid input reached the store");
}

/// What a [`Twisted`] store does unlike the `MemoryStore` it wraps.
#[derive(Debug, Clone, Copy)]
enum Twist {
    /// Writes and releases apply at once but answer this much later: a caller that drops
    /// the call meanwhile has a grant it never hears of.
    SlowAnswers(Duration),
    /// Every release meets a newer version of the record it releases, still naming the
    /// same holder: something renews it behind the releaser's back.
    RenewedBehindTheBack,
    /// Every grant applies and its answer is lost (`Indeterminate`); reads and
    /// releases answer.
    GrantAnswersLost,
    /// No grant applies, and none is answered (`Indeterminate`): a store that holds
    /// every write until it stops waiting for it (a file another process keeps locked);
    /// reads answer.
    GrantsNotTaken,
    /// A first grant applies and its answer is lost (`Indeterminate`); the write that
    /// confirms it (on the version a read showed) fails without applying
    /// (`Unavailable`). Reads and releases answer.
    ConfirmsFail,
    /// As `ConfirmsFail`, but the confirming write is refused without the current
    /// record (`Conflict(Unknown)`), and every read after the first answers 10 s late.
    ConfirmsRefusedThenSlowReads,
}

/// A `MemoryStore` with one [`Twist`].
#[derive(Debug, Clone)]
struct Twisted {
    inner: MemoryStore,
    twist: Twist,
    /// Reads answered so far.
    reads: Arc<AtomicUsize>,
}

#[async_trait]
impl CasStore for Twisted {
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    async fn read(&self, name: &LeaseName) -> Result<Option<Stored>> {
        let earlier = self.reads.fetch_add(1, Ordering::SeqCst);
        if matches!(self.twist, Twist::ConfirmsRefusedThenSlowReads) && earlier > 0 {
            tokio::time::sleep(Duration::from_secs(10)).await;
        }
        self.inner.read(name).await
    }
    async fn write(&self, name: &LeaseName, expect: &Precondition, record: &LeaseRecord) -> Result<CasOutcome> {
        let confirms = matches!(expect, Precondition::Version(_)) && record.holder.is_some();
        match self.twist {
            Twist::GrantsNotTaken if record.holder.is_some() => {
                return Err(Error::Indeterminate {
                    message: "no answer within the request timeout".into(),
                    source: None,
                });
            }
            Twist::ConfirmsFail if confirms => {
                return Err(Error::Unavailable {
                    message: "the store refused the request".into(),
                    source: None,
                });
            }
            Twist::ConfirmsRefusedThenSlowReads if confirms => return Ok(CasOutcome::Conflict(Current::Unknown)),
            _ => {}
        }
        let answer = self.inner.write(name, expect, record).await;
        match self.twist {
            Twist::SlowAnswers(delay) => tokio::time::sleep(delay).await,
            Twist::GrantAnswersLost | Twist::ConfirmsFail | Twist::ConfirmsRefusedThenSlowReads
                if record.holder.is_some() =>
            {
                answer?;
                return Err(Error::Indeterminate {
                    message: "the grant's answer was lost".into(),
                    source: None,
                });
            }
            _ => {}
        }
        answer
    }
    async fn delete(&self, name: &LeaseName, version: &Version) -> Result<DeleteOutcome> {
        self.inner.delete(name, version).await
    }
    async fn release(&self, name: &LeaseName, version: &Version, held: &LeaseRecord) -> Result<CasOutcome> {
        if let Twist::RenewedBehindTheBack = self.twist {
            if let Some(current) = self.inner.read(name).await? {
                if current.record.holder == held.holder && current.record.token == held.token {
                    self.inner.renew(name, &current.version, &current.record).await?;
                }
            }
        }
        let answer = self.inner.release(name, version, held).await;
        if let Twist::SlowAnswers(delay) = self.twist {
            tokio::time::sleep(delay).await;
        }
        answer
    }
}

impl Linearizable for Twisted {}

/// A client on `inner` with one [`Twist`].
fn twisted(inner: &MemoryStore, twist: Twist) -> LeaseClient {
    LeaseClient::new(Twisted {
        inner: inner.clone(),
        twist,
        reads: Arc::default(),
    })
}

#[tokio::test(start_paused = true)]
async fn attempts_abandoned_before_their_write_send_nothing() {
    // Every call takes 10 s; the caller gives each attempt 100 ms, 50 times in a row.
    let (mem, slow, _) = common::slowed(4, Duration::from_secs(10));
    let counting = CountingStore::new(slow);
    let client = LeaseClient::new(counting.clone());
    let ttl = Duration::from_secs(60);
    for _ in 0..50 {
        let attempt = client.try_acquire("job", ttl);
        assert!(tokio::time::timeout(Duration::from_millis(100), attempt).await.is_err());
    }
    // The first attempt sent its write; the 49 others waited for it to settle and were
    // dropped there. Only that write is finished, and what it granted released.
    assert!(
        poll_async(Duration::from_secs(60), || vacant(&mem, "job")).await,
        "the abandoned grant was not released"
    );
    assert_eq!(
        counting.counts().writes,
        2,
        "the first attempt's write and its release, nothing else: {:?}",
        counting.counts()
    );
    // Nothing queued behind it either: the next grant is the second token.
    let lease = client.acquire("job", ttl).await.expect("acquire");
    assert_eq!(lease.token().get(), 2, "abandoned attempts were granted meanwhile");
    assert_eq!(counting.counts().writes, 3, "{:?}", counting.counts());
}

#[tokio::test(start_paused = true)]
async fn an_acquire_dropped_after_its_write_applied_releases_the_grant() {
    let mem = MemoryStore::new();
    let client = twisted(&mem, Twist::SlowAnswers(Duration::from_millis(100)));
    let mut attempt = Box::pin(client.try_acquire("answered", Duration::from_secs(60)));
    assert!(futures::poll!(attempt.as_mut()).is_pending());
    // Granted in the store; the answer is on its way when the caller gives up.
    let name = LeaseName::new("answered").expect("name");
    let held = mem.read(&name).await.expect("read").expect("written");
    assert!(held.record.holder.is_some());
    drop(attempt);
    released_then_second_token(
        &mem,
        &client,
        "answered",
        Duration::from_secs(2),
        "a grant whose answer nobody took was left held",
    )
    .await;
}

#[tokio::test(start_paused = true)]
async fn an_acquire_dropped_while_settling_an_unknown_outcome_releases_what_applied() {
    let mem = MemoryStore::new();
    let store = FaultStore::new(mem.clone(), 5);
    let client = LeaseClient::new(store.clone());
    // The write applies at 100 ms and its answer is lost; so is the answer of the read
    // that follows (sent at 100 ms, the plan changed meanwhile applies to later calls).
    store.set_plan(FaultPlan {
        apply_then_fail: 1.0,
        delay: Some(Duration::from_millis(100)),
        ..FaultPlan::none()
    });
    let mut attempt = Box::pin(client.try_acquire("in-doubt", Duration::from_secs(60)));
    assert!(futures::poll!(attempt.as_mut()).is_pending());
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert!(futures::poll!(attempt.as_mut()).is_pending());
    store.set_plan(FaultPlan {
        delay: Some(Duration::from_millis(100)),
        ..FaultPlan::none()
    });
    // Dropped during that read: the task that finishes it reads again, finds the
    // record naming the abandoned attempt, and releases it.
    drop(attempt);
    released_then_second_token(
        &mem,
        &client,
        "in-doubt",
        Duration::from_secs(5),
        "a write of unknown outcome that applied was left held",
    )
    .await;
}

/// The attempt's first write applied with its answer lost, a read showed it, and the
/// caller gave up during the write that was to confirm it, which then failed without
/// applying: the record the first write left is released all the same (it was left
/// held till its TTL).
#[tokio::test(start_paused = true)]
async fn an_acquire_dropped_during_its_confirming_write_releases_what_the_first_applied() {
    let mem = MemoryStore::new();
    let store = FaultStore::new(mem.clone(), 5);
    let client = LeaseClient::new(store.clone());
    let ms = Duration::from_millis;
    let mut attempt = Box::pin(client.try_acquire("confirming", Duration::from_secs(60)));
    // Each plan applies to the calls sent after it is set (every call takes 100 ms):
    // the write at 0 applies and its answer is lost; the read at 100 answers; the
    // confirming write at 200 fails without applying; the release after it goes through.
    store.set_plan(FaultPlan {
        apply_then_fail: 1.0,
        delay: Some(ms(100)),
        ..FaultPlan::none()
    });
    assert!(tokio::time::timeout(ms(50), attempt.as_mut()).await.is_err());
    store.set_plan(FaultPlan {
        delay: Some(ms(100)),
        ..FaultPlan::none()
    });
    assert!(tokio::time::timeout(ms(100), attempt.as_mut()).await.is_err());
    store.set_plan(FaultPlan {
        fail_before_send: 1.0,
        delay: Some(ms(100)),
        ..FaultPlan::none()
    });
    assert!(tokio::time::timeout(ms(100), attempt.as_mut()).await.is_err());
    let name = LeaseName::new("confirming").expect("name");
    let held = mem.read(&name).await.expect("read").expect("written");
    assert!(held.record.holder.is_some(), "the first write applied");
    store.set_plan(FaultPlan::none());
    drop(attempt);
    released_then_second_token(
        &mem,
        &client,
        "confirming",
        Duration::from_secs(5),
        "what the first write applied was left held",
    )
    .await;
}

/// Every write of an attempt applied with its answer lost, each confirmed by a read:
/// after its last round the attempt gives up, and releases what it wrote (it returned
/// `Held` by itself, and the record stayed held by nobody till its TTL).
#[tokio::test(start_paused = true)]
async fn an_attempt_that_gives_up_on_writes_of_unknown_outcome_releases_what_applied() {
    let mem = MemoryStore::new();
    let client = twisted(&mem, Twist::GrantAnswersLost);
    let outcome = client.try_acquire("unknown", Duration::from_secs(60)).await;
    assert!(
        matches!(&outcome, Err(e) if e.is_retryable()),
        "expected a retryable error once what applied was released: {outcome:?}"
    );
    assert!(vacant(&mem, "unknown").await, "what the attempt wrote was left held");
}

/// A current-thread runtime with paused time.
fn paused_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("runtime")
}

#[test]
fn a_client_whose_driver_is_gone_sends_no_grant_and_still_releases() {
    let mem = MemoryStore::new();
    let counting = CountingStore::new(mem.clone());
    let client = LeaseClient::new(counting.clone());
    let ttl = Duration::from_secs(60);
    // The renewal driver runs on the runtime of the client's first acquire.
    let first = paused_runtime();
    let (released, dropped) = first.block_on(async {
        let released = client.acquire("released", ttl).await.expect("acquire");
        let dropped = client.acquire("dropped", ttl).await.expect("acquire");
        (released, dropped)
    });
    drop(first);
    paused_runtime().block_on(async {
        counting.reset();
        let err = client.try_acquire("never", ttl).await.unwrap_err();
        assert!(matches!(err, Error::Shutdown), "{err:?}");
        assert_eq!(counting.counts().writes, 0, "a grant nobody would renew was written");
        let never = LeaseName::new("never").expect("name");
        assert!(mem.read(&never).await.expect("read").is_none());
        // The release runs in the caller's task: it needs no driver.
        released.release().await.expect("release without a driver");
        assert!(vacant(&mem, "released").await, "release did not write");
        // Nor does a dropped guard: released on the runtime at hand.
        drop(dropped);
        assert!(
            poll_async(Duration::from_secs(2), || vacant(&mem, "dropped")).await,
            "a dropped guard was left held"
        );
    });
}

/// `settle` returns once an attempt abandoned after its write was sent has given back
/// what it granted (what a program about to exit waits for), not before; a lease the
/// client holds is not waited for.
#[test]
fn settle_waits_for_an_abandoned_attempt_to_give_back_its_grant() {
    let (mem, _slow, client) = common::slowed(7, Duration::from_millis(100));
    paused_runtime().block_on(async {
        let ttl = Duration::from_secs(60);
        let mut attempt = Box::pin(client.try_acquire("abandoned", ttl));
        assert!(futures::poll!(attempt.as_mut()).is_pending(), "the write is in flight");
        drop(attempt);
        client.settle("abandoned").await.expect("settle");
        assert!(
            vacant(&mem, "abandoned").await,
            "settle returned before the grant was given back"
        );
        let held = client.acquire("held", ttl).await.expect("acquire");
        client.settle("held").await.expect("a held lease is no attempt");
        assert!(held.is_valid());
        assert!(matches!(
            client.settle("bad name").await,
            Err(Error::InvalidInput { .. })
        ));
    });
}

/// Leases held when their driver's runtime shuts down end at once, with their own cause:
/// `lost()` completes and the work given their cancellation token hears it, rather than
/// never (nothing renews them any more). The guard still releases on another runtime.
#[test]
fn held_leases_end_when_their_driver_stops() {
    let mem = MemoryStore::new();
    let client = LeaseClient::new(mem.clone());
    let ttl = Duration::from_secs(60);
    let first = paused_runtime();
    let (lease, on_board) = first.block_on(async {
        let lease = client.acquire("orphaned", ttl).await.expect("acquire");
        // The driver runs, takes the first grant into its schedule and sleeps until its
        // renewal; the second grant waits on its board (due after that).
        tokio::time::sleep(Duration::from_millis(1)).await;
        let on_board = client.acquire("on-board", ttl).await.expect("acquire");
        (lease, on_board)
    });
    let work = lease.cancellation();
    assert!(lease.is_valid() && !work.is_cancelled());
    drop(first);
    assert_eq!(lease.loss_cause(), Some(LossCause::DriverStopped));
    assert_eq!(on_board.loss_cause(), Some(LossCause::DriverStopped));
    assert!(work.is_cancelled(), "the work was not told");
    assert!(!lease.is_valid());
    paused_runtime().block_on(async {
        assert_eq!(lease.lost().await, LossCause::DriverStopped);
        assert!(!vacant(&mem, "orphaned").await, "nothing was written yet");
        lease.release().await.expect("release without a driver");
        assert!(vacant(&mem, "orphaned").await, "release did not write");
    });
}

#[test]
fn a_grant_whose_driver_went_away_during_its_write_is_given_back() {
    let recorder = metrics_util::debugging::DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let (mem, _slow, client) = common::slowed(6, Duration::from_millis(100));
        let ttl = Duration::from_secs(60);
        let first = paused_runtime();
        first.block_on(async {
            let warm = client.acquire("warm", ttl).await.expect("acquire");
            warm.release().await.expect("release");
        });
        paused_runtime().block_on(async {
            let mut attempt = pin!(client.try_acquire("racing", ttl));
            assert!(futures::poll!(attempt.as_mut()).is_pending(), "the write is in flight");
            // The driver's runtime ends while the write is in flight.
            first.shutdown_background();
            let err = attempt.await.unwrap_err();
            assert!(matches!(err, Error::Shutdown), "{err:?}");
            assert!(
                vacant(&mem, "racing").await,
                "a grant the driver cannot renew was left held"
            );
        });
    });
    let held: Vec<f64> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter(|(key, ..)| key.key().name() == leasehold_core::observe::HELD)
        .filter_map(|(.., value)| match value {
            metrics_util::debugging::DebugValue::Gauge(g) => Some(g.into_inner()),
            _ => None,
        })
        .collect();
    assert_eq!(held, vec![0.0], "the held gauge");
}

#[tokio::test(start_paused = true)]
async fn a_timeout_too_long_for_the_clock_means_no_deadline() {
    let store = MemoryStore::new();
    let client = LeaseClient::new(store.clone());
    let ttl = Duration::from_secs(60);
    let lease = client
        .acquire_timeout("free", ttl, Duration::MAX)
        .await
        .expect("acquire_timeout");
    lease.release().await.expect("release");
    let forever = AcquireOptions::new(ttl).timeout(Duration::MAX);
    let set = client
        .acquire_all_with(["a", "b"], &forever)
        .await
        .expect("acquire_all_with");
    set.release().await.expect("release");
    // Held by another client: waited for until it is released, never timed out.
    let holder = LeaseClient::new(store.clone())
        .acquire("busy", ttl)
        .await
        .expect("holder");
    let started = Instant::now();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(5)).await;
        holder.release().await.expect("release");
    });
    let lease = client.acquire_with("busy", &forever).await.expect("acquire_with");
    assert!(Instant::now() - started >= Duration::from_secs(5));
    assert_eq!(lease.token().get(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_release_that_keeps_meeting_our_own_newer_record_is_not_ok() {
    let mem = MemoryStore::new();
    let client = twisted(&mem, Twist::RenewedBehindTheBack);
    let lease = client
        .acquire("renewed", Duration::from_secs(60))
        .await
        .expect("acquire");
    let holder = lease.holder().clone();
    let err = lease.release().await.unwrap_err();
    assert!(matches!(err, Error::Indeterminate { .. }), "{err:?}");
    // It was right not to say Ok: the record still names the holder.
    let name = LeaseName::new("renewed").expect("name");
    let rec = mem.read(&name).await.expect("read").expect("present");
    assert_eq!(rec.record.holder.as_ref(), Some(&holder));
}
