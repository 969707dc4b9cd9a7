//! Fenced writes on data kept in ZooKeeper.
//!
//! ZooKeeper's `multi` compares znode versions, never data, so both fences guard on
//! versions:
//!
//! - [`TenureFence`]: any operations of yours in one `multi` that also `check`s the
//!   name's fence counter znode and record znode at the versions of the grant: the
//!   counter's version moves with every write of the name (a release, a takeover), and
//!   the record znode goes with its holder's session, so a stale holder's `multi` fails
//!   as a whole on the ensemble. One round trip.
//! - [`NodeFence`]: a znode of yours marked with the highest token that wrote it
//!   (`leasehold-fence/1 token=<20 digits>\n<bytes>`). The store evaluates the guard
//!   (`mark <= token`, or `<` when strict) on the data at the version it last saw and
//!   writes with a `setData` on that very version, so the guard holds on the ensemble
//!   when the write applies. One round trip when this store saw the node's current
//!   version (its own last write or read); otherwise a read first. A stale token is
//!   refused without a request when the store already knows a higher mark.

use std::sync::PoisonError;

use leasehold_core::fence::{FenceMode, FencedOutcome, rejected, rejected_by};
use leasehold_core::{Error, FencingToken, Lease, LeaseName, Result};
use zookeeper_client as zk;

use crate::error::Effect;
use crate::nodes::Ver;
use crate::store::{ZooKeeperStore, add_set_or_create, first_version};

/// The header of a token-marked znode's data.
pub const NODE_FENCE_HEADER: &[u8] = b"leasehold-fence/1 token=";

const DIGITS: usize = 20;

/// The guard of one tenure: the name's fence counter and record znodes and their
/// versions when the lease was granted, with the grant's token.
///
/// Take it once, right after the grant ([`ZooKeeperStore::fence`]), and use it for every
/// write of the tenure, like the token. Renewals do not write, so the versions stay
/// until the tenure ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenureFence {
    name: LeaseName,
    fence_path: String,
    counter_version: i32,
    record_path: String,
    record_version: i32,
    token: FencingToken,
}

impl TenureFence {
    /// The lease name.
    pub fn name(&self) -> &LeaseName {
        &self.name
    }

    /// The grant's fencing token, for writes outside ZooKeeper.
    pub fn token(&self) -> FencingToken {
        self.token
    }

    /// Adds the guard's two `check`s to your own `multi` (put them first).
    ///
    /// # Errors
    /// As [`zk::MultiWriter::add_check_version`].
    pub fn add_checks(&self, multi: &mut zk::MultiWriter<'_>) -> std::result::Result<(), zk::Error> {
        multi.add_check_version(&self.fence_path, self.counter_version)?;
        multi.add_check_version(&self.record_path, self.record_version)
    }
}

/// A fenced write on a token-marked znode: its path, the writer's token and the mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeFence {
    path: String,
    token: FencingToken,
    mode: FenceMode,
}

impl NodeFence {
    /// A fence on the znode `path` for `token`, in [`FenceMode::NotOlder`] mode.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for token 0 or a path that is not absolute.
    pub fn new(path: impl Into<String>, token: FencingToken) -> Result<Self> {
        let path = path.into();
        if !path.starts_with('/') || path.len() < 2 || path.ends_with('/') {
            return Err(Error::invalid(
                "znode path",
                format!("{path:?} is not an absolute znode path"),
            ));
        }
        Ok(Self {
            path,
            token: leasehold_core::fence::issued(token)?,
            mode: FenceMode::NotOlder,
        })
    }

    /// The same fence in `mode`.
    #[must_use]
    pub fn mode(mut self, mode: FenceMode) -> Self {
        self.mode = mode;
        self
    }

    /// The same fence in strict mode (`mark < token`).
    #[must_use]
    pub fn strict(self) -> Self {
        self.mode(FenceMode::Newer)
    }

    /// The znode path.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The writer's token.
    pub fn token(&self) -> FencingToken {
        self.token
    }

    /// `bytes` marked with this fence's token, as the znode holds them.
    pub fn encode(&self, bytes: &[u8]) -> Vec<u8> {
        let mut v = Vec::with_capacity(NODE_FENCE_HEADER.len() + DIGITS + 1 + bytes.len());
        v.extend_from_slice(NODE_FENCE_HEADER);
        v.extend_from_slice(format!("{:0DIGITS$}", self.token.get()).as_bytes());
        v.push(b'\n');
        v.extend_from_slice(bytes);
        v
    }

    /// The mark and the bytes of a token-marked znode's data.
    ///
    /// # Errors
    /// [`Error::CorruptRecord`] for data that is not a mark and bytes.
    pub fn decode<'d>(path: &str, data: &'d [u8]) -> Result<(FencingToken, &'d [u8])> {
        let corrupt = || Error::corrupt(path, "the fenced znode does not hold a token mark");
        let rest = data.strip_prefix(NODE_FENCE_HEADER).ok_or_else(corrupt)?;
        if rest.len() < DIGITS + 1 || rest[DIGITS] != b'\n' || !rest[..DIGITS].iter().all(u8::is_ascii_digit) {
            return Err(corrupt());
        }
        let mark = std::str::from_utf8(&rest[..DIGITS])
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
            .map(FencingToken::new)
            .filter(|t| *t <= FencingToken::MAX)
            .ok_or_else(corrupt)?;
        Ok((mark, &rest[DIGITS + 1..]))
    }
}

impl ZooKeeperStore {
    /// The guard of `lease`, granted by a [`leasehold_core::LeaseClient`] over a
    /// ZooKeeper store on the same ensemble and root: its version carries the znode
    /// versions of the grant.
    ///
    /// # Errors
    /// [`Error::FenceRejected`] if the lease is no longer valid; [`Error::InvalidInput`]
    /// for a lease granted on another kind of store.
    pub fn fence(&self, lease: &Lease) -> Result<TenureFence> {
        if !lease.is_valid() {
            return Err(rejected(lease.token()));
        }
        let v = Ver::parse(&lease.version()).map_err(|_| {
            Error::invalid(
                "lease",
                "its version is not a ZooKeeper store version: granted on another store",
            )
        })?;
        Ok(TenureFence {
            name: lease.name().clone(),
            fence_path: self.fence_path(lease.name()),
            counter_version: v.counter,
            record_path: self.record_path(lease.name()),
            record_version: v.record,
            token: lease.token(),
        })
    }

    /// Runs the operations `build` adds in one `multi` that applies only while `fence`'s
    /// tenure is current. One round trip.
    ///
    /// Returns [`FencedOutcome::Applied`] with the results of your operations, in order,
    /// or [`FencedOutcome::ConditionFailed`] with the index (among yours) and error of
    /// the first of your operations that failed (nothing applied).
    ///
    /// # Errors
    /// [`Error::FenceRejected`] when the tenure is over (nothing applied); the errors of
    /// a write otherwise ([`Error::Indeterminate`] when the answer was lost).
    pub async fn fenced_multi(
        &self,
        fence: &TenureFence,
        build: impl FnOnce(&mut zk::MultiWriter<'_>) -> std::result::Result<(), zk::Error>,
    ) -> Result<FencedOutcome<Vec<zk::MultiWriteResult>, (usize, zk::Error)>> {
        let inner = &self.inner;
        let client = inner.main_client().await?;
        let sent = inner
            .send_multi(&client, "fenced multi", |w| {
                fence.add_checks(w)?;
                build(w)
            })
            .await;
        match sent {
            Ok(mut results) => Ok(FencedOutcome::Applied(results.split_off(2.min(results.len())))),
            Err(f) => {
                let mut failed = None;
                let e = f.into_error(|i, e| {
                    if i < 2 {
                        rejected(fence.token)
                    } else {
                        failed = Some((i - 2, e.clone()));
                        Error::invalid("fenced multi", e.to_string())
                    }
                });
                match failed {
                    Some(f) => Ok(FencedOutcome::ConditionFailed(f)),
                    None => Err(e),
                }
            }
        }
    }

    /// Writes `bytes` to the token-marked znode of `fence` if its mark admits the
    /// fence's token (creating it, PERSISTENT, when it does not exist; its parent must).
    /// Returns the znode's new data version.
    ///
    /// # Errors
    /// [`Error::FenceRejected`] (with the mark) when the mark refuses the token;
    /// [`Error::CorruptRecord`] when the znode holds something else;
    /// [`Error::FenceTargetMissing`] when its parent does not exist.
    pub async fn fenced_set(&self, fence: &NodeFence, bytes: impl AsRef<[u8]>) -> Result<FencedOutcome<i32>> {
        let inner = &self.inner;
        let data = fence.encode(bytes.as_ref());
        // A znode this store never saw is most likely new: try creating it (one request).
        let mut known = Some(inner.fenced_seen(&fence.path).unwrap_or(None));
        for _ in 0..3 {
            let state = match known.take() {
                Some(s) => s,
                None => self.read_marked(&fence.path).await?.map(|(m, _, v)| (m, v)),
            };
            if let Some((mark, _)) = state {
                if !fence.mode.admits(mark, fence.token) {
                    return Err(rejected_by(fence.token, mark));
                }
            }
            let client = inner.main_client().await?;
            let sent = inner
                .send_multi(&client, "fenced set", |w| {
                    add_set_or_create(w, &fence.path, &data, state.map(|(_, version)| version))
                })
                .await;
            match sent {
                Ok(results) => {
                    let version = first_version(&results);
                    inner.remember_fenced(&fence.path, Some((fence.token, version)));
                    return Ok(FencedOutcome::Applied(version));
                }
                Err(f) => {
                    let mut stale = false;
                    let e = f.into_error(|_, e| {
                        if state.is_none() && e == zk::Error::NoNode {
                            Error::FenceTargetMissing {
                                resource: format!("the parent of {}", fence.path),
                            }
                        } else {
                            stale = true;
                            Error::invalid("fenced set", e.to_string())
                        }
                    });
                    inner.remember_fenced(&fence.path, None);
                    if !stale {
                        return Err(e);
                    }
                }
            }
        }
        Err(Error::Unavailable {
            message: format!("fenced set of {}: the znode changed under every attempt", fence.path),
            source: None,
        })
    }

    /// Reads a token-marked znode: its mark and bytes, or `None` if it does not exist.
    ///
    /// # Errors
    /// [`Error::CorruptRecord`] when it holds something else.
    pub async fn read_fenced(&self, path: &str) -> Result<Option<(FencingToken, Vec<u8>)>> {
        Ok(self.read_marked(path).await?.map(|(m, b, _)| (m, b)))
    }

    async fn read_marked(&self, path: &str) -> Result<Option<(FencingToken, Vec<u8>, i32)>> {
        let inner = &self.inner;
        let client = inner.main_client().await?;
        inner.stats.read();
        let got = inner
            .bounded_node("fenced read", Effect::Read, client.get_data(path))
            .await?;
        let Some((data, stat)) = got else {
            inner.remember_fenced(path, None);
            return Ok(None);
        };
        let (mark, bytes) = NodeFence::decode(path, &data)?;
        inner.remember_fenced(path, Some((mark, stat.version)));
        Ok(Some((mark, bytes.to_vec(), stat.version)))
    }
}

impl crate::store::Inner {
    fn fenced_seen(&self, path: &str) -> Option<Option<(FencingToken, i32)>> {
        self.fenced
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(path)
            .copied()
    }

    fn remember_fenced(&self, path: &str, state: Option<(FencingToken, i32)>) {
        let mut m = self.fenced.lock().unwrap_or_else(PoisonError::into_inner);
        if m.len() > 10_000 {
            m.clear();
        }
        m.insert(path.to_owned(), state);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_round_trip_and_garbage_is_corrupt() {
        let f = NodeFence::new("/a/b", FencingToken::new(42)).unwrap();
        let data = f.encode(b"payload\n2");
        assert_eq!(
            NodeFence::decode("/a/b", &data).ok(),
            Some((FencingToken::new(42), &b"payload\n2"[..]))
        );
        for bad in [
            &b""[..],
            b"x",
            b"leasehold-fence/1 token=12\nx",
            b"leasehold-fence/1 token=0000000000000000000x\n",
        ] {
            assert!(NodeFence::decode("/p", bad).is_err(), "{bad:?}");
        }
        assert!(NodeFence::new("rel", FencingToken::new(1)).is_err());
        assert!(NodeFence::new("/a", FencingToken::ZERO).is_err());
    }
}
