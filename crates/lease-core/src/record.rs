//! The lease record as stores keep it, its opaque version, and its portable encoding.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::{Error, FencingToken, HolderId, LeaseName, Result, Ttl};

/// What a store keeps under a lease name.
///
/// The token lives here and changes only inside the conditional write that changes the
/// holder (rule 1 of docs/DESIGN.md). A released lease is not deleted: it becomes *vacant*
/// (`holder: None`) and keeps its token, so the next grant continues the sequence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRecord {
    /// The current holder, or `None` when the lease was released.
    pub holder: Option<HolderId>,
    /// The fencing token of the current (or last) grant.
    pub token: FencingToken,
    /// The TTL of the last grant or renewal.
    pub ttl: Ttl,
    /// The holder's wall-clock expiry in Unix milliseconds, written for challengers
    /// that opted into a bounded-skew rule ([`crate::SkewBound`]). Never read otherwise.
    pub wall_expires_at_ms: Option<u64>,
}

impl LeaseRecord {
    /// A record held by `holder` with `token` for `ttl`.
    pub fn held(holder: HolderId, token: FencingToken, ttl: Ttl) -> Self {
        Self {
            holder: Some(holder),
            token,
            ttl,
            wall_expires_at_ms: None,
        }
    }

    /// The record a renewal writes: same holder and token, `ttl` from now, with the
    /// holder's wall-clock expiry (read only under an opt-in skew bound).
    #[must_use]
    pub fn renewed(&self, ttl: Ttl, wall_now_ms: u64) -> Self {
        Self {
            holder: self.holder.clone(),
            token: self.token,
            ttl,
            wall_expires_at_ms: Some(wall_now_ms.saturating_add(ttl.as_millis())),
        }
    }

    /// This record released: no holder, same token.
    #[must_use]
    pub fn vacated(&self) -> Self {
        Self {
            holder: None,
            token: self.token,
            ttl: self.ttl,
            wall_expires_at_ms: None,
        }
    }

    /// True when nobody holds it.
    pub fn is_vacant(&self) -> bool {
        self.holder.is_none()
    }
}

/// A store's opaque version of a record: an S3 ETag, an etcd mod_revision, a SQL or
/// DynamoDB version column. Only compared for equality; a store never reuses one for a
/// different content of the same name.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Version(Arc<str>);

impl Version {
    /// Wraps a store's version string.
    pub fn new(v: impl Into<Arc<str>>) -> Self {
        Self(v.into())
    }

    /// The version as the store gave it.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Version({})", self.0)
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<u64> for Version {
    fn from(v: u64) -> Self {
        Self::new(v.to_string())
    }
}

/// A record as read from (or written to) a store, with its version.
///
/// Built with [`Stored::new`] (and [`Stored::with_remaining`] on a store with a clock),
/// so that a new field is not a breaking change for stores written outside this crate.
///
/// ```
/// use std::time::Duration;
/// use leasehold_core::store::{LeaseRecord, Stored, Version};
/// use leasehold_core::{FencingToken, HolderId, Ttl};
/// let record = LeaseRecord::held(HolderId::new("a")?, FencingToken::new(7), Ttl::new(Duration::from_secs(5))?);
/// let stored = Stored::new(record, Version::new("12")).with_remaining(Some(Duration::from_secs(4)));
/// assert_eq!((stored.version.as_str(), stored.remaining), ("12", Some(Duration::from_secs(4))));
/// # Ok::<(), leasehold_core::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stored {
    /// The record.
    pub record: LeaseRecord,
    /// Its version.
    pub version: Version,
    /// For stores with a clock ([`crate::store::ClockSource::Store`]): the time left of the
    /// record's TTL as judged by the store's own clock when it answered (zero when it
    /// has run out). `None` for stores judged by observation.
    pub remaining: Option<Duration>,
}

impl Stored {
    /// `record` at `version`, with no time left known (a store judged by observation).
    pub const fn new(record: LeaseRecord, version: Version) -> Self {
        Self {
            record,
            version,
            remaining: None,
        }
    }

    /// Sets [`Stored::remaining`]: the time left as the store's own clock judged it.
    #[must_use]
    pub const fn with_remaining(mut self, remaining: Option<Duration>) -> Self {
        self.remaining = remaining;
        self
    }
}

/// How far a held record's expiry may lie beyond its TTL before the record is corrupt.
///
/// No write of this library puts an expiry more than the TTL ahead of the store's clock,
/// so one further ahead was planted by someone else (an operator, a restore) and would
/// keep the name held for that long: every store reports it as
/// [`crate::Error::CorruptRecord`] ([`expiry_is_possible`]). The slack tolerates a step
/// back of the store's clock by less than this, which only lengthens the leases held
/// across it.
pub const EXPIRY_SLACK: Duration = Duration::from_secs(60);

/// True unless `record` is held and `remaining` lies further ahead than its TTL plus
/// [`EXPIRY_SLACK`].
pub fn expiry_is_possible(record: &LeaseRecord, remaining: Duration) -> bool {
    record.is_vacant() || remaining <= record.ttl.get() + EXPIRY_SLACK
}

/// The portable encoding of a [`LeaseRecord`] for stores that keep a blob
/// (S3 objects, etcd values, Redis strings): compact JSON with a format number.
///
/// Decoding is strict: anything that is not exactly a valid record is
/// [`Error::CorruptRecord`], never a free lease.
///
/// ```
/// use leasehold_core::{FencingToken, HolderId, LeaseName, Ttl, store::{record_codec, LeaseRecord}};
/// let name = LeaseName::new("jobs/a").unwrap();
/// let rec = LeaseRecord::held(HolderId::new("w1").unwrap(), FencingToken::new(7), Ttl::from_millis(500).unwrap());
/// let bytes = record_codec::encode(&rec);
/// assert_eq!(record_codec::decode(&name, &bytes).unwrap(), rec);
/// assert!(record_codec::decode(&name, b"{\"nonsense\":1}").is_err());
/// ```
pub mod record_codec {
    use super::*;

    /// The format number written in every record.
    pub const FORMAT: u32 = 1;

    #[derive(Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Wire<'a> {
        f: u32,
        #[serde(borrow)]
        holder: Option<std::borrow::Cow<'a, str>>,
        token: u64,
        ttl_ms: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        wall_exp_ms: Option<u64>,
    }

    /// Encodes a record.
    pub fn encode(record: &LeaseRecord) -> Vec<u8> {
        let wire = Wire {
            f: FORMAT,
            holder: record.holder.as_ref().map(|h| h.as_str().into()),
            token: record.token.get(),
            ttl_ms: record.ttl.as_millis(),
            wall_exp_ms: record.wall_expires_at_ms,
        };
        serde_json::to_vec(&wire).unwrap_or_default()
    }

    /// Decodes a record kept under `name`.
    ///
    /// # Errors
    /// [`Error::CorruptRecord`] for anything that is not a valid record.
    pub fn decode(name: &LeaseName, bytes: &[u8]) -> Result<LeaseRecord> {
        let wire: Wire<'_> = serde_json::from_slice(bytes)
            .map_err(|e| Error::corrupt(name.as_str(), format!("not a lease record: {e}")))?;
        if wire.f != FORMAT {
            return Err(Error::corrupt(
                name.as_str(),
                format!("unknown record format {}", wire.f),
            ));
        }
        from_parts(name, wire.holder.as_deref(), wire.token, wire.ttl_ms, wire.wall_exp_ms)
    }

    /// Builds a record from column values (for stores that keep one column per field),
    /// with the same validation as [`decode`].
    ///
    /// # Errors
    /// [`Error::CorruptRecord`] for an invalid holder, a zero token, a token above
    /// [`FencingToken::MAX`] or an invalid TTL.
    pub fn from_parts(
        name: &LeaseName,
        holder: Option<&str>,
        token: u64,
        ttl_ms: u64,
        wall_expires_at_ms: Option<u64>,
    ) -> Result<LeaseRecord> {
        let holder = holder
            .map(HolderId::new)
            .transpose()
            .map_err(|e| Error::corrupt(name.as_str(), format!("bad holder: {e}")))?;
        if token == 0 {
            return Err(Error::corrupt(name.as_str(), "token 0 is never issued"));
        }
        if FencingToken::new(token) > FencingToken::MAX {
            return Err(Error::corrupt(
                name.as_str(),
                format!("token {token} is above the highest ever issued, {}", FencingToken::MAX),
            ));
        }
        let ttl = Ttl::from_millis(ttl_ms).map_err(|e| Error::corrupt(name.as_str(), format!("bad ttl: {e}")))?;
        Ok(LeaseRecord {
            holder,
            token: FencingToken::new(token),
            ttl,
            wall_expires_at_ms,
        })
    }
}
