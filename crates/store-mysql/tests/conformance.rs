//! The leasehold-core conformance suite against the real MariaDB (`LEASEHOLD_MYSQL_URL`),
//! on a lease table of its own (created idempotently; every case uses fresh names).
#![allow(missing_docs)]

mod common;

common::shared::fixture::sql_conformance_tests!(My);

/// Beyond the suite: many first claims of one new name at the same moment (InnoDB's
/// insert of a missing key, where racing `INSERT … ON DUPLICATE KEY UPDATE`s take gap
/// and record locks): exactly one is granted, every other is refused, none fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_first_claims_of_a_new_name_grant_exactly_one() {
    use std::sync::Arc;

    use leasehold_core::store::{CasOutcome, CasStore, LeaseRecord, Precondition};
    use leasehold_core::{FencingToken, HolderId, Ttl};

    let f = common::shared::fixture::fixture::<common::My>().await;
    let store: Arc<dyn CasStore> = Arc::new(f.store.clone());
    let pool = common::pool_of(16).await;
    let racers = common::store_on(&pool, "leasehold_conformance").await;
    let ttl = Ttl::from_millis(30_000).expect("ttl");
    for round in 0..20 {
        let name = leasehold_core::conformance::unique_name(&format!("race_{round}"));
        let gate = Arc::new(tokio::sync::Barrier::new(12));
        let tasks: Vec<_> = (0..12)
            .map(|i| {
                let (racers, name, gate) = (racers.clone(), name.clone(), gate.clone());
                tokio::spawn(async move {
                    let me = HolderId::new(format!("racer-{i}")).expect("holder");
                    gate.wait().await;
                    racers
                        .write(
                            &name,
                            &Precondition::Claimable,
                            &LeaseRecord::held(me, FencingToken::ZERO, ttl),
                        )
                        .await
                })
            })
            .collect();
        let mut granted = 0;
        for t in tasks {
            match t.await.expect("task").expect("a racing claim failed") {
                CasOutcome::Written(s) => {
                    granted += 1;
                    assert_eq!(s.record.token, FencingToken::FIRST);
                }
                CasOutcome::Conflict(_) => {}
            }
        }
        assert_eq!(granted, 1, "round {round}: {granted} grants");
        let row = store.read(&name).await.expect("read").expect("present");
        assert_eq!(row.record.token, FencingToken::FIRST);
    }
}
