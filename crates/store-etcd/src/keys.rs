//! Where a lease name's two keys live, and how the fence counter is encoded.
//!
//! - `<prefix><name>`: the lease record (JSON, [`leasehold_core::store::record_codec`]). A held
//!   record is attached to its holder's session lease; a vacant one has no lease.
//! - `<prefix><name>!fence`: the highest token ever issued for the name, as 20 ASCII
//!   digits. It has no lease and is never deleted, so tokens keep growing across expiry.
//!
//! The range `[<prefix><name>, <prefix><name>!fence\0)` holds exactly these two keys:
//! names and prefixes only use characters above `!`, so no other key of this layout
//! sorts between them. One range read returns both in one snapshot.

use leasehold_core::store::counter_codec;
use leasehold_core::{FencingToken, LeaseName, Result};

/// The suffix of a name's fence-counter key.
pub(crate) const FENCE_SUFFIX: &[u8] = b"!fence";

/// The keys of one lease name.
#[derive(Debug, Clone)]
pub(crate) struct Keys {
    pub(crate) record: Vec<u8>,
    pub(crate) fence: Vec<u8>,
    /// Exclusive end of the range holding both keys.
    pub(crate) range_end: Vec<u8>,
}

impl Keys {
    pub(crate) fn new(prefix: &str, name: &LeaseName) -> Self {
        let mut record = Vec::with_capacity(prefix.len() + name.as_str().len());
        record.extend_from_slice(prefix.as_bytes());
        record.extend_from_slice(name.as_str().as_bytes());
        let mut fence = record.clone();
        fence.extend_from_slice(FENCE_SUFFIX);
        let mut range_end = fence.clone();
        range_end.push(0);
        Self {
            record,
            fence,
            range_end,
        }
    }
}

/// Encodes a fence counter so that byte order is numeric order (etcd compares values as
/// bytes): [`counter_codec`].
pub(crate) fn encode_fence(token: FencingToken) -> Vec<u8> {
    counter_codec::encode(token)
}

/// Decodes a fence counter ([`counter_codec`]).
pub(crate) fn decode_fence(name: &LeaseName, bytes: &[u8]) -> Result<FencingToken> {
    counter_codec::decode(name, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout() {
        let k = Keys::new("lh/", &LeaseName::new("jobs/a").unwrap());
        assert_eq!(k.record, b"lh/jobs/a");
        assert_eq!(k.fence, b"lh/jobs/a!fence");
        assert_eq!(k.range_end, b"lh/jobs/a!fence\0");
        // No other valid name's record falls inside the range.
        for other in ["jobs/a/b", "jobs/a-b", "jobs/a#1", "jobs/a0", "jobs/a.b", "jobs/a="] {
            let o = Keys::new("lh/", &LeaseName::new(other).unwrap());
            assert!(
                o.record.as_slice() >= k.range_end.as_slice(),
                "{other} sorts inside the range of jobs/a"
            );
        }
    }
}
