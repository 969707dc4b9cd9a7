//! Fenced writes on Redis hashes, what the core's fence conformance cases
//! (`tests/conformance.rs`) do not cover: the outcome's previous mark and counters, a
//! chosen mark field, deletes, numeric comparison of marks, and racing writers.

mod support;

use std::sync::Arc;

use leasehold_core::{Error, FencingToken};
use leasehold_redis::{FenceMode, FencedOutcome, HashFence, HashWrite, read_high_water};

fn t(n: u64) -> FencingToken {
    FencingToken::new(n)
}

/// The output of a write that must have applied (a Redis fenced write has no caller
/// condition, so every `Ok` is `Applied`).
fn applied(r: leasehold_core::Result<FencedOutcome<HashWrite>>, what: &str) -> HashWrite {
    match r {
        Ok(FencedOutcome::Applied(w)) => w,
        Ok(FencedOutcome::ConditionFailed(())) => panic!("{what}: a Redis fenced write has no caller condition"),
        Err(e) => panic!("{what}: {e}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_applied_write_reports_the_previous_mark_and_the_new_counters() {
    let mut conn = support::admin(&support::shared_url()).await;
    let key = format!("{}acct", support::unique_prefix("fenced-counters"));
    let pay = |n: i64| HashFence::new(&key).incr("balance", n).set("memo", format!("{n}"));

    let first = applied(pay(100).apply(&mut conn, t(3)).await, "first write");
    assert_eq!(first.previous_mark, FencingToken::ZERO);
    assert_eq!(first.counters, vec![("balance".to_owned(), 100)]);
    let again = applied(pay(-30).apply(&mut conn, t(3)).await, "same tenure");
    assert_eq!(again.previous_mark, t(3));
    assert_eq!(again.counters, vec![("balance".to_owned(), 70)]);
    let newer = applied(pay(5).apply(&mut conn, t(9)).await, "a newer token");
    assert_eq!(newer.previous_mark, t(3));
    assert_eq!(newer.counters, vec![("balance".to_owned(), 75)]);

    // A refused write leaves every field as it was, the incremented one included.
    let before = support::hgetall(&mut conn, &key).await;
    match pay(1_000).apply(&mut conn, t(2)).await {
        Err(Error::FenceRejected { token, mark }) => {
            assert_eq!(token, t(2));
            assert_eq!(mark, Some(t(9)), "the refusal names the mark that refused it");
        }
        other => panic!("an older token wrote: {other:?}"),
    }
    assert_eq!(
        support::hgetall(&mut conn, &key).await,
        before,
        "a refused write changed data"
    );
    let data = support::hgetall(&mut conn, &key).await;
    assert_eq!(data.get("balance").map(String::as_str), Some("75"));
    assert_eq!(data.get("memo").map(String::as_str), Some("5"));
    assert_eq!(data.get("_fence_token").map(String::as_str), Some("9"));
    assert_eq!(
        read_high_water(&mut conn, &key, HashFence::DEFAULT_MARK_FIELD)
            .await
            .expect("mark"),
        t(9)
    );
    let _: () = redis::cmd("DEL").arg(&key).query_async(&mut conn).await.expect("DEL");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chosen_mark_field_holds_the_mark_and_del_removes_a_field() {
    let mut conn = support::admin(&support::shared_url()).await;
    let key = format!("{}deploy", support::unique_prefix("fenced-mark-field"));
    assert_eq!(
        HashFence::new(&key).strict(),
        HashFence::new(&key).mode(FenceMode::Newer),
        "strict() is the Newer mode"
    );
    let deploy = |v: &str| {
        HashFence::new(&key)
            .mark_field("epoch")
            .strict()
            .set("version", v.to_owned())
    };
    applied(deploy("v1").apply(&mut conn, t(1)).await, "first grant");
    applied(deploy("v2").apply(&mut conn, t(2)).await, "next grant");
    let data = support::hgetall(&mut conn, &key).await;
    assert_eq!(data.get("version").map(String::as_str), Some("v2"));
    assert_eq!(data.get("epoch").map(String::as_str), Some("2"));
    assert!(!data.contains_key(HashFence::DEFAULT_MARK_FIELD));
    assert_eq!(
        read_high_water(&mut conn, &key, HashFence::DEFAULT_MARK_FIELD)
            .await
            .expect("default mark field"),
        FencingToken::ZERO,
        "the default mark field was never written"
    );

    let removed = HashFence::new(&key)
        .mark_field("epoch")
        .mode(FenceMode::NotOlder)
        .del("version")
        .apply(&mut conn, t(2))
        .await;
    assert_eq!(applied(removed, "a delete").previous_mark, t(2));
    let data = support::hgetall(&mut conn, &key).await;
    assert!(!data.contains_key("version"), "{data:?}");
    assert_eq!(read_high_water(&mut conn, &key, "epoch").await.expect("mark"), t(2));
    let _: () = redis::cmd("DEL").arg(&key).query_async(&mut conn).await.expect("DEL");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn marks_compare_as_numbers_not_strings() {
    let mut conn = support::admin(&support::shared_url()).await;
    let key = format!("{}num", support::unique_prefix("fenced-num"));
    let w = || HashFence::new(&key).incr("n", 1);
    applied(w().apply(&mut conn, t(10)).await, "10");
    // "9" > "10" as strings; as tokens it is older.
    assert!(matches!(
        w().apply(&mut conn, t(9)).await,
        Err(Error::FenceRejected { .. })
    ));
    let big = FencingToken::new(u64::try_from(i64::MAX).expect("fits"));
    applied(w().apply(&mut conn, big).await, "the largest token");
    assert!(matches!(
        w().apply(&mut conn, FencingToken::new(9_007_199_254_740_993)).await,
        Err(Error::FenceRejected { .. })
    ));
    assert_eq!(
        read_high_water(&mut conn, &key, HashFence::DEFAULT_MARK_FIELD)
            .await
            .expect("mark"),
        big,
        "a token above 2^53 is kept exactly"
    );
    let _: () = redis::cmd("DEL").arg(&key).query_async(&mut conn).await.expect("DEL");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_writers_with_different_tokens_never_let_an_older_one_in_after_a_newer() {
    let url = support::shared_url();
    let key = Arc::new(format!("{}race", support::unique_prefix("fenced-race")));
    let mut tasks = Vec::new();
    for token in 1..=8u64 {
        let key = key.clone();
        let mut conn = support::admin(&url).await;
        tasks.push(tokio::spawn(async move {
            let mut applied = 0u64;
            for i in 0..20 {
                let w = HashFence::new(key.as_str())
                    .incr("applied", 1)
                    .set(format!("t{token}:{i}"), "1");
                match w.apply(&mut conn, FencingToken::new(token)).await {
                    Ok(FencedOutcome::Applied(out)) => {
                        assert!(out.previous_mark.get() <= token, "{out:?} for token {token}");
                        applied += 1;
                    }
                    Ok(FencedOutcome::ConditionFailed(())) => panic!("a Redis fenced write has no caller condition"),
                    Err(Error::FenceRejected { .. }) => {}
                    Err(e) => panic!("{e}"),
                }
            }
            applied
        }));
    }
    let mut total = 0;
    for task in tasks {
        total += task.await.expect("task");
    }
    let mut conn = support::admin(&url).await;
    let data = support::hgetall(&mut conn, &key).await;
    assert_eq!(
        data.get("applied").map(String::as_str),
        Some(total.to_string().as_str())
    );
    assert_eq!(data.get("_fence_token").map(String::as_str), Some("8"));
    let entries = data.keys().filter(|k| k.starts_with('t')).count();
    assert_eq!(
        u64::try_from(entries).expect("count"),
        total,
        "lost or duplicated writes"
    );
    let _: () = redis::cmd("DEL")
        .arg(key.as_str())
        .query_async(&mut conn)
        .await
        .expect("DEL");
}
