//! # leasehold-redis
//!
//! Leases with fencing tokens on Redis (7.0 or later), each store operation **one Lua
//! script call**, and fenced writes on data kept in Redis. The best lock Redis can
//! give, with its limits in the types.
//!
//! ## Guarantee: efficiency only (rule 6 of docs/DESIGN.md)
//! Redis replicates asynchronously and, without `appendfsync always`, forgets recent
//! writes on a crash. A failover to a replica that had not yet received the grant, or a
//! restart without persistence, **loses the lease** (a second holder is granted it
//! while the first still works) and **can reset the token counter** (tokens start again
//! from 1). This is the Redis half of the Redlock debate (seed 004, section 13:
//! Kleppmann's critique, Sanfilippo's reply): a Redis lock is a very good *efficiency*
//! lock (it avoids duplicate work) and not what should stand between a customer and a
//! double debit (seed 000).
//!
//! So [`RedisStore`] implements [`leasehold_core::store::CasStore`] but **not**
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
//! ## Clock: the server's (rule 2 of docs/DESIGN.md)
//! [`leasehold_core::store::ClockSource::Store`]. Every record is written with `PX` = its TTL, so
//! expiry is judged by the Redis server's clock alone; reads report the time left from
//! `PTTL`. [`leasehold_core::store::Precondition::Claimable`] (how a free, released or expired
//! lease is acquired) is evaluated inside the script: the record is absent (never
//! written, deleted, or expired: `PX` removed it) or vacant (released).
//!
//! ## How each operation works (one `EVALSHA` each)
//! Keys per lease name are in [`KeyLayout`]: the record hash `P{name}` (with `PX`) and
//! a persistent counter hash `P{name}:meta`.
//!
//! | operation | what the script does, atomically | round trips |
//! |-----------|----------------------------------|-------------|
//! | acquire a free / released / expired lease | checks the record is absent or vacant, `HINCRBY`s the token counter, writes the record with the new token and `PX` | 1 |
//! | renew | checks version, holder **and** token, rewrites with a fresh `PX` | 1 |
//! | release | checks the version, writes the record vacant (holder `""`, same token), `PUBLISH`es its new version on the release channel | 1 |
//! | a refused acquire | the conflict reply names the holder, its token and its `PTTL` (how long to wait) | 1 |
//! | read | the record and its `PTTL` | 1 |
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
//! Versions come from a per-name write counter that never goes back (and carries an
//! epoch, so a counter recreated after data loss never repeats a version). Tokens come
//! from the per-name token counter, which every write raises to at least its token:
//! strictly increasing for every grant, across releases, expiries and deletes, **as long
//! as Redis keeps the counter hash**. A script missing from the server's script cache
//! (after a restart, `SCRIPT FLUSH` or a failover) is reloaded and retried once by
//! [`redis::Script`] (`NOSCRIPT` → `SCRIPT LOAD` → `EVALSHA`: three commands, once);
//! [`RedisStore::connect`] preloads every script. The scripts validate everything they
//! read before their first write, so they apply whole or not at all, and never grant a
//! key that is not a well-formed record ([`leasehold_core::Error::CorruptRecord`]).
//!
//! ## Waiting
//! With a pub/sub client ([`RedisConfig::notify_client`], set by
//! [`RedisStore::connect`]) a release wakes a waiter at once
//! ([`leasehold_core::store::Capabilities::notifies_waiters`]): the release and delete
//! scripts publish the name's new version on `P{name}:released` in the same atomic step
//! as the write. The store's one pub/sub connection subscribes a name's channel while
//! someone in the process waits on it, and hands each release to the core's
//! [`leasehold_core::store::WakeHub`], which wakes **one** waiter per release and passes
//! the wake-up on when that waiter does not take the lease (an election observer hands
//! it on at once; a waiter that went away, after
//! [`leasehold_core::store::BATON_PASS`]). Whoever subscribes a name reads its record
//! right after (two `HMGET`s in one round trip), so that a release just before the
//! subscription still wakes a waiter. A grant, a renewal and an expiry publish nothing
//! (keyspace events need server configuration): a waiter wakes at the holder's remaining
//! time, which the conflict reply carries. A lost pub/sub connection wakes every waiter;
//! when pub/sub cannot be reached, waiters sleep until their deadline. Without a client,
//! waiters back off with jitter.
//!
//! So N waiters in one process cost O(1) store calls per release, not N. Measured with
//! the core's wake-up cases (`cargo test -p leasehold-redis --all-features --test
//! conformance wake -- --nocapture`, three runs against a local Redis 7.0.15 on two
//! shared cores; the waiters share one store, the holder has another): 50 waiters and
//! one release cost **1** store call in all (the grant), granted 6.4–6.9 ms after the
//! release. An observer woken first hands the wake-up to the acquirer, granted 2.4–4.8
//! ms after the release; a woken waiter that went away delays the grant by the pass
//! time (granted 503–504 ms after the release).
//!
//! ## What a restart does to tokens, and how to avoid the stall
//! A Redis without persistence restarted while a lease is held (tested in
//! `tests/restart.rs`):
//! 1. the lease is gone: the holder's next renewal finds no record and its loss signal
//!    fires; any challenger is granted the lease at once;
//! 2. the token counter is gone: the next grant carries token **1** again;
//! 3. a fenced resource that saw a higher token before the restart **refuses** the new
//!    holder's writes ([`leasehold_core::Error::FenceRejected`]) until the tokens climb past
//!    its high-water mark: the resource is safe from the *new* tokens, but stalled;
//! 4. the *previous* holder's token is still the highest the resource has seen: if that
//!    holder ignores its loss signal it can go on writing. Two holders, and the old one
//!    passes the fence: the reason Redis leases are efficiency-only.
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
//! ## Setup
//! - [`RedisStore::provision`] loads the scripts (all Redis needs);
//!   [`RedisStore::verify`] checks that the server answers and accepts them.
//! - Redis 7.0 or later (scripts declare flags with a `#!lua` shebang; a writing
//!   script is refused up front when Redis is out of memory instead of failing half way).
//! - The connection is yours: TLS, `AUTH`/ACL user, database, timeouts
//!   ([`redis::aio::ConnectionManager`] reconnects by itself; or bring a
//!   [`redis::aio::MultiplexedConnection`] to [`RedisStore::new`]). With ACLs
//!   the user needs `EVALSHA`, `SCRIPT LOAD`, and for waiters `HMGET`, `SUBSCRIBE` /
//!   `UNSUBSCRIBE`, on keys and channels `P*` (`P` the [`RedisConfig::key_prefix`]);
//!   the scripts call `TYPE HGETALL HMGET HLEN HGET HSET HINCRBY HDEL DEL PEXPIRE PTTL
//!   TIME PUBLISH`. Fenced resources need the same on their own keys.
//! - Each lease name keeps one small persistent hash (its counters) forever: deleting
//!   it resets the name's tokens, with the consequences above.
//! - Both keys of a name share the hash tag `{name}`: one cluster slot. Tested on a
//!   standalone server.
#![cfg_attr(docsrs, feature(doc_cfg))]

mod config;
mod error;
mod fence;
mod notify;
mod reply;
mod scripts;
mod store;

pub use config::{KeyLayout, RedisConfig};
pub use fence::{HashFence, HashWrite, MAX_INCREMENT, read_high_water};
pub use leasehold_core::fence::{FenceMode, FencedOutcome};
pub use store::RedisStore;

/// The client crate this store is built on, re-exported so that your client is built
/// with the very version this crate links.
pub use redis;
