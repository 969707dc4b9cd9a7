//! Where a lease name's two znodes live, how the fence counter and the version are
//! encoded, and what a read of both znodes means.
//!
//! - `<root>/<name>`: the lease record (JSON, [`record_codec`]). A held record is an
//!   EPHEMERAL znode of its holder's session; a vacant one is PERSISTENT.
//! - `<root>/<name>!fence`: the highest token ever issued for the name, as 20 ASCII
//!   digits. PERSISTENT and never deleted (but by a purge, of a name nobody takes again),
//!   so tokens keep growing across session expiry
//!   and server restarts. Every write of the name bumps its znode version in the same
//!   `multi` (a versioned `setData`): that version is the name's write count, the first
//!   half of a record's [`Version`].
//!
//! A name's `/` is written `%2F` in the znode name (`%` and `!` are no name's
//! characters), so every name is one child of the root.

use leasehold_core::store::{LeaseRecord, Version, counter_codec, record_codec};
use leasehold_core::{Error, FencingToken, LeaseName, Result};
use tokio::time::Instant;

/// What starts a kept record's znode data, before its JSON: a held record made to
/// outlive its writer's session ([`leasehold_core::store::CasStore::expire`]), in a
/// PERSISTENT znode. A held record in a persistent znode without it is corrupt.
pub(crate) const KEPT_PREFIX: &[u8] = b"kept:";

/// The suffix of a name's fence-counter znode.
pub(crate) const FENCE_SUFFIX: &str = "!fence";

/// The znode paths of one lease name.
#[derive(Debug, Clone)]
pub(crate) struct Paths {
    pub(crate) record: String,
    pub(crate) fence: String,
}

impl Paths {
    pub(crate) fn new(root: &str, name: &LeaseName) -> Self {
        let record = format!("{root}/{}", child_of(name));
        let fence = format!("{record}{FENCE_SUFFIX}");
        Self { record, fence }
    }
}

/// The child znode name of `name`'s record.
pub(crate) fn child_of(name: &LeaseName) -> String {
    name.as_str().replace('/', "%2F")
}

/// The lease name whose record is the child `child`, if it is one (fence counters and
/// foreign znodes are not).
pub(crate) fn name_of(child: &str) -> Option<LeaseName> {
    if child.ends_with(FENCE_SUFFIX) {
        return None;
    }
    LeaseName::new(child.replace("%2F", "/")).ok()
}

/// Encodes a fence counter ([`counter_codec`]).
pub(crate) fn encode_fence(token: FencingToken) -> Vec<u8> {
    counter_codec::encode(token)
}

/// Decodes a fence counter ([`counter_codec`]).
pub(crate) fn decode_fence(name: &LeaseName, bytes: &[u8]) -> Result<FencingToken> {
    counter_codec::decode(name, bytes)
}

/// A record's version: the fence counter znode's version after the write that made the
/// record, and the record znode's own data version (0 for every record this store
/// writes; a foreign `set` raises it). The counter's version grows with every write of
/// the name and the counter is never deleted (a purge deletes it only for a name nobody
/// takes again), so no version is ever reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Ver {
    pub(crate) counter: i32,
    pub(crate) record: i32,
}

impl Ver {
    /// The version as one decimal number: the counter's version in the high 32 bits, the
    /// record's data version in the low 32.
    pub(crate) fn to_version(self) -> Version {
        let n = (u64::from(self.counter.unsigned_abs()) << 32) | u64::from(self.record.unsigned_abs());
        Version::new(n.to_string())
    }

    pub(crate) fn parse(v: &Version) -> Result<Self> {
        let bad = || {
            Error::invalid(
                "version",
                format!("{:?} is not a ZooKeeper store version (a decimal number)", v.as_str()),
            )
        };
        let s = v.as_str();
        if s.is_empty() || s.len() > 20 || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        let n = s.parse::<u64>().map_err(|_| bad())?;
        let counter = i32::try_from(n >> 32).map_err(|_| bad())?;
        let record = i32::try_from(n & 0xffff_ffff).map_err(|_| bad())?;
        Ok(Self { counter, record })
    }

    /// Its position in the name's history for the wake-up hub: even for a record,
    /// odd for the record's removal that followed it (an expiry, a delete).
    pub(crate) fn position(self) -> u64 {
        u64::try_from(self.counter).unwrap_or(0) * 2 + 2
    }
}

/// The fence counter as read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Counter {
    pub(crate) token: FencingToken,
    pub(crate) version: i32,
}

/// The record znode as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RecordNode {
    pub(crate) bytes: Vec<u8>,
    pub(crate) data_version: i32,
    pub(crate) ephemeral_owner: i64,
    pub(crate) mzxid: i64,
}

/// A name's two znodes as one read (or this store's last write) showed them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Snapshot {
    pub(crate) counter: Option<Counter>,
    pub(crate) record: Option<RecordNode>,
    /// When a read showed them (`None`: this store's own write).
    pub(crate) read_at: Option<Instant>,
}

/// What a snapshot means.
#[derive(Debug)]
pub(crate) enum Decoded {
    /// Never written (or only a counter: the record expired or was deleted).
    Absent,
    /// A record at a version.
    Present(Ver, LeaseRecord),
    /// A kept record at a version: held, in a PERSISTENT znode, until a purge removes
    /// it (its writer's session no longer bounds it; nor does any clock of the store).
    Kept(Ver, LeaseRecord),
}

impl Snapshot {
    /// Decodes the snapshot; a counter or record that this store could not have written
    /// is [`Error::CorruptRecord`].
    pub(crate) fn decode(&self, name: &LeaseName) -> Result<Decoded> {
        let Some(node) = &self.record else {
            return Ok(Decoded::Absent);
        };
        let corrupt = |why: String| Err(Error::corrupt(name.as_str(), why));
        let Some(counter) = self.counter else {
            return corrupt("the record znode exists without its fence counter znode".to_owned());
        };
        let ver = Ver {
            counter: counter.version,
            record: node.data_version,
        };
        if let Some(json) = node.bytes.strip_prefix(KEPT_PREFIX) {
            let record = record_codec::decode(name, json)?;
            if record.holder.is_none() || node.ephemeral_owner != 0 {
                return corrupt("a kept record that is not a held record in a persistent znode".to_owned());
            }
            return Ok(Decoded::Kept(ver, record));
        }
        let record = record_codec::decode(name, &node.bytes)?;
        if record.holder.is_some() && node.ephemeral_owner == 0 {
            return corrupt("a held record in a persistent znode (no session would ever expire it)".to_owned());
        }
        if record.holder.is_none() && node.ephemeral_owner != 0 {
            return corrupt("a vacant record in an ephemeral znode".to_owned());
        }
        Ok(Decoded::Present(ver, record))
    }

    /// The counter, checked, or `None` if there is none.
    pub(crate) fn counter(&self, name: &LeaseName) -> Result<Option<Counter>> {
        self.counter
            .map(|c| Ok(c).and_then(|c| check_counter(name, c)))
            .transpose()
    }
}

fn check_counter(name: &LeaseName, c: Counter) -> Result<Counter> {
    if c.version < 0 || c.token == FencingToken::ZERO && c.version > 0 {
        return Err(Error::corrupt(
            name.as_str(),
            format!("the fence counter is at token {} after {} writes", c.token, c.version),
        ));
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout() {
        let p = Paths::new("/lh", &LeaseName::new("jobs/a").unwrap());
        assert_eq!(p.record, "/lh/jobs%2Fa");
        assert_eq!(p.fence, "/lh/jobs%2Fa!fence");
        assert_eq!(
            name_of("jobs%2Fa").map(|n| n.as_str().to_owned()),
            Some("jobs/a".to_owned())
        );
        assert_eq!(name_of("jobs%2Fa!fence"), None);
    }

    #[test]
    fn versions() {
        let v = Ver { counter: 7, record: 0 };
        assert_eq!(Ver::parse(&v.to_version()).ok(), Some(v));
        assert_eq!(v.to_version().as_str(), (7_u64 << 32).to_string());
        assert_eq!(Ver::parse(&Version::new("1")).ok(), Some(Ver { counter: 0, record: 1 }));
        for bad in [
            "",
            "-1",
            "1.0",
            "x",
            "+1",
            "18446744073709551616",
            &(1_u64 << 63).to_string(),
        ] {
            assert!(Ver::parse(&Version::new(bad)).is_err(), "{bad:?} accepted");
        }
        assert!(Ver { counter: 1, record: 0 }.position() > Ver { counter: 0, record: 5 }.position());
    }
}
