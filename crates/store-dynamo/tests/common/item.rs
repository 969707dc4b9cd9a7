//! The protected resource of the fence tests: one item of a resource table, written
//! through the crate's public fence API ([`ItemFence`]), read plainly.
//!
//! Its value is the number attribute `v`, its mark `last_token`. The same table and key
//! name the same item in any process (the frozen-holder test's two processes share it).

use std::collections::HashMap;

use async_trait::async_trait;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::AttributeValue;
use leasehold_core::conformance::FencedResource;
use leasehold_core::fence::{FenceMode, FencedOutcome};
use leasehold_core::{FencingToken, Result};
use leasehold_dynamodb::ItemFence;

/// The mark attribute.
pub const MARK: &str = "last_token";
/// The value attribute.
pub const VALUE: &str = "v";

/// Which of the fence's sending methods the writes go through.
#[derive(Debug, Clone, Copy)]
pub enum Via {
    /// `ItemFence::update`: `SET #v = :v`.
    Update,
    /// `ItemFence::put`: the whole item.
    Put,
}

/// The item `key` (partition key `id`) of the resource table `table`.
pub struct FencedItem {
    /// The client of the fenced writes, counted by `http`.
    fenced: Client,
    http: leasehold_aws::SentRequests,
    /// The client of the plain reads.
    plain: Client,
    table: String,
    key: String,
    via: Via,
}

impl FencedItem {
    /// The item `key` of `table` (made by [`super::ensure_resource_table`]) on the moto
    /// server of the environment, written through `via`: the same item for the same
    /// table and key in any process. Its clients are made here, on the caller's runtime
    /// (SDK clients keep connections on the runtime that made them).
    pub fn new(table: &str, key: &str, via: Via) -> Self {
        let http = leasehold_aws::SentRequests::default();
        Self {
            fenced: super::client(Some(&http)),
            http,
            plain: super::client(None),
            table: table.to_owned(),
            key: key.to_owned(),
            via,
        }
    }

    /// The item's key: what `UpdateItem` finds it by, and what `PutItem` writes with the
    /// value.
    fn key(&self) -> HashMap<String, AttributeValue> {
        HashMap::from([("id".to_owned(), super::s(&self.key))])
    }
}

/// `Ok(())` for an applied write. The writes carry no condition of the caller's own, so
/// the fence must never report one as failed.
fn applied<O>(outcome: FencedOutcome<O, Option<HashMap<String, AttributeValue>>>, via: Via) -> Result<()> {
    match outcome {
        FencedOutcome::Applied(_) => Ok(()),
        FencedOutcome::ConditionFailed(item) => {
            panic!("{via:?}: no condition of the caller's own, yet ConditionFailed (item as it was: {item:?})")
        }
    }
}

#[async_trait]
impl FencedResource for FencedItem {
    async fn write(&self, token: FencingToken, mode: FenceMode, value: i64) -> Result<()> {
        let fence = ItemFence::new(MARK, token)?.mode(mode);
        let value = AttributeValue::N(value.to_string());
        match self.via {
            Via::Update => {
                let update = self
                    .fenced
                    .update_item()
                    .table_name(&self.table)
                    .set_key(Some(self.key()))
                    .update_expression("SET #v = :v")
                    .expression_attribute_names("#v", VALUE)
                    .expression_attribute_values(":v", value);
                applied(fence.update(update).await?, self.via)
            }
            Via::Put => {
                let mut item = self.key();
                item.insert(VALUE.to_owned(), value);
                let put = self.fenced.put_item().table_name(&self.table).set_item(Some(item));
                applied(fence.put(put).await?, self.via)
            }
        }
    }

    async fn read(&self) -> Option<(FencingToken, i64)> {
        let item = super::get_item(&self.plain, &self.table, ("id", &self.key)).await?;
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
        self.http.total()
    }
}
