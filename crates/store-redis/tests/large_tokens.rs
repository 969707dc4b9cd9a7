//! Tokens and versions past 2^53, where Lua's doubles stop being exact: the scripts
//! keep every digit (a counter raised by `HINCRBY` is read back above 2^53).

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
