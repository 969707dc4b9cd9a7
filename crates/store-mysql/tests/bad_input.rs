//! Bad input and a bad table fail loudly with a typed error, grant nothing and change
//! nothing: a missing table, wrong columns, a table that is not InnoDB, a name longer
//! than the column, a TTL of zero or beyond range, and rows whose values are corrupt.
#![allow(missing_docs)]

mod common;

use std::time::Duration;

use leasehold_core::{
    Error, FencingToken, HolderId, LeaseClient, LeaseName, Ttl,
    store::{CasOutcome, CasStore, Current, LeaseRecord, Precondition},
};
use leasehold_mysql::{MySqlConfig, MySqlStore};
use sqlx::{MySqlPool, Row};

const GOOD_COLUMNS: &str = "name VARCHAR(200) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY, \
    holder VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NULL, fence_token BIGINT NOT NULL, \
    version BIGINT NOT NULL, ttl_ms BIGINT NOT NULL, acquired_at_ms BIGINT NOT NULL, expires_at_ms BIGINT NOT NULL, \
    wall_expires_at_ms BIGINT NULL, deleted BOOLEAN NOT NULL DEFAULT FALSE";

const NOW_MS: &str = "(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000)";

async fn open(pool: &MySqlPool, table: &str) -> leasehold_core::Result<MySqlStore> {
    MySqlStore::new(pool.clone(), MySqlConfig::new().with_table(table)?).await
}

fn misconfigured<T: std::fmt::Debug>(r: leasehold_core::Result<T>) -> bool {
    matches!(r, Err(Error::Misconfigured { .. }))
}

fn rec(holder: &str) -> LeaseRecord {
    LeaseRecord::held(
        HolderId::new(holder).expect("holder"),
        FencingToken::FIRST,
        Ttl::from_millis(1000).expect("ttl"),
    )
}

/// A pool, a lease table of its own (`<prefix>_…`) and a store on it.
async fn fresh_store(prefix: &str) -> (MySqlPool, String, MySqlStore) {
    let pool = common::pool().await;
    let table = common::unique_table(prefix);
    let store = common::store_on(&pool, &table).await;
    (pool, table, store)
}

async fn count(pool: &MySqlPool, table: &str) -> i64 {
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT CAST(count(*) AS SIGNED) FROM `{table}`"
    )))
    .fetch_one(pool)
    .await
    .expect("count")
    .get(0)
}

#[tokio::test]
async fn a_missing_table_is_misconfigured() {
    let pool = common::pool().await;
    let table = common::unique_table("lh_missing");
    let err = open(&pool, &table).await.expect_err("opened a missing table");
    assert!(matches!(err, Error::Misconfigured { .. }), "{err:?}");
    assert!(err.to_string().contains("does not exist"), "{err}");

    // A table dropped under a running store: every operation says so, typed.
    let store = common::store_on(&pool, &table).await;
    common::exec(&pool, &format!("DROP TABLE `{table}`")).await;
    let name = LeaseName::new("x").expect("name");
    assert!(misconfigured(store.read(&name).await));
    assert!(misconfigured(
        store.write(&name, &Precondition::Claimable, &rec("w")).await
    ));
    assert!(misconfigured(store.verify().await));
    let client = LeaseClient::new(store);
    assert!(misconfigured(client.try_acquire("x", Duration::from_secs(1)).await));
}

#[tokio::test]
async fn wrong_columns_are_misconfigured() {
    let pool = common::pool().await;
    let variants = [
        (
            "token as text",
            GOOD_COLUMNS.replace("fence_token BIGINT NOT NULL", "fence_token TEXT NOT NULL"),
        ),
        (
            "token unsigned",
            GOOD_COLUMNS.replace("fence_token BIGINT NOT NULL", "fence_token BIGINT UNSIGNED NOT NULL"),
        ),
        (
            "version as int",
            GOOD_COLUMNS.replace("version BIGINT NOT NULL", "version INT NOT NULL"),
        ),
        (
            "no deleted column",
            GOOD_COLUMNS.replace(", deleted BOOLEAN NOT NULL DEFAULT FALSE", ""),
        ),
        (
            "holder not null",
            GOOD_COLUMNS.replace("COLLATE ascii_bin NULL", "COLLATE ascii_bin NOT NULL"),
        ),
        (
            "name not the key",
            GOOD_COLUMNS.replace("NOT NULL PRIMARY KEY", "NOT NULL"),
        ),
        ("another unique key", format!("{GOOD_COLUMNS}, UNIQUE KEY (holder)")),
        (
            "expiry as a datetime",
            GOOD_COLUMNS.replace("expires_at_ms BIGINT NOT NULL", "expires_at_ms DATETIME(6) NOT NULL"),
        ),
    ];
    for (what, columns) in variants {
        let table = common::unique_table("lh_wrong");
        common::exec(&pool, &format!("CREATE TABLE `{table}` ({columns}) ENGINE=InnoDB")).await;
        let r = open(&pool, &table).await;
        assert!(matches!(r, Err(Error::Misconfigured { .. })), "{what}: {r:?}");
        common::exec(&pool, &format!("DROP TABLE `{table}`")).await;
    }
    // And the control: the right columns open.
    let table = common::unique_table("lh_right");
    common::exec(&pool, &format!("CREATE TABLE `{table}` ({GOOD_COLUMNS}) ENGINE=InnoDB")).await;
    open(&pool, &table).await.expect("the documented columns open");
    common::exec(&pool, &format!("DROP TABLE `{table}`")).await;
}

/// MyISAM has no row locks and no transactions: a lease table in it is refused at open,
/// and a table switched to it under a running store fails `verify`, naming the engine.
#[tokio::test]
async fn a_table_that_is_not_innodb_is_refused() {
    let pool = common::pool().await;
    for engine in ["MyISAM", "MEMORY", "Aria"] {
        let table = common::unique_table("lh_engine");
        common::exec(
            &pool,
            &format!("CREATE TABLE `{table}` ({GOOD_COLUMNS}) ENGINE={engine}"),
        )
        .await;
        let err = open(&pool, &table)
            .await
            .expect_err("opened a table that is not InnoDB");
        assert!(matches!(err, Error::Misconfigured { .. }), "{engine}: {err:?}");
        let text = err.to_string();
        assert!(text.contains(engine) && text.contains("InnoDB"), "{engine}: {text}");
        common::exec(&pool, &format!("DROP TABLE `{table}`")).await;
    }
    let (pool, table, store) = fresh_store("lh_engine").await;
    store.verify().await.expect("an InnoDB table verifies");
    common::exec(&pool, &format!("ALTER TABLE `{table}` ENGINE=MyISAM")).await;
    let err = store.verify().await.expect_err("verify passed a MyISAM table");
    assert!(
        matches!(err, Error::Misconfigured { .. }) && err.to_string().contains("MyISAM"),
        "{err:?}"
    );
    common::exec(&pool, &format!("DROP TABLE `{table}`")).await;
}

#[tokio::test]
async fn names_and_holders_longer_than_the_columns_are_invalid_input() {
    let pool = common::pool().await;
    let table = common::unique_table("lh_short");
    let columns = GOOD_COLUMNS
        .replace("name VARCHAR(200)", "name VARCHAR(16)")
        .replace("holder VARCHAR(128)", "holder VARCHAR(40)");
    common::exec(&pool, &format!("CREATE TABLE `{table}` ({columns}) ENGINE=InnoDB")).await;
    let store = open(&pool, &table).await.expect("open");
    assert_eq!((store.limits().name, store.limits().holder), (16, 40));
    let long = LeaseName::new("a-name-of-20-bytes!!".replace('!', "x")).expect("valid lease name");
    let invalid = |r: leasehold_core::Result<CasOutcome>| matches!(r, Err(Error::InvalidInput { .. }));
    assert!(invalid(store.write(&long, &Precondition::Claimable, &rec("w")).await));
    assert!(matches!(store.read(&long).await, Err(Error::InvalidInput { .. })));
    let short = LeaseName::new("short").expect("name");
    assert!(invalid(
        store
            .write(&short, &Precondition::Claimable, &rec(&"h".repeat(41)))
            .await
    ));
    let client = LeaseClient::new(store.clone());
    assert!(matches!(
        client.try_acquire(long.as_str(), Duration::from_secs(1)).await,
        Err(Error::InvalidInput { .. })
    ));
    // At the limit it works.
    assert!(matches!(
        store
            .write(
                &LeaseName::new("x".repeat(16)).expect("name"),
                &Precondition::Claimable,
                &rec(&"h".repeat(40))
            )
            .await,
        Ok(CasOutcome::Written(_))
    ));
    assert_eq!(count(&pool, &table).await, 1, "a refused input created a row");
    common::exec(&pool, &format!("DROP TABLE `{table}`")).await;
}

#[tokio::test]
async fn ttl_of_zero_or_beyond_range_is_invalid_input() {
    let (pool, table, store) = fresh_store("lh_ttl").await;
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
    assert_eq!(count(&pool, &table).await, 0, "a refused TTL created a row");
    common::exec(&pool, &format!("DROP TABLE `{table}`")).await;
}

/// Every row is expired (or vacant), so only its corruption keeps it from a claim: the
/// claim writes nothing (MySQL's refused claim says only that; the client then reads),
/// reads and acquires are `CorruptRecord`, and the row is unchanged.
#[tokio::test]
async fn corrupt_rows_are_corrupt_records_and_never_claimed() {
    let (pool, table, store) = fresh_store("lh_corrupt").await;
    let client = LeaseClient::new(store.clone());
    let corruptions = [
        ("token zero", "'w1', 0, 1000, NULL"),
        ("negative token", "'w1', -5, 1000, NULL"),
        ("the largest token", "'w1', 9223372036854775807, 1000, NULL"),
        ("holder with a space", "'bad holder', 3, 1000, NULL"),
        ("empty holder", "'', 3, 1000, NULL"),
        ("vacant with negative token", "NULL, -1, 1000, NULL"),
        ("ttl zero", "'w1', 3, 0, NULL"),
        ("ttl negative", "'w1', 3, -1, NULL"),
        ("ttl beyond range", "'w1', 3, 604800001, NULL"),
        ("negative wall expiry", "'w1', 3, 1000, -7"),
    ];
    for (i, (what, values)) in corruptions.iter().enumerate() {
        let name = LeaseName::new(format!("corrupt-{i}")).expect("name");
        common::exec(
            &pool,
            &format!(
                "INSERT INTO `{table}` (name, holder, fence_token, ttl_ms, wall_expires_at_ms, version, acquired_at_ms, expires_at_ms) \
                 VALUES ('{name}', {values}, 1, {NOW_MS} - 3600000, {NOW_MS} - 60000)"
            ),
        )
        .await;
        let snapshot = format!(
            "SELECT CONCAT_WS('|', holder, fence_token, version, ttl_ms, acquired_at_ms, expires_at_ms, \
             wall_expires_at_ms, deleted) FROM `{table}` WHERE name = '{name}'"
        );
        let before: String = sqlx::query(sqlx::AssertSqlSafe(snapshot.clone()))
            .fetch_one(&pool)
            .await
            .expect("row")
            .get(0);
        assert!(
            matches!(store.read(&name).await, Err(Error::CorruptRecord { .. })),
            "{what}: read"
        );
        assert!(
            matches!(
                store.write(&name, &Precondition::Claimable, &rec("thief")).await,
                Ok(CasOutcome::Conflict(Current::Unknown))
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
    common::exec(&pool, &format!("DROP TABLE `{table}`")).await;
}
