//! Administration of leases, for operators and tools rather than holders: list the
//! leases under a prefix, read one lease's state for a person, and release a lease by
//! force. The `leasehold` command's `list`, `show` and `release --force` are these.
//!
//! ```
//! use leasehold_core::admin::{Admin, ForcedRelease, Status};
//! use leasehold_core::{LeaseClient, LeaseName, LossCause, MemoryStore, NamePrefix};
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> leasehold_core::Result<()> {
//! let store = MemoryStore::new();
//! let client = LeaseClient::new(store.clone());
//! let lease = client.acquire("jobs/nightly", std::time::Duration::from_secs(3)).await?;
//!
//! let admin = Admin::new(store);
//! let name = LeaseName::new("jobs/nightly")?;
//! assert_eq!(admin.list(&NamePrefix::new("jobs/")?).await?, [name.clone()]);
//! let state = admin.inspect(&name).await?;
//! assert_eq!(state.status, Status::Held);
//! assert_eq!(state.token, Some(lease.token()));
//!
//! // The holder may still be running: it learns of the release at its next renewal
//! // (a third of its TTL after the grant), as released by someone else.
//! let released = admin.force_release(&name).await?;
//! assert!(matches!(released, ForcedRelease::Released { token, .. } if token == lease.token()));
//! assert_eq!(admin.inspect(&name).await?.status, Status::Vacant);
//! assert_eq!(lease.lost().await, LossCause::ReleasedByOther);
//! # Ok(())
//! # }
//! ```

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::store::{CasOutcome, CasStore, ClockSource, Grade, Precondition, Stored, Version};
use crate::{FencingToken, HolderId, LeaseName, NamePrefix, Result};

/// How many times a forced release reads and writes again when the record changed in
/// between.
pub const FORCE_ATTEMPTS: u32 = 3;

/// Administration of the leases in one store.
#[derive(Clone)]
pub struct Admin {
    store: Arc<dyn CasStore>,
}

impl fmt::Debug for Admin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Admin").finish_non_exhaustive()
    }
}

/// Where a lease stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Status {
    /// No record was ever written (or it was deleted).
    Absent,
    /// Released: nobody holds it; the token of the last grant is kept.
    Vacant,
    /// Held, and (on a store with a clock) its time has not run out. On a store judged
    /// by observation a held record may belong to a holder that died: only watching it
    /// for a whole TTL tells.
    Held,
    /// Held, but its time ran out on the store's clock: the next acquire takes it over.
    Expired,
}

impl Status {
    /// `absent`, `vacant`, `held` or `expired`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Absent => "absent",
            Self::Vacant => "vacant",
            Self::Held => "held",
            Self::Expired => "expired",
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One lease's state, for a person (its [`fmt::Display`] is one line) or a tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseState {
    /// The lease name.
    pub name: LeaseName,
    /// Where it stands.
    pub status: Status,
    /// The holder, while held (or expired).
    pub holder: Option<HolderId>,
    /// The token of the current or last grant; `None` when absent.
    pub token: Option<FencingToken>,
    /// The TTL of the last grant or renewal; `None` when absent.
    pub ttl: Option<Duration>,
    /// The time left on the store's clock while held; `None` where expiry is judged by
    /// observation ([`ClockSource::Observation`]) or the lease is not held.
    pub remaining: Option<Duration>,
    /// The store's version of the record; `None` when absent.
    pub version: Option<Version>,
    /// Where the store judges expiry.
    pub clock: ClockSource,
    /// What the store's leases may be trusted for.
    pub grade: Grade,
}

impl LeaseState {
    /// The state of `name` from its record (`None`: absent) on a store of `clock` and
    /// `grade`.
    pub fn of(name: &LeaseName, stored: Option<&Stored>, clock: ClockSource, grade: Grade) -> Self {
        let mut state = Self {
            name: name.clone(),
            status: Status::Absent,
            holder: None,
            token: None,
            ttl: None,
            remaining: None,
            version: None,
            clock,
            grade,
        };
        if let Some(s) = stored {
            state.holder = s.record.holder.clone();
            state.token = Some(s.record.token);
            state.ttl = Some(s.record.ttl.get());
            state.version = Some(s.version.clone());
            state.status = if s.record.is_vacant() {
                Status::Vacant
            } else if s.remaining.is_some_and(|r| r.is_zero()) {
                Status::Expired
            } else {
                Status::Held
            };
            if !s.record.is_vacant() {
                state.remaining = s.remaining;
            }
        }
        state
    }
}

impl fmt::Display for LeaseState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = &self.name;
        let token = self.token.unwrap_or(FencingToken::ZERO);
        match (self.status, &self.holder) {
            (Status::Absent, _) => write!(f, "{name}: absent (never granted)"),
            (Status::Vacant, _) => write!(f, "{name}: vacant (last token {token})"),
            (Status::Expired, Some(h)) => write!(f, "{name}: expired (held by {h} with token {token})"),
            (Status::Held, Some(h)) => {
                write!(f, "{name}: held by {h} with token {token}, ")?;
                match self.remaining {
                    Some(left) => write!(f, "{left:?} left on the store's clock"),
                    None => f.write_str("time left unknown: judged by observation"),
                }
            }
            (status, None) => write!(f, "{name}: {status} (token {token})"),
        }
    }
}

/// What a forced release did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub enum ForcedRelease {
    /// The lease was held and is now vacant, its token kept: the next grant's token is
    /// higher, and a fence that checks `token` refuses the old holder. The old holder
    /// may still be running: it learns of the release at its next renewal.
    Released {
        /// Who held it.
        holder: HolderId,
        /// The token of its grant.
        token: FencingToken,
    },
    /// Nobody held it; nothing was written.
    AlreadyVacant {
        /// The token of the last grant.
        token: FencingToken,
    },
    /// There is no such lease; nothing was written.
    Absent,
    /// The record changed between the read and the write [`FORCE_ATTEMPTS`] times
    /// (a busy lease); nothing was written. Trying again may succeed.
    KeptChanging,
}

impl Admin {
    /// Administration of the leases in `store`.
    pub fn new(store: impl CasStore + 'static) -> Self {
        Self { store: Arc::new(store) }
    }

    /// Administration of the leases in a shared store (a [`crate::LeaseClient::store`]).
    pub fn shared(store: Arc<dyn CasStore>) -> Self {
        Self { store }
    }

    /// The names of the leases whose names start with `prefix`, sorted: one listing of
    /// the store ([`CasStore::list`]).
    ///
    /// # Errors
    /// [`crate::Error::Unsupported`] where the store cannot list; store errors.
    pub async fn list(&self, prefix: &NamePrefix) -> Result<Vec<LeaseName>> {
        self.store.list(prefix).await
    }

    /// The state of `name`, from one read.
    ///
    /// # Errors
    /// Store errors; [`crate::Error::CorruptRecord`] for a record that is not a lease.
    pub async fn inspect(&self, name: &LeaseName) -> Result<LeaseState> {
        let stored = self.store.read(name).await?;
        let caps = self.store.capabilities();
        Ok(LeaseState::of(name, stored.as_ref(), caps.clock, caps.grade))
    }

    /// Makes `name` vacant whoever holds it, keeping its token sequence: a conditional
    /// write of the vacant record on the version just read (read again, up to
    /// [`FORCE_ATTEMPTS`] times, when it changed in between).
    ///
    /// # Errors
    /// Store errors ([`crate::Error::Indeterminate`]: the release may have applied);
    /// [`crate::Error::CorruptRecord`] for a record that is not a lease.
    pub async fn force_release(&self, name: &LeaseName) -> Result<ForcedRelease> {
        for _ in 0..FORCE_ATTEMPTS {
            let Some(stored) = self.store.read(name).await? else {
                return Ok(ForcedRelease::Absent);
            };
            let Some(holder) = stored.record.holder.clone() else {
                return Ok(ForcedRelease::AlreadyVacant {
                    token: stored.record.token,
                });
            };
            let expect = Precondition::Version(stored.version.clone());
            match self.store.write(name, &expect, &stored.record.vacated()).await? {
                CasOutcome::Written(_) => {
                    return Ok(ForcedRelease::Released {
                        holder,
                        token: stored.record.token,
                    });
                }
                CasOutcome::Conflict(_) => {}
            }
        }
        Ok(ForcedRelease::KeptChanging)
    }
}
