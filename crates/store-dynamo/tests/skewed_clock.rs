//! Two clients whose wall clocks disagree by ten times the TTL (injected clocks), on
//! the real table: no early takeover and no double grant, in the default observation
//! mode and with an explicit (honest) skew bound. A last case shows what an
//! understated bound costs, and that the fence still holds then.
#![allow(missing_docs)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use leasehold_core::conformance::take_over_after_expiry;
use leasehold_core::fence::FencedOutcome;
use leasehold_core::testing::{FaultPlan, FaultStore};
use leasehold_core::{
    AcquireOutcome, ClientConfig, Error, FencingToken, LeaseClient, LeaseName, SkewBound, store::CasStore,
    testing::SkewedWallClock,
};
use leasehold_dynamodb::ItemFence;
use tokio::time::Instant;

/// Long enough that a renewal answered late by moto on a loaded machine (CI runs it
/// beside every other suite) is still in time: at 600 ms one run in a few lost its lease
/// to `OutcomeUnknown` and failed for that, not for a takeover.
const TTL: Duration = Duration::from_millis(1_500);
const TTL_MS: i64 = 1_500;
/// Ten times the TTL.
const SKEW_MS: i64 = 10 * TTL_MS;

fn unique(case: &str) -> String {
    common::unique_name("skew", case)
}

fn config(label: &str, offset_ms: i64, bound: Option<SkewBound>) -> ClientConfig {
    let builder = ClientConfig::builder()
        .label(label)
        .wall_clock(Arc::new(SkewedWallClock::new(offset_ms)));
    match bound {
        Some(bound) => builder.skew_bound(bound),
        None => builder,
    }
    .build()
    .expect("client config")
}

/// A holds the lease with its clock at `offset_a`; B, at `offset_b`, tries again and
/// again while A renews, then A freezes and B takes over: never before A's validity
/// ended, with the next token, and A knows it lost.
async fn no_early_takeover(case: &str, offset_a: i64, offset_b: i64, bound: Option<SkewBound>) {
    let (admin, table) = common::fresh_lease_table(case).await;
    let name = unique(case);
    let a_store = FaultStore::new(common::store_on(&table), 11);
    let b_store = common::store_on(&table);
    let a = LeaseClient::with_config(a_store.clone(), config("a", offset_a, bound)).expect("a");
    let b = LeaseClient::with_config(b_store.clone(), config("b", offset_b, bound)).expect("b");

    let la = leasehold_testkit::granted(&a, &name, TTL, "a").await;

    // While A renews: B is refused every time, over five TTLs, whatever its clock says.
    // A fresh client for each try as well (a one-shot caller knows nothing).
    let watch_until = Instant::now() + TTL * 5;
    let mut tries = 0;
    while Instant::now() < watch_until {
        for challenger in [
            &b,
            &LeaseClient::with_config(b_store.clone(), config("b1", offset_b, bound)).expect("b1"),
        ] {
            match challenger.try_acquire(&name, TTL).await.expect("b attempt") {
                AcquireOutcome::Granted(l) => panic!(
                    "{case}: double grant: B got {l:?} while A holds {la:?} (A valid: {})",
                    la.is_valid()
                ),
                AcquireOutcome::Held { holder, token, .. } => {
                    assert_eq!(holder.as_ref(), Some(la.holder()));
                    assert_eq!(token, la.token());
                }
            }
            tries += 1;
        }
        assert!(
            la.is_valid(),
            "{case}: A lost its lease while renewing: {:?}",
            la.loss_cause()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(tries >= 20, "{case}: only {tries} tries");

    // A freezes: B takes over only after A's validity ended.
    a_store.set_plan(FaultPlan::hang());
    let lb = take_over_after_expiry(&b, &name, TTL, Duration::from_secs(15), &la, case).await;
    let late = Instant::now().saturating_duration_since(la.valid_until());
    assert!(!la.is_valid(), "{case}: two valid holders at once");
    assert_eq!(lb.token(), la.token().next(), "{case}: takeover takes the next token");
    let cause = tokio::time::timeout(Duration::from_secs(2), la.lost())
        .await
        .expect("A's loss signal fired");
    eprintln!("{case}: B took over (at least) {late:?} after A's validity ended; A's loss: {cause}");

    // The table agrees.
    let truth = b_store
        .read(&LeaseName::new(&name).expect("name"))
        .await
        .expect("read")
        .expect("record");
    assert_eq!(truth.record.holder.as_ref(), Some(lb.holder()));
    assert_eq!(truth.record.token, lb.token());
    common::clean_up_takeover(lb, la, &admin, &table).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observation_mode_challenger_clock_ahead() {
    no_early_takeover("obs-ahead", 0, SKEW_MS, None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observation_mode_challenger_clock_behind() {
    no_early_takeover("obs-behind", 0, -SKEW_MS, None).await;
}

/// An honest bound: the clocks disagree by 10 TTLs, the bound says 11.
fn honest() -> Option<SkewBound> {
    Some(SkewBound(TTL * 11))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skew_bound_mode_challenger_clock_ahead() {
    no_early_takeover("bound-ahead", 0, SKEW_MS, honest()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skew_bound_mode_challenger_clock_behind() {
    no_early_takeover("bound-behind", 0, -SKEW_MS, honest()).await;
}

/// The holder's clock is the one that is wrong (ahead): its recorded expiry is far in
/// the future for everyone else, so a bounded-skew challenger must still not wait
/// forever: it falls back to observation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skew_bound_mode_holder_clock_ahead() {
    no_early_takeover("bound-holder-ahead", SKEW_MS, 0, honest()).await;
}

/// With an honest bound, a one-shot caller (fresh client) takes over a dead lease in a
/// single attempt once the bound has passed, which plain observation never allows; it
/// never does so while the holder could still be valid.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skew_bound_lets_a_one_shot_caller_take_over_a_dead_lease() {
    let (admin, table) = common::fresh_lease_table("oneshot").await;
    let name = unique("oneshot");
    let a_store = FaultStore::new(common::store_on(&table), 13);
    let a = LeaseClient::with_config(a_store.clone(), config("a", 0, honest())).expect("a");
    let la = leasehold_testkit::granted(&a, &name, TTL, "a").await;
    a_store.set_plan(FaultPlan::hang());
    let a_valid_until = la.valid_until();
    let store = common::store_on(&table);
    let deadline = Instant::now() + Duration::from_secs(20);
    let lb = loop {
        // Without a bound, a fresh client always has to watch first.
        let plain = LeaseClient::with_config(store.clone(), config("plain", SKEW_MS, None)).expect("plain");
        assert!(
            matches!(
                plain.try_acquire(&name, TTL).await.expect("plain"),
                AcquireOutcome::Held { .. }
            ),
            "a one-shot caller without a skew bound took over without watching"
        );
        let one_shot = LeaseClient::with_config(store.clone(), config("c", SKEW_MS, honest())).expect("c");
        match one_shot.try_acquire(&name, TTL).await.expect("one shot") {
            AcquireOutcome::Granted(l) => break l,
            AcquireOutcome::Held { .. } => {
                assert!(Instant::now() < deadline, "the bounded-skew caller never took over");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    assert!(Instant::now() >= a_valid_until, "early takeover");
    assert!(!la.is_valid());
    assert_eq!(lb.token(), la.token().next());
    common::clean_up_takeover(lb, la, &admin, &table).await;
}

/// The opt-in rule is only as good as the bound: with clocks 10 TTLs apart and a bound
/// of one TTL, the challenger takes over while the holder is still valid. The fence on
/// the protected item still refuses the old holder once the new one wrote.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn understated_skew_bound_can_double_grant_and_the_fence_still_holds() {
    let (admin, table) = common::fresh_lease_table("understated").await;
    let resources = common::unique_table("understated-res");
    common::create_resource_table(&admin, &resources).await;
    let name = unique("understated");
    let store = common::store_on(&table);
    let bound = Some(SkewBound(TTL));
    let a = LeaseClient::with_config(store.clone(), config("a", 0, bound)).expect("a");
    let la = leasehold_testkit::granted(&a, &name, TTL, "a").await;
    // With an understated bound, B takes over at once.
    let b = LeaseClient::with_config(store.clone(), config("b", SKEW_MS, bound)).expect("b");
    let lb = leasehold_testkit::granted(&b, &name, TTL, "b").await;
    assert!(la.is_valid(), "A's validity had ended: this test shows nothing");
    assert_eq!(lb.token(), FencingToken::new(2));

    let write = |token: FencingToken, who: &'static str| {
        let admin = admin.clone();
        let resources = resources.clone();
        async move {
            ItemFence::new("mark", token)
                .expect("fence")
                .put(
                    admin
                        .put_item()
                        .table_name(&resources)
                        .item("id", common::s("ledger"))
                        .item("writer", common::s(who)),
                )
                .await
        }
    };
    assert!(matches!(write(lb.token(), "b").await, Ok(FencedOutcome::Applied(_))));
    match write(la.token(), "a").await {
        Err(Error::FenceRejected { token, .. }) => assert_eq!(token, la.token()),
        other => panic!("the old holder's write was not refused: {other:?}"),
    }
    let item = common::get_item(&admin, &resources, ("id", "ledger"))
        .await
        .expect("item");
    assert_eq!(item.get("writer"), Some(&common::s("b")));
    assert_eq!(item.get("mark"), Some(&common::n(2)));
    common::clean_up_takeover(lb, la, &admin, &table).await;
    common::delete_table(&admin, &resources).await;
}
