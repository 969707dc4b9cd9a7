//! Bad input and a bad table fail loudly with a typed error, grant nothing and change
//! nothing: a missing table, wrong columns, a name longer than the column, a TTL of zero
//! or beyond range, and rows whose values are corrupt.
#![allow(missing_docs)]

mod common;

use std::time::Duration;

use leasehold_core::{
    Error, FencingToken, HolderId, LeaseClient, LeaseName, Ttl,
    store::{CasStore, LeaseRecord, Precondition},
};
use leasehold_postgres::{PostgresConfig, PostgresStore};
use sqlx::{PgPool, Row};

const GOOD_COLUMNS: &str = "name VARCHAR(200) PRIMARY KEY, holder VARCHAR(128), fence_token BIGINT NOT NULL, \
    version BIGINT NOT NULL, ttl_ms BIGINT NOT NULL, acquired_at TIMESTAMPTZ NOT NULL, expires_at TIMESTAMPTZ NOT NULL, \
    wall_expires_at_ms BIGINT, deleted BOOLEAN NOT NULL DEFAULT FALSE";

async fn open(pool: &PgPool, table: &str) -> leasehold_core::Result<PostgresStore> {
    PostgresStore::new(pool.clone(), PostgresConfig::new().with_table(table)?).await
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
async fn fresh_store(prefix: &str) -> (PgPool, String, PostgresStore) {
    let pool = common::pool().await;
    let table = common::unique_table(prefix);
    let store = common::store_on(&pool, &table).await;
    (pool, table, store)
}

async fn count(pool: &PgPool, table: &str) -> i64 {
    sqlx::query(sqlx::AssertSqlSafe(format!("SELECT count(*) FROM \"{table}\"")))
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
    common::exec(&pool, &format!("DROP TABLE \"{table}\"")).await;
    let name = LeaseName::new("x").expect("name");
    assert!(misconfigured(store.read(&name).await));
    assert!(misconfigured(
        store.write(&name, &Precondition::Claimable, &rec("w")).await
    ));
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
            "no deleted column",
            GOOD_COLUMNS.replace(", deleted BOOLEAN NOT NULL DEFAULT FALSE", ""),
        ),
        (
            "holder not null",
            GOOD_COLUMNS.replace("holder VARCHAR(128)", "holder VARCHAR(128) NOT NULL"),
        ),
        (
            "name not the key",
            GOOD_COLUMNS.replace("name VARCHAR(200) PRIMARY KEY", "name VARCHAR(200) NOT NULL"),
        ),
        (
            "expiry as bigint",
            GOOD_COLUMNS.replace("expires_at TIMESTAMPTZ", "expires_at BIGINT"),
        ),
    ];
    for (what, columns) in variants {
        let table = common::unique_table("lh_wrong");
        common::exec(&pool, &format!("CREATE TABLE \"{table}\" ({columns})")).await;
        let r = open(&pool, &table).await;
        assert!(matches!(r, Err(Error::Misconfigured { .. })), "{what}: {r:?}");
        common::exec(&pool, &format!("DROP TABLE \"{table}\"")).await;
    }
    // And the control: the right columns open.
    let table = common::unique_table("lh_right");
    common::exec(&pool, &format!("CREATE TABLE \"{table}\" ({GOOD_COLUMNS})")).await;
    open(&pool, &table).await.expect("the documented columns open");
    common::exec(&pool, &format!("DROP TABLE \"{table}\"")).await;
}

#[tokio::test]
async fn names_and_holders_longer_than_the_columns_are_invalid_input() {
    let pool = common::pool().await;
    let table = common::unique_table("lh_short");
    let columns = GOOD_COLUMNS
        .replace("name VARCHAR(200)", "name VARCHAR(16)")
        .replace("holder VARCHAR(128)", "holder VARCHAR(40)");
    common::exec(&pool, &format!("CREATE TABLE \"{table}\" ({columns})")).await;
    let store = open(&pool, &table).await.expect("open");
    assert_eq!((store.limits().name, store.limits().holder), (16, 40));
    let long = LeaseName::new("a-name-of-20-bytes!!".replace('!', "x")).expect("valid lease name");
    let invalid =
        |r: leasehold_core::Result<leasehold_core::store::CasOutcome>| matches!(r, Err(Error::InvalidInput { .. }));
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
        Ok(leasehold_core::store::CasOutcome::Written(_))
    ));
    assert_eq!(count(&pool, &table).await, 1, "a refused input created a row");
    common::exec(&pool, &format!("DROP TABLE \"{table}\"")).await;
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
    common::exec(&pool, &format!("DROP TABLE \"{table}\"")).await;
}

#[tokio::test]
async fn corrupt_rows_are_corrupt_records_and_never_claimed() {
    let (pool, table, store) = fresh_store("lh_corrupt").await;
    let client = LeaseClient::new(store.clone());
    // Every row is expired (or vacant), so only its corruption keeps it from a claim.
    let corruptions = [
        ("token zero", "'w1', 0, 1000, NULL"),
        ("negative token", "'w1', -5, 1000, NULL"),
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
                "INSERT INTO \"{table}\" (name, holder, fence_token, ttl_ms, wall_expires_at_ms, version, acquired_at, expires_at) \
                 VALUES ('{name}', {values}, 1, now() - interval '1 hour', now() - interval '1 minute')"
            ),
        )
        .await;
        let snapshot = format!("SELECT row_to_json(t)::text FROM \"{table}\" t WHERE name = '{name}'");
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
    common::exec(&pool, &format!("DROP TABLE \"{table}\"")).await;
}
