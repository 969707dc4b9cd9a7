//! # leasehold-core
//!
//! Leases and fencing tokens over pluggable compare-and-swap stores, so that "only one
//! copy does this at a time" holds even when a holder freezes past its lease.
//!
//! Most users add the `leasehold` crate, which re-exports this one with the stores and
//! layers behind features. What is where:
//!
//! - **The root: using leases.** [`LeaseClient`] (configured by [`ClientConfig`])
//!   acquires leases from a store and renews them all from one driver task (with
//!   [`AcquireOptions`] for a cap on a hold or a timeout), sending the renewals that
//!   come due together in one request where the store batches them
//!   ([`store::CasStore::renew_many`]); each grant
//!   is a [`Lease`] guard with a [`FencingToken`] and a loss signal ([`LossCause`]);
//!   every failure is an [`Error`]. [`fence`] is the fenced-write contract (and the SQL
//!   guard builder), [`MemoryStore`] an in-process store that behaves like the real
//!   ones, [`clock`] the injectable wall clock, [`observe`] the metric names.
//! - **[`store`]: implementing a store.** The [`store::CasStore`] trait, its record,
//!   version and outcome types, capabilities and record codec. Store crates
//!   (`leasehold-postgres`, `leasehold-sqlite`, `leasehold-mysql`, `leasehold-etcd`,
//!   `leasehold-zookeeper`, `leasehold-dynamodb`, `leasehold-s3`, `leasehold-redis`)
//!   implement it and run the one `conformance` suite
//!   (feature `conformance`) against their real servers.
//! - **`testing`** (feature `testing`): counting and fault-injecting store wrappers, a
//!   skewed wall clock, freezing a process.
//!
//! ## Beyond one lease
//! - **No waiting on yourself.** Acquiring a name the same client already holds is
//!   [`Error::AlreadyHeld`] at once; leases are not reentrant ([`LeaseClient`] says why).
//! - **A hard cap on a hold.** [`AcquireOptions::max_hold`] (or
//!   [`ClientConfig::max_hold`]): past it the lease is no longer renewed and ends with
//!   [`LossCause::MaxHoldReached`] before anyone else can take it.
//! - **Several names together.** [`LeaseClient::acquire_all`] takes them in one sorted
//!   order (no deadlock between callers), all or none, as one [`LeaseSet`] with one
//!   loss signal.
//! - **At most N at a time.** A [`Semaphore`] of N permits hands out [`Permit`]s, each
//!   the lease of one of N slots with that slot's own fencing tokens.
//!
//! The lease decision itself (may this caller take, renew, release, with which token)
//! is a private pure function of the record read, the request and monotonic time,
//! tested exhaustively inside this crate.
//!
//! ## The guarantee, and its limit
//! A lease only limits who *starts*; the fence decides who *succeeds*. A holder that
//! froze past its TTL (GC pause, SIGSTOP, VM migration) wakes up believing it holds the
//! lease until its loss signal fires; in that window its writes must carry
//! [`Lease::token`] to a resource that refuses tokens older than the newest it has seen.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! use std::time::Duration;
//! use leasehold_core::{LeaseClient, MemoryStore};
//!
//! let client = LeaseClient::new(MemoryStore::new());
//! let lease = client.acquire("nightly-payout", Duration::from_secs(30)).await?;
//! let token = lease.token(); // carry this on every protected write
//! tokio::select! {
//!     _ = async { /* the work, writing with `token` */ } => {}
//!     cause = lease.lost() => { eprintln!("lost the lease: {cause}"); }
//! }
//! lease.release().await?;
//! # let _ = token;
//! # Ok::<(), leasehold_core::Error>(()) }).unwrap();
//! ```
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod admin;
mod backoff;
mod batch;
mod client;
pub mod clock;
mod decision;
mod driver;
mod error;
mod failure;
pub mod fence;
mod finish;
mod held;
mod lease;
mod lease_set;
mod mailbox;
mod memory;
mod name;
pub mod observe;
mod options;
mod policy;
mod record;
mod seen;
mod semaphore;
pub mod store;
mod token;
mod ttl;
mod validity;
mod wait;
mod wake_hub;

#[cfg(feature = "testing")]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub mod testing;

#[cfg(feature = "conformance")]
#[cfg_attr(docsrs, doc(cfg(feature = "conformance")))]
pub mod conformance;

pub use client::{AcquireOutcome, ClientConfig, ClientConfigBuilder, LeaseClient};
pub use error::{BoxError, Error, Result};
pub use lease::{Lease, LossCause};
pub use lease_set::LeaseSet;
pub use memory::MemoryStore;
pub use name::{HolderId, LeaseName, MAX_HOLDER_LEN, MAX_NAME_LEN, NamePrefix};
pub use options::AcquireOptions;
pub use policy::{Policy, SkewBound};
pub use semaphore::{MAX_PERMITS, Permit, PermitOutcome, Semaphore};
pub use token::FencingToken;
pub use ttl::Ttl;
pub use validity::Validity;
