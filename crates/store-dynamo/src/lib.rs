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
//! // Your region, credentials, endpoint and timeouts (for DynamoDB Local or moto:
//! // `leasehold_dynamodb::local_client("http://127.0.0.1:8000")`).
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
//! ## Guarantee and clock
//! DynamoDB conditional writes are atomic and strongly consistent, and reads use
//! `ConsistentRead = true`, so the store is [`leasehold_core::store::Grade::Linearizable`]
//! and implements [`leasehold_core::store::Linearizable`]: fit for leases that guard money,
//! with fencing on the resource. DynamoDB has no server clock a client may compare with, so
//! expiry is judged by observation ([`leasehold_core::store::ClockSource::Observation`]): a
//! challenger takes over only after it has seen the *same item version* unchanged for the
//! record's TTL plus the safety margin (5% of the TTL by default), on its own monotonic
//! clock. A challenger that has just arrived therefore waits a full TTL before taking over
//! a dead holder's lease.
//!
//! ## Setup
//! - **Table**: one string partition key (default name [`DEFAULT_KEY_ATTRIBUTE`]), no
//!   sort key, on-demand billing: [`DynamoStore::provision`] creates it idempotently
//!   and waits until it is active; [`DynamoStore::verify`] checks one you created
//!   yourself. Several applications may share one table (lease names are the keys).
//! - **Do not delete lease items by hand, and give the table's Time to Live no attribute
//!   but `expires_at`**: a released lease stays as a vacant item that keeps its token,
//!   and the next grant continues from it. An item that disappears restarts its token
//!   sequence at 1, and every resource fenced by it would refuse the new holder. The
//!   store removes items only where nobody needs their tokens again: a scheduled job's
//!   aged slot records, by a conditional delete ([`leasehold_core::store::CasStore::purge`])
//!   or by Time to Live on `expires_at`, which [`DynamoStore::provision`] turns on and
//!   which only [`leasehold_core::store::CasStore::expire`] sets (docs/STORES.md, "Native
//!   expiry on DynamoDB").
//! - **IAM actions** on the lease table: `dynamodb:GetItem`, `dynamodb:UpdateItem`
//!   (every lease operation, and `expire`); `dynamodb:DeleteItem` (for
//!   [`leasehold_core::store::CasStore::delete`] and the scheduled jobs' purge);
//!   `dynamodb:Scan` (only for [`leasehold_core::store::CasStore::list`]);
//!   `dynamodb:CreateTable` and `dynamodb:DescribeTable` (only for
//!   [`DynamoStore::provision`] / [`DynamoStore::verify`]), `dynamodb:DescribeTimeToLive`
//!   and `dynamodb:UpdateTimeToLive` (only for `provision`; without them it leaves Time
//!   to Live off with a warning). On the protected tables: `dynamodb:PutItem` and / or
//!   `dynamodb:UpdateItem` for the fenced writes.
//! - **Client**: any `aws_sdk_dynamodb::Client`. The store bounds each of its own
//!   requests by [`DynamoConfig::with_request_timeout`] (default
//!   [`DEFAULT_REQUEST_TIMEOUT`], 3 s), in place of the client's operation and attempt
//!   timeouts: keep it well below the TTL, since a renewal that hangs for longer than
//!   the TTL is a lost lease whatever happens. Set the client's `connect_timeout`
//!   shorter than that bound, so an unreachable endpoint is reported as `Unavailable`
//!   (never sent) rather than as a timeout. The store sends each request once (the SDK's
//!   retries are off per request); the lease client does the retrying. Fenced writes
//!   ([`ItemFence`]) are the caller's own requests, bounded by the caller's client.
//! - **Waiting**: DynamoDB cannot push a release, so a waiter in `acquire` looks again at
//!   least every [`DynamoConfig::with_poll_interval`] (default [`DEFAULT_POLL_INTERVAL`],
//!   1 s): a release is seen within it, at one request per waiter per interval while
//!   the lease is held.
//! - **The item**: a lease item (partition key [`DEFAULT_KEY_ATTRIBUTE`], configurable)
//!   holds [`ATTR_HOLDER`] (absent while vacant), [`ATTR_FENCE`] (the token),
//!   [`ATTR_TTL_MS`], [`ATTR_WALL_EXPIRES_AT_MS`], [`ATTR_VERSION`] and [`ATTR_FORMAT`].
//!   Every write is one `UpdateItem` conditioned on `attribute_not_exists(<key>)` (the
//!   first grant of a name) or on the version the client read.
//!
//! ## Configuration
//! - [`DynamoConfig`]: the table and its partition key attribute.
//! - [`DynamoConfig::with_conflict_returns_current`]`(false)` for an emulator that does not
//!   support `ReturnValuesOnConditionCheckFailure` (dynalite): conflicts then report
//!   `Current::Unknown` and the lease client falls back to a read.
//! - Callers that try once (a scheduled job started by cron on several machines) can opt
//!   into [`leasehold_core::ClientConfig::skew_bound`] with an explicit
//!   [`leasehold_core::SkewBound`]: a challenger then also takes over when the holder's
//!   recorded wall-clock expiry plus the bound is past on its own wall clock, without
//!   watching first. The bound must really hold between all participants' clocks.
//!
//! ## Cost per operation
//! | operation | requests | capacity (items under 1 KB) |
//! | --- | --- | --- |
//! | acquire a free or released lease | 1 `UpdateItem` | 1 write unit |
//! | a new client's first acquire of a released lease (a new process) | 1 `UpdateItem` on "no item, or a vacant one" ([`Precondition::Vacant`](leasehold_core::store::Precondition::Vacant)), the token raised by the server; on an item it cannot read (an attribute this crate never writes, a fractional token), 1 `PutItem` more puts that item back | 1 write unit (2 for the put-back) |
//! | renewal (every TTL/3) | 1 `UpdateItem` | 1 write unit |
//! | release | 1 `UpdateItem` | 1 write unit |
//! | takeover of an expired lease | 1 `GetItem` + 1 `UpdateItem` (the read starts the observation window) | 1 read unit + 1 write unit |
//! | a refused attempt | 1 failed `UpdateItem` (its answer carries the item) when the item last seen was free and another claimer wrote first; 1 `GetItem` when the item last seen was held and still is; that `GetItem` and 1 failed `UpdateItem` when the read shows it free and another claimer writes first (on one hot name, (round trips per grant − 2) ÷ refused attempts per grant came to 1.95: docs/PERFORMANCE.md, contention) | a failed conditional write still costs 1 write unit |
//! | list the names under a prefix | 1 `Scan` per 1 MB of items in the table (strongly consistent, the key only, filtered by `begins_with`): its cost grows with the table, not the prefix | the read units of every item in the table |
//!
//! A lease held for a day with a 30 s TTL costs 3 renewals per 30 s = 8,640 write
//! units a day; with a 3 s TTL, 86,400. A conflict costs no extra round trip: the failed
//! write returns the current item
//! ([`leasehold_core::store::Capabilities::conflict_returns_current`]).
//!
//! ## Errors
//! See [`error`] for the full table. In short: a conditional check that
//! fails is `Ok(Conflict)`; throttling (DynamoDB's throttling codes, 429) is
//! `Unavailable` (not applied, retry with backoff); a timeout after sending, a lost
//! connection, an unreadable reply and a 500 or 503 on a write are `Indeterminate` (may
//! have applied); a connection that could not be made is `Unavailable`; a missing table
//! is `NotProvisioned`; access denied, bad credentials and validation errors are
//! `Misconfigured`. A record
//! that does not decode (missing or mistyped attribute, unknown format, token 0, an
//! attribute the crate never writes) is [`leasehold_core::Error::CorruptRecord`], never a
//! free lease.
//!
//! ## Items changed by other programs
//! Every version-guarded write (renewal, release, takeover) also requires the item it
//! replaces to be valid and its token not above the new one, and a renewal requires the
//! item's holder and token to be its own: an operator's `update-item` that changed them
//! without the version is never written back (the holder loses the lease), and an item
//! it made invalid is reported, never healed. Deleting a lease item forgets its tokens:
//! the next grant starts again at 1, so never delete a lease item by hand.
//!
//! ## Limits
//! - One lease name takes at most about 1,000 writes per second from its holder and all
//!   its challengers together (one partition); beyond that DynamoDB throttles.
//! - A TTL of 2-30 s is sensible; shorter TTLs work only with low, steady latency.
//! - A takeover of a dead holder's lease waits a full TTL of watching (unless you opt into
//!   a skew bound).
//! - With a skew bound, clocks that disagree by more than the bound can let two holders
//!   overlap (the fence still protects the resource).
//! - [`Precondition::Claimable`](leasehold_core::store::Precondition::Claimable), which
//!   needs a store clock, is refused with [`leasehold_core::Error::InvalidInput`];
//!   [`Precondition::Vacant`](leasehold_core::store::Precondition::Vacant) is taken.
//! - moto, which the tests run against, differs from DynamoDB in ways that matter
//!   (concurrent writes to one item, throttling, permissions): see the link below.
//!
//! Why it is built this way: [docs/STORES.md](https://example.invalid/leasehold/blob/main/docs/STORES.md#dynamodb).
#![cfg_attr(docsrs, feature(doc_cfg))]

mod config;
pub mod error;
pub mod fence;
mod item;
mod local;
mod store;

pub use config::{
    ATTR_EXPIRES_AT, ATTR_FENCE, ATTR_FORMAT, ATTR_HOLDER, ATTR_TTL_MS, ATTR_VERSION, ATTR_WALL_EXPIRES_AT_MS,
    DEFAULT_KEY_ATTRIBUTE, DEFAULT_POLL_INTERVAL, DEFAULT_REQUEST_TIMEOUT, DynamoConfig, ITEM_FORMAT, LEASE_ATTRIBUTES,
    TableName,
};
pub use fence::{ItemFence, NAME_PLACEHOLDER, TOKEN_PLACEHOLDER};
pub use local::local_client;
pub use store::{DynamoStore, TABLE_ACTIVE_TIMEOUT};

/// The client crate this store is built on, re-exported so that your client is built
/// with the very version this crate links.
pub use aws_sdk_dynamodb;
