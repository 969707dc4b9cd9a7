//! DynamoDB on moto: `leasehold-dynamodb` (one conditional `UpdateItem` per operation)
//! against the bare conditional `UpdateItem` of a hand-written lock.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType,
};
use leasehold_core::store::CasStore;
use leasehold_dynamodb::DynamoStore;

use super::{
    Backend, CRASHED, Floor, Observed, OpTexts, RawLock, StoreInfo, StoreKind, env, lost, observed, planted, ttl_ms,
};
use crate::Result;

const KEY: &str = "lock_key";

/// moto's DynamoDB, with tables of this run.
pub(crate) struct DynamoBackend {
    endpoint: String,
    lib_table: String,
    raw_table: String,
}

/// A client for `endpoint` (static dummy credentials, the store's request timeout):
/// nothing is read from the environment or instance metadata.
pub(crate) fn client(endpoint: &str) -> Client {
    leasehold_dynamodb::local_client(endpoint)
}

/// The moto version installed in the project's venv.
pub(crate) fn moto_version() -> String {
    let venv = std::env::var("LEASEHOLD_VENV").unwrap_or_else(|_| {
        format!(
            "{}/.cache/leasehold-venv",
            std::env::var("HOME").unwrap_or_else(|_| "/root".into())
        )
    });
    crate::machine::command_output(
        &format!("{venv}/bin/python"),
        &["-c", "import moto; print(moto.__version__)"],
    )
    .map_or_else(|| "moto (version unknown)".into(), |v| format!("moto {v}"))
}

impl DynamoBackend {
    pub(crate) async fn open(tag: &str) -> Result<Self> {
        let endpoint = env("LEASEHOLD_MOTO_ENDPOINT")?;
        let lib_table = format!("lhbench-{tag}");
        let raw_table = format!("lhbench-raw-{tag}");
        let c = client(&endpoint);
        DynamoStore::provision(&c, &leasehold_dynamodb::DynamoConfig::new(lib_table.as_str())?).await?;
        c.create_table()
            .table_name(&raw_table)
            .billing_mode(BillingMode::PayPerRequest)
            .attribute_definitions(
                AttributeDefinition::builder()
                    .attribute_name(KEY)
                    .attribute_type(ScalarAttributeType::S)
                    .build()?,
            )
            .key_schema(
                KeySchemaElement::builder()
                    .attribute_name(KEY)
                    .key_type(KeyType::Hash)
                    .build()?,
            )
            .send()
            .await?;
        Ok(Self {
            endpoint,
            lib_table,
            raw_table,
        })
    }
}

#[async_trait]
impl Backend for DynamoBackend {
    async fn store(&self) -> Result<Arc<dyn CasStore>> {
        Ok(Arc::new(DynamoStore::new(
            client(&self.endpoint),
            leasehold_dynamodb::DynamoConfig::new(self.lib_table.as_str())?,
        )))
    }

    async fn floor(&self) -> Result<Box<dyn Floor>> {
        Ok(Box::new(DynamoFloor {
            client: client(&self.endpoint),
            table: self.raw_table.clone(),
        }))
    }

    async fn describe(&self) -> Result<StoreInfo> {
        Ok(StoreInfo {
            kind: StoreKind::Dynamo,
            version: format!("{} (DynamoDB emulator, Python)", moto_version()),
            settings: vec![
                format!(
                    "moto's server on {}, in memory, run by `scripts/moto_serial.py` (one request at a time: moto \
                     alone applies racing conditional writes non-atomically); aws-sdk-dynamodb 1.x, static credentials",
                    self.endpoint
                ),
                "an emulator's latency is Python's, not DynamoDB's: read the ratios, not the absolute times".into(),
            ],
            library_ops: OpTexts {
                acquire: "one `UpdateItem` (`SET` the record with a fresh random version; condition `version = :seen` after a release, `attribute_not_exists(key)` for a new name; `ReturnValues ALL_NEW`, `ReturnValuesOnConditionCheckFailure ALL_OLD`)".into(),
                renew: "one `UpdateItem` on `version = :v`".into(),
                release: "one `UpdateItem` on `version = :v` (`REMOVE holder`, token kept)".into(),
                takeover: "one `UpdateItem` on the version watched for TTL + margin (the watching read is not timed)".into(),
            },
            floor_ops: OpTexts {
                acquire: "`UpdateItem SET holder, rvn` if `attribute_not_exists(key) OR attribute_not_exists(holder)`".into(),
                renew: "`UpdateItem SET rvn, ttl_ms` if `rvn = :old`".into(),
                release: "`UpdateItem REMOVE holder SET rvn` if `rvn = :old`".into(),
                takeover: "`UpdateItem SET holder, rvn` if `rvn = :seen` (after watching it for the TTL, not timed)".into(),
            },
        })
    }

    async fn cleanup(&self) -> Result<()> {
        // moto keeps tables in memory; deleting them is this run's own business.
        let c = client(&self.endpoint);
        for t in [&self.lib_table, &self.raw_table] {
            c.delete_table().table_name(t).send().await?;
        }
        Ok(())
    }
}

struct DynamoFloor {
    client: Client,
    table: String,
}

fn rvn() -> String {
    format!("{:032x}", rand::random::<u128>())
}

impl DynamoFloor {
    /// One conditional `UpdateItem`; `Ok(None)` when the condition failed.
    async fn update(
        &self,
        key: &str,
        update: &str,
        condition: &str,
        values: HashMap<String, AttributeValue>,
    ) -> Result<Option<()>> {
        let mut req = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(KEY, AttributeValue::S(key.to_owned()))
            .update_expression(update)
            .condition_expression(condition)
            .expression_attribute_names("#k", KEY);
        for (k, v) in values {
            req = req.expression_attribute_values(k, v);
        }
        match req.send().await {
            Ok(_) => Ok(Some(())),
            Err(e) => {
                if e.as_service_error().is_some_and(
                    aws_sdk_dynamodb::operation::update_item::UpdateItemError::is_conditional_check_failed_exception,
                ) {
                    Ok(None)
                } else {
                    Err(e.into())
                }
            }
        }
    }

    /// Writes `holder` with a fresh version if `condition` holds.
    async fn take_if(
        &self,
        key: &str,
        holder: &str,
        ttl: Duration,
        condition: &str,
        seen: Option<&str>,
    ) -> Result<Option<RawLock>> {
        let version = rvn();
        let mut values = HashMap::from([
            (":h".to_owned(), AttributeValue::S(holder.to_owned())),
            (":r".to_owned(), AttributeValue::S(version.clone())),
            (":t".to_owned(), AttributeValue::N(ttl_ms(ttl).to_string())),
        ]);
        if let Some(s) = seen {
            values.insert(":seen".into(), AttributeValue::S(s.to_owned()));
        }
        Ok(self
            .update(key, "SET holder = :h, rvn = :r, ttl_ms = :t", condition, values)
            .await?
            .map(|()| RawLock::new(key, holder, version)))
    }

    /// `update` on a held lock: only if its version is still `lock.version`.
    async fn on_version(
        &self,
        lock: &RawLock,
        update: &str,
        mut values: HashMap<String, AttributeValue>,
    ) -> Result<()> {
        values.insert(":old".to_owned(), AttributeValue::S(lock.version.clone()));
        self.update(&lock.key, update, "attribute_exists(#k) AND rvn = :old", values)
            .await?
            .ok_or_else(|| lost(self.label(), &lock.key))
    }
}

#[async_trait]
impl Floor for DynamoFloor {
    fn label(&self) -> &'static str {
        "dynamo"
    }

    async fn take(&self, key: &str, holder: &str, ttl: Duration) -> Result<Option<RawLock>> {
        self.take_if(
            key,
            holder,
            ttl,
            "attribute_not_exists(#k) OR attribute_not_exists(holder)",
            None,
        )
        .await
    }

    async fn renew(&self, lock: &mut RawLock, ttl: Duration) -> Result<()> {
        let new = rvn();
        let values = HashMap::from([
            (":r".to_owned(), AttributeValue::S(new.clone())),
            (":t".to_owned(), AttributeValue::N(ttl_ms(ttl).to_string())),
        ]);
        self.on_version(lock, "SET rvn = :r, ttl_ms = :t", values).await?;
        lock.version = new;
        Ok(())
    }

    async fn release(&self, lock: RawLock) -> Result<()> {
        let values = HashMap::from([(":r".to_owned(), AttributeValue::S(rvn()))]);
        self.on_version(&lock, "REMOVE holder SET rvn = :r", values).await
    }

    async fn plant(&self, key: &str, ttl: Duration) -> Result<()> {
        let lock = self
            .take_if(key, CRASHED, ttl, "attribute_not_exists(#k)", None)
            .await?;
        planted(self.label(), key, lock)
    }

    async fn observe(&self, key: &str) -> Result<Observed> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(KEY, AttributeValue::S(key.to_owned()))
            .consistent_read(true)
            .send()
            .await?;
        Ok(out
            .item()
            .and_then(|i| i.get("rvn"))
            .and_then(|v| v.as_s().ok())
            .cloned())
    }

    async fn takeover(&self, key: &str, seen: &Observed, holder: &str, ttl: Duration) -> Result<Option<RawLock>> {
        let seen = observed(self.label(), key, seen)?;
        self.take_if(key, holder, ttl, "attribute_exists(#k) AND rvn = :seen", Some(seen))
            .await
    }
}
