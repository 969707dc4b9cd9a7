//! `CasStore::expire` on ZooKeeper keeps a held record past its writer's session (a
//! scheduled job's done record must outlive the instance that ran the slot): the record
//! becomes a PERSISTENT znode marked kept, reads as held with no time left known, is
//! never claimable, and goes only with a purge, which takes its fence counter too.
#![allow(missing_docs)]

mod common;

use std::time::Duration;

use leasehold_core::testing::process::poll_async;
use leasehold_core::{
    LeaseName,
    store::{CasOutcome, CasStore, Current, DeleteOutcome, ExpireOutcome, Precondition, record_codec},
};
use leasehold_testkit::records::held_record;
use leasehold_zookeeper::zookeeper_client as zk;

fn name(n: &str) -> LeaseName {
    LeaseName::new(n).expect("name")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_record_outlives_its_writer_until_a_purge() {
    let writer = common::store("kept").await;
    let dir = common::dir_of(&writer);
    let (done, plain) = (name("job/slot-1"), name("job/slot-2"));
    let record = held_record("=done=worker-1", 7, 30_000);
    let written = leasehold_testkit::write_ok(&writer, &done, &Precondition::Absent, &record).await;
    leasehold_testkit::write_ok(&writer, &plain, &Precondition::Absent, &record).await;
    let outcome = writer
        .expire(&done, &written.version, Duration::from_secs(60))
        .await
        .expect("expire");
    assert_eq!(outcome, ExpireOutcome::Kept);
    let (record_path, fence_path) = (writer.record_path(&done), writer.fence_path(&done));
    drop(writer);

    // The writer's sessions are closed: its other held record goes with them, the kept
    // one stays.
    let reader = common::store_under(&dir).await;
    let gone = poll_async(Duration::from_secs(10), || async {
        reader.read(&plain).await.expect("read").is_none()
    })
    .await;
    assert!(gone, "a held record outlived its writer's session");
    let kept = reader.read(&done).await.expect("read").expect("the kept record");
    assert_eq!(kept.record.holder, record.holder);
    assert_eq!(kept.record.token, record.token);
    assert_eq!(kept.remaining, None, "no clock of the store bounds a kept record");
    assert_ne!(kept.version, written.version, "keeping it is a write");

    // Never claimable, however long ago it was read.
    match reader
        .write(&done, &Precondition::Claimable, &held_record("other", 1, 1_000))
        .await
        .expect("claim")
    {
        CasOutcome::Conflict(Current::Present(s)) => assert_eq!(s.version, kept.version),
        other => panic!("a kept record was claimable: {other:?}"),
    }
    // Kept again at its version: nothing to do.
    let again = reader
        .expire(&done, &kept.version, Duration::from_secs(60))
        .await
        .expect("expire");
    assert_eq!(again, ExpireOutcome::Kept);
    assert_eq!(
        reader.read(&done).await.expect("read").map(|s| s.version),
        Some(kept.version.clone())
    );

    // The purge takes the record and its fence counter.
    assert_eq!(
        reader.purge(&done, &kept.version).await.expect("purge"),
        DeleteOutcome::Deleted
    );
    let zk = reader.client().await.expect("client");
    for path in [&record_path, &fence_path] {
        assert!(
            zk.check_stat(path).await.expect("stat").is_none(),
            "{path} left after the purge"
        );
    }
}

/// A record gone before the purge (its store deleted it at its TTL) still has its
/// counter purged, at the version last read; a write of the name since keeps it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purge_after_the_record_went_takes_the_counter() {
    let store = common::store("purge-gone").await;
    let n = name("job/slot-3");
    let written =
        leasehold_testkit::write_ok(&store, &n, &Precondition::Absent, &held_record("=done=w", 1, 1_000)).await;
    let read_none = || async { store.read(&n).await.expect("read").is_none() };
    assert!(
        poll_async(Duration::from_secs(10), read_none).await,
        "not deleted at its TTL"
    );
    let zk = store.client().await.expect("client");
    let counter = || async { zk.check_stat(&store.fence_path(&n)).await.expect("stat").is_some() };
    assert!(counter().await, "the counter stays after its record");
    let purged = store.purge(&n, &written.version).await.expect("purge");
    assert!(purged == DeleteOutcome::Deleted && !counter().await, "{purged:?}");

    // A record made since the last read showed the name without one (here by hand,
    // which moves no counter): the counter-only purge proves the record absent first,
    // so it refuses and the counter stays.
    let k = name("job/slot-5");
    let gone_soon = held_record("=done=w", 1, 1_000);
    let last = leasehold_testkit::write_ok(&store, &k, &Precondition::Absent, &gone_soon).await;
    let read_none = || async { store.read(&k).await.expect("read").is_none() };
    assert!(
        poll_async(Duration::from_secs(10), read_none).await,
        "not deleted at its TTL"
    );
    let vacant = record_codec::encode(&gone_soon.vacated());
    let persistent = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    zk.create(&store.record_path(&k), &vacant, &persistent)
        .await
        .expect("plant a record");
    let refused = store.purge(&k, &last.version).await.expect("purge");
    assert!(matches!(refused, DeleteOutcome::Conflict(_)), "{refused:?}");
    let fence = store.fence_path(&k);
    assert!(
        zk.check_stat(&fence).await.expect("stat").is_some(),
        "the counter of a record went"
    );

    // Taken again since the version read: the purge changes nothing.
    let m = name("job/slot-4");
    let held = |h: &str, t: u64| held_record(h, t, 30_000);
    let first = leasehold_testkit::write_ok(&store, &m, &Precondition::Absent, &held("a", 1)).await;
    let next = Precondition::Version(first.version.clone());
    let second = leasehold_testkit::write_ok(&store, &m, &next, &held("b", 2)).await;
    let stale = store.purge(&m, &first.version).await.expect("stale purge");
    assert!(matches!(stale, DeleteOutcome::Conflict(_)), "{stale:?}");
    let now = store.read(&m).await.expect("read").map(|s| s.version);
    assert_eq!(now, Some(second.version), "a stale purge changed the record");
}
