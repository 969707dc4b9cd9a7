//! Bad input and a bad table fail loudly with a typed error, grant nothing and change
//! nothing, on every SQL store: a missing table, wrong columns, a name or holder longer
//! than its column, a TTL of zero or beyond range, and rows whose values are corrupt.
//! `sql_tests!(bad_input, …)` runs each case on one [`TestDb`].

use std::time::Duration;

use leasehold_core::store::{CasOutcome, CasStore, LeaseRecord, Precondition};
use leasehold_core::{Error, FencingToken, HolderId, LeaseClient, LeaseName, Result, Ttl};
use leasehold_sql::{SqlConfig, SqlStore};

use super::db::{DbOf, PoolOf, Shell, TestDb, q};

type Store<T> = SqlStore<<T as TestDb>::B>;

async fn open<T: TestDb>(pool: &PoolOf<T>, table: &str) -> Result<Store<T>> {
    SqlStore::new(pool.clone(), SqlConfig::new().with_table(table)?).await
}

fn misconfigured<T: std::fmt::Debug>(r: Result<T>) -> bool {
    matches!(r, Err(Error::Misconfigured { .. }))
}

fn invalid<T: std::fmt::Debug>(r: Result<T>) -> bool {
    matches!(r, Err(Error::InvalidInput { .. }))
}

fn rec(holder: &str) -> LeaseRecord {
    LeaseRecord::held(
        HolderId::new(holder).expect("holder"),
        FencingToken::FIRST,
        Ttl::from_millis(1000).expect("ttl"),
    )
}

async fn run<T: TestDb>(pool: &PoolOf<T>, sql: &str) {
    <DbOf<T>>::run(pool, sql).await;
}

async fn count<T: TestDb>(pool: &PoolOf<T>, table: &str) -> i64 {
    let sql = format!("SELECT count(*) FROM {}", q::<DbOf<T>>(table));
    <DbOf<T>>::ints(pool, &sql).await.expect("a count")[0]
}

async fn create<T: TestDb>(pool: &PoolOf<T>, table: &str, columns: &str) {
    run::<T>(pool, &format!("CREATE TABLE {} ({columns})", q::<DbOf<T>>(table))).await;
}

async fn drop_table<T: TestDb>(pool: &PoolOf<T>, table: &str) {
    run::<T>(pool, &format!("DROP TABLE {}", q::<DbOf<T>>(table))).await;
}

/// A missing table is `NotProvisioned` at open (what `provision` fixes, not another
/// misconfiguration), and so is every operation on a table dropped under a running store.
pub async fn a_missing_table_is_not_provisioned<T: TestDb>() {
    let not_provisioned = |what: &str, r: Result<()>| match r {
        Err(e @ Error::NotProvisioned { .. }) => assert!(e.to_string().contains("does not exist"), "{what}: {e}"),
        other => panic!("{what}: expected NotProvisioned, got {other:?}"),
    };
    let (pool, _keep) = T::fresh("missing").await;
    let table = T::table("lh_missing");
    not_provisioned("open", open::<T>(&pool, &table).await.map(drop));

    let store = super::store_on::<T::B>(&pool, &table).await;
    drop_table::<T>(&pool, &table).await;
    let name = LeaseName::new("x").expect("name");
    not_provisioned("read", store.read(&name).await.map(drop));
    not_provisioned(
        "write",
        store.write(&name, &Precondition::Claimable, &rec("w")).await.map(drop),
    );
    not_provisioned("verify", store.verify().await);
    let client = LeaseClient::new(store);
    not_provisioned(
        "try_acquire",
        client.try_acquire("x", Duration::from_secs(1)).await.map(drop),
    );
}

/// Each of the wrong columns ([`super::db::WRONG_COLUMNS`], [`TestDb::WRONG_COLUMNS`]) is `Misconfigured` at open,
/// except a column that a table of an earlier version lacks (`provision` adds it):
/// that one is `NotProvisioned`. The documented columns open.
pub async fn wrong_columns_are_misconfigured<T: TestDb>() {
    let (pool, _keep) = T::fresh("wrong").await;
    let wrong = super::db::WRONG_COLUMNS.iter().chain(T::WRONG_COLUMNS);
    for (what, from, to) in wrong {
        let columns = T::GOOD_COLUMNS.replace(from, to);
        assert_ne!(columns, T::GOOD_COLUMNS, "{what}: {from:?} is not in the columns");
        let table = T::table("lh_wrong");
        create::<T>(&pool, &table, &columns).await;
        let r = open::<T>(&pool, &table).await;
        if what.contains("an earlier version") {
            assert!(matches!(r, Err(Error::NotProvisioned { .. })), "{what}: {r:?}");
        } else {
            assert!(misconfigured(r), "{what}: opened");
        }
        drop_table::<T>(&pool, &table).await;
    }
    let table = T::table("lh_right");
    create::<T>(&pool, &table, T::GOOD_COLUMNS).await;
    open::<T>(&pool, &table).await.expect("the documented columns open");
    drop_table::<T>(&pool, &table).await;
}

/// A name or holder longer than its column is `InvalidInput` before anything is
/// written; at the column's length it works.
pub async fn names_and_holders_longer_than_the_columns_are_invalid_input<T: TestDb>() {
    let (pool, _keep) = T::fresh("short").await;
    let table = T::table("lh_short");
    let columns = T::GOOD_COLUMNS
        .replace("name VARCHAR(200)", "name VARCHAR(16)")
        .replace("holder VARCHAR(128)", "holder VARCHAR(40)");
    create::<T>(&pool, &table, &columns).await;
    let store = open::<T>(&pool, &table).await.expect("open");
    assert_eq!((store.limits().name, store.limits().holder), (16, 40));
    let long = LeaseName::new("a-name-of-20-bytesxx").expect("valid lease name");
    assert!(invalid(store.write(&long, &Precondition::Claimable, &rec("w")).await));
    assert!(invalid(store.read(&long).await));
    let short = LeaseName::new("short").expect("name");
    assert!(invalid(
        store
            .write(&short, &Precondition::Claimable, &rec(&"h".repeat(41)))
            .await
    ));
    let client = LeaseClient::new(store.clone());
    assert!(invalid(client.try_acquire(long.as_str(), Duration::from_secs(1)).await));
    let at_limit = LeaseName::new("x".repeat(16)).expect("name");
    assert!(matches!(
        store
            .write(&at_limit, &Precondition::Claimable, &rec(&"h".repeat(40)))
            .await,
        Ok(CasOutcome::Written(_))
    ));
    assert_eq!(count::<T>(&pool, &table).await, 1, "a refused input created a row");
    drop_table::<T>(&pool, &table).await;
}

/// A TTL of zero, below the store's resolution or beyond its range is `InvalidInput`,
/// and creates no row.
pub async fn ttl_of_zero_or_beyond_range_is_invalid_input<T: TestDb>() {
    let (pool, _keep) = T::fresh("ttl").await;
    let table = T::table("lh_ttl");
    let client = LeaseClient::new(super::store_on::<T::B>(&pool, &table).await);
    for ttl in [
        Duration::ZERO,
        Duration::from_millis(9),
        Duration::from_secs(8 * 86_400),
        Duration::MAX,
    ] {
        assert!(invalid(client.try_acquire("ttl", ttl).await), "{ttl:?} accepted");
    }
    assert_eq!(count::<T>(&pool, &table).await, 0, "a refused TTL created a row");
    drop_table::<T>(&pool, &table).await;
}

/// Every row of the corruptions ([`super::db::CORRUPTIONS`], [`TestDb::CORRUPTIONS`]) is expired (or vacant), so only its corruption
/// keeps it from a claim: reads and acquires are `CorruptRecord`, the claim writes
/// nothing, and the row is unchanged.
pub async fn corrupt_rows_are_corrupt_records_and_never_claimed<T: TestDb>() {
    let (pool, _keep) = T::fresh("corrupt").await;
    let table = T::table("lh_corrupt");
    let store = super::store_on::<T::B>(&pool, &table).await;
    let client = LeaseClient::new(store.clone());
    let corruptions = super::db::CORRUPTIONS.iter().chain(T::CORRUPTIONS);
    for (i, (what, values)) in corruptions.enumerate() {
        let name = LeaseName::new(format!("corrupt-{i}")).expect("name");
        run::<T>(&pool, &T::insert_expired(&table, name.as_str(), values)).await;
        let snapshot = T::snapshot(&table, name.as_str());
        let before = <DbOf<T>>::text(&pool, &snapshot).await;
        let read = store.read(&name).await;
        assert!(
            matches!(read, Err(Error::CorruptRecord { .. })),
            "{what}: read gave {read:?}"
        );
        let claim = store.write(&name, &Precondition::Claimable, &rec("thief")).await;
        assert!(T::claim_refused(&claim), "{what}: claim gave {claim:?}");
        let acquire = client.try_acquire(name.as_str(), Duration::from_secs(1)).await;
        assert!(
            matches!(acquire, Err(Error::CorruptRecord { .. })),
            "{what}: acquire gave {acquire:?}"
        );
        let after = <DbOf<T>>::text(&pool, &snapshot).await;
        assert_eq!(before, after, "{what}: the corrupt row was changed");
    }
    drop_table::<T>(&pool, &table).await;
}

/// Listing: the rows of a table are listed by name whatever their values (a corrupt row
/// is still a lease record: reading it says so), and a row under a name no lease can
/// have (a foreign writer's `INSERT`) is left out, as on every store.
pub async fn a_row_no_lease_could_be_named_is_not_listed<T: TestDb>() {
    let (pool, _keep) = T::fresh("listing").await;
    let table = T::table("lh_listing");
    let store = super::store_on::<T::B>(&pool, &table).await;
    let (_, values) = super::db::CORRUPTIONS[0];
    run::<T>(&pool, &T::insert_expired(&table, "lst/corrupt", values)).await;
    run::<T>(&pool, &T::insert_expired(&table, "lst/has space", values)).await;
    run::<T>(&pool, &T::insert_expired(&table, "lst//double", values)).await;
    let prefix = leasehold_core::NamePrefix::new("lst/").expect("prefix");
    let listed = store.list(&prefix).await.expect("list");
    let corrupt = LeaseName::new("lst/corrupt").expect("name");
    assert_eq!(listed, std::slice::from_ref(&corrupt));
    assert!(matches!(store.read(&corrupt).await, Err(Error::CorruptRecord { .. })));
    assert_eq!(count::<T>(&pool, &table).await, 3, "listing changed nothing");
    drop_table::<T>(&pool, &table).await;
}
