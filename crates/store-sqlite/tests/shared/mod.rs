//! What the SQLite, Postgres and MySQL tests share, generic over the backend. It lives here
//! and the Postgres and MySQL tests include it too, from their `common` module:
//! `#[path = "../../../store-sqlite/tests/shared/mod.rs"] mod shared;`.
#![allow(dead_code, unreachable_pub, unused_macros, unused_imports)]

pub mod bad_input;
pub mod batched;
pub mod db;
pub mod fenced;
pub mod fixture;
pub mod frozen;
pub mod request_timeout;
pub mod statements;

use std::time::Duration;

use leasehold_core::fence::FencedUpdate;
use leasehold_core::store::CasStore;
use leasehold_core::store::Linearizable;
use leasehold_core::testing::{FaultPlan, FaultStore};
use leasehold_core::{AcquireOutcome, Lease, LeaseClient, LossCause};
use leasehold_sql::{SqlBackend, SqlConfig, SqlStore};
use sqlx::{AssertSqlSafe, Database, Executor, Pool};

/// Creates (if needed) and opens the lease table `table`.
pub async fn store_on<B: SqlBackend>(pool: &Pool<B::Db>, table: &str) -> SqlStore<B> {
    let config = SqlConfig::new().with_table(table).expect("table name");
    SqlStore::<B>::provision(pool, &config).await.expect("create schema");
    SqlStore::new(pool.clone(), config).await.expect("open store")
}

/// A pool on `T`'s database for one test, a lease table of its own there (named for
/// `prefix`) and a store on it: the pool, the table's name, the store, and what must
/// live as long as the pool.
pub async fn fresh_store<T: db::TestDb>(prefix: &str) -> (db::PoolOf<T>, String, SqlStore<T::B>, T::Keep) {
    let (pool, keep) = T::fresh(prefix).await;
    let table = T::table(prefix);
    let store = store_on::<T::B>(&pool, &table).await;
    (pool, table, store, keep)
}

/// Runs one statement.
pub async fn exec<DB: Database>(pool: &Pool<DB>, sql: &str)
where
    for<'c> &'c Pool<DB>: Executor<'c, Database = DB>,
{
    pool.execute(AssertSqlSafe(sql.to_owned()))
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

/// A holder of `name` for `ttl` through `store` that then stops answering (its store
/// hangs right after the grant): it never renews or releases.
pub async fn frozen_holder<S: Linearizable + Clone>(store: S, name: &str, ttl: Duration) -> Lease {
    let frozen = FaultStore::new(store, 7);
    let held = LeaseClient::new(frozen.clone())
        .try_acquire(name, ttl)
        .await
        .expect("acquire")
        .granted()
        .expect("granted");
    frozen.set_plan(FaultPlan::hang());
    held
}

/// Takes over from `held` (a [`frozen_holder`]): runs `attempt` every 50 ms, for up to
/// 10 s, until it is granted the lease; that lease must carry the next token. Releases it.
pub async fn take_over(held: &Lease, mut attempt: impl AsyncFnMut() -> Option<Lease>) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let taken = loop {
        if let Some(l) = attempt().await {
            break l;
        }
        assert!(tokio::time::Instant::now() < deadline, "never took over");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(taken.token(), held.token().next());
    taken.release().await.expect("release");
}

/// A rival's `outcome` while `lease` (of `ttl`) is held: refused, naming the holder and
/// its token, with a wait of at most `ttl`.
pub use leasehold_core::conformance::assert_held_by;

/// The fenced update of the `accounts` tests on `table`: `balance` set (or, with
/// `increment`, incremented) on the row of key `id`, fenced by `last_token`, strict or not.
pub fn accounts_update(table: &str, strict: bool, increment: bool) -> FencedUpdate {
    let b = FencedUpdate::new(table, "last_token")
        .and_then(|f| {
            if increment {
                f.increment("balance")
            } else {
                f.set("balance")
            }
        })
        .and_then(|f| f.key("id"))
        .expect("builder");
    if strict { b.strict() } else { b }
}

/// The crate's shipped `sql/leasehold_leases.sql` is exactly `generated` (what
/// `provision` runs); with `LEASEHOLD_BLESS` set, it is rewritten first.
pub fn assert_shipped_sql_is(manifest_dir: &str, generated: &str) {
    let path = format!("{manifest_dir}/sql/leasehold_leases.sql");
    if std::env::var_os("LEASEHOLD_BLESS").is_some() {
        std::fs::write(&path, generated).expect("write sql file");
    }
    let shipped = std::fs::read_to_string(&path).expect("read sql file");
    assert_eq!(
        shipped, generated,
        "sql/leasehold_leases.sql is stale: rerun with LEASEHOLD_BLESS=1"
    );
}

/// Takes `name` through `store`, changes its row by hand (`SET {set}`, the way `psql` or
/// `sqlite3` would, the version untouched), and waits for the holder to notice: the loss
/// cause. Panics if the holder still believes it holds the lease 5 s later (it renews
/// every ~200 ms).
async fn hold_then_change_by_hand<B: SqlBackend>(
    store: &SqlStore<B>,
    table: &str,
    name: &str,
    set: &str,
    operator: Operator<'_>,
) -> LossCause {
    let client = LeaseClient::new(store.clone());
    let sql = format!("UPDATE \"{table}\" SET {set} WHERE name = '{name}'");
    // A 2 s TTL: a renewal due every 667 ms must land in time on a loaded machine too
    // (with 600 ms, MariaDB's fsync per commit under CI load missed it).
    let (cause, _, lease) =
        leasehold_testkit::foreign::hold_then(&client, name, Duration::from_secs(2), async { operator(&sql) }).await;
    assert_eq!(lease.token().get(), 1);
    cause
}

/// The operator's SQL shell: runs one statement with the database's own command-line
/// client (`psql`, `sqlite3`), as a person would.
pub type Operator<'a> = &'a (dyn Fn(&str) + Sync);

/// An operator raises a held lease's token by hand (`UPDATE … SET fence_token = 100`,
/// the version untouched). The holder's next renewal must not write its own token back
/// over it: the holder loses the lease, the row keeps 100, and the next grant is 101,
/// above every token a resource may have seen.
pub async fn a_raised_token_is_never_written_back<B: SqlBackend>(
    store: SqlStore<B>,
    table: &str,
    operator: Operator<'_>,
) {
    let name = format!("foreign/raised/{}", leasehold_testkit::unique_suffix());
    let cause = hold_then_change_by_hand(&store, table, &name, "fence_token = 100", operator).await;
    let key = leasehold_core::LeaseName::new(&name).expect("name");
    let row = store.read(&key).await.expect("read").expect("the record");
    assert_eq!(
        row.record.token.get(),
        100,
        "a renewal wrote the token back ({cause:?}): tokens went backwards"
    );
    let next = LeaseClient::new(store.clone())
        .acquire_timeout(&name, Duration::from_millis(600), Duration::from_secs(10))
        .await
        .expect("the next grant");
    assert_eq!(next.token().get(), 101, "the next grant must be above the raised token");
    next.release().await.expect("release");
}

/// An operator hands a held lease to someone else by hand (`UPDATE … SET holder = …`,
/// the version untouched). The holder's next renewal must not write itself back: the
/// holder loses the lease to the new holder, and the row keeps what the operator wrote.
pub async fn a_changed_holder_is_never_written_back<B: SqlBackend>(
    store: SqlStore<B>,
    table: &str,
    operator: Operator<'_>,
) {
    let name = format!("foreign/holder/{}", leasehold_testkit::unique_suffix());
    let cause = hold_then_change_by_hand(&store, table, &name, "holder = 'the-operator'", operator).await;
    assert!(matches!(cause, LossCause::TakenOver { .. }), "{cause:?}");
    let key = leasehold_core::LeaseName::new(&name).expect("name");
    let row = store.read(&key).await.expect("read").expect("the record");
    assert_eq!(
        row.record.holder.as_ref().map(|h| h.as_str()),
        Some("the-operator"),
        "a renewal wrote its holder back ({cause:?})"
    );
    assert_eq!(row.record.token.get(), 1, "nobody changed the token");
}

/// An operator deletes a held row by hand (`DELETE FROM …`). The holder notices at its
/// next renewal, and neither a renewal nor its release recreates the row. The row was
/// the name's only record of its tokens, so the next grant starts again at token 1: a
/// lease row must never be deleted by hand (the library's own delete leaves a
/// tombstone).
pub async fn a_deleted_row_is_noticed_and_never_recreated<B: SqlBackend>(
    store: SqlStore<B>,
    table: &str,
    operator: Operator<'_>,
) {
    let name = format!("foreign/deleted/{}", leasehold_testkit::unique_suffix());
    let client = LeaseClient::new(store.clone());
    let sql = format!("DELETE FROM \"{table}\" WHERE name = '{name}'");
    let (cause, _, lease) =
        leasehold_testkit::foreign::hold_then(&client, &name, Duration::from_secs(2), async { operator(&sql) }).await;
    assert!(
        matches!(cause, LossCause::Expired | LossCause::TakenOver { .. }),
        "{cause:?}"
    );
    lease.release().await.expect("the release of a lost lease");
    let key = leasehold_core::LeaseName::new(&name).expect("name");
    assert!(
        store.read(&key).await.expect("read").is_none(),
        "a renewal or the release recreated the deleted row ({cause:?})"
    );
    let next = client
        .acquire_timeout(&name, Duration::from_millis(600), Duration::from_secs(10))
        .await
        .expect("the next grant");
    assert_eq!(next.token().get(), 1, "the deleted row took the token sequence with it");
    next.release().await.expect("release");
}

/// An operator (or a bad restore) leaves a held row invalid: an empty holder, a zero
/// TTL, a negative token. The holder's renewal must not heal it: the holder loses the
/// lease, the row keeps what was written, and reads and grants report it as corrupt.
pub async fn a_corrupted_held_row_is_never_healed<B: SqlBackend>(
    store: SqlStore<B>,
    table: &str,
    operator: Operator<'_>,
) {
    for (what, set) in [
        ("an empty holder", "holder = ''"),
        ("a zero TTL", "ttl_ms = 0"),
        ("a negative token", "fence_token = -5"),
    ] {
        let name = format!("foreign/corrupt/{}", leasehold_testkit::unique_suffix());
        let cause = hold_then_change_by_hand(&store, table, &name, set, operator).await;
        let key = leasehold_core::LeaseName::new(&name).expect("name");
        match store.read(&key).await {
            Err(leasehold_core::Error::CorruptRecord { .. }) => {}
            other => panic!("{what}: a renewal healed the row ({cause:?}): read gives {other:?}"),
        }
        match LeaseClient::new(store.clone())
            .try_acquire(&name, Duration::from_millis(600))
            .await
        {
            Err(leasehold_core::Error::CorruptRecord { .. }) => {}
            other => panic!("{what}: a corrupt row must never be granted: {other:?}"),
        }
    }
}

/// An operator plants an expiry no write of the library makes (far beyond the TTL, or at
/// the edge of the column's type) on a held row. The holder loses the lease, and reads
/// and grants report the row as corrupt at once: never granted, never waited on.
pub async fn an_impossible_expiry_is_corrupt<B: SqlBackend>(store: SqlStore<B>, table: &str, operator: Operator<'_>) {
    for (what, set) in super::IMPOSSIBLE_EXPIRIES {
        let name = format!("foreign/expiry/{}", leasehold_testkit::unique_suffix());
        let cause = hold_then_change_by_hand(&store, table, &name, set, operator).await;
        assert_corrupt_everywhere(&store, &name, &format!("{what} ({cause:?})")).await;
    }
}

/// A vacant row whose version was set by hand to one the store never issues (zero,
/// negative): never granted, and reported as corrupt.
pub async fn an_impossible_version_is_corrupt<B: SqlBackend>(store: SqlStore<B>, table: &str, operator: Operator<'_>) {
    for version in [-1, 0] {
        let name = released(&store, "foreign/version").await;
        operator(&format!(
            "UPDATE \"{table}\" SET version = {version} WHERE name = '{name}'"
        ));
        assert_corrupt_everywhere(&store, &name, &format!("a vacant row at version {version}")).await;
    }
}

/// A fresh lease name under `prefix`, granted on `store` and released: its row is
/// vacant, with token 1.
pub async fn released<B: SqlBackend>(store: &SqlStore<B>, prefix: &str) -> String {
    let name = format!("{prefix}/{}", leasehold_testkit::unique_suffix());
    let lease = LeaseClient::new(store.clone())
        .acquire(&name, Duration::from_millis(600))
        .await
        .expect("acquire");
    lease.release().await.expect("release");
    name
}

/// Reads and a grant of `name` on `store` report [`leasehold_core::Error::CorruptRecord`],
/// at once.
pub async fn assert_corrupt_everywhere<B: SqlBackend>(store: &SqlStore<B>, name: &str, what: &str) {
    let key = leasehold_core::LeaseName::new(name).expect("name");
    match store.read(&key).await {
        Err(leasehold_core::Error::CorruptRecord { .. }) => {}
        other => panic!("{what}: a read gives {other:?}"),
    }
    let client = LeaseClient::new(store.clone());
    let attempt = client.acquire_timeout(name, Duration::from_millis(600), Duration::from_secs(3));
    match tokio::time::timeout(Duration::from_secs(5), attempt).await {
        Ok(Err(leasehold_core::Error::CorruptRecord { .. })) => {}
        Ok(Ok(lease)) => panic!("{what}: a corrupt row was granted (token {})", lease.token()),
        Ok(Err(other)) => panic!("{what}: a grant gives {other:?}, not CorruptRecord"),
        Err(_) => panic!("{what}: a grant still waits on a corrupt row"),
    }
}

/// One `#[tokio::test]` per case of the shared module `bad_input`, `fenced`,
/// `statements`, `request_timeout` or `batched`, each run on the [`db::TestDb`] `$db`.
macro_rules! sql_tests {
    (bad_input, $db:ty) => {
        $crate::common::shared::sql_tests!(
            @cases bad_input, $db, tokio::test:
            a_missing_table_is_not_provisioned,
            wrong_columns_are_misconfigured,
            names_and_holders_longer_than_the_columns_are_invalid_input,
            ttl_of_zero_or_beyond_range_is_invalid_input,
            corrupt_rows_are_corrupt_records_and_never_claimed,
            a_row_no_lease_could_be_named_is_not_listed,
        );
    };
    (fenced, $db:ty) => {
        $crate::common::shared::sql_tests!(
            @cases fenced, $db, tokio::test:
            updates_apply_under_the_guard_and_a_missing_row_is_refused,
            upsert_inserts_then_guards,
            a_lease_token_fences_out_the_previous_holder,
            bad_fenced_writes_are_typed_errors,
            refused_fenced_writes_say_why,
        );
    };
    (statements, $db:ty) => {
        $crate::common::shared::sql_tests!(
            @cases statements, $db, tokio::test:
            acquire_renew_release_are_one_statement_each,
        );
    };
    (request_timeout, $db:ty) => {
        $crate::common::shared::sql_tests!(
            @cases request_timeout, $db, tokio::test:
            a_slow_or_silent_server_ends_each_statement_at_the_request_timeout,
        );
    };
    // The leases renew in the background while the case waits: two worker threads.
    (batched, $db:ty) => {
        $crate::common::shared::sql_tests!(
            @cases batched, $db, tokio::test(flavor = "multi_thread", worker_threads = 2):
            forty_leases_renew_in_a_few_statements,
        );
    };
    (@cases $module:ident, $db:ty, $test:meta: $($case:ident),* $(,)?) => {
        $(
            #[$test]
            async fn $case() {
                common::shared::$module::$case::<$db>().await;
            }
        )*
    };
}
pub(crate) use sql_tests;

/// The foreign-writer tests of a SQL store, one `#[tokio::test]` per case above:
/// `common::foreign_store()` gives the store, its lease table's name, and what must live
/// as long as the test; `common::operator` runs a statement with the database's own
/// command-line client.
macro_rules! foreign_writer_tests {
    () => {
        $crate::common::shared::foreign_writer_tests!(
            @cases
            a_raised_token_is_never_written_back,
            a_changed_holder_is_never_written_back,
            a_deleted_row_is_noticed_and_never_recreated,
            a_corrupted_held_row_is_never_healed,
            an_impossible_expiry_is_corrupt,
            an_impossible_version_is_corrupt
        );
    };
    (@cases $($case:ident),*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let (store, table, keep) = common::foreign_store().await;
                common::shared::$case(store, &table, &|sql: &str| common::operator(&keep, sql)).await;
            }
        )*
    };
}
pub(crate) use foreign_writer_tests;
