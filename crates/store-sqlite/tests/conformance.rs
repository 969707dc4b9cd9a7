//! The leasehold-core conformance suite against a real SQLite file (WAL, shared pool).
#![allow(missing_docs)]

mod common;

common::shared::fixture::sql_conformance_tests!(Lite);

/// One release wakes one acquirer (and every observer), and waiters to claim wait in line (`PRAGMA
/// data_version` into the core's wake-up hub): the holder's store and the waiters'
/// store each have their own pool on one file.
mod wake {
    use std::sync::Arc;

    use async_trait::async_trait;
    use leasehold_core::conformance::WakeFixture;
    use leasehold_core::store::CasStore;

    use super::common;

    /// Each case's database file, kept (not removed) after the binary ends: the stores
    /// outlive the fixture call. One file per case, so that the cases running at once
    /// do not race to create one.
    fn db(tag: &str) -> &'static common::TempDb {
        Box::leak(Box::new(common::db_path(tag)))
    }

    struct TwoStores;

    #[async_trait]
    impl WakeFixture for TwoStores {
        async fn stores(&self, tag: &str) -> (Arc<dyn CasStore>, Arc<dyn CasStore>) {
            let (table, db) = ("leasehold_leases", db(tag));
            let holder = common::store_on(&common::pool(db.path()).await, table).await;
            let waiters = common::store_on(&common::pool(db.path()).await, table).await;
            (Arc::new(holder), Arc::new(waiters))
        }
    }

    leasehold_core::conformance::wake_tests!(TwoStores);
}
