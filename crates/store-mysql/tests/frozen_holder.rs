//! The shared frozen-holder case (`leasehold_testkit::frozen`) on the real MariaDB: a
//! holder process SIGSTOPped past its TTL, a takeover, the holder resumed; its writes to
//! rows of a user's table, made with `RowFence` (`INSERT … ON DUPLICATE KEY UPDATE`,
//! backquoted), are refused.
#![allow(missing_docs)]

mod common;

use std::process::ExitCode;
use std::sync::Arc;

use async_trait::async_trait;
use leasehold_core::conformance::FencedResource;
use leasehold_core::store::CasStore;
use leasehold_mysql::MySqlStore;
use leasehold_sql::testing::RowFixture;
use leasehold_testkit::frozen::World;

struct My {
    store: MySqlStore,
    rows: RowFixture<sqlx::MySql>,
}

#[async_trait]
impl World for My {
    async fn store(&self) -> Arc<dyn CasStore> {
        Arc::new(self.store.clone())
    }

    async fn resource(&self, name: &str) -> Box<dyn FencedResource> {
        self.rows.row(name).await
    }
}

fn main() -> ExitCode {
    leasehold_testkit::frozen::main(|_run| async {
        let pool = common::pool().await;
        let store = common::store_on(&pool, "leasehold_frozen_holder").await;
        My {
            store,
            rows: RowFixture::new(pool),
        }
    })
}
