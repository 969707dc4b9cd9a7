//! Fenced writes on Redis hashes: the token check and the write are one atomic step,
//! in both guard modes, and a refusal changes nothing.

mod support;

use std::sync::Arc;

use leasehold_core::{Error, FencingToken};
use leasehold_redis::{FenceMode, FencedWrite, read_high_water};

fn t(n: u64) -> FencingToken {
    FencingToken::new(n)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn not_older_accepts_the_same_token_again_and_refuses_an_older_one() {
    let mut conn = support::admin(&support::shared_url()).await;
    let key = format!("{}acct", support::unique_prefix("fenced-le"));
    let pay = |n: i64| FencedWrite::new(&key).incr("balance", n).set("memo", format!("{n}"));

    let first = pay(100).apply(&mut conn, t(3)).await.expect("first write");
    assert_eq!(first.previous_mark, FencingToken::ZERO);
    assert_eq!(first.counters, vec![("balance".to_owned(), 100)]);
    let again = pay(-30).apply(&mut conn, t(3)).await.expect("same tenure writes again");
    assert_eq!(again.previous_mark, t(3));
    assert_eq!(again.counters, vec![("balance".to_owned(), 70)]);

    let before = support::hgetall(&mut conn, &key).await;
    match pay(1_000).apply(&mut conn, t(2)).await {
        Err(Error::FenceRejected { token }) => assert_eq!(token, t(2)),
        other => panic!("an older token wrote: {other:?}"),
    }
    assert_eq!(
        support::hgetall(&mut conn, &key).await,
        before,
        "a refused write changed data"
    );

    let newer = pay(5).apply(&mut conn, t(9)).await.expect("a newer token writes");
    assert_eq!(newer.previous_mark, t(3));
    assert!(matches!(
        pay(1).apply(&mut conn, t(3)).await,
        Err(Error::FenceRejected { .. })
    ));
    let data = support::hgetall(&mut conn, &key).await;
    assert_eq!(data.get("balance").map(String::as_str), Some("75"));
    assert_eq!(data.get("memo").map(String::as_str), Some("5"));
    assert_eq!(data.get("_fence_token").map(String::as_str), Some("9"));
    assert_eq!(
        read_high_water(&mut conn, &key, FencedWrite::DEFAULT_MARK_FIELD)
            .await
            .expect("mark"),
        t(9)
    );
    let _: () = redis::cmd("DEL").arg(&key).query_async(&mut conn).await.expect("DEL");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strict_mode_accepts_each_token_once() {
    let mut conn = support::admin(&support::shared_url()).await;
    let key = format!("{}deploy", support::unique_prefix("fenced-lt"));
    let deploy = |v: &str| {
        FencedWrite::new(&key)
            .mark_field("epoch")
            .strict()
            .set("version", v.to_owned())
    };
    deploy("v1").apply(&mut conn, t(1)).await.expect("first grant writes");
    assert!(matches!(
        deploy("v1-again").apply(&mut conn, t(1)).await,
        Err(Error::FenceRejected { .. })
    ));
    assert!(matches!(
        deploy("v0").apply(&mut conn, t(0).next()).await,
        Err(Error::FenceRejected { .. })
    ));
    deploy("v2").apply(&mut conn, t(2)).await.expect("next grant writes");
    let data = support::hgetall(&mut conn, &key).await;
    assert_eq!(data.get("version").map(String::as_str), Some("v2"));
    assert_eq!(data.get("epoch").map(String::as_str), Some("2"));
    assert!(!data.contains_key(FencedWrite::DEFAULT_MARK_FIELD));
    assert_eq!(
        FencedWrite::new(&key)
            .mark_field("epoch")
            .mode(FenceMode::NotOlder)
            .del("version")
            .apply(&mut conn, t(2))
            .await
            .expect("NotOlder with the same token")
            .previous_mark,
        t(2)
    );
    assert!(!support::hgetall(&mut conn, &key).await.contains_key("version"));
    let _: () = redis::cmd("DEL").arg(&key).query_async(&mut conn).await.expect("DEL");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn marks_compare_as_numbers_not_strings() {
    let mut conn = support::admin(&support::shared_url()).await;
    let key = format!("{}num", support::unique_prefix("fenced-num"));
    let w = || FencedWrite::new(&key).incr("n", 1);
    w().apply(&mut conn, t(10)).await.expect("10");
    // "9" > "10" as strings; as tokens it is older.
    assert!(matches!(
        w().apply(&mut conn, t(9)).await,
        Err(Error::FenceRejected { .. })
    ));
    let big = FencingToken::new(u64::try_from(i64::MAX).expect("fits"));
    w().apply(&mut conn, big).await.expect("the largest token");
    assert!(matches!(
        w().apply(&mut conn, FencingToken::new(9_007_199_254_740_993)).await,
        Err(Error::FenceRejected { .. })
    ));
    assert_eq!(
        read_high_water(&mut conn, &key, FencedWrite::DEFAULT_MARK_FIELD)
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
                let w = FencedWrite::new(key.as_str())
                    .incr("applied", 1)
                    .set(format!("t{token}:{i}"), "1");
                match w.apply(&mut conn, FencingToken::new(token)).await {
                    Ok(out) => {
                        assert!(out.previous_mark.get() <= token, "{out:?} for token {token}");
                        applied += 1;
                    }
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
