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

use leasehold_core::{Error, FencingToken, LeaseName, Result};

/// The suffix of a name's fence-counter key.
pub(crate) const FENCE_SUFFIX: &[u8] = b"!fence";

/// Digits in an encoded fence counter (`u64::MAX` has 20).
const FENCE_DIGITS: usize = 20;

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
/// bytes).
pub(crate) fn encode_fence(token: FencingToken) -> Vec<u8> {
    format!("{:0width$}", token.get(), width = FENCE_DIGITS).into_bytes()
}

/// Decodes a fence counter; anything but exactly 20 ASCII digits, or a counter above
/// [`FencingToken::MAX`], is corrupt.
pub(crate) fn decode_fence(name: &LeaseName, bytes: &[u8]) -> Result<FencingToken> {
    let corrupt = || Error::corrupt(name.as_str(), "the fence counter key does not hold 20 ASCII digits");
    if bytes.len() != FENCE_DIGITS || !bytes.iter().all(u8::is_ascii_digit) {
        return Err(corrupt());
    }
    let text = std::str::from_utf8(bytes).map_err(|_| corrupt())?;
    let token = text.parse::<u64>().map(FencingToken::new).map_err(|_| corrupt())?;
    if token > FencingToken::MAX {
        return Err(Error::corrupt(
            name.as_str(),
            format!(
                "the fence counter {token} is above the highest token, {}",
                FencingToken::MAX
            ),
        ));
    }
    Ok(token)
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

    #[test]
    fn fence_round_trip_and_order() {
        let n = LeaseName::new("a").unwrap();
        for t in [1, 9, 10, 12_345, FencingToken::MAX.get()] {
            let e = encode_fence(FencingToken::new(t));
            assert_eq!(decode_fence(&n, &e).ok(), Some(FencingToken::new(t)));
        }
        // Above the last token: written by someone else.
        for t in [FencingToken::MAX.get() + 1, u64::MAX] {
            let e = encode_fence(FencingToken::new(t));
            assert!(matches!(decode_fence(&n, &e), Err(Error::CorruptRecord { .. })), "{t}");
        }
        assert!(encode_fence(FencingToken::new(9)) < encode_fence(FencingToken::new(10)));
        for bad in [
            &b""[..],
            b"12",
            b"0000000000000000000x",
            b"-0000000000000000001",
            b"000000000000000000001",
        ] {
            assert!(decode_fence(&n, bad).is_err(), "{bad:?} accepted");
        }
    }
}
