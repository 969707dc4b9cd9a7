//! The semaphore cases: a [`Semaphore`] of N permits on the store under test never has
//! more than N holders, each slot's tokens grow with every grant, and a frozen permit
//! holder is refused by its slot's fence once its permit was taken over.
//!
//! The protected resource here is in-process: one high-water mark per slot, guard and
//! effect under one lock, with the fence contract's [`FenceMode`]. A permit's token is
//! its slot's lease token, so each store's own fence (checked by the [`super::fence`]
//! cases) guards a per-slot resource exactly as it guards a lease's.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;

use super::{Fixture, client, unique_name};
use crate::fence::FenceMode;
use crate::testing::{FaultPlan, FaultStore};
use crate::{ClientConfig, Error, FencingToken, LeaseClient, Permit, Result, Semaphore, fence::rejected_by};

/// Per-slot resources: each slot's high-water mark and who writes under it now, and
/// how many permit holders are inside at once.
#[derive(Default)]
struct SlotMarks {
    state: Mutex<Marks>,
}

#[derive(Default)]
struct Marks {
    /// Each slot's high-water mark.
    mark: HashMap<u32, FencingToken>,
    /// Each slot's last granted token.
    granted: HashMap<u32, FencingToken>,
    /// Who is inside each slot's resource now.
    inside: HashMap<u32, usize>,
    /// How many are inside any slot's resource now, and the most at once.
    holding: usize,
    most: usize,
    grants: u64,
}

impl SlotMarks {
    fn lock(&self) -> MutexGuard<'_, Marks> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// One fenced write to `slot`'s resource with `token` (`NotOlder`): guard and
    /// effect under one lock.
    fn write(&self, slot: u32, token: FencingToken) -> Result<()> {
        let mut m = self.lock();
        let mark = m.mark.get(&slot).copied().unwrap_or(FencingToken::ZERO);
        if !FenceMode::NotOlder.admits(mark, token) {
            return Err(rejected_by(token, mark));
        }
        m.mark.insert(slot, token);
        Ok(())
    }

    /// Contender `who` enters with `permit`: its token is above every earlier grant of
    /// the slot, nobody else is inside the slot, and at most `permits` are inside.
    fn enter(&self, who: usize, permit: &Permit, permits: usize) {
        let mut m = self.lock();
        let slot = permit.slot();
        let last = m.granted.insert(slot, permit.token()).unwrap_or(FencingToken::ZERO);
        assert!(
            permit.token() > last,
            "slot {slot}: token {} granted after {last}",
            permit.token()
        );
        if let Some(other) = m.inside.insert(slot, who) {
            panic!("slot {slot} held by contenders {other} and {who} at once");
        }
        m.holding += 1;
        m.grants += 1;
        m.most = m.most.max(m.holding);
        assert!(
            m.holding <= permits,
            "{} permit holders at once, with {permits} permits",
            m.holding
        );
    }

    fn leave(&self, permit: &Permit) {
        let mut m = self.lock();
        m.inside.remove(&permit.slot());
        m.holding -= 1;
    }
}

/// N + k contenders (N = 3, k = 4), each a client of its own, loop acquire → check the
/// slot's record on the store → write through the slot's fence → release: never more
/// than N hold at once (counted at the resource), the store's record of each slot names
/// its one holder and token, every grant of a slot carries a token above the slot's
/// previous one, and every contender is served.
pub async fn semaphore_never_exceeds_its_permits(f: &dyn Fixture) {
    const PERMITS: u32 = 3;
    const EXTRA: usize = 4;
    const ROUNDS: usize = 3;
    let store = f.store().await;
    let name = unique_name("semaphore");
    let marks = Arc::new(SlotMarks::default());
    let mut tasks = Vec::new();
    for who in 0..PERMITS as usize + EXTRA {
        let config = ClientConfig::builder()
            .max_acquire_backoff(Duration::from_millis(200))
            .build()
            .unwrap_or_else(|e| panic!("config: {e}"));
        let c = LeaseClient::efficiency_only(store.clone(), config).unwrap_or_else(|e| panic!("client: {e}"));
        let sem = Semaphore::new(c, name.as_str(), PERMITS).unwrap_or_else(|e| panic!("semaphore: {e}"));
        let (marks, store) = (marks.clone(), store.clone());
        tasks.push(tokio::spawn(async move {
            for round in 0..ROUNDS {
                let permit = sem
                    .acquire_timeout(Duration::from_secs(5), Duration::from_secs(60))
                    .await
                    .unwrap_or_else(|e| panic!("contender {who} round {round}: {e}"));
                marks.enter(who, &permit, PERMITS as usize);
                let record = store
                    .read(permit.name())
                    .await
                    .unwrap_or_else(|e| panic!("read {}: {e}", permit.name()))
                    .unwrap_or_else(|| panic!("{}: no record while its permit is held", permit.name()));
                assert_eq!(
                    (record.record.holder.as_ref(), record.record.token),
                    (Some(permit.holder()), permit.token()),
                    "the store's record of {} does not name its permit holder",
                    permit.name()
                );
                for _ in 0..2 {
                    marks
                        .write(permit.slot(), permit.token())
                        .unwrap_or_else(|e| panic!("contender {who}: a live permit was fenced off: {e}"));
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                assert!(
                    permit.is_valid(),
                    "contender {who} lost its permit: {:?}",
                    permit.loss_cause()
                );
                marks.leave(&permit);
                permit
                    .release()
                    .await
                    .unwrap_or_else(|e| panic!("contender {who}: release: {e}"));
            }
        }));
    }
    let all = async {
        for t in tasks {
            t.await.unwrap_or_else(|e| panic!("contender: {e}"));
        }
    };
    tokio::time::timeout(Duration::from_secs(90), all)
        .await
        .expect("semaphore contenders did not finish (starved, or the store was too slow)");
    let m = marks.lock();
    let total = (PERMITS as usize + EXTRA) * ROUNDS;
    assert_eq!(
        m.grants, total as u64,
        "every round of every contender was granted once"
    );
    assert!(
        (1..=PERMITS as usize).contains(&m.most),
        "at most {} holders at once, expected 1..={PERMITS}",
        m.most
    );
    // Each slot's tokens count its grants: one token per grant, none skipped or reused.
    let issued: u64 = m.granted.values().map(|t| t.get()).sum();
    assert_eq!(issued, total as u64, "tokens issued across slots: {:?}", m.granted);
}

/// A client holding both permits of a semaphore of 2 freezes (its store stops
/// answering) past its TTL: another client is granted both slots no earlier than the
/// frozen permits' validity ended, with each slot's next token; the frozen holder's
/// loss signals fire, and its writes with its old tokens are refused by each slot's
/// fence.
pub async fn frozen_permit_holder_is_refused_after_takeover(f: &dyn Fixture) {
    let store = f.store().await;
    let name = unique_name("semaphore_frozen");
    let frozen = FaultStore::new(store.clone(), 7);
    let sem = |c: LeaseClient| Semaphore::new(c, name.as_str(), 2).unwrap_or_else(|e| panic!("semaphore: {e}"));
    let a = sem(client(Arc::new(frozen.clone())));
    let b = sem(client(store.clone()));
    let marks = SlotMarks::default();
    let ttl = Duration::from_millis(500);
    let mut old = Vec::new();
    for _ in 0..2 {
        let p = a
            .acquire_timeout(ttl, Duration::from_secs(10))
            .await
            .unwrap_or_else(|e| panic!("frozen-to-be holder: {e}"));
        marks
            .write(p.slot(), p.token())
            .unwrap_or_else(|e| panic!("first write: {e}"));
        old.push(p);
    }
    frozen.set_plan(FaultPlan::hang());
    let valid_until = old.iter().map(Permit::valid_until).max().unwrap_or_else(Instant::now);
    let mut new = Vec::new();
    for _ in 0..2 {
        let p = b
            .acquire_timeout(Duration::from_secs(5), Duration::from_secs(20))
            .await
            .unwrap_or_else(|e| panic!("no takeover of a frozen permit: {e}"));
        let was = old
            .iter()
            .find(|o| o.slot() == p.slot())
            .unwrap_or_else(|| panic!("slot {} was never the frozen holder's", p.slot()));
        assert!(
            Instant::now() >= was.valid_until(),
            "slot {} taken over while the frozen permit was still valid",
            p.slot()
        );
        assert_eq!(
            p.token(),
            was.token().next(),
            "slot {}: takeover takes the next token",
            p.slot()
        );
        marks
            .write(p.slot(), p.token())
            .unwrap_or_else(|e| panic!("the new holder was fenced off: {e}"));
        new.push(p);
    }
    assert!(Instant::now() >= valid_until);
    for p in &old {
        let cause = tokio::time::timeout(Duration::from_secs(2), p.lost())
            .await
            .unwrap_or_else(|_| panic!("slot {}: the frozen holder's loss signal never fired", p.slot()));
        assert!(!p.is_valid(), "slot {}: still valid after {cause}", p.slot());
        // A buggy holder that ignores its loss signal and writes on is refused.
        match marks.write(p.slot(), p.token()) {
            Err(Error::FenceRejected { token, .. }) => assert_eq!(token, p.token()),
            other => panic!("slot {}: the frozen holder's write gave {other:?}", p.slot()),
        }
    }
    for p in new {
        p.release().await.unwrap_or_else(|e| panic!("release: {e}"));
    }
}
