//! Tokens and versions past 2^53, where Lua's doubles stop being exact: the scripts
//! keep every digit (a counter of 15 digits or more is raised digit by digit).

mod support;

use std::time::Duration;

use leasehold_core::{ClientConfig, LeaseClient, LeaseName, store::CasStore};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_across_two_to_the_53_are_exact() {
    let store = support::shared_store("large-tokens").await;
    let leases = LeaseClient::efficiency_only(store.clone(), ClientConfig::default()).expect("client");
    let name = "large/tokens";
    let two_53: u64 = 1 << 53;
    support::seed(&store, &LeaseName::new(name).expect("name"), two_53 - 2).await;
    // Each grant after a release issues the next token: 2^53 - 1, 2^53, 2^53 + 1, 2^53 + 2.
    for expected in (two_53 - 1)..=(two_53 + 2) {
        let lease = leases
            .try_acquire(name, Duration::from_secs(5))
            .await
            .expect("acquire")
            .granted()
            .expect("a free lease is granted");
        assert_eq!(lease.token().get(), expected, "a token past 2^53 lost a digit");
        lease.release().await.expect("release");
    }
    let stored = store
        .read(&LeaseName::new(name).expect("name"))
        .await
        .expect("read")
        .expect("the vacant record");
    assert_eq!(stored.record.token.get(), two_53 + 2);
}

/// The script raises a count of 15 digits or more digit by digit: a carry through
/// every digit (…999 to 1000…) keeps them all, for the token and for the version.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counts_carry_through_every_digit() {
    use leasehold_core::store::{CasOutcome, Precondition};
    use leasehold_testkit::{records::held_record, write_ok};
    let store = support::shared_store("carry").await;
    let name = LeaseName::new("carry/all-nines").expect("name");
    let nines: u64 = 9_999_999_999_999_999;
    support::seed(&store, &name, nines - 1).await;
    // The version counter as a foreign writer could leave it: all nines too.
    let mut admin = support::admin(&support::shared_url()).await;
    let meta = store.keys().meta(&name);
    let () = redis::cmd("HSET")
        .arg(&meta)
        .arg("n")
        .arg("99999999999999999")
        .query_async(&mut admin)
        .await
        .expect("HSET n");
    let first = write_ok(&store, &name, &Precondition::Claimable, &held_record("a", 1, 30_000)).await;
    assert_eq!(first.record.token.get(), nines, "…998 + 1");
    let epoch = support::hgetall(&mut admin, &meta).await["e"].clone();
    assert_eq!(
        first.version.as_str(),
        format!("{epoch}:100000000000000000"),
        "the version's carry"
    );
    let out = store
        .release(&name, &first.version, &first.record)
        .await
        .expect("release");
    assert!(matches!(out, CasOutcome::Written(_)), "{out:?}");
    let second = write_ok(&store, &name, &Precondition::Claimable, &held_record("b", 1, 30_000)).await;
    assert_eq!(
        second.record.token.get(),
        nines + 1,
        "…999 + 1 carries through every digit"
    );
    assert_eq!(second.version.as_str(), format!("{epoch}:100000000000000002"));
    let counters = support::hgetall(&mut admin, &meta).await;
    assert_eq!(counters["f"], "10000000000000000");
    assert_eq!(counters["n"], "100000000000000002");
}
