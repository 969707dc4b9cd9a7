//! # leasehold-etcd
//!
//! Leases and fencing tokens on etcd, over an [`etcd_client::Client`] you supply, plus
//! fenced writes on keys in etcd. Every write is one etcd transaction (Txn), committed by
//! a Raft quorum before etcd answers, and reads are etcd's default linearizable reads
//! ([`leasehold_core::store::Grade::Linearizable`], [`leasehold_core::store::Linearizable`]):
//! [`leasehold_core::LeaseClient::new`] accepts the store for correctness locks, leader
//! election and singleton jobs, and a lease survives the loss of the etcd leader. Expiry
//! is judged on etcd's lease clock ([`leasehold_core::store::ClockSource::Store`]): a
//! holder's records are attached to etcd leases its process keeps alive, and etcd deletes
//! them when the keep-alives stop. A lease still only limits who *starts*: carry the fence
//! on every protected write (see "Fenced writes").
//!
//! ## Setup
//! - Nothing to create: [`EtcdStore::provision`] (the setup verb every store has) only
//!   checks, as [`EtcdStore::verify`] does, that the cluster answers and the prefix may
//!   be read.
//! - etcd 3.3 or later (nested transactions; tested with 3.4).
//! - With authentication on: a role with read-write permission on the key range of the
//!   prefix (`etcdctl role grant-permission --prefix=true <role> readwrite <prefix>`);
//!   granting and keeping leases alive needs no extra permission.
//! - Use one store per process and etcd cluster, on one Tokio runtime (its background
//!   tasks live on the runtime of first use).
//!
//! ## Keys
//! Under the configured prefix ([`EtcdConfig`], default `leasehold/`), per lease name:
//!
//! | key | value | etcd lease |
//! |---|---|---|
//! | `<prefix><name>` | the lease record ([`leasehold_core::store::record_codec`] JSON) | the holder's session while held, none when vacant |
//! | `<prefix><name>!fence` | the highest token issued for the name, 20 ASCII digits | none; never deleted |
//!
//! Names and prefixes use only characters above `!`, so the range
//! `[<prefix><name>, <prefix><name>!fence\0)` holds exactly these two keys. A value that
//! does not decode is [`leasehold_core::Error::CorruptRecord`], never a free lease.
//!
//! ## Configuration
//! - [`EtcdConfig::new`]: the key prefix (default [`EtcdConfig::DEFAULT_PREFIX`]).
//! - [`EtcdConfig::with_request_timeout`] (default [`EtcdConfig::DEFAULT_REQUEST_TIMEOUT`]):
//!   a write whose answer has not arrived by then is
//!   [`leasehold_core::Error::Indeterminate`].
//! - The TTL: each store keeps one etcd lease (a *session*) per TTL class, the record TTL
//!   rounded up to whole seconds and raised by etcd to its minimum (about 1.5 election
//!   timeouts: 2 s on default settings), kept alive by one keep-alive task. That is the
//!   lease's real TTL (a frozen or dead process's record lives that long), so a held
//!   record is written with it and the grant reports it: a lease asked for with 1 s is
//!   held, renewed and shown by [`leasehold_core::Lease::ttl`] as 2 s, one asked for
//!   with 2.5 s as 3 s (`tests/behaviour.rs`).
//!
//! ## Cost per operation
//! Each [`leasehold_core::store::CasStore`] call is one request, except where noted:
//!
//! | operation | etcd requests |
//! |---|---|
//! | acquire of a free, released or expired lease | 1 Txn (no keep-alive while the session's last answered one leaves it half the TTL, the grant then trusted for what the session surely has left; otherwise one keep-alive message in parallel; the first held record of a TTL class in a store also grants its session: 1 `LeaseGrant`, once) |
//! | acquire when another client changed the name since this store last saw it | 2 Txns (the first one's else-branch returns the fresh state) |
//! | acquire refused (held) | 1 Txn, whose else-branch returns the holder's record |
//! | renewal | no Txn: nothing when the session's last answered keep-alive already covers the TTL, otherwise one `LeaseKeepAlive` message shared by every lease of that session |
//! | release (write of the vacant record) | 1 Txn: one compare (the holder's revision) and one put, without the fence counter (the token it keeps is counted already); sent from the caller's task |
//! | read | 1 range read |
//! | list of the names under a prefix | 1 keys-only range read per 1000 keys under it (a name has two keys: its record and its fence counter), all at the first one's revision; fence counters, which outlive deleted records, are not listed |
//! | waiting for a release | one watch per name per store; a release wakes one acquirer, every change every observer |
//! | a held record abandoned while its process lives | 1 Txn at its TTL |
//! | noticing a foreign delete or overwrite of a held record (`etcdctl del`, `etcdctl put`) | one watch on the store's prefix, opened by the first grant and kept while the store holds any record; the holder's next renewal (a third of the TTL later at most) is then a Txn that finds the change |
//! | fenced write ([`EtcdStore::fenced_put`], [`EtcdStore::fenced_txn`]), applied or refused | 1 Txn |
//! | read of a fenced key ([`EtcdStore::read_fenced`]) | 1 range read |
//!
//! Conflicts always return the current record
//! ([`leasehold_core::store::Capabilities::conflict_returns_current`]).
//! [`EtcdStore::stats`] counts the requests a store has sent, by kind.
//!
//! ## Waiting
//! A blocked [`leasehold_core::LeaseClient::acquire`] waits on one etcd watch per name per
//! store, open while the name has waiters
//! ([`leasehold_core::store::Capabilities::notifies_waiters`]): a release, or etcd deleting
//! the record of an expired session, wakes **one** acquirer (and every observer), and the
//! wake-up passes to the next acquirer when the woken one does not claim
//! ([`leasehold_core::store::BATON_PASS`]). Waiters in other processes each have their own
//! store and watch: one acquirer woken per process per release.
//!
//! ## Fenced writes
//! Every fence keeps the contract of [`leasehold_core::fence`]: guard and effect are one
//! etcd transaction (one round trip), a refused guard is
//! [`leasehold_core::Error::FenceRejected`] (nothing was written, the writer has lost its
//! lease and must stop), and a write whose guard passed returns a
//! [`leasehold_core::fence::FencedOutcome`].
//!
//! - **A key of yours, marked with the token** ([`KeyFence`]): the key's value carries
//!   the highest token that wrote it and your bytes
//!   (`leasehold-fence/1 token=<20 digits>\n<bytes>`); [`EtcdStore::fenced_put`] checks
//!   the mark and writes in one Txn (a nested one creates the key when it was never
//!   written), in [`leasehold_core::fence::FenceMode::NotOlder`] (`mark <= token`, the
//!   default) or strict (`mark < token`, [`KeyFence::strict`]) mode;
//!   [`EtcdStore::read_fenced`] reads `(mark, bytes)` back. A key holding anything else
//!   is [`leasehold_core::Error::CorruptRecord`], never overwritten.
//! - **Any operations, guarded by the tenure** ([`TxnFence`]): [`EtcdStore::fence`]
//!   captures the tenure's guard right after the grant; [`EtcdStore::fenced_txn`] runs
//!   your puts and deletes in one Txn that applies only while the lease record still has
//!   that tenure's revision. A frozen holder's write after its record expired or was
//!   taken over is refused by etcd itself. To build your own Txn, add
//!   [`TxnFence::compare`].
//! - **Outside etcd**: carry [`leasehold_core::Lease::token`] (also [`TxnFence::token`]) to
//!   the resource and check it in the write itself, for example with
//!   [`leasehold_core::fence::FencedUpdate`] for a SQL row (`... WHERE last_token <= $token`).
//!
//! ## Errors
//! Connection refused or unreachable, `no leader`, rate limiting: the request was not
//! applied → [`leasehold_core::Error::Unavailable`]. A write sent but unanswered (the
//! configured request timeout, a lost connection, an etcd-side timeout or leader change)
//! → [`leasehold_core::Error::Indeterminate`]. Permission denied, authentication, a full
//! keyspace (NOSPACE) → [`leasehold_core::Error::Misconfigured`]. Nothing panics on input;
//! bad versions, tokens and prefixes are [`leasehold_core::Error::InvalidInput`] before
//! anything is sent.
//!
//! ## Example
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use etcd_client::{Client, TxnOp};
//! use leasehold_core::LeaseClient;
//! use leasehold_etcd::{EtcdConfig, EtcdStore};
//!
//! let client = Client::connect(["http://127.0.0.1:2379"], None).await?;
//! let store = EtcdStore::new(client, EtcdConfig::new("payments/leases/")?);
//! let leases = LeaseClient::new(store.clone());
//!
//! let lease = leases.acquire("nightly-payout", Duration::from_secs(10)).await?;
//! let fence = store.fence(&lease)?; // this tenure's guard, taken once
//! tokio::select! {
//!     done = store.fenced_txn(&fence, [TxnOp::put("payments/batch/2026-11-30", "done", None)]) => {
//!         let _response = done?; // Err(FenceRejected): the lease was lost, nothing was written
//!     }
//!     cause = lease.lost() => eprintln!("lost the lease: {cause}"),
//! }
//! lease.release().await?;
//! # Ok(()) }
//! ```
//!
//! ## Limits
//! - A renewal sends no request, so a record overwritten or deleted by a raw write of
//!   *another* client, or a session revoked by hand, is noticed at the next keep-alive
//!   (within a third of the session TTL); fenced transactions refuse such a tenure at once.
//! - A dead or frozen holder's lease ends with its session: up to the session TTL after
//!   the last keep-alive etcd answered, plus etcd's expiry sweep (every 500 ms).
//! - [`leasehold_core::store::Stored::remaining`] is exact only for records this store
//!   holds; for a record held through another client's session it is the record's TTL.
//! - While etcd cannot be reached, waiters sleep until their
//!   [`Wait::after`](leasehold_core::store::Wait::after).
//! - One store per process and etcd cluster, on one Tokio runtime.
//!
//! Why it is built this way: [docs/STORES.md](https://example.invalid/leasehold/blob/main/docs/STORES.md#etcd).

mod config;
mod error;
mod held_watch;
mod key_fence;
mod keys;
mod listing;
mod session;
mod state;
mod stats;
mod store;
mod txn_fence;
mod watch;

pub use config::EtcdConfig;
pub use key_fence::{KEY_FENCE_HEADER, KeyFence};
pub use stats::EtcdStats;
pub use store::EtcdStore;
pub use txn_fence::TxnFence;

/// The client crate this store is built on, re-exported so that your client is built
/// with the very version this crate links.
pub use etcd_client;
