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
            .conflict_returns_current(self.returns_current);
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
/// API (`UpdateItem` and `PutItem`: each has its own guard) and read plainly.
mod fence {
    use std::collections::HashMap;

    use aws_sdk_dynamodb::Client;
    use leasehold_core::conformance::{FenceFixture, FencedResource};
    use leasehold_core::fence::{FenceMode, FencedOutcome};
    use leasehold_core::{FencingToken, Result};
    use leasehold_dynamodb::ItemFence;
    use tokio::sync::OnceCell;

    use super::*;

    const MARK: &str = "last_token";
    const VALUE: &str = "v";

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

    /// Which of the fence's sending methods the writes go through.
    #[derive(Debug, Clone, Copy)]
    pub(super) enum Via {
        /// `ItemFence::update`: `SET #v = :v`.
        Update,
        /// `ItemFence::put`: the whole item.
        Put,
    }

    pub(super) struct Items(pub(super) Via);

    #[async_trait]
    impl FenceFixture for Items {
        async fn resource(&self, case: &str) -> Box<dyn FencedResource> {
            let table = resource_table().await;
            // Clients made here, on the case's own runtime (see `Dynamo::store`).
            let http = common::HttpCounter::default();
            Box::new(Item {
                fenced: common::client(Some(&http)),
                http,
                plain: common::client(None),
                table,
                key: format!("fence/{case}/{}", leasehold_testkit::unique_suffix()),
                via: self.0,
            })
        }
    }

    struct Item {
        /// The client of the fenced writes, counted by `http`.
        fenced: Client,
        http: common::HttpCounter,
        /// The client of the plain reads.
        plain: Client,
        table: &'static str,
        key: String,
        via: Via,
    }

    /// `Ok(())` for an applied write. The writes carry no condition of the caller's own,
    /// so the fence must never report one as failed.
    fn applied<O>(outcome: FencedOutcome<O, Option<HashMap<String, AttributeValue>>>, via: Via) -> Result<()> {
        match outcome {
            FencedOutcome::Applied(_) => Ok(()),
            FencedOutcome::ConditionFailed(item) => {
                panic!("{via:?}: no condition of the caller's own, yet ConditionFailed (item as it was: {item:?})")
            }
        }
    }

    #[async_trait]
    impl FencedResource for Item {
        async fn write(&self, token: FencingToken, mode: FenceMode, value: i64) -> Result<()> {
            let fence = ItemFence::new(MARK, token)?.mode(mode);
            let value = AttributeValue::N(value.to_string());
            match self.via {
                Via::Update => {
                    let update = self
                        .fenced
                        .update_item()
                        .table_name(self.table)
                        .key("id", common::s(&self.key))
                        .update_expression("SET #v = :v")
                        .expression_attribute_names("#v", VALUE)
                        .expression_attribute_values(":v", value);
                    applied(fence.update(update).await?, self.via)
                }
                Via::Put => {
                    let put = self
                        .fenced
                        .put_item()
                        .table_name(self.table)
                        .item("id", common::s(&self.key))
                        .item(VALUE, value);
                    applied(fence.put(put).await?, self.via)
                }
            }
        }

        async fn read(&self) -> Option<(FencingToken, i64)> {
            let item = common::get_item(&self.plain, self.table, ("id", &self.key)).await?;
            let number = |attribute: &str| match item.get(attribute) {
                Some(AttributeValue::N(n)) => n.clone(),
                other => panic!("item {:?}: {attribute} is {other:?}, not a number", self.key),
            };
            let mark = number(MARK)
                .parse::<u64>()
                .unwrap_or_else(|e| panic!("item {:?}: {MARK}: {e}", self.key));
            let value = number(VALUE)
                .parse::<i64>()
                .unwrap_or_else(|e| panic!("item {:?}: {VALUE}: {e}", self.key));
            Some((FencingToken::new(mark), value))
        }

        fn round_trips(&self) -> u64 {
            self.http.get()
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
