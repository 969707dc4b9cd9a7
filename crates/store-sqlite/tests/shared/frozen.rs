//! The shared frozen-holder case (`leasehold_testkit::frozen`) on a SQL server: a holder
//! process SIGSTOPped past its TTL, a takeover, the holder resumed; its writes to rows
//! of a user's table, made with `RowFence`, are refused.

use std::process::ExitCode;
use std::sync::Arc;

use async_trait::async_trait;
use leasehold_core::conformance::FencedResource;
use leasehold_core::store::CasStore;
use leasehold_sql::SqlStore;
use leasehold_sql::testing::{FencedRow, RowFixture};
use leasehold_testkit::frozen::World;
use sqlx::{Executor, Pool};

use super::db::{DbOf, TestDb};

/// The lease store and the rows it fences, on one server.
pub struct SqlWorld<T: TestDb> {
    store: SqlStore<T::B>,
    rows: RowFixture<DbOf<T>>,
}

#[async_trait]
impl<T: TestDb> World for SqlWorld<T>
where
    FencedRow<DbOf<T>>: FencedResource,
    for<'c> &'c Pool<DbOf<T>>: Executor<'c, Database = DbOf<T>>,
{
    async fn store(&self) -> Arc<dyn CasStore> {
        Arc::new(self.store.clone())
    }

    async fn resource(&self, name: &str) -> Box<dyn FencedResource> {
        self.rows.row(name).await
    }
}

/// The test binary's `main` (`harness = false`): the case, or its worker process.
pub fn main<T: TestDb>() -> ExitCode
where
    FencedRow<DbOf<T>>: FencedResource,
    for<'c> &'c Pool<DbOf<T>>: Executor<'c, Database = DbOf<T>>,
{
    leasehold_testkit::frozen::main(|_run| async {
        let (pool, _keep) = T::fresh("frozen").await;
        let store = super::store_on::<T::B>(&pool, "leasehold_frozen_holder").await;
        SqlWorld::<T> {
            store,
            rows: RowFixture::new(pool),
        }
    })
}
