//! The leasehold-core conformance suite against the real Postgres (`LEASEHOLD_PG_URL`),
//! on a lease table of its own (created idempotently; every case uses fresh names).
#![allow(missing_docs)]

mod common;

common::shared::fixture::sql_conformance_tests!(Pg);

/// One release wakes one acquirer, and every observer (`LISTEN/NOTIFY` into the core's wake-up hub). The
/// holder's store and the waiters' store each have their own pool and `LISTEN`
/// connection.
mod wake {
    use std::sync::Arc;

    use async_trait::async_trait;
    use leasehold_core::conformance::WakeFixture;
    use leasehold_core::store::CasStore;

    use super::common;

    struct TwoStores;

    #[async_trait]
    impl WakeFixture for TwoStores {
        async fn stores(&self, _tag: &str) -> (Arc<dyn CasStore>, Arc<dyn CasStore>) {
            let table = "leasehold_conformance";
            let holder = common::store_on(&common::pool().await, table).await;
            let waiters = common::store_on(&common::pool().await, table).await;
            (Arc::new(holder), Arc::new(waiters))
        }
    }

    leasehold_core::conformance::wake_tests!(TwoStores);
}
