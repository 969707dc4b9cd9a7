//! This crate's part of the shared suites ([`leasehold_testkit::suite`]): [`Dynamo`]
//! opens stores on lease tables of their own on moto (through this process's
//! serializing forwarder, [`super::serial`]), each with a resource table beside it whose
//! items it protects ([`FencedItem`]), and corrupts a record with a plain `PutItem`;
//! `Suite::<Dynamo>` is the conformance fixture, the fence fixture and the frozen
//! holder's world. Its [`Variant`]s set how a conflict answers and which of the fence's
//! methods writes the resources.

use std::marker::PhantomData;

use async_trait::async_trait;
use aws_sdk_dynamodb::types::AttributeValue;
use leasehold_core::LeaseName;
use leasehold_core::conformance::FencedResource;
use leasehold_dynamodb::{ATTR_FENCE, ATTR_FORMAT, ATTR_TTL_MS, ATTR_VERSION, DynamoConfig, DynamoStore};
use leasehold_testkit::suite::Backend;

use super::item::{FencedItem, Via};

/// The DynamoDB store in the shared suites, in the variant `V`: a place is the name of a
/// lease table, with the resource table `<place>-items` beside it (both created, if
/// missing, by whoever opens the place first). A store's client is made where it is
/// opened, on the case's own runtime (SDK clients keep connections on the runtime that
/// made them).
pub struct Dynamo<V = Standard>(PhantomData<fn() -> V>);

/// How the stores of a [`Dynamo`] variant answer a conflict, and which of the fence's
/// sending methods writes their resources.
pub trait Variant: Send + Sync + 'static {
    /// Whether a conflict carries the current item
    /// ([`DynamoConfig::with_conflict_returns_current`]).
    const RETURNS_CURRENT: bool = true;
    /// How the resources are written.
    const VIA: Via = Via::Update;
}

/// The default: conflicts return the current item (`ReturnValuesOnConditionCheckFailure`),
/// resources are written with `ItemFence::update`.
pub enum Standard {}

impl Variant for Standard {}

/// The fallback for emulators without `ReturnValuesOnConditionCheckFailure`: conflicts
/// report `Current::Unknown` and the lease client reads.
pub enum ReadOnConflict {}

impl Variant for ReadOnConflict {
    const RETURNS_CURRENT: bool = false;
}

/// Resources written with `ItemFence::put` (the whole item).
pub enum PutItems {}

impl Variant for PutItems {
    const VIA: Via = Via::Put;
}

/// The resource table beside the lease table `table`.
fn items_table(table: &str) -> String {
    format!("{table}-items")
}

#[async_trait]
impl<V: Variant> Backend for Dynamo<V> {
    type Store = DynamoStore;

    fn unique_place(tag: &str) -> String {
        super::unique_table(tag)
    }

    async fn open(table: &str) -> DynamoStore {
        let client = super::client(None);
        super::ensure_resource_table(&client, &items_table(table)).await;
        let config = DynamoConfig::new(table)
            .expect("table name")
            .with_conflict_returns_current(V::RETURNS_CURRENT);
        super::provisioned(client, config).await
    }

    /// The item `name` of the resource table beside the store's lease table, written
    /// through the variant's method (created by its first write).
    fn resource(store: &DynamoStore, name: &str) -> Box<dyn FencedResource> {
        let table = items_table(store.config().table().as_str());
        Box::new(FencedItem::new(&table, name, V::VIA))
    }

    /// A lease item whose token is a string: what a foreign writer could leave.
    async fn corrupt(store: &DynamoStore, name: &LeaseName) {
        let config = store.config();
        store
            .client()
            .put_item()
            .table_name(config.table().as_str())
            .item(config.key(), AttributeValue::S(name.as_str().to_owned()))
            .item(ATTR_FORMAT, AttributeValue::N("1".into()))
            .item(ATTR_VERSION, AttributeValue::S("v-corrupt".into()))
            .item(ATTR_FENCE, AttributeValue::S("not a number".into()))
            .item(ATTR_TTL_MS, AttributeValue::N("1000".into()))
            .send()
            .await
            .unwrap_or_else(|e| panic!("put corrupt item: {e:?}"));
    }
}
