//! A SQL store as the conformance suite drives it, the cases beyond the suite that
//! every SQL store runs, and [`sql_conformance_tests!`], which runs them all on one
//! [`TestDb`].

use std::sync::Arc;

use super::db::{DbOf, TestDb};
use async_trait::async_trait;
use leasehold_core::conformance::{FenceFixture, FencedResource, Fixture};
use leasehold_core::{LeaseName, store::CasStore};
use leasehold_sql::testing::RowFixture;
use leasehold_sql::{SqlBackend, SqlStore};
use sqlx::{AssertSqlSafe, Database, Encode, Executor, IntoArguments, Pool, Type};

/// The conformance fixture of a SQL store: [`Fixture::corrupt`] runs `corrupt_row` with
/// the lease name as its one parameter; `keep` is what must live as long as the fixture
/// (the database file of SQLite, nothing for Postgres).
pub struct SqlFixture<B: SqlBackend, K> {
    /// The store every `store()` clones.
    pub store: SqlStore<B>,
    /// An `INSERT` of a row no write of the store makes, under the name it binds.
    pub corrupt_row: String,
    /// Kept alive with the fixture.
    pub keep: K,
}

#[async_trait]
impl<B, K> Fixture for SqlFixture<B, K>
where
    B: SqlBackend,
    K: Send + Sync,
    <B::Db as Database>::Arguments: IntoArguments<B::Db>,
    for<'c> &'c Pool<B::Db>: Executor<'c, Database = B::Db>,
    for<'q> &'q str: Encode<'q, B::Db> + Type<B::Db>,
{
    async fn store(&self) -> Arc<dyn CasStore> {
        Arc::new(self.store.clone())
    }

    async fn corrupt(&self, name: &LeaseName) {
        sqlx::query(AssertSqlSafe(self.corrupt_row.clone()))
            .bind(name.as_str())
            .execute(self.store.pool())
            .await
            .expect("insert corrupt row");
    }
}

/// Beyond the suite: under contention the fixture's store issues each token exactly
/// once (6 tasks, 10 grants each).
pub async fn concurrent_claims_issue_each_token_once<B: SqlBackend, K>(f: &SqlFixture<B, K>) {
    let name = leasehold_core::conformance::unique_name("claims");
    leasehold_sql::testing::concurrent_claims_issue_each_token_once(Arc::new(f.store.clone()), &name, 6, 10).await;
}

/// The conformance fixture of the [`TestDb`] `T`: its lease table
/// `leasehold_conformance` (created idempotently: every case uses fresh names), and
/// [`TestDb::corrupt_held_row`] as the foreign writer's row.
pub async fn fixture<T: TestDb>() -> SqlFixture<T::B, T::Keep> {
    let (pool, keep) = T::fresh("conformance").await;
    let table = "leasehold_conformance";
    SqlFixture {
        store: super::store_on::<T::B>(&pool, table).await,
        corrupt_row: T::corrupt_held_row(table),
        keep,
    }
}

/// The fence cases' rows on a database of the [`TestDb`] `T`, and what keeps it alive.
pub struct SqlRows<T: TestDb> {
    rows: RowFixture<DbOf<T>>,
    _keep: T::Keep,
}

/// The fence cases' fixture of the [`TestDb`] `T`.
pub async fn rows<T: TestDb>() -> SqlRows<T> {
    let (pool, keep) = T::fresh("fence").await;
    SqlRows {
        rows: RowFixture::new(pool),
        _keep: keep,
    }
}

#[async_trait]
impl<T: TestDb> FenceFixture for SqlRows<T>
where
    T::Keep: Send + Sync,
    RowFixture<DbOf<T>>: FenceFixture,
{
    async fn resource(&self, case: &str) -> Box<dyn FencedResource> {
        self.rows.resource(case).await
    }
}

/// The conformance suite, its fence cases on rows of a user's table (`RowFence`), and
/// the cases beyond it, on the [`TestDb`] `common::$db`.
macro_rules! sql_conformance_tests {
    ($db:ident) => {
        leasehold_core::conformance::conformance_tests!(common::shared::fixture::fixture::<common::$db>().await);

        /// Beyond the suite: under contention the store issues each token exactly once.
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn concurrent_claims_issue_each_token_once() {
            let f = common::shared::fixture::fixture::<common::$db>().await;
            common::shared::fixture::concurrent_claims_issue_each_token_once(&f).await;
        }

        /// The fence cases on a row of a user's table, written with `RowFence`.
        mod fence {
            leasehold_core::conformance::fence_tests!(
                super::common::shared::fixture::rows::<super::common::$db>().await
            );
        }
    };
}
pub(crate) use sql_conformance_tests;
