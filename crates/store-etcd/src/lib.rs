//! # leasehold-etcd
//!
//! Leases and fencing tokens on etcd: a [`leasehold_core::store::CasStore`] over an
//! [`etcd_client::Client`] you supply. Use it with [`leasehold_core::LeaseClient`] for
//! correctness locks, leader election and singleton jobs.
//!
//! ## Guarantee: linearizable
//! Every write is one etcd transaction (Txn), committed by a Raft quorum before etcd
//! answers; reads are etcd's default linearizable reads. [`EtcdStore`] implements
//! [`leasehold_core::store::Linearizable`], so [`leasehold_core::LeaseClient::new`] accepts it for
//! correctness leases. A lease survives the loss of the etcd leader (tested with
//! `kill -9` on a three-member cluster: no second grant, same token, renewals resume
//! after the election).
//!
//! A lease still only limits who *starts*: a holder that freezes past its TTL wakes up
//! believing it holds the lease (Jepsen measured 18 % lost updates on etcd 3.4 locks
//! this way). Carry the fence on every protected write, see "Fenced writes".
//!
//! ## Clock source: etcd's lease clock
//! [`leasehold_core::store::ClockSource::Store`]. Liveness comes from etcd leases used as
//! **sessions**: each store keeps one etcd lease per TTL class (the record TTL rounded up
//! to whole seconds, raised by etcd to its minimum, about 1.5 election timeouts: 2 s on
//! default settings), kept alive by one keep-alive task, and every held record it writes
//! with that TTL is attached to it. No record is ever written with a server lease nobody
//! renews, and no held record is written without one: only vacant (released) records
//! persist without a lease.
//!
//! - **Holder process frozen or dead**: its keep-alives stop and etcd deletes every
//!   record attached to its sessions, on etcd's own clock, at most the session TTL after
//!   the last keep-alive it answered (plus etcd's expiry sweep, every 500 ms). A deleted
//!   record is an expired lease: absent means claimable.
//! - **Holder alive but no longer renewing one lease** (its renewals hang, the lease was
//!   abandoned): the session lives on for the process's other records, so the store
//!   itself deletes that record when its TTL has passed since its last renewal (one Txn
//!   comparing its revision). That deadline is the holder process's own monotonic clock:
//!   no two machines' clocks are compared (rule 2 of docs/DESIGN.md).
//! - **Caller gone mid-write** (a `tokio::time::timeout` around the call, a `select!`, a
//!   dropped [`leasehold_core::LeaseClient::acquire`]): every write runs to its end on a task
//!   of its own, so a claim that reached etcd after its caller left is still registered
//!   and deleted at its deadline, never kept alive by the session for as long as the
//!   store exists (`tests/orphans.rs` drops a claim between etcd applying it and its
//!   answer; another store cannot take the name at once, and takes it once the TTL has
//!   run out).
//! - **Unanswered writes in a row**: a write whose answer was lost is registered with its
//!   bytes (it may have applied); when a later attempt on the same name replaces that
//!   entry, the earlier record is kept as an *orphan* and deleted at its deadline (a Txn
//!   comparing its value and session, so a record that replaced it is never touched)
//!   unless the same bytes are written again. `tests/orphans.rs` loses the answers of two
//!   claims in a row, the first of which applied: the name is free once its TTL has run
//!   out, not before.
//! - **Holder validity** (rule 3 of docs/DESIGN.md): a grant or renewal answers `Written` only when
//!   the session certainly lives on etcd until `call + ttl`, i.e. when a keep-alive
//!   *sent* at `s` was answered positively and `s + session_ttl >= call + ttl` (etcd
//!   processed it after `s`). The lease client then trusts the lease until
//!   `call + ttl - margin`. When the last answered keep-alive does not reach that far, a
//!   grant sends one in parallel with its Txn and a renewal waits for one.
//!
//! [`leasehold_core::store::Stored::remaining`]: exact for records this store holds (time to the
//! deadline above, zero once expired), zero for vacant records. For a record held
//! through another client's session it is the record's TTL: a present key proves that
//! session alive (etcd deletes the keys of an expired one), but how long it will stay
//! alive is not known without a `LeaseTimeToLive` round trip, which this store avoids;
//! the value only sets how long a challenger waits before its next attempt, and the
//! watch wakes it as soon as the record goes.
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
//! `[<prefix><name>, <prefix><name>!fence\0)` holds exactly these two keys: one range
//! read (or one Txn else-branch) returns both in one snapshot. A value that does not
//! decode is [`leasehold_core::Error::CorruptRecord`], never a free lease.
//!
//! ## Versions and tokens
//! - The [`leasehold_core::store::Version`] of a record is its **mod revision**. etcd revisions are
//!   cluster-wide and only grow, so a version is never reused for a name, even after a
//!   delete and re-create. Renewals do not rewrite the record: the version is constant
//!   for a whole tenure, which is what the etcd fence compares.
//! - The **fencing token** is the per-name counter in `<prefix><name>!fence`. A claim
//!   ([`leasehold_core::store::Precondition::Claimable`]) compares the counter with the value the
//!   store expects and writes `counter + 1` into the counter and into the record in the
//!   same Txn: the grant and its token are one atomic step (rule 1 of docs/DESIGN.md), and the first
//!   grant of a name is 1, then 2, 3, … The counter has no lease, so it survives the
//!   record's deletion when a session expires; writes with an explicit token
//!   (`Absent`/`Version`) raise it to at least that token in a nested Txn, so a later
//!   claim is always greater than any token ever stored.
//! - Why not the record's create revision (which etcd also makes monotonic)? It would
//!   fence, but tokens of one name would jump by every write of the whole cluster, and
//!   the lease contract (and resources written once per grant) want "previous + 1". The
//!   counter keeps that, at no extra round trip.
//!
//! ## Operations and their cost
//! Each [`leasehold_core::store::CasStore`] call is one request, except where noted:
//!
//! | operation | etcd requests |
//! |---|---|
//! | acquire of a free, released or expired lease | 1 Txn (plus, in parallel, one keep-alive message when the session's last one does not cover the TTL; the first held record of a TTL class in a store also grants its session: 1 `LeaseGrant`, once) |
//! | acquire when another client changed the name since this store last saw it | 2 Txns (the first one's else-branch returns the fresh state) |
//! | acquire refused (held) | 1 Txn, whose else-branch returns the holder's record |
//! | renewal | no Txn: nothing when the session's last answered keep-alive already covers the TTL, otherwise one `LeaseKeepAlive` message shared by every lease of that session |
//! | release (write of the vacant record) | 1 Txn |
//! | read | 1 range read |
//! | waiting for a release | one watch per name per store; each change wakes one waiter |
//! | a held record abandoned while its process lives | 1 Txn at its TTL |
//! | fenced write ([`EtcdStore::fenced_put`], [`EtcdStore::fenced_txn`]), applied or refused | 1 Txn |
//! | read of a fenced key ([`EtcdStore::read_fenced`]) | 1 range read |
//!
//! The claim Txn: `If(record create_revision == 0 | record mod_revision == v) AND
//! If(fence == n | fence absent) Then(put record [lease = session], put fence n + 1)
//! Else(range read of both keys)`. What the store expects (absent or vacant at `v`,
//! counter `n`) comes from what it last saw of the name; a wrong guess costs the second
//! Txn, never a wrong grant: etcd's compares decide. Conflicts always return the current
//! record ([`leasehold_core::store::Capabilities::conflict_returns_current`]).
//!
//! ## Waiting without a thundering herd
//! [`leasehold_core::store::CasStore::wait_for_change`] waits in the core's wake-up hub
//! ([`leasehold_core::store::WakeHub`], one per store), fed by one etcd watch per name
//! per store on the record key, open while the name has waiters. The watch announces
//! each change at its revision, free when the record was released (vacant) or deleted
//! (its holder's session expired); the hub wakes **one** waiter per change: a release
//! wakes one acquirer; its grant (a change) wakes the next, which finds the lease held
//! and waits again. A wake-up while the lease is free is passed on if its waiter does
//! not take it — an election observer that shares the watch with its process's campaign
//! waits again having seen it free (vacant or absent), or the woken waiter went away and
//! nobody through this store claimed the lease 500 ms later
//! ([`leasehold_core::store::BATON_PASS`]). An observer that is not woken (behind the
//! acquirer that took the lease) learns of the change at its own `max_wait`. Waiters in
//! other processes each have their own store and watch: one wake-up per process per
//! change.
//!
//! A watch that breaks (a lost connection) reopens after the last revision it saw, so a
//! change made meanwhile still wakes a waiter once it reconnects; one that etcd cancels
//! (compacted past that revision) wakes every waiter and starts over from a read. While
//! etcd cannot be reached, waiters sleep until their `max_wait`.
//!
//! Measured on a loopback single-member etcd, three runs each of `cargo test -p
//! leasehold-etcd --test conformance wake -- --nocapture` (the conformance wake-up
//! cases: the holder and the waiters in two stores, the holder's TTL 30 s) and `cargo
//! test -p leasehold-etcd --test wake_ups -- --nocapture`:
//!
//! - 50 waiters, one release: 2 store calls in all (the winner's claim, and the refused
//!   claim of the one waiter its grant woke; no read), granted 8–9 ms after the release;
//!   with holder and waiters in one store (`wake_ups`), 3 etcd Txns counting the release
//!   itself, no range read, and one watch for all 50 waiters.
//! - An observer woken first hands the wake-up on: the acquirer is granted 4–9 ms after
//!   a release, and 3–9 ms after etcd deleted the record because its holder's session
//!   was revoked (the observer reads it 3 times in all: before, after the delete, after
//!   the grant; passing "no record seen" as position 0 instead made it read 559 times
//!   in one run, in the 509 ms before the pass timer woke the acquirer).
//! - The woken waiter gone: granted 506–507 ms after the release, through the pass
//!   timer.
//! - A release while the waiters' connection was cut: granted 257–296 ms after it, when
//!   the watch reopened (it retries every 200 ms).
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
//!   is [`leasehold_core::Error::CorruptRecord`], never overwritten. The conformance
//!   fence cases run on it against the real etcd.
//! - **Any operations, guarded by the tenure** ([`TxnFence`]): [`EtcdStore::fence`]
//!   captures the tenure's guard right after the grant; [`EtcdStore::fenced_txn`] runs
//!   your puts and deletes in one Txn that applies only while the lease record still has
//!   that tenure's revision — the mitigation Jepsen recommended for etcd locks. A frozen
//!   holder's write after its record expired or was taken over is refused by etcd
//!   itself. To build your own Txn, add [`TxnFence::compare`].
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
//! - Known limits: a renewal does not send a request, so a record overwritten or deleted
//!   by a raw write of *another* client, or a session revoked by hand, is noticed at the
//!   next keep-alive (within a third of the session TTL); fenced transactions compare in
//!   etcd and refuse such a tenure at once.
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

mod config;
mod error;
mod key_fence;
mod keys;
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
