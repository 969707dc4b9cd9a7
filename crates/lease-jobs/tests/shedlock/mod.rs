//! What the ShedLock-table tests share across databases: the store's own functions
//! ([`Store`], implemented by [`store_calls!`]), what each database says in its own
//! SQL ([`Dialect`], which a test file implements for its store), fresh tables on a
//! [`Db`], the conformance fixture, and [`shedlock_cases!`], which runs every shared
//! case against one store.
#![allow(dead_code, unreachable_pub)]

pub mod cases;
pub mod java;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use leasehold_core::conformance::Fixture;
use leasehold_core::store::CasStore;
use leasehold_core::{ClientConfig, LeaseClient, LeaseName};

use java::JavaShedLock;

/// A ShedLock store type, through the functions the cases call: its own, which have
/// the same names and meaning on every ShedLock store, and its pool's.
#[async_trait]
pub trait Store: CasStore + Clone + std::fmt::Debug + Sized + 'static {
    /// The store type's name, as its functions are named in messages.
    const NAME: &'static str;

    /// The pool the store runs on.
    type Pool: Clone + Send + Sync + 'static;

    /// A pool of at most `max` connections, `min` of them opened now (panics if the
    /// database is unreachable).
    async fn connect(max: u32, min: u32) -> Self::Pool;

    /// A pool of one connection to the same database as the user `user` with the
    /// password `password` (panics if refused).
    async fn connect_as(user: &str, password: &str) -> Self::Pool;

    /// Closes `pool`'s connections.
    async fn close(pool: Self::Pool);

    /// The store's `provision`: ShedLock's table, with the fence column if `fence`.
    async fn provision(pool: &Self::Pool, table: &str, fence: bool) -> leasehold_core::Result<()>;

    /// The store's `new` on `table` with the default options.
    async fn open(pool: &Self::Pool, table: &str) -> leasehold_core::Result<Self>;

    /// The store's `is_fenced`: whether it found the fence column.
    fn is_fenced(&self) -> bool;

    /// The store's `lease_client`.
    fn lease_client(self, config: ClientConfig) -> leasehold_core::Result<LeaseClient>;

    /// Runs `sql`.
    async fn execute(pool: &Self::Pool, sql: String) -> Result<(), sqlx::Error>;

    /// The first column of every row `sql` returns, as `BIGINT`s (panics on an error).
    async fn i64s(pool: &Self::Pool, sql: String) -> Vec<i64>;
}

/// Implements [`Store`] for the ShedLock store `$store` on the sqlx database `$db`,
/// whose URL is in the environment variable `$url`. The stores' functions share
/// names, not a trait: only the types differ.
macro_rules! store_calls {
    ($store:ty, $db:ty, $url:literal) => {
        #[async_trait::async_trait]
        impl $crate::shedlock::Store for $store {
            const NAME: &'static str = stringify!($store);
            type Pool = sqlx::Pool<$db>;

            async fn connect(max: u32, min: u32) -> Self::Pool {
                sqlx::pool::PoolOptions::<$db>::new()
                    .max_connections(max)
                    .min_connections(min)
                    .acquire_timeout(std::time::Duration::from_secs(5))
                    .connect(&leasehold_testkit::env($url))
                    .await
                    .unwrap_or_else(|e| panic!("the database at {} unreachable: {e}", $url))
            }

            async fn connect_as(user: &str, password: &str) -> Self::Pool {
                let url = leasehold_testkit::env($url);
                let (scheme, rest) = url.split_once("://").expect("a URL");
                let host = rest.split_once('@').map_or(rest, |(_, host)| host);
                sqlx::pool::PoolOptions::<$db>::new()
                    .max_connections(1)
                    .acquire_timeout(std::time::Duration::from_secs(5))
                    .connect(&format!("{scheme}://{user}:{password}@{host}"))
                    .await
                    .unwrap_or_else(|e| panic!("connect as {user}: {e}"))
            }

            async fn close(pool: Self::Pool) {
                pool.close().await;
            }

            async fn provision(pool: &Self::Pool, table: &str, fence: bool) -> leasehold_core::Result<()> {
                <$store>::provision(pool, table, fence).await
            }

            async fn open(pool: &Self::Pool, table: &str) -> leasehold_core::Result<Self> {
                <$store>::new(
                    pool.clone(),
                    leasehold_jobs::shedlock::ShedlockConfig::table(table),
                )
                .await
            }

            fn is_fenced(&self) -> bool {
                <$store>::is_fenced(self)
            }

            fn lease_client(
                self,
                config: leasehold_core::ClientConfig,
            ) -> leasehold_core::Result<leasehold_core::LeaseClient> {
                <$store>::lease_client(self, config)
            }

            async fn execute(pool: &Self::Pool, sql: String) -> Result<(), sqlx::Error> {
                sqlx::query(sqlx::AssertSqlSafe(sql))
                    .execute(pool)
                    .await
                    .map(drop)
            }

            async fn i64s(pool: &Self::Pool, sql: String) -> Vec<i64> {
                sqlx::query_scalar(sqlx::AssertSqlSafe(sql.clone()))
                    .fetch_all(pool)
                    .await
                    .unwrap_or_else(|e| panic!("{sql}: {e}"))
            }
        }
    };
}
pub(crate) use store_calls;

/// What the cases need that each database says in its own SQL.
#[async_trait]
pub trait Dialect: Store {
    /// How every test table's name starts; the process id follows it.
    const PREFIX: &'static str;

    /// How many rounds of sixteen sessions creating one table at once
    /// [`cases::sixteen_sessions_creating_one_fenced_table_at_once_all_succeed`] runs.
    const DDL_ROUNDS: usize;

    /// The database's clock at the time of the call (not of the statement's start).
    const CLOCK: &'static str;

    /// The type of a column holding [`Dialect::CLOCK`] to the microsecond.
    const TIMESTAMP: &'static str;

    /// `table` as it stands in a statement.
    fn quoted(table: &str) -> String;

    /// Creates what a test table needs before it can be created (Postgres: this
    /// crate's schema).
    async fn make_room(pool: &Self::Pool);

    /// The tables whose names start with [`Dialect::PREFIX`], as [`Db::fresh_name`]
    /// gave them.
    async fn test_tables(pool: &Self::Pool) -> Vec<String>;

    /// The statements that create the user `user` (password `pw`), who may read
    /// `visible` and no other table, and those that drop it again.
    fn reader(user: &str, visible: &str) -> (Vec<String>, Vec<String>);

    /// The database's clock as UTC wall time, as ShedLock writes it in its `TIMESTAMP`
    /// columns.
    const UTC_NOW: &'static str;

    /// ShedLock's lock statement as `java` sends it: the insert if `first` (the first
    /// use of the name), else the update of an expired row; whether it took the lock.
    async fn java_lock(java: &JavaShedLock<Self>, name: &str, at_most: Duration, first: bool) -> bool;

    /// ShedLock's unlock statement as `java` sends it: keeps the lock until
    /// `locked_at + at_least` if that is later than now.
    async fn java_unlock(java: &JavaShedLock<Self>, name: &str, at_least: Duration);
}

/// The database of the store `S`, through one pool on it.
pub struct Db<S: Store> {
    /// The pool.
    pub pool: S::Pool,
}

impl<S: Store> Clone for Db<S> {
    fn clone(&self) -> Self {
        Self {
            pool: self.pool.clone(),
        }
    }
}

impl<S: Dialect> Db<S> {
    /// A pool of six connections.
    pub async fn connect() -> Self {
        Self {
            pool: S::connect(6, 0).await,
        }
    }

    /// A pool of one session, connected now.
    pub async fn session() -> Self {
        Self {
            pool: S::connect(1, 1).await,
        }
    }

    /// A table name no other test uses, in the room [`Dialect::make_room`] made. The
    /// first call in a process drops the tables earlier runs left: those whose
    /// creating process (the pid in the name) is gone.
    pub async fn fresh_name(&self) -> String {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        static CLEANED: AtomicBool = AtomicBool::new(false);
        S::make_room(&self.pool).await;
        if !CLEANED.swap(true, Ordering::SeqCst) {
            for table in S::test_tables(&self.pool).await {
                let pid = table.strip_prefix(S::PREFIX).and_then(|r| r.split('_').next());
                if pid.is_some_and(|pid| !std::path::Path::new(&format!("/proc/{pid}")).exists()) {
                    let _ = S::execute(&self.pool, format!("DROP TABLE IF EXISTS {}", S::quoted(&table))).await;
                }
            }
        }
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        format!(
            "{}{}_{}_{nanos}",
            S::PREFIX,
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        )
    }

    /// The store's `provision` on this pool.
    pub async fn provision(&self, table: &str, fence: bool) -> leasehold_core::Result<()> {
        S::provision(&self.pool, table, fence).await
    }

    /// The store's `new` on `table` on this pool.
    pub async fn open(&self, table: &str) -> leasehold_core::Result<S> {
        S::open(&self.pool, table).await
    }

    /// A fresh ShedLock table, with the fence column if `fence`.
    pub async fn fresh_table(&self, fence: bool) -> String {
        let table = self.fresh_name().await;
        self.provision(&table, fence).await.expect("create table");
        table
    }

    /// The store on `table`.
    pub async fn store_on(&self, table: &str) -> S {
        self.open(table).await.expect("open shedlock store")
    }

    /// Runs `sql`, which must succeed.
    pub async fn exec(&self, sql: String) {
        if let Err(e) = S::execute(&self.pool, sql.clone()).await {
            panic!("{sql}: {e}");
        }
    }

    /// The first column of every row `sql` returns, as `BIGINT`s.
    pub async fn i64s(&self, sql: String) -> Vec<i64> {
        S::i64s(&self.pool, sql).await
    }

    /// The one `BIGINT` `sql` returns (a count).
    pub async fn count(&self, sql: String) -> i64 {
        self.i64s(sql.clone())
            .await
            .first()
            .copied()
            .unwrap_or_else(|| panic!("no row: {sql}"))
    }
}

/// Panics unless `result` is [`leasehold_core::Error::Misconfigured`].
pub fn assert_misconfigured<T: std::fmt::Debug>(result: leasehold_core::Result<T>, what: &str) {
    match result {
        Err(leasehold_core::Error::Misconfigured { .. }) => {}
        other => panic!("{what}: {other:?}"),
    }
}

/// The conformance suite's fixture: a fresh fenced table.
pub struct Fenced<S: Store> {
    db: Db<S>,
    table: String,
}

impl<S: Dialect> Fenced<S> {
    /// A fresh fenced table on a new pool.
    pub async fn new() -> Self {
        let db = Db::connect().await;
        let table = db.fresh_table(true).await;
        Self { db, table }
    }
}

#[async_trait]
impl<S: Dialect> Fixture for Fenced<S> {
    async fn store(&self) -> Arc<dyn CasStore> {
        Arc::new(self.db.store_on(&self.table).await)
    }
    /// A held row whose fence is negative: no token was ever that. (A lease name has
    /// no quotes to escape.)
    async fn corrupt(&self, name: &LeaseName) {
        let (table, now) = (S::quoted(&self.table), S::UTC_NOW);
        self.db
            .exec(format!(
                "INSERT INTO {table} (name, lock_until, locked_at, locked_by, fence) \
                 VALUES ('{name}', {now} + INTERVAL '1' HOUR, {now}, 'x', -5)"
            ))
            .await;
    }
}

/// The conformance suite on a fenced table and every case of [`cases`], as tests of
/// the calling file against the store `$store` (a [`Dialect`]).
macro_rules! shedlock_cases {
    ($store:ty) => {
        mod conformance_fenced {
            use super::*;
            leasehold_core::conformance::conformance_tests!($crate::shedlock::Fenced::<$store>::new().await);
        }
        $crate::shedlock::shedlock_cases!(@each $store;
            2 rust_and_java_shedlock_exclude_each_other,
            2 lock_at_least_for_is_honoured_both_ways,
            2 a_hung_rust_holder_is_replaced_by_java_after_expiry,
            2 unfenced_table_is_efficiency_only_with_growing_tokens,
            2 missing_or_mistyped_tables_are_misconfigured,
            2 a_table_the_user_may_not_read_is_not_reported_missing,
            2 a_table_dropped_under_the_store_is_not_provisioned,
            4 sixteen_sessions_creating_one_fenced_table_at_once_all_succeed);
    };
    (@each $store:ty; $($threads:tt $case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = $threads)]
            async fn $case() {
                $crate::shedlock::cases::$case::<$store>().await;
            }
        )*
    };
}
pub(crate) use shedlock_cases;
