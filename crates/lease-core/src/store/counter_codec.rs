//! The one text format of a name's fence counter for stores that keep it as a value of
//! its own (etcd's `!fence` key, ZooKeeper's `!fence` znode): the highest token issued,
//! as exactly 20 ASCII digits, so that byte order is numeric order.

use crate::{Error, FencingToken, LeaseName, Result};

/// Digits in an encoded fence counter (`u64::MAX` has 20).
pub const DIGITS: usize = 20;

/// Encodes a fence counter.
///
/// ```
/// use leasehold_core::FencingToken;
/// use leasehold_core::store::counter_codec;
/// assert_eq!(counter_codec::encode(FencingToken::new(42)), b"00000000000000000042");
/// ```
pub fn encode(token: FencingToken) -> Vec<u8> {
    format!("{:0width$}", token.get(), width = DIGITS).into_bytes()
}

/// Decodes the fence counter of `name`; anything but exactly 20 ASCII digits, or a
/// counter above [`FencingToken::MAX`], is [`Error::CorruptRecord`].
///
/// # Errors
/// [`Error::CorruptRecord`] as above.
pub fn decode(name: &LeaseName, bytes: &[u8]) -> Result<FencingToken> {
    let corrupt = || Error::corrupt(name.as_str(), "the fence counter does not hold 20 ASCII digits");
    if bytes.len() != DIGITS || !bytes.iter().all(u8::is_ascii_digit) {
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
    fn round_trip_order_and_garbage() {
        let n = LeaseName::new("a").unwrap_or_else(|e| panic!("{e}"));
        for t in [1, 9, 10, 12_345, FencingToken::MAX.get()] {
            assert_eq!(
                decode(&n, &encode(FencingToken::new(t))).ok(),
                Some(FencingToken::new(t))
            );
        }
        for t in [FencingToken::MAX.get() + 1, u64::MAX] {
            assert!(
                matches!(
                    decode(&n, &encode(FencingToken::new(t))),
                    Err(Error::CorruptRecord { .. })
                ),
                "{t}"
            );
        }
        assert!(encode(FencingToken::new(9)) < encode(FencingToken::new(10)));
        for bad in [
            &b""[..],
            b"12",
            b"0000000000000000000x",
            b"-0000000000000000001",
            b"000000000000000000001",
        ] {
            assert!(decode(&n, bad).is_err(), "{bad:?} accepted");
        }
    }
}
