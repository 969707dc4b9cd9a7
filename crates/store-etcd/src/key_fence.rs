//! Fenced writes on an etcd key of the caller's: the key's value carries its own token
//! mark, and one etcd transaction checks the mark and writes (the `KeyFence` of the
//! naming table in [`leasehold_core::fence`]). The encoding and the transaction are
//! documented on [`KeyFence`].

use etcd_client::{Compare, CompareOp, Txn, TxnOp, TxnOpResponse, TxnResponse};
use leasehold_core::fence::{FenceMode, FencedOutcome, rejected_by};
use leasehold_core::{Error, FencingToken, Result};

use crate::error::Effect;
use crate::keys::encode_fence;
use crate::store::EtcdStore;

/// The header every fenced value starts with, followed by the 20-digit mark and `\n`.
pub const KEY_FENCE_HEADER: &[u8] = b"leasehold-fence/1 token=";

/// Digits of the mark (`u64::MAX` has 20).
const DIGITS: usize = 20;
/// What follows the mark's digits.
const SEPARATOR: u8 = b'\n';

/// The guard of fenced writes carrying one writer's token to one etcd key whose value
/// carries its own high-water mark.
///
/// The guard is [`FenceMode::NotOlder`] (`mark <= token`: many writes per tenure) unless
/// [`KeyFence::strict`] asks for `mark < token` (one write per grant). A write that
/// passes sets the mark to the token; a refused one changes nothing and is
/// [`Error::FenceRejected`].
///
/// ## The value
/// ```text
/// leasehold-fence/1 token=<the writer's token, 20 ASCII digits, zero-padded>\n<the caller's bytes>
/// ```
/// for example `leasehold-fence/1 token=00000000000000000007\n42`. The token is the
/// key's high-water mark: every fenced write replaces the whole value, mark and bytes
/// together, so they can never be written apart. Read it back with
/// [`EtcdStore::read_fenced`] (or decode a value you read yourself with
/// [`KeyFence::decode`]).
///
/// ## The transaction
/// etcd compares values as bytes, and the digits have one length, so the mark's order is
/// the values' order up to the first byte after the digits:
///
/// ```text
/// If(create_revision(key) == 0)                          -- never written: create it
/// Then(put key <header><token>\n<bytes>)
/// Else(Txn(
///     If(value(key) > <header>00000000000000000001       -- a fence value (mark >= 1)
///        AND value(key) < <bound>)                       -- whose mark the mode admits
///     Then(put key <header><token>\n<bytes>)
///     Else(range key)))                                  -- refused: the value, to say why
/// ```
///
/// where `<bound>` is `<header><token>\x0b` for [`FenceMode::NotOlder`] (`mark <= token`:
/// `\n` sorts just below `\x0b`) and `<header><token>` for [`FenceMode::Newer`] (`mark <
/// token`: a value with the same mark is longer, so greater). The nested transaction is
/// needed because etcd's value compare always fails on a missing key. Guard and effect
/// are one request; a refusal returns the current value in the same answer, which
/// decodes to [`Error::FenceRejected`] (a newer mark, reported) or [`Error::FenceMarkInvalid`]
/// (not a fence value), with no second request.
///
/// A key holding something that is not a fence value (anything without the header, a
/// mark of 0 or beyond `u64::MAX`) fails the guard's first compare or its bound, so it is
/// never overwritten: [`Error::FenceMarkInvalid`]. The one limit of a guard made of byte
/// compares: a value that *begins* with the exact header and is damaged after it (a
/// truncated value, say) may pass when its damaged digits sort at or below the bound;
/// [`EtcdStore::read_fenced`] still reports it as corrupt.
///
/// The fenced key must never be deleted nor written with an etcd lease: a deleted key
/// has forgotten its mark, and the next write of any token creates it again.
///
/// ## Example
/// ```no_run
/// # async fn demo(store: leasehold_etcd::EtcdStore, lease: leasehold_core::Lease) -> leasehold_core::Result<()> {
/// use leasehold_core::fence::FencedOutcome;
/// use leasehold_etcd::KeyFence;
///
/// let fence = KeyFence::new("ledger/acct-7", lease.token())?;
/// match store.fenced_put(&fence, "balance=42").await {
///     Ok(FencedOutcome::Applied(revision)) => println!("written at revision {revision}"),
///     Ok(FencedOutcome::ConditionFailed(())) => unreachable!("a key fence has no condition of its own"),
///     Err(leasehold_core::Error::FenceRejected { .. }) => { /* the lease was lost: stop */ }
///     Err(e) => return Err(e),
/// }
/// assert_eq!(
///     store.read_fenced("ledger/acct-7").await?,
///     Some((lease.token(), b"balance=42".to_vec()))
/// );
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyFence {
    key: Vec<u8>,
    token: FencingToken,
    mode: FenceMode,
}

impl KeyFence {
    /// A guard for writes carrying `token` to `key`, in [`FenceMode::NotOlder`].
    ///
    /// ```
    /// use leasehold_core::{Error, FencingToken};
    /// use leasehold_etcd::KeyFence;
    /// let fence = KeyFence::new("ledger/acct-7", FencingToken::new(3))?;
    /// assert_eq!(fence.key(), b"ledger/acct-7");
    /// assert!(matches!(KeyFence::new("", FencingToken::new(3)), Err(Error::InvalidInput { .. })));
    /// assert!(matches!(KeyFence::new("k", FencingToken::ZERO), Err(Error::InvalidInput { .. })));
    /// # Ok::<(), Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for an empty key or token 0 (never issued).
    pub fn new(key: impl Into<Vec<u8>>, token: FencingToken) -> Result<Self> {
        let key = key.into();
        check_key(&key)?;
        Ok(Self {
            key,
            token: leasehold_core::fence::issued(token)?,
            mode: FenceMode::NotOlder,
        })
    }

    leasehold_core::fence::fence_mode_setters!(mode);

    /// The protected key.
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// The writer's token.
    pub fn token(&self) -> FencingToken {
        self.token
    }

    /// The guard's mode.
    pub fn fence_mode(&self) -> FenceMode {
        self.mode
    }

    /// The value a write of `bytes` through this guard stores: the header, the token
    /// as the mark, `\n`, then `bytes`.
    ///
    /// ```
    /// use leasehold_core::FencingToken;
    /// use leasehold_etcd::KeyFence;
    /// let fence = KeyFence::new("k", FencingToken::new(7))?;
    /// assert_eq!(fence.encode(b"42"), b"leasehold-fence/1 token=00000000000000000007\n42");
    /// # Ok::<(), leasehold_core::Error>(())
    /// ```
    pub fn encode(&self, bytes: &[u8]) -> Vec<u8> {
        let mut v = marked(self.token);
        v.reserve(1 + bytes.len());
        v.push(SEPARATOR);
        v.extend_from_slice(bytes);
        v
    }

    /// Decodes a fenced value read from `key` into `(mark, bytes)`.
    ///
    /// ```
    /// use leasehold_core::{Error, FencingToken};
    /// use leasehold_etcd::KeyFence;
    /// let (mark, bytes) = KeyFence::decode(b"k", b"leasehold-fence/1 token=00000000000000000007\n42")?;
    /// assert_eq!((mark, bytes), (FencingToken::new(7), &b"42"[..]));
    /// assert!(matches!(KeyFence::decode(b"k", b"42"), Err(Error::FenceMarkInvalid { .. })));
    /// # Ok::<(), Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::FenceMarkInvalid`] (named by the key) if `value` is not a fence value: no
    /// header, not exactly 20 digits then `\n`, a mark of 0 or beyond `u64::MAX`.
    pub fn decode<'v>(key: &[u8], value: &'v [u8]) -> Result<(FencingToken, &'v [u8])> {
        let corrupt = |why: &str| Error::FenceMarkInvalid {
            resource: String::from_utf8_lossy(key).into_owned(),
            reason: format!("not a fenced value: {why}"),
        };
        let rest = value
            .strip_prefix(KEY_FENCE_HEADER)
            .ok_or_else(|| corrupt("no leasehold-fence/1 header"))?;
        let (digits, rest) = rest
            .split_at_checked(DIGITS)
            .ok_or_else(|| corrupt("the mark is shorter than 20 digits"))?;
        if !digits.iter().all(u8::is_ascii_digit) {
            return Err(corrupt("the mark is not 20 ASCII digits"));
        }
        let mark = std::str::from_utf8(digits)
            .ok()
            .and_then(|d| d.parse::<u64>().ok())
            .ok_or_else(|| corrupt("the mark is beyond u64::MAX"))?;
        if mark == 0 {
            return Err(corrupt("mark 0 (token 0 is never issued)"));
        }
        let bytes = rest
            .strip_prefix(&[SEPARATOR])
            .ok_or_else(|| corrupt("no newline after the mark"))?;
        Ok((FencingToken::new(mark), bytes))
    }

    /// The transaction that writes `bytes` through this guard, for sending it with a
    /// client of your own; read its answer with [`KeyFence::outcome`].
    /// [`EtcdStore::fenced_put`] does both.
    pub fn txn(&self, bytes: impl AsRef<[u8]>) -> Txn {
        let value = self.encode(bytes.as_ref());
        let put = TxnOp::put(self.key.clone(), value, None);
        let guarded = Txn::new()
            .when([
                Compare::value(self.key.clone(), CompareOp::Greater, marked(FencingToken::new(1))),
                Compare::value(self.key.clone(), CompareOp::Less, self.bound()),
            ])
            .and_then([put.clone()])
            .or_else([TxnOp::get(self.key.clone(), None)]);
        Txn::new()
            .when([Compare::create_revision(self.key.clone(), CompareOp::Equal, 0)])
            .and_then([put])
            .or_else([TxnOp::txn(guarded)])
    }

    /// The outcome of [`KeyFence::txn`] from etcd's answer: the write's revision when it
    /// applied (it is never [`FencedOutcome::ConditionFailed`]: the guard is the only
    /// condition).
    ///
    /// # Errors
    /// [`Error::FenceRejected`] with the key's mark (through [`rejected_by`]) when the
    /// mark is newer than the token (or, strict, the token itself): nothing was written.
    /// [`Error::FenceMarkInvalid`] when the key holds something that is not a fence
    /// value: nothing was written. [`Error::Indeterminate`] for an answer of another shape.
    pub fn outcome(&self, resp: &TxnResponse) -> Result<FencedOutcome<i64>> {
        let applied = || -> Result<FencedOutcome<i64>> {
            let revision = resp
                .header()
                .map(|h| h.revision())
                .ok_or_else(|| unexpected("no header"))?;
            Ok(FencedOutcome::Applied(revision))
        };
        if resp.succeeded() {
            return applied();
        }
        let nested = answer(resp, "no nested transaction response", |r| match r {
            TxnOpResponse::Txn(t) => Some(t),
            _ => None,
        })?;
        if nested.succeeded() {
            return applied();
        }
        let current = answer(&nested, "a refused guard without the key's value", |r| match r {
            TxnOpResponse::Get(g) => g.kvs().first().map(|kv| kv.value().to_vec()),
            _ => None,
        })?;
        let (mark, _) = Self::decode(&self.key, &current)?;
        if self.mode.admits(mark, self.token) {
            // A decodable value compares exactly; refusing it would mean a value etcd
            // and this decoder read differently.
            return Err(Error::corrupt(
                String::from_utf8_lossy(&self.key),
                format!("etcd refused token {} against mark {mark}", self.token),
            ));
        }
        Err(rejected_by(self.token, mark))
    }

    /// The exclusive upper bound of the values the guard admits.
    fn bound(&self) -> Vec<u8> {
        let mut b = marked(self.token);
        if self.mode == FenceMode::NotOlder {
            // Just above the separator: every value carrying this very mark is below.
            b.push(SEPARATOR + 1);
        }
        b
    }
}

/// The header and `token` as a 20-digit mark.
fn marked(token: FencingToken) -> Vec<u8> {
    let mut v = Vec::with_capacity(KEY_FENCE_HEADER.len() + DIGITS + 1);
    v.extend_from_slice(KEY_FENCE_HEADER);
    v.extend_from_slice(&encode_fence(token));
    v
}

fn check_key(key: &[u8]) -> Result<()> {
    if key.is_empty() {
        return Err(Error::invalid("fenced key", "an etcd key cannot be empty"));
    }
    Ok(())
}

/// The first of `resp`'s operation answers that `pick` takes; an [`unexpected`] answer
/// (`missing` says what is missing) if none is.
fn answer<T>(resp: &TxnResponse, missing: &str, pick: impl FnMut(TxnOpResponse) -> Option<T>) -> Result<T> {
    resp.op_responses()
        .into_iter()
        .find_map(pick)
        .ok_or_else(|| unexpected(missing))
}

fn unexpected(what: &str) -> Error {
    Error::Indeterminate {
        message: format!("etcd answered a key-fenced write in an unexpected shape: {what}"),
        source: None,
    }
}

impl EtcdStore {
    /// Writes `bytes` to `fence`'s key if its mark admits `fence`'s token, and sets the
    /// mark to the token: one etcd transaction ([`KeyFence::txn`]), one round trip,
    /// applied or refused. A key never written is created.
    ///
    /// The outcome is [`FencedOutcome::Applied`] with the etcd revision of the write.
    /// See [`KeyFence`] for an example.
    ///
    /// # Errors
    /// [`Error::FenceRejected`] when the key has seen a newer token (or, strict, this
    /// one): nothing was written, the writer has lost its lease and must stop.
    /// [`Error::FenceMarkInvalid`] when the key holds something that is not a fence value
    /// (nothing was written). [`Error::Indeterminate`] when no answer came (the write may
    /// have applied); [`Error::Unavailable`] when it was not sent.
    pub async fn fenced_put(&self, fence: &KeyFence, bytes: impl AsRef<[u8]>) -> Result<FencedOutcome<i64>> {
        let resp = self
            .inner
            .send_txn(fence.txn(bytes))
            .await
            .map_err(|f| self.inner.failure("key-fenced write", Effect::Write, f))?;
        fence.outcome(&resp)
    }

    /// Reads a key written through a [`KeyFence`], plainly (one range read, no guard):
    /// `(mark, bytes)`, or `None` if the key does not exist.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for an empty key; [`Error::FenceMarkInvalid`] if the key
    /// holds something that is not a fence value ([`KeyFence::decode`]);
    /// [`Error::Unavailable`] when etcd does not answer.
    pub async fn read_fenced(&self, key: impl Into<Vec<u8>>) -> Result<Option<(FencingToken, Vec<u8>)>> {
        let key = key.into();
        check_key(&key)?;
        let inner = &self.inner;
        inner.stats.range();
        let mut kv = inner.client.kv_client();
        let resp = inner
            .bounded("key-fenced read", Effect::Read, kv.get(key.clone(), None))
            .await?;
        match resp.kvs().first() {
            None => Ok(None),
            Some(kv) => {
                let (mark, bytes) = KeyFence::decode(&key, kv.value())?;
                Ok(Some((mark, bytes.to_vec())))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fence(token: u64, mode: FenceMode) -> KeyFence {
        KeyFence::new("k", FencingToken::new(token))
            .unwrap_or_else(|e| panic!("{e}"))
            .mode(mode)
    }

    /// What etcd does with the nested guard, on bytes: `lower < value < bound`.
    fn guard_admits(f: &KeyFence, value: &[u8]) -> bool {
        value > marked(FencingToken::new(1)).as_slice() && value < f.bound().as_slice()
    }

    #[test]
    fn encode_decode_round_trip() {
        for (t, bytes) in [(1, &b""[..]), (7, b"42"), (10, b"\n\x00\xff"), (u64::MAX, b"x")] {
            let f = fence(t, FenceMode::NotOlder);
            let v = f.encode(bytes);
            assert_eq!(KeyFence::decode(b"k", &v).ok(), Some((FencingToken::new(t), bytes)));
        }
    }

    #[test]
    fn the_byte_guard_is_the_mode() {
        let marks = [1, 2, 9, 10, 11, 99, 100, 12_345, u64::MAX - 1, u64::MAX];
        for &mark in &marks {
            for bytes in [&b""[..], b"0", b"\xff\xff", b"\n"] {
                let value = fence(mark, FenceMode::NotOlder).encode(bytes);
                for &token in &marks {
                    for mode in [FenceMode::NotOlder, FenceMode::Newer] {
                        let f = fence(token, mode);
                        assert_eq!(
                            guard_admits(&f, &value),
                            mode.admits(FencingToken::new(mark), FencingToken::new(token)),
                            "mark {mark}, token {token}, {mode:?}, bytes {bytes:?}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn values_that_are_not_fence_values_fail_the_guard_and_the_decoder() {
        let header = KEY_FENCE_HEADER.to_vec();
        let with = |tail: &[u8]| [header.as_slice(), tail].concat();
        let bad: Vec<Vec<u8>> = vec![
            b"".to_vec(),
            b"42".to_vec(),
            b"\x00not a fence".to_vec(),
            b"{\"holder\":\"a\"}".to_vec(),
            header.clone(),
            with(b"00000000000000000000\nzero"),
            with(b"00000000000000000001"),
            with(b"99999999999999999999\nbeyond u64"),
            with(b"x"),
        ];
        for v in &bad {
            assert!(
                matches!(KeyFence::decode(b"k", v), Err(Error::FenceMarkInvalid { .. })),
                "{v:?} decoded"
            );
            for mode in [FenceMode::NotOlder, FenceMode::Newer] {
                for token in [1, 5, u64::MAX] {
                    assert!(
                        !guard_admits(&fence(token, mode), v),
                        "{v:?} passes token {token} {mode:?}"
                    );
                }
            }
        }
        // Damaged after the header: refused by the decoder (the guard may admit it).
        for v in [
            with(b"00000000000000000001x"),
            with(b"0000000000000000000"),
            with(b"0000000000000000000a\n"),
        ] {
            assert!(KeyFence::decode(b"k", &v).is_err(), "{v:?} decoded");
        }
    }

    #[test]
    fn input_is_checked() {
        assert!(matches!(
            KeyFence::new(Vec::new(), FencingToken::new(1)),
            Err(Error::InvalidInput { .. })
        ));
        assert!(matches!(
            KeyFence::new("k", FencingToken::ZERO),
            Err(Error::InvalidInput { .. })
        ));
        let f = fence(3, FenceMode::NotOlder).strict();
        assert_eq!(f.fence_mode(), FenceMode::Newer);
        assert_eq!(f.token(), FencingToken::new(3));
    }
}
