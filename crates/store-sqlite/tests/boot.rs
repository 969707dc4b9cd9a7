//! Expiry on the host's boot clock: a record written in another boot (its `boot_id`
//! differs) is expired at once and its token sequence continues; a table of an earlier
//! version (no `boot_id`) is refused until `provision` adds the column, and then its
//! rows count as another boot's.
#![allow(missing_docs)]

mod common;

use std::time::Duration;

use leasehold_core::store::CasStore;
use leasehold_core::{AcquireOutcome, Error, FencingToken, LeaseClient, LeaseName};
use leasehold_sql::HostClock;
use leasehold_sqlite::{SqliteConfig, SqliteStore};
use sqlx::SqlitePool;

const LONG: Duration = Duration::from_secs(60);

async fn boot_id_of(pool: &SqlitePool, name: &str) -> String {
    sqlx::query_scalar("SELECT boot_id FROM leasehold_leases WHERE name = ?1")
        .bind(name)
        .fetch_one(pool)
        .await
        .expect("boot_id")
}

#[tokio::test]
async fn a_record_of_another_boot_is_claimable_at_once_with_the_next_token() {
    let db = common::db_path("boot");
    let pool = common::pool(db.path()).await;
    let store = common::store_on(&pool, "leasehold_leases").await;
    let name = "boot/other";
    let first = leasehold_testkit::granted(&LeaseClient::new(store.clone()), name, LONG, "the first holder").await;
    let boot = HostClock::get().expect("host clock").boot_id().to_owned();
    assert_eq!(boot_id_of(&pool, name).await, boot, "a grant records this boot");

    // Held for a minute in this boot: a rival is refused.
    let rival = LeaseClient::new(store.clone());
    assert!(matches!(
        rival.try_acquire(name, LONG).await.expect("try"),
        AcquireOutcome::Held { .. }
    ));

    // The same record, as if written before a reboot: expired, though its expiry is a
    // minute ahead on the clock it was written on.
    sqlx::query("UPDATE leasehold_leases SET boot_id = 'a-boot-before-this-one' WHERE name = ?1")
        .bind(name)
        .execute(&pool)
        .await
        .expect("plant another boot");
    let seen = store
        .read(&LeaseName::new(name).expect("name"))
        .await
        .expect("read")
        .expect("present");
    assert_eq!(seen.remaining, Some(Duration::ZERO), "{seen:?}");
    assert_eq!(seen.record.token, first.token());
    let second = leasehold_testkit::granted(&rival, name, LONG, "the rival, after the reboot").await;
    assert_eq!(second.token(), first.token().next(), "the token sequence continues");
    assert_eq!(boot_id_of(&pool, name).await, boot);
    second.release().await.expect("release");
    drop(first);
}

/// The layout of the first version, without `boot_id`.
const EARLIER_TABLE: &str = "CREATE TABLE leasehold_leases (name VARCHAR(200) NOT NULL PRIMARY KEY, \
    holder VARCHAR(128), fence_token INTEGER NOT NULL, version INTEGER NOT NULL, ttl_ms INTEGER NOT NULL, \
    acquired_at_ms INTEGER NOT NULL, expires_at_ms INTEGER NOT NULL, wall_expires_at_ms INTEGER, \
    deleted INTEGER NOT NULL DEFAULT 0, write_id INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provision_upgrades_a_table_of_an_earlier_version() {
    let db = common::db_path("upgrade");
    let pool = common::pool(db.path()).await;
    common::exec(&pool, EARLIER_TABLE).await;
    // Held an hour ahead on the wall clock, as the earlier version wrote it.
    let wall_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("wall")
        .as_millis();
    common::exec(
        &pool,
        &format!(
            "INSERT INTO leasehold_leases (name, holder, fence_token, version, ttl_ms, acquired_at_ms, expires_at_ms) \
             VALUES ('old/held', 'old-holder', 7, 3, 3600000, {wall_ms}, {wall_ms} + 3600000)"
        ),
    )
    .await;

    let refused = SqliteStore::new(pool.clone(), SqliteConfig::new())
        .await
        .expect_err("a table without boot_id");
    // What provision adds: it says so by its kind.
    assert!(matches!(refused, Error::NotProvisioned { .. }), "{refused:?}");
    assert!(refused.to_string().contains("boot_id"), "{refused}");

    // Several processes provision at once: every one succeeds.
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let path = db.path().to_path_buf();
        tasks.push(tokio::spawn(async move {
            let pool = common::pool(&path).await;
            SqliteStore::provision(&pool, &SqliteConfig::new()).await
        }));
    }
    for t in tasks {
        t.await.expect("join").expect("provision an earlier table");
    }
    let store = SqliteStore::new(pool.clone(), SqliteConfig::new())
        .await
        .expect("open the upgraded table");
    store.verify().await.expect("verify");
    assert_eq!(boot_id_of(&pool, "old/held").await, "");

    // Its held row is another boot's: expired, not corrupt, and the tokens go on.
    let lease =
        leasehold_testkit::granted(&LeaseClient::new(store.clone()), "old/held", LONG, "after the upgrade").await;
    assert_eq!(lease.token(), FencingToken::new(8));
    lease.release().await.expect("release");

    // A column lost later is reported by verify.
    common::exec(&pool, "ALTER TABLE leasehold_leases DROP COLUMN boot_id").await;
    let err = store.verify().await.expect_err("verify without boot_id");
    assert!(matches!(err, Error::NotProvisioned { .. }), "{err:?}");
    assert!(err.to_string().contains("has no column \"boot_id\""), "{err}");
}
