//! The leasehold-core conformance suite against a real DynamoDB-compatible server (moto).
#![allow(missing_docs)]

mod common;

use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use aws_sdk_dynamodb::types::AttributeValue;
use leasehold_core::conformance::Fixture;
use leasehold_core::{LeaseName, store::CasStore};
use leasehold_dynamodb::{
    ATTR_FENCE, ATTR_FORMAT, ATTR_TTL_MS, ATTR_VERSION, DEFAULT_KEY_ATTRIBUTE, DynamoConfig, DynamoStore,
};

/// One table per test process; every case uses fresh lease names in it.
fn table() -> &'static str {
    static TABLE: OnceLock<String> = OnceLock::new();
    TABLE.get_or_init(|| common::unique_table("conformance"))
}

struct Dynamo {
    returns_current: bool,
}

async fn fixture(returns_current: bool) -> Dynamo {
    // Idempotent: every case's runtime makes sure the table exists.
    common::lease_store(common::client(None), table()).await;
    Dynamo { returns_current }
}

#[async_trait]
impl Fixture for Dynamo {
    async fn store(&self) -> Arc<dyn CasStore> {
        // A client per call: SDK clients keep connections on the runtime that made them,
        // and every case runs on its own runtime.
        let config = DynamoConfig::new(table())
            .expect("config")
            .with_conflict_returns_current(self.returns_current);
        Arc::new(DynamoStore::new(common::client(None), config))
    }

    async fn corrupt(&self, name: &LeaseName) {
        // A lease item whose token is a string: what a foreign writer could leave.
        common::client(None)
            .put_item()
            .table_name(table())
            .item(DEFAULT_KEY_ATTRIBUTE, AttributeValue::S(name.as_str().to_owned()))
            .item(ATTR_FORMAT, AttributeValue::N("1".into()))
            .item(ATTR_VERSION, AttributeValue::S("v-corrupt".into()))
            .item(ATTR_FENCE, AttributeValue::S("not a number".into()))
            .item(ATTR_TTL_MS, AttributeValue::N("1000".into()))
            .send()
            .await
            .unwrap_or_else(|e| panic!("put corrupt item: {e:?}"));
    }
}

/// The default: conflicts return the current item (`ReturnValuesOnConditionCheckFailure`).
mod returns_current {
    use super::*;
    leasehold_core::conformance::conformance_tests!(fixture(true).await);
}

/// The fallback for emulators without `ReturnValuesOnConditionCheckFailure`: conflicts
/// report `Current::Unknown` and the lease client reads.
///
/// Every case but `round_trips_per_operation`, whose takeover section counts the
/// background renewals of a lease the same counting client still holds (`again`): with
/// conflicts that do not carry the item, a refused attempt is a write and a read, and a
/// renewal landing inside it makes three. (The default mode above runs it: there an
/// attempt is one request.)
mod read_on_conflict {
    use super::*;
    leasehold_core::conformance::conformance_tests!(@cases fixture(false).await;
        create_is_exclusive, stale_version_conflicts, update_missing_conflicts,
        delete_checks_version, concurrent_cas_increments_are_exact,
        token_sequence_acquire_release_takeover, holder_is_refused_while_held,
        expired_lease_is_taken_over_with_next_token, non_holder_cannot_renew_or_release,
        corrupt_record_is_an_error_never_a_grant, loss_signal_fires_before_deadline_when_store_hangs,
        acquire_waits_for_release);
}

/// The fence cases on [`ItemFence`](leasehold_dynamodb::ItemFence): each resource is a
/// fresh item (a key no other case uses) of one resource table, its value in the number
/// attribute `v` and its mark in `last_token`, written through the crate's public fence
/// API (`UpdateItem` and `PutItem`: each has its own guard) and read plainly
/// ([`common::item::FencedItem`], also the frozen-holder test's resource).
mod fence {
    use leasehold_core::conformance::{FenceFixture, FencedResource};
    use tokio::sync::OnceCell;

    use super::*;
    use crate::common::item::{FencedItem, Via};

    /// One resource table per test process, created by the first case that needs it.
    async fn resource_table() -> &'static str {
        static TABLE: OnceCell<String> = OnceCell::const_new();
        TABLE
            .get_or_init(|| async {
                let table = common::unique_table("fence");
                common::create_resource_table(&common::client(None), &table).await;
                table
            })
            .await
    }

    pub(super) struct Items(pub(super) Via);

    #[async_trait]
    impl FenceFixture for Items {
        async fn resource(&self, case: &str) -> Box<dyn FencedResource> {
            let table = resource_table().await;
            // Made here, on the case's own runtime (see `Dynamo::store`).
            let key = format!("fence/{case}/{}", leasehold_testkit::unique_suffix());
            Box::new(FencedItem::new(table, &key, self.0))
        }
    }

    /// Through `ItemFence::update`.
    mod update_item {
        use super::{Items, Via};
        leasehold_core::conformance::fence_tests!(Items(Via::Update));
    }

    /// Through `ItemFence::put`.
    mod put_item {
        use super::{Items, Via};
        leasehold_core::conformance::fence_tests!(Items(Via::Put));
    }
}
