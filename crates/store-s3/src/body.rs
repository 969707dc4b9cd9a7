//! The bytes of a lease-record object: the portable record encoding, made unique per
//! write.
//!
//! S3's ETag of a single-part upload is the MD5 of the body, so two writes of the same
//! record would get the same ETag, and a version would be reused (a renewal that wrote
//! the same bytes again would look unchanged to a challenger watching the ETag). Each
//! write therefore appends a random 128-bit nonce to the JSON, spelled in JSON's own
//! insignificant whitespace (two bits per character from space, tab, newline, carriage
//! return). The object stays one valid JSON document that [`record_codec::decode`] reads
//! as it is, and ETags of different writes collide with probability 2^-128.

use leasehold_core::{
    LeaseName, Result,
    store::{LeaseRecord, record_codec},
};

/// The whitespace alphabet of the nonce: two bits per character.
const NONCE_ALPHABET: [u8; 4] = [b' ', b'\t', b'\n', b'\r'];

/// Characters of the nonce (128 bits, two per character).
const NONCE_CHARS: usize = 64;

/// The body of a new write of `record`.
pub(crate) fn encode(record: &LeaseRecord) -> Vec<u8> {
    encode_with_nonce(record, rand::random())
}

fn encode_with_nonce(record: &LeaseRecord, nonce: u128) -> Vec<u8> {
    let mut bytes = record_codec::encode(record);
    bytes.reserve(1 + NONCE_CHARS);
    bytes.push(b'\n');
    for i in 0..NONCE_CHARS {
        let symbol = (nonce >> (2 * i)) & 0b11;
        bytes.push(NONCE_ALPHABET[usize::try_from(symbol).unwrap_or(0)]);
    }
    bytes
}

/// Reads an object's body as a lease record (the nonce is whitespace, ignored).
pub(crate) fn decode(name: &LeaseName, bytes: &[u8]) -> Result<LeaseRecord> {
    record_codec::decode(name, bytes)
}

#[cfg(test)]
mod tests {
    use leasehold_core::{FencingToken, HolderId, Ttl};

    use super::*;

    fn rec() -> LeaseRecord {
        LeaseRecord::held(
            HolderId::new("w1").expect("holder"),
            FencingToken::new(3),
            Ttl::from_millis(900).expect("ttl"),
        )
    }

    #[test]
    fn round_trips_and_differs_per_write() {
        let name = LeaseName::new("a/b").expect("name");
        let a = encode(&rec());
        let b = encode(&rec());
        assert_ne!(a, b, "two writes of one record must differ");
        assert_eq!(decode(&name, &a).expect("decode"), rec());
        assert_eq!(decode(&name, &b).expect("decode"), rec());
    }

    #[test]
    fn nonce_is_whitespace_after_the_record() {
        let plain = record_codec::encode(&rec());
        let body = encode_with_nonce(&rec(), u128::MAX);
        assert_eq!(&body[..plain.len()], &plain[..]);
        assert_eq!(body.len(), plain.len() + 1 + NONCE_CHARS);
        assert!(body[plain.len()..].iter().all(u8::is_ascii_whitespace));
        assert_ne!(encode_with_nonce(&rec(), 1), encode_with_nonce(&rec(), 2));
    }

    #[test]
    fn garbage_is_corrupt() {
        let name = LeaseName::new("a").expect("name");
        for bad in [&b""[..], b"\x00\x01", b"{}", b"[1,2]", b"{\"f\":1}"] {
            assert!(
                matches!(decode(&name, bad), Err(leasehold_core::Error::CorruptRecord { .. })),
                "{bad:?}"
            );
        }
    }
}
