//! A SQL store as the conformance suite drives it, and the one case beyond the suite
//! that both SQL stores run.

use std::sync::Arc;

use async_trait::async_trait;
use leasehold_core::conformance::Fixture;
use leasehold_core::{LeaseName, store::CasStore};
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
