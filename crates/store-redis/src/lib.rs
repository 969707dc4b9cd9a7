//! # leasehold-redis
//!
//! Leases with fencing tokens on Redis (7.0 or later), each store operation **one Lua
//! script call**, and fenced writes on data kept in Redis: the best lock Redis can give,
//! with its limits in the types. Redis replicates asynchronously and, without
//! `appendfsync always`, forgets recent writes on a crash: a failover or a restart can
//! **lose a lease** (a second holder is granted it while the first still works) and
//! **reset its token counter**. So the store is
//! [`leasehold_core::store::Grade::EfficiencyOnly`] (rule 6 of docs/DESIGN.md): a very good
//! lock for avoiding duplicate work, not one that should stand between a customer and a
//! double debit. Expiry is judged on the Redis server's clock alone
//! ([`leasehold_core::store::ClockSource::Store`]): every record is written with `PX` =
//! its TTL.
//!
//! [`RedisStore`] implements [`leasehold_core::store::CasStore`] but **not**
//! [`leasehold_core::store::Linearizable`]. Asking for a correctness lease does not compile:
//!
//! ```compile_fail,E0277
//! # async fn demo(store: leasehold_redis::RedisStore) {
//! // error[E0277]: the trait bound `RedisStore: Linearizable` is not satisfied
//! let client = leasehold_core::LeaseClient::new(store);
//! # let _ = client; }
//! ```
//!
//! The caller opts in by name, and the tokens still fence writes:
//!
//! ```no_run
//! # async fn demo() -> leasehold_core::Result<()> {
//! use std::time::Duration;
//! use leasehold_core::{ClientConfig, LeaseClient};
//! use leasehold_redis::{HashFence, RedisConfig, RedisStore};
//!
//! let client = redis::Client::open("redis://127.0.0.1:6379/")
//!     .map_err(|e| leasehold_core::Error::invalid("redis url", e.to_string()))?;
//! let store = RedisStore::connect(client, RedisConfig::default()).await?;
//! let leases = LeaseClient::efficiency_only(store.clone(), ClientConfig::default())?;
//!
//! let lease = leases.acquire("reports:daily", Duration::from_secs(30)).await?;
//! // Every protected write carries the token; a stale holder's write is refused
//! // (`Error::FenceRejected`), and one that passes is `FencedOutcome::Applied`.
//! let outcome = store
//!     .fenced_write(&HashFence::new("reports:state").set("last_run", "2026-11-30"), lease.token())
//!     .await?;
//! assert!(outcome.is_applied(), "Redis has no caller condition");
//! lease.release().await?;
//! # Ok(()) }
//! ```
//!
//! ([`leasehold_core::LeaseClient::from_dyn`] refuses the store at run time too, since
//! its [`leasehold_core::store::Capabilities::grade`] is [`leasehold_core::store::Grade::EfficiencyOnly`].)
//!
//! ## Setup
//! - [`RedisStore::provision`] loads the scripts (all Redis needs);
//!   [`RedisStore::verify`] checks that the server answers and accepts them.
//! - Redis 7.0 or later (scripts declare flags with a `#!lua` shebang; a writing
//!   script is refused up front when Redis is out of memory instead of failing half way).
//! - The connection is yours: TLS, `AUTH`/ACL user, database, timeouts
//!   ([`redis::aio::ConnectionManager`] reconnects by itself; or bring a
//!   [`redis::aio::MultiplexedConnection`] to [`RedisStore::new`]). With ACLs
//!   the user needs `EVALSHA`, `SCRIPT LOAD`, and for waiters `HMGET`, `SUBSCRIBE` /
//!   `UNSUBSCRIBE`, for listing `SCAN`, on keys and channels `P*` (`P` the
//!   [`RedisConfig::key_prefix`]);
//!   the scripts call `TYPE HGETALL HGET HSET HINCRBY HDEL DEL PEXPIRE PERSIST PTTL
//!   TIME PUBLISH`. Fenced resources need the same on their own keys.
//! - Keys per lease name are in [`KeyLayout`]: the record hash `P{name}` (with `PX`) and
//!   a persistent counter hash `P{name}:meta`; releases are published on
//!   `P{name}:released`.
//! - Each lease name keeps one small persistent hash (its counters) forever: deleting
//!   it resets the name's tokens, with the consequences under "After a restart or
//!   failover".
//! - Both keys of a name share the hash tag `{name}`: one cluster slot. Tested on a
//!   standalone server.
//!
//! ## Configuration
//! - [`RedisConfig::key_prefix`] (default [`RedisConfig::DEFAULT_PREFIX`],
//!   [`RedisConfig::with_prefix`]): several applications can share one Redis.
//! - [`RedisConfig::notify_client`] (set by [`RedisStore::connect`]): a pub/sub client,
//!   so that a release wakes a waiter at once; without one, waiters back off with jitter.
//! - [`RedisConfig::request_timeout`] (default [`RedisConfig::DEFAULT_REQUEST_TIMEOUT`]): the
//!   bound on one script call; a write that runs out of time is
//!   [`leasehold_core::Error::Indeterminate`].
//! - [`RedisConfig::connect_timeout`] (default [`RedisConfig::DEFAULT_CONNECT_TIMEOUT`],
//!   [`RedisConfig::with_connect_timeout`]): the bound on [`RedisStore::connect`]; a refused
//!   port or a server that never answers is [`leasehold_core::Error::Unavailable`] within
//!   it (`tests/connect.rs`; unbounded, the same took 9.5 s and 16.5 s).
//! - On the server: `appendonly yes` and `appendfsync always` keep leases and tokens
//!   across a crash of the server (see "After a restart or failover").
//!
//! ## Cost per operation
//! Each operation is one `EVALSHA`; what the script does, atomically:
//!
//! | operation | what the script does, atomically | round trips |
//! |-----------|----------------------------------|-------------|
//! | acquire a free / released / expired lease | checks the record is absent or vacant, raises the token counter, writes the record with the new token and `PX` | 1 |
//! | renew | checks version, holder **and** token, rewrites with a fresh `PX` | 1 |
//! | release | checks the version, writes the record vacant (holder `""`, same token), `PUBLISH`es its new version on the release channel | 1 |
//! | renewals of up to [`RENEWAL_BATCH`] (128) leases of one client that come due together | one pipeline of renewal scripts, each checking its own version, holder and token ([`leasehold_core::store::CasStore::renew_many`]; `tests/batched_renewals.rs`: 40 leases, one renewal round, 1 round trip; a flushed script cache is loaded and the pipeline sent again) | 1 |
//! | a refused acquire | the conflict reply names the holder, its token and its `PTTL` (how long to wait) | 1 |
//! | read | the record and its `PTTL` | 1 |
//! | list the names under a prefix | (no script) `SCAN` with `MATCH P{<prefix>*}` and `COUNT 1000` until the cursor is 0: record keys only, deduplicated and sorted; `SCAN` walks the whole database, so a record Redis expired is not listed and the cost grows with the database, not the prefix | 1 per 1000 keys in the database (1 below that) |
//! | conflict | any write whose check fails returns the current record and its `PTTL` in the same reply | (same call) |
//! | fenced write ([`HashFence`]) | compares the token with the hash's high-water mark, writes the fields and the mark; a refusal is [`leasehold_core::Error::FenceRejected`] | 1 |
//!
//! `tests/round_trips.rs` counts these at the server (`MONITOR` on a dedicated Redis,
//! script-internal commands excluded): acquire, renewal, release, re-acquire, read, a
//! refused attempt and a takeover of an expired lease are each exactly one `EVALSHA` on
//! the wire. A fenced write is counted by the core's fence conformance cases
//! (`tests/conformance.rs`), below the library (every command the connection sends):
//! one per write, applied or refused.
//!
//! A script missing from the server's script cache (after a restart, `SCRIPT FLUSH` or a
//! failover) is reloaded and retried once by [`redis::Script`] (`NOSCRIPT` →
//! `SCRIPT LOAD` → `EVALSHA`: three commands, once); [`RedisStore::connect`] preloads
//! every script.
//!
//! ## Waiting
//! With a pub/sub client ([`RedisConfig::notify_client`]) a release wakes a waiter at once
//! ([`leasehold_core::store::Capabilities::notifies_waiters`]): **one** acquirer per release
//! (and every observer), and the wake-up passes to the next when that acquirer does not take the lease
//! ([`leasehold_core::store::BATON_PASS`]). N waiters in one process cost O(1) store calls
//! per release, not N. A grant, a renewal and an expiry publish nothing: a waiter wakes at
//! the holder's remaining time, which the conflict reply carries.
//!
//! ## After a restart or failover
//! A Redis without persistence restarted while a lease is held (tested in
//! `tests/restart.rs`):
//! 1. the lease is gone: the holder's next renewal finds no record and its loss signal
//!    fires; any challenger is granted the lease at once;
//! 2. the token counter is gone: the next grant carries token **1** again;
//! 3. a fenced resource that saw a higher token before the restart **refuses** the new
//!    holder's writes ([`leasehold_core::Error::FenceRejected`]) until the tokens climb past
//!    its high-water mark: the resource is safe from the *new* tokens, but stalled;
//! 4. the *previous* holder's token is still the highest the resource has seen: if that
//!    holder ignores its loss signal it can go on writing.
//!
//! Ways out, from strongest:
//! - Run Redis with `appendonly yes` and `appendfsync always`: the counter and the lease
//!   survive a crash of the server (tested: tokens continue after a `SIGKILL`). This
//!   does not help against an asynchronous failover to a lagging replica.
//! - Seed the counter from the resources before granting again:
//!   [`read_high_water`] on each protected resource, then
//!   [`RedisStore::seed_fence_counter`] with the highest; the next grant's token is
//!   above it (tested).
//! - For data that must not stall or double-apply, use a linearizable store.
//!
//! ## Limits
//! - Efficiency only: a failover to a replica that had not yet received the grant, or a
//!   restart without persistence, can grant the lease twice and reset its tokens.
//! - Tokens strictly increase only as long as Redis keeps the name's counter hash.
//! - Tested on a standalone server, not on Redis Cluster.
//! - A grant, a renewal and an expiry wake no waiter (keyspace events need server
//!   configuration); when pub/sub cannot be reached, waiters sleep until their deadline.
//! - A step of the server's clock moves every lease at once (Redis expires keys on its
//!   wall clock). Forward: leases expire early on the server while their holders still
//!   count them valid, so a successor can be granted while the old holder works (the
//!   fencing token still refuses its writes where the resource checks it). Back: leases
//!   last longer. In production slew the clock, never step it after boot: chrony or ntpd,
//!   with chrony's `makestep` only at startup, and leap seconds smeared.
//!
//! Why it is built this way: [docs/STORES.md](https://example.invalid/leasehold/blob/main/docs/STORES.md#redis).
#![cfg_attr(docsrs, feature(doc_cfg))]

mod call;
mod config;
mod error;
mod fence;
mod listing;
mod notify;
mod reply;
mod scripts;
mod store;

pub use config::{KeyLayout, RedisConfig};
pub use fence::{HashFence, HashWrite, MAX_INCREMENT, read_high_water};
pub use leasehold_core::fence::{FenceMode, FencedOutcome};
pub use store::{RENEWAL_BATCH, RedisStore};

/// The client crate this store is built on, re-exported so that your client is built
/// with the very version this crate links.
pub use redis;
