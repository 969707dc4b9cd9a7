//! # leasehold-zookeeper
//!
//! Leases and fencing tokens on Apache ZooKeeper (3.6 or later: `multi` reads and
//! writes; tested with 3.8), over the async [`zookeeper_client`] crate, plus fenced
//! writes on data kept in ZooKeeper. Every write is one `multi`, committed by the
//! ensemble's quorum before it answers ([`leasehold_core::store::Grade::Linearizable`],
//! [`leasehold_core::store::Linearizable`]). Expiry is judged on the ensemble's session
//! clock ([`leasehold_core::store::ClockSource::Store`]): a held lease record is an
//! EPHEMERAL znode of a session its process keeps alive, and ZooKeeper deletes it when
//! the session expires. A lease still only limits who *starts*: carry the fence on every
//! protected write (see "Fenced writes").
//!
//! ## Setup
//! - [`ZooKeeperStore::provision`] creates the root znode (default `/leasehold`, see
//!   [`ZooKeeperConfig`]); [`ZooKeeperStore::verify`] checks it. Without it every write
//!   is [`leasehold_core::Error::NotProvisioned`], naming the missing root.
//! - With ACLs on: the store creates its znodes with `world:anyone` ALL; put the root
//!   under a chroot (`host:port/app`) to keep it apart.
//! - The ensemble's `maxSessionTimeout` bounds the longest lease TTL (default 20 ticks:
//!   40 s with a 2 s tick); its `minSessionTimeout` the shortest (default 2 ticks).
//!
//! ## Znodes
//! Under the root, per lease name (its `/` written `%2F`, so each name is one child):
//!
//! | znode | data | mode |
//! |---|---|---|
//! | `<root>/<name>` | the lease record ([`leasehold_core::store::record_codec`] JSON; after `kept:` when kept) | EPHEMERAL on the holder's session while held, PERSISTENT when vacant or kept |
//! | `<root>/<name>!fence` | the highest token issued for the name, 20 ASCII digits | PERSISTENT; deleted only by a purge |
//!
//! A held record is *kept* by [`leasehold_core::store::CasStore::expire`] (a scheduled
//! job's done record, which must outlive the instance that ran the slot): ZooKeeper has
//! no expiry of its own for a znode, so the record becomes PERSISTENT, marked `kept:`,
//! and stays, held and never claimable, until [`leasehold_core::store::CasStore::purge`]
//! removes it with its counter ([`leasehold_core::store::ExpireOutcome::Kept`]).
//!
//! Every write of a name is one `multi`: a versioned `setData` of the counter (its
//! version is the name's write count and moves with every write), the `delete` of the
//! record znode at the data version read, and the `create` of the new record. A claim
//! writes the counter + 1 (or the record's token + 1, when an operator raised it above
//! the counter) as the new token in the same `multi`, so the token survives
//! session expiry and server restarts with the counter. A record's version is
//! one number, the counter's version in its high 32 bits and the record znode's data
//! version in the low 32: never reused, since the counter is never
//! deleted (but by a purge, of a name nobody takes again). A record or counter that does not decode, or that this store could not have
//! written (a held record in a persistent znode unless kept, a vacant one in an ephemeral znode, a
//! record without its counter, a counter at 0 or ephemeral), is [`leasehold_core::Error::CorruptRecord`], never a free lease.
//!
//! ## TTLs and sessions
//! Each store keeps one ZooKeeper session per TTL class (the record TTL rounded up to
//! whole seconds), opened with that session timeout, plus a main session for reads,
//! watches and vacant records. The timeout the ensemble negotiates is the lease's real
//! TTL (a frozen or dead process's record lives that long after its last heartbeat), so
//! a held record is written with it and the grant reports it: a lease asked for with
//! 300 ms is held, renewed and shown by [`leasehold_core::Lease::ttl`] as 1 s (on an
//! ensemble whose `minSessionTimeout` is at most 1 s).
//!
//! ## Cost per operation
//! | operation | ZooKeeper requests |
//! |---|---|
//! | acquire of a free, released or expired lease this store saw last, or of a new name | 1 `multi` (the first held record of a TTL class in a store also opens its session: 1 handshake, once) |
//! | acquire of a lease this store last saw held, read a TTL ago or more, now expired (its record gone) | 1 `multi`: the claim is sent as for a record gone, as a new holder's would be (not while the store watches the name for waiters: its picture is then current) |
//! | acquire when another client changed the name since this store last saw it | 1 `multi` read and 1 `multi` (when this store last saw it held, read less than a TTL ago); 1 failed `multi`, 1 `multi` read and 1 `multi` (when it last saw it free) |
//! | acquire refused (held) | 1 `multi` read; plus 1 failed `multi` first when this store never saw the name (it tries the claim of a new name first), or last read it held a TTL ago or more (it tries the claim of a record gone first) |
//! | renewal | 1 `exists` of the record znode on the holder's session: the answer proves the session alive and the record still the holder's, and the server counts it as the session's heartbeat (the client library's pings keep idle sessions alive too and are not counted) |
//! | per session that holds records, in the background | 1 `sync` every eighth of the session timeout ([`ZooKeeperStats::heartbeats`]): it tells how long the ensemble's leader keeps the session (see "How long a lease is trusted"); on a session that grants or renews, also one a report lag after its latest answered request, at most one per thirty-second of the timeout (and per report lag), so that a renewal is trusted from a heartbeat at most that old |
//! | release (write of the vacant record) | 1 `multi` |
//! | read | 1 `multi` read of both znodes |
//! | list of the names under a prefix | 1 child listing of the root |
//! | waiting for a release | per name with waiters: 1 `exists` watch and 1 `multi` read, again after each change; a release wakes one acquirer, every change every observer |
//! | a held record abandoned while its process lives | 1 `multi` at its TTL |
//! | keep a held record past its session (`expire`) | 1 `multi` read and 1 `multi` |
//! | purge (the record and its counter) | 1 `multi` (of the counter alone when the last read showed the record gone; 2 when only the first `multi` finds it gone) |
//! | fenced `multi` ([`ZooKeeperStore::fenced_multi`]), applied or refused | 1 `multi` |
//! | fenced write on a token-marked znode ([`ZooKeeperStore::fenced_set`]) | 1 `multi` when the store saw the node's current version or the node is new, else 1 read and 1 `multi`; none when the store knows a mark that refuses the token |
//!
//! A conflict does not carry the current record in ZooKeeper's answer (a failed `multi`
//! says only which operation failed), so
//! [`leasehold_core::store::Capabilities::conflict_returns_current`] is false; the store
//! reads it when it must decide. [`ZooKeeperStore::stats`] counts the requests a store
//! has sent, by kind.
//!
//! ## How long a lease is trusted
//! On an ensemble the leader alone expires sessions, and a follower reports the
//! heartbeats it answers to the leader once per half tick. A grant or renewal is
//! therefore trusted from what the leader surely heard, not from its own send time: a
//! heartbeat answered at least three quarters of a tick before a request that went
//! through the leader (a `sync`, a `multi`) was sent. The store answers that as
//! [`leasehold_core::store::Stored::remaining`], and the client trusts the lease for
//! `remaining` minus its margin. Tell the store the ensemble's `tickTime` with
//! [`ZooKeeperConfig::with_tick_time`]; without it the store assumes the longest tick a
//! session's timeout allows (half of it), and trusts leases for less. With a 1 s TTL and
//! a 100 ms tick, a holder whose follower froze right after answering a renewal trusted
//! its lease for 766 to 775 ms more and was taken over 0.97 to 1.07 s after the freeze
//! (three runs of six rounds on 2026-12-05, at 9b49b8a: `cargo test -p
//! leasehold-zookeeper --all-features --test frozen_follower -- --nocapture`). Why:
//! docs/STORES.md, "How long a ZooKeeper holder trusts its lease".
//!
//! ## Waiting and losing
//! A blocked [`leasehold_core::LeaseClient::acquire`] waits on one `exists` watch per
//! name per store ([`leasehold_core::store::Capabilities::notifies_waiters`]): a release,
//! or ZooKeeper deleting the record of an expired session, wakes **one** acquirer (and
//! every observer), and the wake-up passes to the next acquirer when the woken one does not claim
//! ([`leasehold_core::store::BATON_PASS`]).
//!
//! A holder loses its lease when its session expires (the renewal after it finds the
//! session dead or the record gone) and when its connection is suspended (Curator's
//! SUSPENDED) for longer than the lease's safe deadline: renewals then get no answer,
//! and the client's renewal driver ends the lease at its deadline, before the session
//! can have expired on the ensemble (Curator's LOST).
//!
//! ## Fenced writes
//! Every fence keeps the contract of [`leasehold_core::fence`]: a refused guard is
//! [`leasehold_core::Error::FenceRejected`] and nothing was written.
//!
//! - **Any operations, guarded by the tenure** ([`TenureFence`]): [`ZooKeeperStore::fence`]
//!   takes the tenure's guard right after the grant; [`ZooKeeperStore::fenced_multi`] runs
//!   your operations in one `multi` that `check`s the counter's version (moved by any
//!   later write of the name) and the record znode's (gone with an expired session).
//! - **A znode of yours, marked with the token** ([`NodeFence`]):
//!   [`ZooKeeperStore::fenced_set`] and [`ZooKeeperStore::read_fenced`].
//! - **Outside ZooKeeper**: carry [`leasehold_core::Lease::token`] to the resource.
//!
//! ## Errors
//! No server reachable, a session that expired, throttling: not applied →
//! [`leasehold_core::Error::Unavailable`]. A `multi` sent but unanswered (the request
//! timeout, a lost connection) → [`leasehold_core::Error::Indeterminate`]. ACLs,
//! authentication, quotas → [`leasehold_core::Error::Misconfigured`]; a missing root →
//! [`leasehold_core::Error::NotProvisioned`].
//! Bad versions, tokens and roots are [`leasehold_core::Error::InvalidInput`] before
//! anything is sent.
//!
//! ## Example
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use leasehold_core::LeaseClient;
//! use leasehold_zookeeper::{ZooKeeperConfig, ZooKeeperStore, zookeeper_client as zk};
//!
//! let config = ZooKeeperConfig::new("/payments/leases")?;
//! ZooKeeperStore::provision("127.0.0.1:2181", &config).await?;
//! let store = ZooKeeperStore::connect("127.0.0.1:2181", config).await?;
//! let leases = LeaseClient::new(store.clone());
//!
//! let lease = leases.acquire("nightly-payout", Duration::from_secs(10)).await?;
//! let fence = store.fence(&lease)?; // this tenure's guard, taken once
//! let opts = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
//! tokio::select! {
//!     done = store.fenced_multi(&fence, |m| m.add_create("/payments/batch-2026-11-30", b"done", &opts)) => {
//!         let _outcome = done?; // Err(FenceRejected): the lease was lost, nothing was written
//!     }
//!     cause = lease.lost() => eprintln!("lost the lease: {cause}"),
//! }
//! lease.release().await?;
//! # Ok(()) }
//! ```
//!
//! ## Limits
//! - Reads are served by the server the session is connected to and may lag the
//!   leader; every decision is a versioned `multi`, so a stale read costs a retry, never
//!   a double grant.
//! - A dead or frozen holder's lease ends with its session: the negotiated timeout after
//!   the last heartbeat the ensemble heard, rounded up to ZooKeeper's tick.
//! - [`leasehold_core::store::Stored::remaining`] is exact only for records this store
//!   holds; for a record held through another store's session it is the record's TTL.
//! - One store per process and ensemble, on one Tokio runtime.
//!
//! Why it is built this way: [docs/STORES.md](https://example.invalid/leasehold/blob/main/docs/STORES.md#zookeeper).

mod config;
mod error;
mod fence;
mod nodes;
mod session;
mod stats;
mod store;
mod watch;

pub use config::ZooKeeperConfig;
pub use fence::{NODE_FENCE_HEADER, NodeFence, TenureFence};
pub use stats::ZooKeeperStats;
pub use store::ZooKeeperStore;

/// The client crate this store is built on, re-exported so that your own requests use
/// the very version this crate links.
pub use zookeeper_client;
