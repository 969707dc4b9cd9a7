//! # leasehold-core
//!
//! Leases and fencing tokens over pluggable compare-and-swap stores, so that "only one
//! copy does this at a time" holds even when a holder freezes past its lease.
//!
//! - [`LeaseClient`] acquires leases from a [`CasStore`] and renews them all from one
//!   driver task; each grant is a [`Lease`] guard with a [`FencingToken`] and a loss
//!   signal.
//! - [`decision`] is the pure lease logic (no I/O, time passed in).
//! - [`fence`] builds SQL statements whose `WHERE` clause refuses stale tokens.
//! - [`MemoryStore`] is an in-process store that behaves like the real ones.
//! - Store crates (`leasehold-postgres`, `leasehold-sqlite`, `leasehold-etcd`, `leasehold-dynamodb`,
//!   `leasehold-s3`, `leasehold-redis`) implement [`CasStore`] and run the one
//!   [`conformance`] suite (feature `conformance`) against their real servers.
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

mod backoff;
mod client;
mod clock;
pub mod decision;
mod driver;
mod error;
pub mod fence;
mod lease;
mod memory;
mod name;
pub mod observe;
mod record;
mod seen;
mod store;
mod token;
mod ttl;

#[cfg(feature = "testing")]
pub mod testing;

#[cfg(feature = "conformance")]
pub mod conformance;

pub use client::{AcquireOutcome, ClientConfig, LeaseClient};
pub use clock::{SkewedWallClock, SystemWallClock, WallClock};
pub use decision::{Policy, SkewBound};
pub use error::{BoxError, Error, Result};
pub use lease::{Lease, LossCause};
pub use memory::MemoryStore;
pub use name::{HolderId, LeaseName, MAX_HOLDER_LEN, MAX_NAME_LEN};
pub use record::{LeaseRecord, Stored, Version, record_codec};
pub use store::{
    Capabilities, CasOutcome, CasStore, ClockSource, Current, DeleteOutcome, Grade, Linearizable, Precondition,
};
pub use token::FencingToken;
pub use ttl::Ttl;
