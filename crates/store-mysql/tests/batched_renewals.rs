//! Renewals that come due together are one request on MySQL/MariaDB
//! (`CasStore::renew_many`): an `UPDATE` joined to `JSON_TABLE` of the renewals, then
//! one read of their rows, two statements for the whole batch. Counted by the store
//! calls and by the statements sqlx sent; each lease is renewed, none lost (the shared SQL
//! case, `shared/batched.rs`). And one renewal of a batch whose row moved on fails alone,
//! its row answered as it is.
#![allow(missing_docs)]

mod common;

use leasehold_core::LeaseName;
use leasehold_core::store::{CasOutcome, CasStore, Current, Precondition, Renewal};

common::shared::sql_tests!(batched, common::My);

/// Three renewals in one batch: the middle one's row was written since (its version
/// moved on), the last one's name has no row. The first is renewed; the middle one
/// answers with the row as it now is; the last finds nothing; no row but the first
/// changed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_moved_row_fails_its_renewal_alone() {
    let (pool, table, store, ()) = common::shared::fresh_store::<common::My>("lh_batch_moved").await;
    let holder = leasehold_core::HolderId::new("h").expect("holder");
    let ttl = leasehold_core::Ttl::from_millis(30_000).expect("ttl");
    let rec = leasehold_core::store::LeaseRecord::held(holder, leasehold_core::FencingToken::ZERO, ttl);
    let mut held = Vec::new();
    for n in ["a", "b"] {
        let name = LeaseName::new(n).expect("name");
        match store.write(&name, &Precondition::Claimable, &rec).await.expect("claim") {
            CasOutcome::Written(s) => held.push((name, s)),
            CasOutcome::Conflict(c) => panic!("{n} was not free: {c:?}"),
        }
    }
    // Another renewal of b lands first: b's version moves on.
    let (b_name, b_then) = &held[1];
    let b_now = match store
        .renew(b_name, &b_then.version, &b_then.record)
        .await
        .expect("renew b")
    {
        CasOutcome::Written(s) => s,
        CasOutcome::Conflict(c) => panic!("b: {c:?}"),
    };
    let missing = LeaseName::new("nobody").expect("name");
    let batch = vec![
        Renewal {
            name: held[0].0.clone(),
            version: held[0].1.version.clone(),
            record: held[0].1.record.clone(),
        },
        Renewal {
            name: b_name.clone(),
            version: b_then.version.clone(),
            record: b_then.record.clone(),
        },
        Renewal {
            name: missing.clone(),
            version: held[0].1.version.clone(),
            record: held[0].1.record.clone(),
        },
    ];
    let out = store.renew_many(&batch).await;
    assert_eq!(out.len(), 3);
    match &out[0] {
        Ok(CasOutcome::Written(s)) => {
            assert_ne!(s.version, held[0].1.version, "a renewal writes a new version");
            assert_eq!(s.record.token, held[0].1.record.token);
            let read = store.read(&held[0].0).await.expect("read a").expect("a exists");
            assert_eq!(read.version, s.version, "the answered version is the row's");
        }
        other => panic!("a: {other:?}"),
    }
    match &out[1] {
        Ok(CasOutcome::Conflict(Current::Present(s))) => {
            assert_eq!(s.version, b_now.version, "b answers with its row as it now is");
        }
        other => panic!("b: {other:?}"),
    }
    assert!(
        matches!(&out[2], Ok(CasOutcome::Conflict(Current::Absent))),
        "nobody: {:?}",
        out[2]
    );
    let b_read = store.read(b_name).await.expect("read b").expect("b exists");
    assert_eq!(b_read.version, b_now.version, "the refused renewal changed nothing");
    assert!(store.read(&missing).await.expect("read").is_none());
    common::exec(&pool, &format!("DROP TABLE `{table}`")).await;
}
