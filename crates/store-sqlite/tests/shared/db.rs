//! One SQL database under test, as the cases every SQL store runs see it: how a test
//! gets a pool on it ([`TestDb`]), and how it runs SQL it writes by hand ([`Shell`]).

use leasehold_core::store::CasOutcome;
use leasehold_core::{Error, Result};
use leasehold_sql::{RowWrite, SqlBackend, SqlDatabase};
use sqlx::{AssertSqlSafe, Executor, Pool, Row};

/// The sqlx database of a [`TestDb`].
pub type DbOf<T> = <<T as TestDb>::B as SqlBackend>::Db;

/// A pool of a [`TestDb`].
pub type PoolOf<T> = Pool<DbOf<T>>;

/// SQL a test writes by hand, run on a pool of this database. One implementation, for
/// each of sqlx's concrete database types (whose executors are not generic).
#[allow(async_fn_in_trait)]
pub trait Shell: SqlDatabase {
    /// Runs one statement; panics with the statement and the error if it fails.
    async fn run(pool: &Pool<Self>, sql: &str);

    /// The integer columns of the first row of `sql`, or `None` without a row.
    async fn ints(pool: &Pool<Self>, sql: &str) -> Option<Vec<i64>>;

    /// The first column of the first row of `sql`, as text.
    async fn text(pool: &Pool<Self>, sql: &str) -> String;

    /// Runs `write` inside a transaction that is then rolled back: its outcome.
    async fn rolled_back(
        pool: &Pool<Self>,
        write: &RowWrite<'_, Self>,
    ) -> Result<leasehold_core::fence::FencedOutcome<u64>>;
}

macro_rules! shell {
    ($($db:ty),*) => {$(
        impl Shell for $db {
            async fn run(pool: &Pool<Self>, sql: &str) {
                pool.execute(AssertSqlSafe(sql.to_owned()))
                    .await
                    .unwrap_or_else(|e| panic!("{sql}: {e}"));
            }

            async fn ints(pool: &Pool<Self>, sql: &str) -> Option<Vec<i64>> {
                let row = sqlx::query(AssertSqlSafe(sql.to_owned()))
                    .fetch_optional(pool)
                    .await
                    .unwrap_or_else(|e| panic!("{sql}: {e}"))?;
                Some((0..row.len()).map(|i| row.get::<i64, _>(i)).collect())
            }

            async fn text(pool: &Pool<Self>, sql: &str) -> String {
                sqlx::query(AssertSqlSafe(sql.to_owned()))
                    .fetch_one(pool)
                    .await
                    .unwrap_or_else(|e| panic!("{sql}: {e}"))
                    .get(0)
            }

            async fn rolled_back(
                pool: &Pool<Self>,
                write: &RowWrite<'_, Self>,
            ) -> Result<leasehold_core::fence::FencedOutcome<u64>> {
                let mut tx = pool.begin().await.expect("begin");
                let outcome = write.execute(&mut *tx).await;
                tx.rollback().await.expect("rollback");
                outcome
            }
        }
    )*};
}

shell!(sqlx::Postgres, sqlx::Sqlite, sqlx::MySql);

/// One SQL database the shared cases run on, and what its SQL looks like where a case
/// writes it by hand: the lease table's documented columns, ways to get them wrong, and
/// rows that no write of the store makes.
#[allow(async_fn_in_trait)]
pub trait TestDb: 'static {
    /// The store's backend.
    type B: SqlBackend<Db: Shell>;
    /// What must live as long as a pool of [`TestDb::fresh`] (SQLite: its file).
    type Keep;

    /// A pool on a database for one test (the server's, or a fresh file).
    async fn fresh(prefix: &str) -> (PoolOf<Self>, Self::Keep);

    /// A table name for `prefix` that no other test run on the database uses (by
    /// default [`unique_table`], for a server that all tests share).
    fn table(prefix: &str) -> String {
        unique_table(prefix)
    }

    /// The documented columns of a lease table, as the body of a `CREATE TABLE`.
    const GOOD_COLUMNS: &'static str;

    /// Lease tables a store must refuse to open, beside [`WRONG_COLUMNS`]: what is
    /// wrong, and the text of [`TestDb::GOOD_COLUMNS`] replaced by another.
    const WRONG_COLUMNS: &'static [(&'static str, &'static str, &'static str)];

    /// Corrupt values beside [`CORRUPTIONS`] that only this database can store.
    const CORRUPTIONS: &'static [(&'static str, &'static str)] = &[];

    /// An `INSERT` into `table` of the lease `name`, expired, with `values` for
    /// `(holder, fence_token, ttl_ms, wall_expires_at_ms)`.
    fn insert_expired(table: &str, name: &str, values: &str) -> String;

    /// An `INSERT` into `table` of a foreign writer's row under the name it binds as
    /// its one parameter: corrupt, and held for an hour (so not claimable by expiry).
    fn corrupt_held_row(table: &str) -> String;

    /// A `SELECT` of one text that shows every column of the row of `name`.
    fn snapshot(table: &str, name: &str) -> String;

    /// Whether a store's claim of a corrupt row refused it: `CorruptRecord` where the
    /// claim's reply carries the row, a conflict without it elsewhere.
    fn claim_refused(outcome: &Result<CasOutcome>) -> bool {
        matches!(outcome, Err(Error::CorruptRecord { .. }))
    }

    /// Whether the database refuses a value of the wrong type for a column (SQLite
    /// stores it as given).
    const TYPED: bool = true;

    /// SQL literals the database can store in a nullable `BIGINT` mark column that are
    /// not tokens and compare above every token.
    const BAD_MARKS: &'static [&'static str] = &[];
}

/// `name` quoted as an identifier of `DB`.
pub fn q<DB: SqlDatabase>(name: &str) -> String {
    leasehold_core::fence::Ident::table(name)
        .unwrap_or_else(|e| panic!("test table {name:?}: {e}"))
        .quoted(DB::DIALECT)
}

/// Lease tables every SQL store must refuse to open: what is wrong, and the text of
/// [`TestDb::GOOD_COLUMNS`] replaced by another.
pub const WRONG_COLUMNS: &[(&str, &str, &str)] = &[
    ("no deleted column", "deleted ", "gone "),
    ("name not the key", " PRIMARY KEY", ""),
];

/// Values for `(holder, fence_token, ttl_ms, wall_expires_at_ms)` that no write of a
/// store makes, each in a row that is expired (or vacant): what is wrong, and the values.
pub const CORRUPTIONS: &[(&str, &str)] = &[
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

/// A pool of at most `max` connections on the database server at `url`; panics with a
/// clear message if the server cannot be reached.
pub async fn server_pool<DB: sqlx::Database>(url: &str, max: u32) -> Pool<DB> {
    sqlx::pool::PoolOptions::<DB>::new()
        .max_connections(max)
        .acquire_timeout(std::time::Duration::from_secs(10))
        .connect(url)
        .await
        .unwrap_or_else(|e| panic!("cannot reach the database server at {url}: {e}"))
}

/// A table name for `prefix` that no other test run on a shared server uses.
pub fn unique_table(prefix: &str) -> String {
    format!("{prefix}_{}", leasehold_testkit::unique_suffix().replace('-', "_"))
}
