//! # leasehold-dynamodb: leases and fencing tokens on DynamoDB
//!
//! [`DynamoStore`] keeps one item per lease name in a DynamoDB table and implements
//! [`leasehold_core::store::CasStore`] with **one conditional `UpdateItem` per operation**: acquire,
//! renewal, takeover and release are each a single request that checks the item's
//! version, writes the record, and hands back either the new item or, on conflict,
//! the current one. [`ItemFence`] adds the fencing guard to your own `PutItem` /
//! `UpdateItem`, so a holder that froze past its lease cannot write after a successor
//! was granted; it keeps the fence contract of [`leasehold_core::fence`] (its outcome is
//! the core's [`FencedOutcome`](leasehold_core::fence::FencedOutcome)).
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use aws_sdk_dynamodb::types::AttributeValue;
//! use leasehold_core::LeaseClient;
//! use leasehold_core::fence::FencedOutcome;
//! use leasehold_dynamodb::{DynamoConfig, DynamoStore, ItemFence};
//!
//! // Your region, credentials, endpoint and timeouts.
//! let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
//! let dynamo = aws_sdk_dynamodb::Client::new(&sdk);
//!
//! let config = DynamoConfig::new("leasehold-leases")?;
//! DynamoStore::provision(&dynamo, &config).await?; // idempotent; or your IaC, then verify()
//! let store = DynamoStore::new(dynamo.clone(), config);
//!
//! let leases = LeaseClient::new(store);
//! let lease = leases.acquire("payouts:2026-11-30", Duration::from_secs(10)).await?;
//!
//! // Every protected write carries the token; the item refuses older ones.
//! let fence = ItemFence::new("last_token", lease.token())?;
//! let put = dynamo
//!     .put_item()
//!     .table_name("payouts")
//!     .item("day", AttributeValue::S("2026-11-30".into()))
//!     .item("state", AttributeValue::S("sent".into()));
//! match fence.put(put).await {
//!     Ok(FencedOutcome::Applied(_)) => {}
//!     Ok(FencedOutcome::ConditionFailed(_)) => unreachable!("no condition of our own"),
//!     Err(leasehold_core::Error::FenceRejected { .. }) => return Ok(()), // lost the lease: stop
//!     Err(e) => return Err(e.into()),
//! }
//! lease.release().await?;
//! # Ok(()) }
//! ```
//!
//! ## Guarantee: linearizable (correctness locks)
//! DynamoDB conditional writes are evaluated and applied atomically on the item's
//! leader replica and are strongly consistent, so the store is
//! [`leasehold_core::store::Grade::Linearizable`] and implements [`leasehold_core::store::Linearizable`]:
//! fit for leases that guard money, with fencing on the resource. Reads use
//! `ConsistentRead = true` (see below).
//!
//! ## Clock model: expiry by observation
//! DynamoDB has no server clock a client may compare with (a condition cannot say
//! "older than now on the server"), so the store reports
//! [`leasehold_core::store::ClockSource::Observation`]: a challenger takes over only after it has
//! seen the *same item version* unchanged for the record's TTL plus the safety margin,
//! measured on its own monotonic clock (the scheme of the AWS DynamoDB Lock Client).
//! No wall clock is compared, so clocks that disagree by any amount cannot cause an
//! early takeover; only bounded clock *rate* drift is assumed (the margin, 5% of the
//! TTL by default). The cost is that a challenger that has just arrived waits a full
//! TTL before taking over a dead holder's lease.
//!
//! Callers that try once (a scheduled job started by cron on several machines) can opt
//! into [`leasehold_core::ClientConfig::skew_bound`] with an explicit
//! [`leasehold_core::SkewBound`]: a challenger then also takes over when the holder's
//! recorded wall-clock expiry plus the bound is past on its own wall clock, without
//! watching first. The bound must really hold between all participants' clocks: if
//! clocks disagree by more, two holders can overlap (the fence still protects the
//! resource). [`Precondition::Claimable`](leasehold_core::store::Precondition::Claimable), which
//! needs a store clock, is refused with [`leasehold_core::Error::InvalidInput`].
//!
//! ## The protocol
//! A lease item (partition key [`DEFAULT_KEY_ATTRIBUTE`], configurable) holds
//! [`ATTR_HOLDER`] (absent while vacant), [`ATTR_FENCE`] (the token), [`ATTR_TTL_MS`],
//! [`ATTR_WALL_EXPIRES_AT_MS`], [`ATTR_VERSION`] and [`ATTR_FORMAT`]. Every write is
//!
//! ```text
//! UpdateItem
//!   ConditionExpression   attribute_not_exists(<key>)        -- first grant of a name
//!                      or version = :version_this_client_read -- renew, release, takeover
//!   UpdateExpression      SET fence = :token, ttl_ms = .., version = :fresh_random, ..
//!                         [REMOVE holder]                    -- release: vacant, token kept
//!   ReturnValues          ALL_NEW                            -- the granted record and token
//!   ReturnValuesOnConditionCheckFailure ALL_OLD              -- on conflict, the current item
//! ```
//!
//! - **The token is written as given, not with `ADD fence :one`.** The lease client
//!   computes it from the record at the exact version the condition names (the same
//!   token on renewal, the next one on a change of holder), so `SET fence = :token`
//!   under `version = :seen` is as atomic as server arithmetic: the write applies only
//!   if the stored token is the one the client incremented. Writing the record verbatim
//!   keeps one code path for every operation and the exact semantics of
//!   [`leasehold_core::MemoryStore`], and no read is needed to decide whether to `ADD`.
//! - **The version** is 128 random bits, fresh on every write, so it is never reused
//!   for a name, even after an item is deleted and created again (a counter would
//!   restart).
//! - **A conflict costs no extra round trip**: `ReturnValuesOnConditionCheckFailure`
//!   returns the current item with the `ConditionalCheckFailedException`, which the
//!   store reports as `Conflict(Current::Present(..))`
//!   ([`leasehold_core::store::Capabilities::conflict_returns_current`]). For an emulator that does
//!   not support the parameter (dynalite), set
//!   [`DynamoConfig::conflict_returns_current`]`(false)`: conflicts then report
//!   `Current::Unknown` and the lease client falls back to a read.
//! - **Reads are `GetItem` with `ConsistentRead = true`.** The store claims
//!   linearizability for every method, so a read must return the last acknowledged
//!   write (the conformance suite checks read-after-write). Grants never rest on a read
//!   alone (each is a conditional write re-checked on the leader), but an eventually
//!   consistent read can return a version up to about a second old: a challenger would
//!   start its observation window on a version already replaced (and wait a TTL for
//!   nothing), and an operator would see a holder that is gone. A strongly consistent
//!   read costs one read unit instead of half of one.
//! - **Each request is sent once.** The store overrides the SDK's retry policy per
//!   request (`RetryConfig::disabled()`), so one trait call is one HTTP request and an
//!   ambiguous failure reaches the lease client as `Indeterminate` instead of being
//!   retried into a second attempt that hides the first; the lease client retries,
//!   knowing what a retry means.
//! - A record that does not decode (missing or mistyped attribute, unknown format,
//!   token 0) is [`leasehold_core::Error::CorruptRecord`], never a free lease; a conflict
//!   whose returned item does not decode is the same error.
//!
//! ## Errors
//! See [`error`] for the full table. In short: a conditional check that
//! fails is `Ok(Conflict)`; throttling (DynamoDB's throttling codes, 429) is
//! `Unavailable` (not applied, retry with backoff); a timeout after sending, a lost
//! connection, an unreadable reply and a 500 or 503 on a write are `Indeterminate` (may
//! have applied: DynamoDB's request router can answer 500 after the storage node
//! applied the write, and a proxy can answer 503 after forwarding it); a connection that could not
//! be made is `Unavailable`; a missing table, access denied, bad credentials and
//! validation errors are `Misconfigured`. Configure the client with a
//! `connect_timeout` shorter than its `operation_attempt_timeout`, so an unreachable
//! endpoint is reported as `Unavailable` (never sent) rather than as a timeout.
//!
//! ## Cost per operation
//! | operation | requests | capacity (items under 1 KB) |
//! | --- | --- | --- |
//! | acquire a free or released lease | 1 `UpdateItem` | 1 write unit |
//! | renewal (every TTL/3) | 1 `UpdateItem` | 1 write unit |
//! | release | 1 `UpdateItem` | 1 write unit |
//! | takeover of an expired lease | 1 `GetItem` + 1 `UpdateItem` (the read starts the observation window) | 1 read unit + 1 write unit |
//! | a refused attempt | 1 `GetItem`, or 1 failed `UpdateItem` | a failed conditional write still costs 1 write unit |
//!
//! A lease held for a day with a 30 s TTL costs 3 renewals per 30 s = 8,640 write
//! units a day; with a 3 s TTL, 86,400.
//!
//! ## The per-partition write limit and the shortest sensible TTL
//! An item lives in one partition, and a partition accepts at most 1,000 write units
//! per second, failed conditional writes included. One lease name therefore takes at
//! most about 1,000 writes per second from its holder and all its challengers together;
//! beyond that DynamoDB throttles (`Unavailable`), and a holder whose renewals are
//! throttled until its deadline loses the lease. Renewals alone are far below that
//! (3 per TTL: 30/s even at a 100 ms TTL), so the practical floor on the TTL is latency,
//! not throughput: a renewal must complete well inside TTL/3, and a TTL shorter than
//! about ten times your p99 request latency (a few ms in-region, more across regions or
//! under throttling) turns latency spikes into lost leases. A TTL of 2-30 s is
//! sensible; shorter TTLs (down to a few hundred ms, as the tests use against a local
//! emulator) work only with low, steady latency. Keep many challengers from hammering
//! one hot name: they back off until the holder's lease can have run out.
//!
//! ## Setup
//! - **Table**: one string partition key (default name [`DEFAULT_KEY_ATTRIBUTE`]), no
//!   sort key, on-demand billing: [`DynamoStore::provision`] creates it idempotently
//!   and waits until it is active; [`DynamoStore::verify`] checks one you created
//!   yourself. Several applications may share one table (lease names are the keys).
//! - **Never enable DynamoDB TTL (item expiry) on the lease table, and do not delete
//!   lease items**: a released lease stays as a vacant item that keeps its token, and
//!   the next grant continues from it. An item that disappears restarts its token
//!   sequence at 1, and every resource fenced by it would refuse the new holder.
//! - **IAM actions** on the lease table: `dynamodb:GetItem`, `dynamodb:UpdateItem`
//!   (every lease operation); `dynamodb:DeleteItem` (only for administrative
//!   [`leasehold_core::store::CasStore::delete`]); `dynamodb:CreateTable` and
//!   `dynamodb:DescribeTable` (only for [`DynamoStore::provision`] /
//!   [`DynamoStore::verify`]). On the protected tables: `dynamodb:PutItem` and /
//!   or `dynamodb:UpdateItem` for the fenced writes.
//! - **Client**: any `aws_sdk_dynamodb::Client`. Set explicit timeouts (connect,
//!   operation attempt) well below the TTL: a renewal that hangs for longer than the TTL
//!   is a lost lease whatever happens.
//!
//! ## Testing against moto, and where it differs from DynamoDB
//! The crate's tests run the leasehold-core conformance suite (the lease cases on the
//! store, the fence cases on [`ItemFence`]'s `PutItem` and `UpdateItem`), a frozen-holder
//! test with real processes, a skewed-clock test and request counts against `moto_server`
//! (PyPI `moto[server]`, started by `scripts/stores.sh start moto`) with dummy
//! credentials and a custom endpoint. moto (5.2) evaluates everything the store uses
//! as DynamoDB does: condition and update expressions, `ReturnValues = ALL_NEW`,
//! `ReturnValuesOnConditionCheckFailure = ALL_OLD` (on `UpdateItem`, `PutItem` and
//! `DeleteItem`), `ConditionalCheckFailedException`, and `ResourceNotFoundException`
//! for a missing table. Where it differs:
//! - **concurrent writes to one item are not atomic**: moto checks a condition and
//!   then applies the write without a lock, and `moto_server` serves requests on
//!   threads, so two concurrent conditional writes to one item can both pass (observed
//!   here: 2 of 8 concurrent creates of one name won; 48 of 51 compare-and-swap
//!   increments landed). DynamoDB serializes the writes to an item on its leader
//!   replica. The tests therefore reach moto through a forwarder that passes it one
//!   request at a time (`tests/common/serial.rs`; bytes unchanged, nothing emulated);
//!   with it the conformance suite's races have exactly one winner;
//! - it has no partitions, no capacity and no throttling: the per-partition limit and
//!   `ProvisionedThroughputExceededException` are never seen (the error mapping is
//!   tested against a scripted HTTP responder instead);
//! - it has one replica: `ConsistentRead` changes nothing there, so a test cannot show
//!   what an eventually consistent read would break;
//! - it does not check signatures or permissions (any credentials work; AccessDenied is
//!   never returned);
//! - a comparison between different types in a condition (a string fence attribute
//!   against a number token) is an HTTP 500 on moto where DynamoDB evaluates it to false
//!   (`ConditionalCheckFailedException`): with a corrupt fence attribute a fenced write
//!   is `Indeterminate` on moto and `Misconfigured` on DynamoDB;
//! - tables are `ACTIVE` as soon as they are created (DynamoDB takes seconds, which
//!   [`DynamoStore::provision`] waits for).
#![cfg_attr(docsrs, feature(doc_cfg))]

mod config;
pub mod error;
pub mod fence;
mod item;
mod store;

pub use config::{
    ATTR_FENCE, ATTR_FORMAT, ATTR_HOLDER, ATTR_TTL_MS, ATTR_VERSION, ATTR_WALL_EXPIRES_AT_MS, DEFAULT_KEY_ATTRIBUTE,
    DynamoConfig, ITEM_FORMAT, LEASE_ATTRIBUTES, TableName,
};
pub use fence::{ItemFence, NAME_PLACEHOLDER, TOKEN_PLACEHOLDER};
pub use store::{DynamoStore, TABLE_ACTIVE_TIMEOUT};

/// The client crate this store is built on, re-exported so that your client is built
/// with the very version this crate links.
pub use aws_sdk_dynamodb;
