//! Bad input and a bad table fail loudly with a typed error, grant nothing and change
//! nothing: a missing table, wrong columns, a name longer than the declared column, a
//! TTL of zero or beyond range, and rows whose values are corrupt (including values of
//! the wrong type, which SQLite stores as given).
#![allow(missing_docs)]

mod common;

use std::time::Duration;

use leasehold_core::{
    Error, FencingToken, HolderId, LeaseClient, LeaseName, Ttl,
    store::{CasStore, LeaseRecord, Precondition},
};
use leasehold_sqlite::{SqliteConfig, SqliteStore};
use sqlx::{Row, SqlitePool};

const GOOD_COLUMNS: &str = "name VARCHAR(200) NOT NULL PRIMARY KEY, holder VARCHAR(128), fence_token INTEGER NOT NULL, \
    version INTEGER NOT NULL, ttl_ms INTEGER NOT NULL, acquired_at_ms INTEGER NOT NULL, expires_at_ms INTEGER NOT NULL, \
    wall_expires_at_ms INTEGER, deleted INTEGER NOT NULL DEFAULT 0, write_id INTEGER NOT NULL DEFAULT 0, \
    boot_id TEXT NOT NULL DEFAULT ''";

async fn open(pool: &SqlitePool, table: &str) -> leasehold_core::Result<SqliteStore> {
    SqliteStore::new(pool.clone(), SqliteConfig::new().with_table(table)?).await
}

fn rec(holder: &str) -> LeaseRecord {
    LeaseRecord::held(
        HolderId::new(holder).expect("holder"),
        FencingToken::FIRST,
        Ttl::from_millis(1000).expect("ttl"),
    )
}

async fn count(pool: &SqlitePool, table: &str) -> i64 {
    sqlx::query(sqlx::AssertSqlSafe(format!("SELECT count(*) FROM \"{table}\"")))
        .fetch_one(pool)
        .await
        .expect("count")
        .get(0)
}

async fn fresh_pool(prefix: &str) -> (SqlitePool, common::TempDb) {
    let db = common::db_path(prefix);
    (common::pool(db.path()).await, db)
}

#[tokio::test]
async fn a_missing_table_is_misconfigured() {
    let (pool, _db) = fresh_pool("missing").await;
    let err = open(&pool, "no_such_table").await.expect_err("opened a missing table");
    assert!(matches!(err, Error::Misconfigured { .. }), "{err:?}");
    assert!(err.to_string().contains("does not exist"), "{err}");

    let store = common::store_on(&pool, "dropped").await;
    common::exec(&pool, "DROP TABLE dropped").await;
    let name = LeaseName::new("x").expect("name");
    assert!(matches!(store.read(&name).await, Err(Error::Misconfigured { .. })));
    assert!(matches!(
        store.write(&name, &Precondition::Claimable, &rec("w")).await,
        Err(Error::Misconfigured { .. })
    ));
    let client = LeaseClient::new(store);
    assert!(matches!(
        client.try_acquire("x", Duration::from_secs(1)).await,
        Err(Error::Misconfigured { .. })
    ));
}

#[tokio::test]
async fn wrong_columns_are_misconfigured() {
    let (pool, _db) = fresh_pool("wrong").await;
    let variants = [
        (
            "token as text",
            GOOD_COLUMNS.replace("fence_token INTEGER", "fence_token TEXT"),
        ),
        (
            "no write_id",
            GOOD_COLUMNS.replace(", write_id INTEGER NOT NULL DEFAULT 0", ""),
        ),
        (
            "no boot_id (a table of an earlier version)",
            GOOD_COLUMNS.replace(
                ", \
    boot_id TEXT NOT NULL DEFAULT ''",
                "",
            ),
        ),
        (
            "holder not null",
            GOOD_COLUMNS.replace("holder VARCHAR(128)", "holder VARCHAR(128) NOT NULL"),
        ),
        (
            "name not the key",
            GOOD_COLUMNS.replace("NOT NULL PRIMARY KEY", "NOT NULL"),
        ),
        (
            "expiry as text",
            GOOD_COLUMNS.replace("expires_at_ms INTEGER", "expires_at_ms TEXT"),
        ),
    ];
    for (i, (what, columns)) in variants.iter().enumerate() {
        let table = format!("wrong_{i}");
        common::exec(&pool, &format!("CREATE TABLE {table} ({columns})")).await;
        let r = open(&pool, &table).await;
        assert!(matches!(r, Err(Error::Misconfigured { .. })), "{what}: {r:?}");
    }
    common::exec(&pool, &format!("CREATE TABLE right_one ({GOOD_COLUMNS})")).await;
    open(&pool, "right_one").await.expect("the documented columns open");
}

#[tokio::test]
async fn names_and_holders_longer_than_the_columns_are_invalid_input() {
    let (pool, _db) = fresh_pool("short").await;
    let columns = GOOD_COLUMNS
        .replace("name VARCHAR(200)", "name VARCHAR(16)")
        .replace("holder VARCHAR(128)", "holder VARCHAR(40)");
    common::exec(&pool, &format!("CREATE TABLE short_names ({columns})")).await;
    let store = open(&pool, "short_names").await.expect("open");
    assert_eq!((store.limits().name, store.limits().holder), (16, 40));
    let long = LeaseName::new("a-name-of-20-bytesxx").expect("valid lease name");
    assert!(matches!(
        store.write(&long, &Precondition::Claimable, &rec("w")).await,
        Err(Error::InvalidInput { .. })
    ));
    assert!(matches!(store.read(&long).await, Err(Error::InvalidInput { .. })));
    let short = LeaseName::new("short").expect("name");
    assert!(matches!(
        store
            .write(&short, &Precondition::Claimable, &rec(&"h".repeat(41)))
            .await,
        Err(Error::InvalidInput { .. })
    ));
    let client = LeaseClient::new(store.clone());
    assert!(matches!(
        client.try_acquire(long.as_str(), Duration::from_secs(1)).await,
        Err(Error::InvalidInput { .. })
    ));
    assert!(matches!(
        store
            .write(
                &LeaseName::new("x".repeat(16)).expect("name"),
                &Precondition::Claimable,
                &rec(&"h".repeat(40))
            )
            .await,
        Ok(leasehold_core::store::CasOutcome::Written(_))
    ));
    assert_eq!(count(&pool, "short_names").await, 1, "a refused input created a row");
}

#[tokio::test]
async fn ttl_of_zero_or_beyond_range_is_invalid_input() {
    let (pool, _db) = fresh_pool("ttl").await;
    let store = common::store_on(&pool, "leases").await;
    let client = LeaseClient::new(store);
    for ttl in [
        Duration::ZERO,
        Duration::from_millis(9),
        Duration::from_secs(8 * 86_400),
        Duration::MAX,
    ] {
        assert!(
            matches!(client.try_acquire("ttl", ttl).await, Err(Error::InvalidInput { .. })),
            "{ttl:?} accepted"
        );
    }
    assert_eq!(count(&pool, "leases").await, 0, "a refused TTL created a row");
}

#[tokio::test]
async fn corrupt_rows_are_corrupt_records_and_never_claimed() {
    let (pool, _db) = fresh_pool("corrupt").await;
    let store = common::store_on(&pool, "leases").await;
    let client = LeaseClient::new(store.clone());
    // Every row is expired in this boot (or vacant), so only its corruption keeps it
    // from a claim.
    let clock = leasehold_sql::HostClock::get().expect("host clock");
    let expired = format!("{}", clock.now_ms() - 60000);
    let corruptions = [
        ("token zero", format!("'w1', 0, 1000, NULL, {expired}")),
        ("negative token", format!("'w1', -5, 1000, NULL, {expired}")),
        ("token as text", format!("'w1', 'seven', 1000, NULL, {expired}")),
        ("token as real", format!("'w1', 2.5, 1000, NULL, {expired}")),
        ("holder with a space", format!("'bad holder', 3, 1000, NULL, {expired}")),
        ("holder as blob", format!("x'00ff', 3, 1000, NULL, {expired}")),
        ("vacant with negative token", format!("NULL, -1, 1000, NULL, {expired}")),
        ("ttl zero", format!("'w1', 3, 0, NULL, {expired}")),
        ("ttl as text", format!("'w1', 3, 'long', NULL, {expired}")),
        ("negative wall expiry", format!("'w1', 3, 1000, -7, {expired}")),
        ("expiry as text", "'w1', 3, 1000, NULL, 'soon'".to_owned()),
    ];
    for (i, (what, values)) in corruptions.iter().enumerate() {
        let name = LeaseName::new(format!("corrupt-{i}")).expect("name");
        common::exec(
            &pool,
            &format!(
                "INSERT INTO leases (name, holder, fence_token, ttl_ms, wall_expires_at_ms, expires_at_ms, version, acquired_at_ms, boot_id) \
                 VALUES ('{name}', {values}, 1, 0, '{}')",
                clock.boot_id()
            ),
        )
        .await;
        let snapshot = format!(
            "SELECT quote(holder) || quote(fence_token) || quote(version) || quote(ttl_ms) || quote(expires_at_ms) \
             || quote(wall_expires_at_ms) || quote(deleted) || quote(write_id) FROM leases WHERE name = '{name}'"
        );
        let before: String = sqlx::query(sqlx::AssertSqlSafe(snapshot.clone()))
            .fetch_one(&pool)
            .await
            .expect("row")
            .get(0);
        assert!(
            matches!(store.read(&name).await, Err(Error::CorruptRecord { .. })),
            "{what}: read gave {:?}",
            store.read(&name).await
        );
        assert!(
            matches!(
                store.write(&name, &Precondition::Claimable, &rec("thief")).await,
                Err(Error::CorruptRecord { .. })
            ),
            "{what}: claim"
        );
        assert!(
            matches!(
                client.try_acquire(name.as_str(), Duration::from_secs(1)).await,
                Err(Error::CorruptRecord { .. })
            ),
            "{what}: acquire"
        );
        let after: String = sqlx::query(sqlx::AssertSqlSafe(snapshot))
            .fetch_one(&pool)
            .await
            .expect("row")
            .get(0);
        assert_eq!(before, after, "{what}: the corrupt row was changed");
    }
}
