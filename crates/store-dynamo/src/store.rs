//! [`DynamoStore`]: the [`CasStore`] over a DynamoDB table.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::client::customize::CustomizableOperation;
use aws_sdk_dynamodb::config::retry::RetryConfig;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, KeySchemaElement, KeyType, ReturnValue,
    ReturnValuesOnConditionCheckFailure, ScalarAttributeType, TableStatus, TimeToLiveSpecification, TimeToLiveStatus,
};
use leasehold_core::{
    Error, LeaseName, NamePrefix, Result,
    store::{
        Capabilities, CasOutcome, CasStore, ClockSource, Current, DeleteOutcome, ExpireOutcome, FinishOnDrop, Grade,
        LeaseRecord, Linearizable, Precondition, Stored, Version, Wait,
    },
};
use tokio::time::Instant;

use crate::config::{ATTR_EXPIRES_AT, ATTR_VERSION, DynamoConfig};
use crate::error::{Conditional, Effect, SentRequests, conditional, map_sdk_error, service_code};
use crate::item::{self, Item, WriteKind};

/// How long [`DynamoStore::provision`] waits for a new table to become `ACTIVE`.
pub const TABLE_ACTIVE_TIMEOUT: Duration = Duration::from_secs(120);

/// The error code of CreateTable on a table that exists.
const RESOURCE_IN_USE: &str = "ResourceInUseException";

/// Lease records in a DynamoDB table: one item per lease name, written with one
/// conditional `UpdateItem` per operation. See the [crate docs](crate) for its setup and
/// cost, and `docs/STORES.md` (section DynamoDB) for the protocol and why it holds.
///
/// Cheap to clone (the SDK client is an `Arc` inside).
#[derive(Debug, Clone)]
pub struct DynamoStore {
    client: Client,
    config: Arc<DynamoConfig>,
    /// One attempt, bounded by the config's request timeout: for each of the store's
    /// own requests.
    overrides: aws_sdk_dynamodb::config::Builder,
}

impl DynamoStore {
    /// Leases in the table `config` names, through the `client` you configured (region,
    /// credentials, endpoint, timeouts). Nothing is sent:
    /// [`DynamoStore::provision`] creates the table, [`DynamoStore::verify`] checks it.
    pub fn new(client: Client, config: DynamoConfig) -> Self {
        let timeouts = leasehold_aws::bounded(client.config().timeout_config(), config.request_timeout());
        let overrides = single_attempt().timeout_config(timeouts);
        Self {
            client,
            config: Arc::new(config),
            overrides,
        }
    }

    /// One attempt of one of the store's requests, bounded by the request timeout, with
    /// `flag` noting whether it was sent.
    fn bounded<T, E, B>(
        &self,
        op: CustomizableOperation<T, E, B>,
        flag: &SentRequests,
    ) -> CustomizableOperation<T, E, B> {
        op.config_override(self.overrides.clone()).interceptor(flag.clone())
    }

    /// The configuration.
    pub fn config(&self) -> &DynamoConfig {
        &self.config
    }

    /// The SDK client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    fn table(&self) -> &str {
        self.config.table().as_str()
    }

    fn key(&self, name: &LeaseName) -> AttributeValue {
        AttributeValue::S(name.as_str().to_owned())
    }

    /// Creates the lease table `config` names if it does not exist (on-demand billing,
    /// the string partition key), waits until it is `ACTIVE`, checks its key schema, and
    /// turns on its Time to Live on [`ATTR_EXPIRES_AT`] (for [`CasStore::expire`]) unless
    /// the table has one already. Idempotent: on an existing table it waits, checks and
    /// turns Time to Live on if it is off.
    ///
    /// Needs `dynamodb:CreateTable` and `dynamodb:DescribeTable`; and
    /// `dynamodb:DescribeTimeToLive` and `dynamodb:UpdateTimeToLive` for the Time to
    /// Live, which is left off, with a warning, without them (done slot records are then
    /// purged by the scheduler alone).
    ///
    /// # Errors
    /// [`Error::Misconfigured`] if the table exists with another key schema or the
    /// caller lacks permission; [`Error::Unavailable`] if it is not `ACTIVE` within
    /// [`TABLE_ACTIVE_TIMEOUT`]; store errors otherwise.
    pub async fn provision(client: &Client, config: &DynamoConfig) -> Result<()> {
        Self::new(client.clone(), config.clone()).create_table().await
    }

    async fn create_table(&self) -> Result<()> {
        let key = self.config.key();
        let build = |e: aws_sdk_dynamodb::error::BuildError| Error::invalid("table definition", e.to_string());
        let flag = SentRequests::default();
        let created = self
            .client
            .create_table()
            .table_name(self.table())
            .billing_mode(BillingMode::PayPerRequest)
            .attribute_definitions(
                AttributeDefinition::builder()
                    .attribute_name(key)
                    .attribute_type(ScalarAttributeType::S)
                    .build()
                    .map_err(build)?,
            )
            .key_schema(
                KeySchemaElement::builder()
                    .attribute_name(key)
                    .key_type(KeyType::Hash)
                    .build()
                    .map_err(build)?,
            )
            .customize()
            .interceptor(flag.clone())
            .send()
            .await;
        match created {
            Ok(_) => tracing::info!(table = self.table(), "created lease table"),
            Err(e) if service_code(&e) == Some(RESOURCE_IN_USE) => {}
            Err(e) => {
                return Err(map_sdk_error(
                    "CreateTable",
                    self.table(),
                    Effect::Write,
                    flag.was_sent(),
                    e,
                ));
            }
        }
        let deadline = Instant::now() + TABLE_ACTIVE_TIMEOUT;
        loop {
            match self.verify().await {
                // Right after CreateTable, DescribeTable may still not find the table.
                Err(Error::Unavailable { .. } | Error::NotProvisioned { .. }) if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
                Ok(()) => {
                    if let Err(e) = self.enable_time_to_live().await {
                        tracing::warn!(table = self.table(), error = %e, "could not turn on the table's Time to Live");
                    }
                    return Ok(());
                }
                other => return other,
            }
        }
    }

    /// Turns on the table's Time to Live on [`ATTR_EXPIRES_AT`], unless it is on
    /// already (DynamoDB refuses to turn it on twice, and allows one TTL attribute a
    /// table).
    async fn enable_time_to_live(&self) -> Result<()> {
        let flag = SentRequests::default();
        let described = self
            .client
            .describe_time_to_live()
            .table_name(self.table())
            .customize()
            .interceptor(flag.clone())
            .send()
            .await
            .map_err(|e| map_sdk_error("DescribeTimeToLive", self.table(), Effect::Read, flag.was_sent(), e))?;
        if let Some(d) = described.time_to_live_description() {
            let on = matches!(
                d.time_to_live_status(),
                Some(TimeToLiveStatus::Enabled | TimeToLiveStatus::Enabling)
            );
            match d.attribute_name() {
                Some(ATTR_EXPIRES_AT) if on => return Ok(()),
                Some(other) if on => {
                    tracing::warn!(
                        table = self.table(),
                        attribute = other,
                        "the table's Time to Live is on another attribute: done slot records are purged, not expired"
                    );
                    return Ok(());
                }
                _ => {}
            }
        }
        let build = |e: aws_sdk_dynamodb::error::BuildError| Error::invalid("time to live", e.to_string());
        let spec = TimeToLiveSpecification::builder()
            .enabled(true)
            .attribute_name(ATTR_EXPIRES_AT)
            .build()
            .map_err(build)?;
        let flag = SentRequests::default();
        self.client
            .update_time_to_live()
            .table_name(self.table())
            .time_to_live_specification(spec)
            .customize()
            .interceptor(flag.clone())
            .send()
            .await
            .map_err(|e| map_sdk_error("UpdateTimeToLive", self.table(), Effect::Write, flag.was_sent(), e))?;
        tracing::info!(
            table = self.table(),
            attribute = ATTR_EXPIRES_AT,
            "enabled the table's Time to Live"
        );
        Ok(())
    }

    /// Checks that the table exists, is usable, and has the expected key: exactly one
    /// partition key, named as configured, of type string.
    ///
    /// Needs `dynamodb:DescribeTable`.
    ///
    /// # Errors
    /// [`Error::NotProvisioned`] for a missing table; [`Error::Misconfigured`] for a
    /// wrong key schema or missing permission; [`Error::Unavailable`] while the table is still being created.
    pub async fn verify(&self) -> Result<()> {
        let flag = SentRequests::default();
        let out = self
            .client
            .describe_table()
            .table_name(self.table())
            .customize()
            .interceptor(flag.clone())
            .send()
            .await
            .map_err(|e| map_sdk_error("DescribeTable", self.table(), Effect::Read, flag.was_sent(), e))?;
        let wrong = |why: String| Error::Misconfigured {
            message: format!("table {}: {why}", self.table()),
            source: None,
        };
        let Some(t) = out.table() else {
            return Err(wrong("DescribeTable returned no description".into()));
        };
        let key = self.config.key();
        let schema = t.key_schema();
        let hash_only =
            schema.len() == 1 && schema[0].attribute_name() == key && schema[0].key_type() == &KeyType::Hash;
        if !hash_only {
            return Err(wrong(format!(
                "key schema {schema:?} is not one partition key named {key:?}"
            )));
        }
        let string_key = t
            .attribute_definitions()
            .iter()
            .any(|d| d.attribute_name() == key && d.attribute_type() == &ScalarAttributeType::S);
        if !string_key {
            return Err(wrong(format!("partition key {key:?} is not a string (S) attribute")));
        }
        match t.table_status() {
            Some(TableStatus::Active | TableStatus::Updating) | None => Ok(()),
            Some(TableStatus::Creating) => Err(Error::Unavailable {
                message: format!("table {} is still being created", self.table()),
                source: None,
            }),
            Some(other) => Err(wrong(format!("table status is {other:?}"))),
        }
    }

    fn current_from(&self, expect: Option<&Precondition>, name: &LeaseName, old: Option<&Item>) -> Result<Current> {
        if !self.config.returns_current() {
            return Ok(Current::Unknown);
        }
        Ok(match (old, expect) {
            (Some(item), _) => Current::Present(item::decode(self.config.key(), name, item)?),
            // An `Absent` or `Vacant` write fails only on an existing item: the server did
            // not return it (an emulator without ReturnValuesOnConditionCheckFailure).
            (None, Some(Precondition::Absent | Precondition::Vacant)) => Current::Unknown,
            (None, _) => Current::Absent,
        })
    }

    /// One lease write: the UpdateItem of `record` if `expect` holds, as `kind` says.
    async fn update(
        &self,
        name: &LeaseName,
        expect: &Precondition,
        record: &LeaseRecord,
        kind: WriteKind,
    ) -> Result<CasOutcome> {
        let version = item::new_version();
        let u = item::lease_update(self.config.key(), expect, record, &version, kind)?;
        let vacant = *expect == Precondition::Vacant;
        let flag = SentRequests::default();
        let op = self
            .client
            .update_item()
            .table_name(self.table())
            .key(self.config.key(), self.key(name))
            .update_expression(u.update_expression)
            .condition_expression(u.condition_expression)
            .set_expression_attribute_names(Some(u.names))
            .set_expression_attribute_values(Some(u.values))
            // A claim of a vacant item answers the item it replaced, which only the store
            // can still check (see `claimed`).
            .return_values(if vacant {
                ReturnValue::AllOld
            } else {
                ReturnValue::AllNew
            })
            .set_return_values_on_condition_check_failure(self.on_conflict())
            .customize();
        let sent = self.bounded(op, &flag).send().await;
        match conditional("UpdateItem", self.table(), flag.was_sent(), sent)? {
            Conditional::Applied(out) if vacant => self.claimed(name, record, &version, out.attributes()).await,
            Conditional::Applied(out) => {
                let stored = match out.attributes() {
                    Some(item) => item::decode(self.config.key(), name, item)?,
                    None => {
                        return Err(Error::corrupt(
                            name.as_str(),
                            "UpdateItem with ReturnValues=ALL_NEW returned no item",
                        ));
                    }
                };
                if stored.version.as_str() != version || stored.record.token != record.token {
                    return Err(Error::corrupt(
                        name.as_str(),
                        "UpdateItem returned an item other than the one written",
                    ));
                }
                Ok(CasOutcome::Written(stored))
            }
            Conditional::Failed(old) => {
                let current = self.current_from(Some(expect), name, old.as_ref())?;
                tracing::debug!(lease = %name, ?expect, "lease write conflicted");
                Ok(CasOutcome::Conflict(current))
            }
        }
    }

    /// What a claim of a vacant item (written as `version`) granted, from the item it
    /// replaced (`old`; none: there was none). The condition checked every attribute it
    /// can; an item that `decode` still refuses (an attribute this crate never writes, a
    /// fractional token) is put back as it was, on the claim's version, and reported.
    async fn claimed(
        &self,
        name: &LeaseName,
        record: &LeaseRecord,
        version: &str,
        old: Option<&Item>,
    ) -> Result<CasOutcome> {
        let vacated = match old.map(|item| item::decode(self.config.key(), name, item)).transpose() {
            Ok(None) => None,
            Ok(Some(prev)) if prev.record.is_vacant() => Some(prev.record.token),
            // The condition admits no held item; should a server apply it anyway, the
            // holder's item is put back too.
            Ok(Some(_)) => {
                return Err(self
                    .put_back(
                        name,
                        old,
                        version,
                        Error::corrupt(name.as_str(), "UpdateItem on a vacant item replaced a held one"),
                    )
                    .await);
            }
            Err(corrupt) => return Err(self.put_back(name, old, version, corrupt).await),
        };
        let token = vacated.map_or(leasehold_core::FencingToken::FIRST, leasehold_core::FencingToken::next);
        let mut granted = record.clone();
        granted.token = token;
        Ok(CasOutcome::Written(Stored::new(granted, Version::new(version))))
    }

    /// Puts `old` back over the item a vacant claim wrote as `version` (one `PutItem`
    /// conditional on that version) and answers `why`; if that fails, `why` says that the
    /// item was left claimed.
    async fn put_back(&self, name: &LeaseName, old: Option<&Item>, version: &str, why: Error) -> Error {
        let flag = SentRequests::default();
        let op = self
            .client
            .put_item()
            .table_name(self.table())
            .set_item(old.cloned())
            .condition_expression("#v = :v")
            .expression_attribute_names("#v", ATTR_VERSION)
            .expression_attribute_values(":v", AttributeValue::S(version.to_owned()))
            .customize();
        let sent = self.bounded(op, &flag).send().await;
        let failed = match conditional("PutItem", self.table(), flag.was_sent(), sent) {
            Ok(Conditional::Applied(_)) => return why,
            Ok(Conditional::Failed(_)) => "the item changed again meanwhile".to_owned(),
            Err(e) => e.to_string(),
        };
        let why = match why {
            Error::CorruptRecord { reason, .. } => reason,
            other => other.to_string(),
        };
        Error::corrupt(
            name.as_str(),
            format!(
                "{why}; the claim written over it (version {version}) could not be undone ({failed}): \
                 the item is left claimed, with its token raised, until an operator repairs it"
            ),
        )
    }

    /// The names of the items under `prefix`: a strongly consistent `Scan` projecting
    /// the key only, filtered by `begins_with` on it (no filter for the empty prefix),
    /// one request per page (DynamoDB's pages are 1 MB of items read), each page started
    /// at the key the last one ended with. An item whose key is no valid lease name is
    /// not listed (nothing can read it as a lease); any other item is, as `read` reports
    /// it (a record or [`Error::CorruptRecord`]).
    async fn scan_names(&self, prefix: &NamePrefix) -> Result<Vec<LeaseName>> {
        let key = self.config.key();
        let mut names = Vec::new();
        let mut start: Option<Item> = None;
        loop {
            let flag = SentRequests::default();
            let mut scan = self
                .client
                .scan()
                .table_name(self.table())
                .consistent_read(true)
                .projection_expression("#k")
                .expression_attribute_names("#k", key)
                .set_exclusive_start_key(start.take());
            if !prefix.as_str().is_empty() {
                scan = scan
                    .filter_expression("begins_with(#k, :prefix)")
                    .expression_attribute_values(":prefix", AttributeValue::S(prefix.as_str().to_owned()));
            }
            let out = self
                .bounded(scan.customize(), &flag)
                .send()
                .await
                .map_err(|e| map_sdk_error("Scan", self.table(), Effect::Read, flag.was_sent(), e))?;
            names.extend(out.items().iter().filter_map(|item| match item.get(key) {
                Some(AttributeValue::S(k)) => LeaseName::new(k).ok().filter(|n| prefix.matches(n)),
                _ => None,
            }));
            match out.last_evaluated_key() {
                Some(last) if !last.is_empty() => start = Some(last.clone()),
                _ => break,
            }
        }
        names.sort_unstable();
        names.dedup();
        Ok(names)
    }

    fn on_conflict(&self) -> Option<ReturnValuesOnConditionCheckFailure> {
        self.config
            .returns_current()
            .then_some(ReturnValuesOnConditionCheckFailure::AllOld)
    }
}

/// Sends each request once: the SDK's own retries would turn "sent, outcome unknown"
/// into a second attempt whose failure hides the first. The lease client retries
/// instead, knowing what a retry means.
fn single_attempt() -> aws_sdk_dynamodb::config::Builder {
    aws_sdk_dynamodb::config::Builder::default().retry_config(RetryConfig::disabled())
}

/// One attempt of a request (no SDK retry: the client decides), with `flag` noting
/// whether it was sent.
pub(crate) fn once<T, E, B>(op: CustomizableOperation<T, E, B>, flag: &SentRequests) -> CustomizableOperation<T, E, B> {
    op.config_override(single_attempt()).interceptor(flag.clone())
}

#[async_trait]
impl CasStore for DynamoStore {
    fn capabilities(&self) -> Capabilities {
        Capabilities::new(ClockSource::Observation, Grade::Linearizable)
            .with_conflict_returns_current(self.config.returns_current())
            .with_claims_vacant(true)
    }

    async fn read(&self, name: &LeaseName) -> Result<Option<Stored>> {
        let flag = SentRequests::default();
        let op = self
            .client
            .get_item()
            .table_name(self.table())
            .key(self.config.key(), self.key(name))
            .consistent_read(true)
            .customize();
        let out = self
            .bounded(op, &flag)
            .send()
            .await
            .map_err(|e| map_sdk_error("GetItem", self.table(), Effect::Read, flag.was_sent(), e))?;
        out.item()
            .map(|item| item::decode(self.config.key(), name, item))
            .transpose()
    }

    async fn write(&self, name: &LeaseName, expect: &Precondition, record: &LeaseRecord) -> Result<CasOutcome> {
        if *expect == Precondition::Vacant {
            // A claim that replaced an item `decode` refuses puts it back in a second
            // request: once sent, it finishes even if the caller goes away.
            let (store, name, record) = (self.clone(), name.clone(), record.clone());
            return FinishOnDrop::new(async move {
                store
                    .update(&name, &Precondition::Vacant, &record, WriteKind::Any)
                    .await
            })
            .await;
        }
        self.update(name, expect, record, WriteKind::Any).await
    }

    /// A renewal is the version-guarded write that also requires the item to show the
    /// same holder and token as `record`: another program that changed either without
    /// the version (an operator's `update-item`) is never written over.
    async fn renew(&self, name: &LeaseName, version: &Version, record: &LeaseRecord) -> Result<CasOutcome> {
        self.update(
            name,
            &Precondition::Version(version.clone()),
            record,
            WriteKind::Renewal,
        )
        .await
    }

    /// One conditional `UpdateItem` that leaves the item vacant only while it shows
    /// this holder with this token: an item another program changed (its version
    /// untouched) stays as it left it.
    async fn release(&self, name: &LeaseName, version: &Version, held: &LeaseRecord) -> Result<CasOutcome> {
        self.update(name, &Precondition::Version(version.clone()), held, WriteKind::Release)
            .await
    }

    /// A paginated, strongly consistent `Scan` of the table (the key only, filtered by
    /// `begins_with`): one request per 1 MB of items in the table, whatever the prefix.
    /// DynamoDB cannot push: sleeps until the caller's time to look again or
    /// [`DynamoConfig::poll_interval`], whichever is first.
    async fn wait_for_change(&self, _name: &LeaseName, _seen: Option<&Version>, wait: Wait) -> Result<()> {
        leasehold_aws::poll(wait, self.config.poll_interval()).await;
        Ok(())
    }

    async fn list(&self, prefix: &NamePrefix) -> Result<Vec<LeaseName>> {
        self.scan_names(prefix).await
    }

    /// Native expiry: one UpdateItem setting [`ATTR_EXPIRES_AT`] to `after` from now
    /// (Unix seconds, rounded up) if the item is at `version`. DynamoDB's Time to Live
    /// deletes the item some time after that (typically within days), so the
    /// scheduler's purge usually comes first; the item is still a valid record until
    /// then.
    async fn expire(&self, name: &LeaseName, version: &Version, after: Duration) -> Result<ExpireOutcome> {
        let at = SystemTime::now()
            .checked_add(after)
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map_or(u64::MAX, |d| d.as_secs().saturating_add(1));
        let flag = SentRequests::default();
        let op = self
            .client
            .update_item()
            .table_name(self.table())
            .key(self.config.key(), self.key(name))
            .update_expression("SET #x = :x")
            .condition_expression("#v = :expect")
            .expression_attribute_names("#v", ATTR_VERSION)
            .expression_attribute_names("#x", ATTR_EXPIRES_AT)
            .expression_attribute_values(":expect", AttributeValue::S(version.as_str().to_owned()))
            .expression_attribute_values(":x", AttributeValue::N(at.to_string()))
            .set_return_values_on_condition_check_failure(self.on_conflict())
            .customize();
        let sent = self.bounded(op, &flag).send().await;
        match conditional("UpdateItem", self.table(), flag.was_sent(), sent)? {
            Conditional::Applied(_) => Ok(ExpireOutcome::Scheduled),
            Conditional::Failed(old) => Ok(ExpireOutcome::Conflict(self.current_from(None, name, old.as_ref())?)),
        }
    }

    async fn delete(&self, name: &LeaseName, version: &Version) -> Result<DeleteOutcome> {
        let flag = SentRequests::default();
        let op = self
            .client
            .delete_item()
            .table_name(self.table())
            .key(self.config.key(), self.key(name))
            .condition_expression("#v = :expect")
            .expression_attribute_names("#v", ATTR_VERSION)
            .expression_attribute_values(":expect", AttributeValue::S(version.as_str().to_owned()))
            .set_return_values_on_condition_check_failure(self.on_conflict())
            .customize();
        let sent = self.bounded(op, &flag).send().await;
        match conditional("DeleteItem", self.table(), flag.was_sent(), sent)? {
            Conditional::Applied(_) => Ok(DeleteOutcome::Deleted),
            Conditional::Failed(old) => Ok(DeleteOutcome::Conflict(self.current_from(None, name, old.as_ref())?)),
        }
    }
}

impl Linearizable for DynamoStore {}

#[cfg(test)]
fn _object_safe(_: Arc<dyn CasStore>) {}
