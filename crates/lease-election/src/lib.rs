//! # leasehold-election
//!
//! Leader election on [`leasehold_core`] leases, on any store that implements
//! [`leasehold_core::store::CasStore`]: etcd, ZooKeeper, Postgres, MySQL, SQLite, DynamoDB,
//! S3, Redis (efficiency only) or the in-process [`leasehold_core::MemoryStore`].
//!
//! - [`Election::campaign`] waits until this candidate leads and returns a
//!   [`Leadership`]: the fencing token of the tenure, a loss signal and a
//!   cancellation token. [`Leadership::resign`] steps down.
//! - [`Election::observe`] is a stream of who leads (holder and token), changes only;
//!   [`Election::observe_states`] also says when that is unknown (the store cannot be
//!   read), for a display that must not go on showing an old answer.
//! - [`Election::run`] with [`Callbacks`] is the client-go style: started leading (with
//!   a context carrying the token and a cancellation), stopped leading, new leader.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! use std::time::Duration;
//! use leasehold_core::{LeaseClient, MemoryStore};
//! use leasehold_election::Election;
//!
//! let election = Election::new(LeaseClient::new(MemoryStore::new()), "compactor", Duration::from_secs(10))?;
//! let leadership = election.campaign().await?;
//! let token = leadership.token(); // carry it on every write the leader makes
//! tokio::select! {
//!     _ = async { /* lead, writing with `token` */ } => {}
//!     cause = leadership.lost() => eprintln!("lost leadership: {cause}"), // stop
//! }
//! leadership.resign().await?;
//! # let _ = token;
//! # Ok::<(), leasehold_core::Error>(()) }).unwrap();
//! ```
//!
//! ## The guarantee
//! Unlike client-go's `leaderelection` (which documents that it does not guarantee a
//! single acting leader) each tenure carries a [`leasehold_core::FencingToken`], strictly
//! greater than every earlier tenure's: writes guarded by it (`leasehold_core::fence`) refuse
//! a deposed leader that woke up from a pause. The guarantee grade is the store's
//! (linearizable stores for correctness; Redis for efficiency only), and so is the
//! clock source: expiry is judged on the store's clock where it has one, otherwise by
//! observing one record version unchanged for the TTL plus the margin.
//!
//! ## Losing leadership cancels the context before a successor can be granted
//! Rule 3 of docs/DESIGN.md: a renewal sent at monotonic time `t` keeps the lease valid for
//! its holder until `t + ttl - margin`, and the loss signal (hence the leader context's
//! cancellation, a child of it) fires at that deadline if no later renewal landed.
//! A challenger is granted only when the store judges the lease expired, which is at
//! the earliest `apply + ttl` on the store's clock, where `apply >= t` is when the
//! store applied that renewal (or, on stores without a clock, after watching one
//! version unchanged for `ttl + margin` from a moment after `apply`). So the holder's
//! context is cancelled at least `margin` (5% of the TTL by default, which absorbs
//! clock-rate drift) before any successor can hold the lease. Resigning cancels the
//! context before the release write is sent. The test
//! `loss_cancels_context_before_successor_is_granted` checks this with paused time
//! and a store that stops answering the leader.
//!
//! A leader frozen past that deadline (a stopped process, a starved runtime) may run
//! again before its renewal driver has had a turn to fire the cancellation: so
//! [`LeaderContext::is_leading`] and [`Leadership::is_leader`] read the deadline
//! itself, not only the cancellation, and answer `false` from the moment it has passed
//! (test `a_leader_frozen_past_its_validity_is_not_leading_when_it_wakes`).
//!
//! What the margin cannot cover is a leader frozen *after* it checked its context and
//! before its write reached the resource: that is what the token is for.
//!
//! ## Cost
//! A campaign costs what `LeaseClient::acquire` costs on its store: one round trip for a
//! free lease; for a takeover, one claim where the store judges expiry, and where the
//! client watches (S3, DynamoDB) one read per poll interval for the TTL and the margin,
//! then the claim. A leader renews as its store renews: a round trip per third of the
//! TTL, or on etcd no transaction (the session's keep-alive message covers it).
//! Resigning is one write. How soon a waiting candidate takes over after it depends
//! on whether the store pushes its changes: on Postgres, etcd, ZooKeeper, MemoryStore
//! and Redis (with its pub/sub connection, which `RedisStore::connect` sets up) the
//! release wakes one waiter at once, and on SQLite within the 5 ms of its
//! `PRAGMA data_version` poller (docs/STORES.md); on MySQL a waiter looks again only
//! when the leader's lease could have run out (up to about a TTL, at most
//! `ClientConfig::max_acquire_backoff` plus up to 20 % jitter), and on DynamoDB and S3
//! at its store's poll interval (`with_poll_interval`, default 1 s) if that comes
//! first. [`Election::observe`] reads once per
//! [`ElectionConfig::observe_interval`], or waits on the store's push where it has one:
//! on SQLite, etcd, ZooKeeper and MemoryStore every change wakes it, on Postgres and
//! Redis only a release or a delete does (a new leader there shows at the next read).
//! Every observer of a name on one store value hears each change the store pushes;
//! only the acquirers are woken one at a time.
#![cfg_attr(docsrs, feature(doc_cfg))]

mod callbacks;
mod config;
mod election;
mod leadership;
mod observe;

pub use callbacks::Callbacks;
pub use config::ElectionConfig;
pub use election::Election;
pub use leadership::{Leader, LeaderContext, Leadership};
pub use observe::LeaderState;
