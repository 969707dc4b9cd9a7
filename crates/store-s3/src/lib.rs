//! # leasehold-s3
//!
//! Leases and fencing tokens on Amazon S3 (or an S3-compatible server) through
//! conditional writes, with no other service to run: [`S3Store`] implements
//! [`leasehold_core::store::CasStore`], and [`ManifestFence`] fences commits of data kept in the
//! bucket itself.
//!
//! ```no_run
//! # async fn demo() -> leasehold_core::Result<()> {
//! use std::time::Duration;
//! use leasehold_core::{LeaseClient, fence::FencedOutcome};
//! use leasehold_s3::{S3Store, S3Config};
//!
//! // On AWS: aws_sdk_s3::Client::new(&aws_config::load_defaults(BehaviorVersion::latest()).await)
//! let client = leasehold_s3::local_client("http://127.0.0.1:55000");
//! let store = S3Store::new(client, S3Config::new("my-bucket", "leases")?);
//! store.verify().await?; // bucket, permissions, conditional writes enforced
//!
//! let leases = LeaseClient::new(store.clone());
//! let lease = leases.acquire("compactor/orders", Duration::from_secs(15)).await?;
//!
//! // The data lives in the bucket; the commit is a fenced swap of its manifest.
//! let manifest = store.manifest("tables/orders/_manifest")?;
//! let base = manifest.fence(lease.token()).await?; // older holders are refused from now on
//! // ... write data/v0042.parquet under a new key, then:
//! match manifest.commit(lease.token(), Some(&base), b"data/v0042.parquet".to_vec()).await {
//!     Ok(FencedOutcome::Applied(_)) => {}
//!     Ok(FencedOutcome::ConditionFailed(_)) => { /* same tenure raced: rebase, retry */ }
//!     Err(leasehold_core::Error::FenceRejected { .. }) => { /* lost the lease: stop */ }
//!     Err(e) => return Err(e),
//! }
//! lease.release().await?;
//! # Ok(()) }
//! ```
//!
//! ## Guarantee and clock
//! S3 reads are strongly consistent and its conditional writes (`If-None-Match: *`,
//! `If-Match: <etag>`) are atomic per key, so the store is
//! [`leasehold_core::store::Grade::Linearizable`]: a lease record is one object,
//! `<prefix>/<lease name>`, and its version is the object's ETag. Expiry is judged by
//! observation ([`leasehold_core::store::ClockSource::Observation`]): a challenger takes
//! over only after it has seen the same ETag unchanged for the record's TTL plus the
//! safety margin (5% by default) on its own monotonic clock, so a takeover needs one full
//! TTL of watching: at least two requests spread over a TTL (look, then swap).
//!
//! ## Cost per operation
//! Each method of the store is one request:
//!
//! | operation | S3 request |
//! |---|---|
//! | acquire of a free (absent) lease | PutObject `If-None-Match: *` |
//! | acquire after a release, renewal, release | PutObject `If-Match: <etag>` |
//! | a new client's first acquire of a released lease (a new process) | PutObject `If-None-Match: *` (412) + GetObject + PutObject `If-Match` |
//! | takeover of an expired lease | PutObject `If-Match` on the ETag watched for the TTL |
//! | first look at a held lease | PutObject (412) + GetObject |
//! | administrative delete | DeleteObject `If-Match: <etag>` |
//! | list the names under a prefix | ListObjectsV2 of `<prefix>/<name prefix>`, one per 1000 keys under it |
//!
//! A failed condition is an empty 412, so a conflict cannot carry the current record
//! ([`leasehold_core::store::Capabilities::conflict_returns_current`] is `false`): the client reads
//! it with one GetObject.
//!
//! A held lease is renewed every third of its TTL, one PutObject each:
//! `259 200 / TTL-in-seconds` PUTs per day per lease. At S3 Standard's $0.005 per 1,000
//! PUTs (us-east-1):
//!
//! | TTL | renewal every | PUTs per day | per month |
//! |---|---|---|---|
//! | 5 s | 1.7 s | 51 840 | about $7.80 |
//! | 15 s | 5 s | 17 280 | about $2.60 |
//! | 30 s | 10 s | 8 640 | about $1.30 |
//! | 60 s | 20 s | 4 320 | about $0.65 |
//!
//! A challenger waiting in `acquire` adds one GetObject per poll interval (1 s by default,
//! [`S3Config::with_poll_interval`]): 86 400 a day while it waits, about $0.035 a day
//! (about $1 a month) at S3 Standard's $0.0004 per 1,000 GETs.
//!
//! ## Fenced commits on data in the bucket
//! A lease only limits who *starts*. [`ManifestFence`] makes the commit itself the fence
//! (the S3 guard of [`leasehold_core::fence`]): a manifest object carries the token of the
//! writer that committed it, and a commit is one PutObject with `If-Match` on the ETag of
//! the manifest the writer based its work on (`If-None-Match: *` for the first), sent only
//! if that manifest's token passes the fence's [`leasehold_core::fence::FenceMode`]: not
//! newer than the writer's (the default), or older ([`ManifestFence::strict`], one commit
//! per grant). The outcome is a [`leasehold_core::fence::FencedOutcome`]: `Applied` (the
//! new manifest) or `ConditionFailed` (the manifest changed under the same tenure:
//! rebase). A holder that froze past its lease fails on the ETag or the token with
//! [`leasehold_core::Error::FenceRejected`]. A new holder should call
//! [`ManifestFence::fence`] right after its grant to raise the mark at once.
//!
//! ## Setup
//! - A bucket (general purpose; any region): yours, or created by
//!   [`S3Store::provision`] (needs `s3:CreateBucket`; idempotent), which then runs
//!   [`S3Store::verify`]. Use an unversioned bucket, or a lifecycle rule that expires
//!   noncurrent versions under the prefix: with versioning every renewal keeps a new
//!   version.
//! - A prefix of the store's own: every object under it is read as a lease record, and
//!   anything else found there is [`leasehold_core::Error::CorruptRecord`], never a free lease.
//!   Any other writer of a lease object (an operator's `put-object`, a restore, a sync
//!   job) gives it a new ETag, so the holder's next renewal is refused and it loses the
//!   lease; a lease object is its name's only record, so deleting one forgets its
//!   tokens (the next grant starts again at 1): never delete lease objects by hand, and
//!   keep expiry rules off the prefix.
//! - IAM, for the lease prefix (add `s3:DeleteObject` for [`S3Store::verify`],
//!   administrative deletes and the scheduled jobs' purge of aged slot records,
//!   [`leasehold_core::store::CasStore::purge`]; manifests need Get/Put on their keys):
//!
//! ```text
//! { "Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject"],
//!   "Resource": "arn:aws:s3:::BUCKET/PREFIX/*" },
//! { "Effect": "Allow", "Action": "s3:ListBucket", "Resource": "arn:aws:s3:::BUCKET",
//!   "Condition": { "StringLike": { "s3:prefix": "PREFIX/*" } } }
//! ```
//!
//!   `s3:ListBucket` matters (listing lease names is a ListObjectsV2 under the prefix,
//!   and) without it S3 answers a GET of a missing key with 403
//!   instead of 404, which the store must report as [`leasehold_core::Error::Misconfigured`].
//!   A bucket policy with the `s3:if-none-match` / `s3:if-match` condition keys can
//!   require every PutObject under the prefix to be conditional.
//! - Requests must be signed with SigV4 (S3 accepts conditional writes only so signed;
//!   the SDK signs whenever the client has a credentials provider, and sends unsigned
//!   requests, refused with 403, when it has none). S3 refuses requests from a machine
//!   whose clock is more than 15 minutes off (403 `RequestTimeTooSkewed`, reported as
//!   misconfiguration).
//! - Any `aws_sdk_s3::Client`: the store switches the SDK's retries off for its writes,
//!   lets the SDK retry a GetObject on transient failures (three attempts, short backoff),
//!   and bounds each call by [`S3Config::request_timeout`], whatever retry and timeout
//!   settings the client was built with.
//!
//! ## Configuration
//! - [`S3Config::new`]: the bucket and the lease prefix.
//! - [`S3Config::with_request_timeout`] (default [`DEFAULT_REQUEST_TIMEOUT`]): keep it at most
//!   about a quarter of the TTL.
//! - [`S3Config::with_poll_interval`] (default [`DEFAULT_POLL_INTERVAL`], 1 s): S3 cannot
//!   push a release, so a waiter in `acquire` looks again at least this often; a release
//!   is seen within it, at one `GET` per waiter per interval while the lease is held.
//! - [`S3Config::with_conflict_retries`] (default [`DEFAULT_CONFLICT_RETRIES`], first backoff
//!   [`DEFAULT_CONFLICT_BACKOFF`]): how often a `409 ConditionalRequestConflict` is re-sent.
//! - Callers that try once (a scheduled job) can opt into an explicit wall-clock skew
//!   bound instead of watching, [`leasehold_core::ClientConfig::skew_bound`]: each record
//!   carries its holder's wall-clock expiry, and a challenger takes over once its own wall
//!   clock is past that expiry plus the bound.
//!
//! ## Errors
//! | S3 answer / SDK failure | result |
//! |---|---|
//! | 412 `PreconditionFailed` | `Conflict(Current::Unknown)` (nothing changed) |
//! | 404 `NoSuchKey` on `If-Match` | `Conflict(Current::Absent)` |
//! | 409 `ConditionalRequestConflict` / `OperationAborted` | re-sent after a jittered backoff ([`S3Config::with_conflict_retries`]), then [`leasehold_core::Error::Unavailable`] |
//! | 503 `SlowDown`, 400 `RequestTimeout`, any failure before the request left (connection refused, DNS, connect timeout, a failing credentials provider) | [`leasehold_core::Error::Unavailable`] (not applied; retry is safe) |
//! | 404 `NoSuchBucket` | [`leasehold_core::Error::NotProvisioned`] |
//! | a 404 without `NoSuchKey`, 401/403 (`AccessDenied`, `InvalidAccessKeyId`, `SignatureDoesNotMatch`, `RequestTimeTooSkewed`), 3xx, 501, other 4xx | [`leasehold_core::Error::Misconfigured`] |
//! | other 5xx, a lost connection or a timeout after the request left, an unreadable answer | writes: [`leasehold_core::Error::Indeterminate`] (may have applied); reads: retried, then [`leasehold_core::Error::Unavailable`] |
//! | an object under the prefix that is not a lease record (or over [`MAX_RECORD_BYTES`]) | [`leasehold_core::Error::CorruptRecord`] |
//!
//! ## Limits
//! - Keep the TTL at **5 s or more** (10–60 s is typical); per-request locks belong in
//!   etcd or the database.
//! - Shorter TTLs work on a local emulator (the tests use 0.2–1 s) but not reliably on S3.
//! - A takeover needs one full TTL of watching (unless you opt into a skew bound).
//! - With a skew bound, real clocks that disagree by more than the bound can let two
//!   holders overlap; the fence still protects the data.
//! - No [`leasehold_core::store::Stored::remaining`] is reported, and
//!   [`leasehold_core::store::Precondition::Claimable`] is refused with
//!   [`leasehold_core::Error::InvalidInput`].
//! - moto, which the tests run against, differs from S3 in ways that matter (concurrent
//!   conditional PUTs, throttling, credentials): see the link below.
//!
//! Why it is built this way: [docs/STORES.md](https://example.invalid/leasehold/blob/main/docs/STORES.md#s3).
#![cfg_attr(docsrs, feature(doc_cfg))]

mod body;
mod bucket;
mod config;
mod error;
mod manifest;
mod store;

pub use config::{
    DEFAULT_CONFLICT_BACKOFF, DEFAULT_CONFLICT_RETRIES, DEFAULT_POLL_INTERVAL, DEFAULT_REQUEST_TIMEOUT, MAX_KEY_LEN,
    MAX_PREFIX_LEN, S3Config, local_client,
};
pub use manifest::{MAX_MANIFEST_BYTES, Manifest, ManifestFence};
pub use store::{MAX_RECORD_BYTES, S3Store};

/// The client crate this store is built on, re-exported so that your client is built
/// with the very version this crate links.
pub use aws_sdk_s3;
