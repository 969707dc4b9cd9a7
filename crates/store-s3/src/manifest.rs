//! Fenced commits for data kept in object storage: a manifest (pointer) object that
//! carries the fencing token, replaced only by a conditional PUT.
//!
//! This is how lakehouse table formats commit: the data (files, snapshots) is written
//! under new, unique keys, where it harms nobody; the *commit* is the replacement of one
//! small manifest that says which data is current. Here the manifest also carries the
//! token of the writer that committed it, its high-water mark (rule 5 of docs/DESIGN.md), and a
//! commit is accepted only if
//!
//! 1. the manifest is still exactly the one the writer based its work on (`If-Match` on
//!    its ETag; `If-None-Match: *` for the first commit), and
//!
//! 2. the writer's token passes the fence's [`FenceMode`] against the token in that
//!    manifest: not older (`mark <= token`, the default: many commits per tenure) or,
//!    with [`ManifestFence::strict`], newer (`mark < token`: one commit per grant).
//!
//! Check 2 is made on the base manifest the writer read, and check 1 makes S3 apply the
//! PUT only if that base is still current, so the pair is atomic: no read-then-compare
//! window, and guard and effect are one PutObject. A holder that froze past its lease and
//! wakes up fails on the ETag (the new holder committed, or raised the fence with
//! [`ManifestFence::fence`]) or on the token, with [`Error::FenceRejected`].
//!
//! The object's body is a header line `leasehold-manifest/1 token=<n>` and a newline,
//! then the caller's bytes, untouched. Never delete a manifest: it holds the
//! high-water mark, and a stale holder could re-create it.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use rand::Rng;

use leasehold_core::fence::{FenceMode, FencedOutcome, rejected_by};
use leasehold_core::{Error, FencingToken, Result, store::Version};

use crate::bucket::{Bucket, Cond, Found, Written};
use crate::config::{MAX_KEY_LEN, validate_key_path};

/// The largest manifest read back (header included); bigger objects are
/// [`Error::CorruptRecord`].
pub const MAX_MANIFEST_BYTES: u64 = 1 << 20;

/// The first bytes of every manifest, before the token.
const HEADER: &[u8] = b"leasehold-manifest/1 token=";

/// How many conflicting commits [`ManifestFence::update`] retries through.
const MAX_UPDATE_ATTEMPTS: u32 = 64;

/// The longest random pause between two rounds of [`ManifestFence::update`].
const MAX_UPDATE_BACKOFF: Duration = Duration::from_millis(50);

/// The content type of manifest objects.
const MANIFEST_CONTENT_TYPE: &str = "application/octet-stream";

/// A committed manifest, as read or as just written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// The token of the writer that committed it: the resource's high-water mark.
    pub token: FencingToken,
    /// The caller's bytes (a pointer to the current data, or small data itself).
    pub data: Vec<u8>,
    /// The object's ETag, the base of the next commit.
    pub version: Version,
}

/// A manifest object whose replacement is fenced by lease tokens: the guard of
/// [`leasehold_core::fence`] on S3.
///
/// [`ManifestFence::commit`] returns a [`FencedOutcome`]: `Applied` with the new manifest,
/// or `ConditionFailed` with the manifest that replaced the base (`None`: it was deleted),
/// written by a writer whose token also passes the fence (the same tenure, racing), so
/// rebase on it and commit again. A stale token is [`Error::FenceRejected`].
///
/// ```no_run
/// # async fn demo(store: leasehold_s3::S3Store, lease: leasehold_core::Lease) -> leasehold_core::Result<()> {
/// use leasehold_core::fence::FencedOutcome;
/// let manifest = store.manifest("tables/orders/_manifest")?;
/// // After a grant: raise the fence, so every older holder's commit is refused from now on.
/// let mut base = manifest.fence(lease.token()).await?;
/// // Write the data under a new key (not shown), then point the manifest at it.
/// match manifest.commit(lease.token(), Some(&base), b"data/v0042.parquet".to_vec()).await? {
///     FencedOutcome::Applied(m) => base = m,
///     FencedOutcome::ConditionFailed(_) => { /* same tenure raced: rebase and retry */ }
/// }
/// // A stale holder gets Err(Error::FenceRejected { .. }) and must stop.
/// # let _ = base; Ok(()) }
/// ```
///
/// In the strict mode ([`ManifestFence::strict`], `mark < token`: one write per grant), a
/// commit also refuses a token equal to the base manifest's, and [`ManifestFence::fence`]
/// is itself that one write (see there):
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> leasehold_core::Result<()> {
/// use leasehold_core::{Error, FencingToken, fence::FenceMode, store::Version};
/// use leasehold_s3::{Manifest, S3Config, S3Store};
///
/// // Nothing listens on port 9: the refusals below send no request.
/// let client = leasehold_s3::local_client("http://127.0.0.1:9");
/// let store = S3Store::new(client, S3Config::new("my-bucket", "leases")?);
/// let base = Manifest {
///     token: FencingToken::new(3),
///     data: b"data/v1.parquet".to_vec(),
///     version: Version::new("\"etag-1\""),
/// };
/// // Token 3 committed the base, so a strict commit with token 3 is refused at once.
/// let manifest = store.manifest("tables/orders/_manifest")?.strict();
/// let again = manifest.commit(FencingToken::new(3), Some(&base), b"data/v2.parquet".to_vec());
/// assert!(matches!(again.await, Err(Error::FenceRejected { .. })));
/// // In the default mode the same token passes (it would send the PUT); an older one
/// // is refused in either mode.
/// let manifest = manifest.mode(FenceMode::NotOlder);
/// let stale = manifest.commit(FencingToken::new(2), Some(&base), b"x".to_vec());
/// assert!(matches!(stale.await, Err(Error::FenceRejected { .. })));
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct ManifestFence {
    bucket: Arc<Bucket>,
    key: String,
    mode: FenceMode,
}

impl fmt::Debug for ManifestFence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ManifestFence")
            .field("bucket", &self.bucket.config().bucket())
            .field("key", &self.key)
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

impl ManifestFence {
    /// The manifest at `key` in the bucket of `config`, sent with `client` and the
    /// request options of `config` (the prefix of `config` is not used), fenced in the
    /// default mode, [`FenceMode::NotOlder`].
    ///
    /// The key follows the prefix rules of [`crate::S3Config::new`] (lease-name
    /// characters, no empty, `.` or `..` segments), up to 1024 bytes.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for an invalid key.
    pub fn new(client: aws_sdk_s3::Client, config: crate::S3Config, key: &str) -> Result<Self> {
        Self::from_bucket(Arc::new(Bucket::new(client, config)), key)
    }

    pub(crate) fn from_bucket(bucket: Arc<Bucket>, key: &str) -> Result<Self> {
        validate_key_path("manifest key", key, MAX_KEY_LEN)?;
        Ok(Self {
            bucket,
            key: key.to_owned(),
            mode: FenceMode::NotOlder,
        })
    }

    leasehold_core::fence::fence_mode_setters!(mode);

    /// The object key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Reads the manifest (`None` before the first commit). One GetObject, plain: no
    /// guard, no write.
    ///
    /// # Errors
    /// [`Error::CorruptRecord`] for an object that is not a manifest (or is larger than
    /// [`MAX_MANIFEST_BYTES`]); store errors.
    pub async fn read(&self) -> Result<Option<Manifest>> {
        match self.bucket.get(&self.key, MAX_MANIFEST_BYTES).await? {
            Found::Missing => Ok(None),
            Found::TooLarge { len } => Err(Error::corrupt(
                &self.key,
                format!("{len} bytes or more, larger than {MAX_MANIFEST_BYTES}"),
            )),
            Found::Object { body, etag } => {
                let (token, data) = decode(&self.key, &body)?;
                Ok(Some(Manifest {
                    token,
                    data,
                    version: Version::new(etag),
                }))
            }
        }
    }

    /// Commits `data` with `token` on top of `base` (the manifest the work was based on,
    /// `None` for the first commit): one conditional PutObject, plus one GetObject when
    /// the condition fails (to tell a stale writer from a concurrent one). Nothing is
    /// sent when `base` already refuses the token.
    ///
    /// Returns `Applied` with the new manifest, or `ConditionFailed` with the manifest
    /// that replaced `base` (`None`: deleted; `Some` for a first commit that lost to an
    /// existing manifest) when its token also passes the fence: nothing was written;
    /// rebase on it and commit again.
    ///
    /// # Errors
    /// - [`Error::FenceRejected`] if the token does not pass the fence's mode against
    ///   `base` or the manifest that replaced it (a newer token, or in strict mode the
    ///   same one): the caller has lost its lease and must stop (never retried).
    /// - [`Error::InvalidInput`] for token 0 (never issued).
    /// - [`Error::Indeterminate`] if the answer was lost: the commit may have applied.
    /// - other store errors.
    pub async fn commit(
        &self,
        token: FencingToken,
        base: Option<&Manifest>,
        data: impl Into<Vec<u8>>,
    ) -> Result<FencedOutcome<Manifest, Option<Manifest>>> {
        leasehold_core::fence::issued(token)?;
        if let Some(refused) = self.refusal(base, token) {
            return Err(refused);
        }
        let data = data.into();
        let cond = match base {
            Some(b) => Cond::Match(b.version.as_str()),
            None => Cond::Absent,
        };
        match self
            .bucket
            .put(&self.key, encode(token, &data), cond, MANIFEST_CONTENT_TYPE)
            .await?
        {
            Written::Applied(etag) => Ok(FencedOutcome::Applied(Manifest {
                token,
                data,
                version: Version::new(etag),
            })),
            Written::PreconditionFailed | Written::NoSuchKey => {
                let current = self.read().await?;
                if let Some(refused) = self.refusal(current.as_ref(), token) {
                    return Err(refused);
                }
                Ok(FencedOutcome::ConditionFailed(current))
            }
        }
    }

    /// The refusal of a write carrying `token` against `manifest` ([`Error::FenceRejected`]
    /// with the manifest's token as the mark), or `None` if it passes the fence (`None`:
    /// never written, mark [`FencingToken::ZERO`]).
    fn refusal(&self, manifest: Option<&Manifest>, token: FencingToken) -> Option<Error> {
        let mark = manifest.map_or(FencingToken::ZERO, |m| m.token);
        (!self.mode.admits(mark, token)).then(|| rejected_by(token, mark))
    }

    /// Reads the manifest, computes the new data from it with `f` and commits it with
    /// `token`, again on every conflict with a writer whose token also passes the fence
    /// (at most 64 rounds, after a random pause growing to 50 ms, so that concurrent
    /// writers do not retry in step). Two requests without contention.
    ///
    /// In strict mode a manifest that already carries `token` refuses the update: this
    /// grant has had its one write.
    ///
    /// # Errors
    /// As [`ManifestFence::commit`]; [`Error::Unavailable`] after 64 conflicting rounds.
    pub async fn update<F>(&self, token: FencingToken, mut f: F) -> Result<Manifest>
    where
        F: FnMut(Option<&Manifest>) -> Vec<u8> + Send,
    {
        let mut base = self.read().await?;
        for round in 0..MAX_UPDATE_ATTEMPTS {
            let data = f(base.as_ref());
            match self.commit(token, base.as_ref(), data).await? {
                FencedOutcome::Applied(m) => return Ok(m),
                FencedOutcome::ConditionFailed(current) => base = current,
            }
            let ceiling = Duration::from_millis(1 << round.min(6)).min(MAX_UPDATE_BACKOFF);
            let pause = ceiling.mul_f64(rand::rng().random_range(0.0..1.0));
            tokio::time::sleep(pause).await;
        }
        Err(Error::Unavailable {
            message: format!(
                "manifest {}: {MAX_UPDATE_ATTEMPTS} commits in a row lost to others",
                self.key
            ),
            source: None,
        })
    }

    /// Raises the manifest's high-water mark to `token`, keeping its data (an empty
    /// manifest is created if there is none): an [`update`](ManifestFence::update) that
    /// rewrites the current data. A new holder calls this right after its grant: from
    /// then on every commit by an older holder is refused, even one based on a manifest
    /// it read before.
    ///
    /// In the default mode a mark already at `token` passes, so a holder may fence as
    /// often as it likes. In strict mode the fence is itself the grant's one write: it
    /// applies only if the mark is older than `token` (so it fails with
    /// [`Error::FenceRejected`] if this grant, or a newer one, has written the manifest
    /// already), and after it every strict write with `token` (another `fence`, a
    /// `commit`, an `update`) is refused. A strict writer therefore needs no fence before
    /// its commit: the commit raises the mark itself, and a fence first would spend the
    /// grant's one write on rewriting the old data.
    ///
    /// # Errors
    /// As [`ManifestFence::update`].
    pub async fn fence(&self, token: FencingToken) -> Result<Manifest> {
        self.update(token, |current| current.map(|m| m.data.clone()).unwrap_or_default())
            .await
    }
}

fn encode(token: FencingToken, data: &[u8]) -> Vec<u8> {
    let digits = token.get().to_string();
    let mut body = Vec::with_capacity(HEADER.len() + digits.len() + 1 + data.len());
    body.extend_from_slice(HEADER);
    body.extend_from_slice(digits.as_bytes());
    body.push(b'\n');
    body.extend_from_slice(data);
    body
}

fn decode(key: &str, body: &[u8]) -> Result<(FencingToken, Vec<u8>)> {
    let corrupt = |why: &str| Error::corrupt(key, format!("not a leasehold manifest: {why}"));
    let rest = body.strip_prefix(HEADER).ok_or_else(|| corrupt("missing header"))?;
    let end = rest
        .iter()
        .position(|b| *b == b'\n')
        .ok_or_else(|| corrupt("unterminated header"))?;
    let digits = &rest[..end];
    if digits.is_empty() || digits.len() > 20 || !digits.iter().all(u8::is_ascii_digit) {
        return Err(corrupt("bad token"));
    }
    let token: u64 = std::str::from_utf8(digits)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| corrupt("bad token"))?;
    if token == 0 {
        return Err(corrupt("token 0 is never issued"));
    }
    Ok((FencingToken::new(token), rest[end + 1..].to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        for data in [&b""[..], b"data/v1.parquet", b"\n\x00binary\nlines\n"] {
            let body = encode(FencingToken::new(42), data);
            assert_eq!(
                decode("k", &body).expect("decode"),
                (FencingToken::new(42), data.to_vec())
            );
        }
        assert!(encode(FencingToken::new(7), b"x").starts_with(b"leasehold-manifest/1 token=7\nx"));
    }

    #[test]
    fn garbage_is_corrupt() {
        for bad in [
            &b""[..],
            b"hello",
            b"leasehold-manifest/1 token=",
            b"leasehold-manifest/1 token=\n",
            b"leasehold-manifest/1 token=0\n",
            b"leasehold-manifest/1 token=-1\n",
            b"leasehold-manifest/1 token=1x\n",
            b"leasehold-manifest/1 token=99999999999999999999\n",
            b"leasehold-manifest/2 token=1\n",
        ] {
            assert!(
                matches!(decode("k", bad), Err(Error::CorruptRecord { .. })),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn keys_are_validated() {
        let store = crate::S3Store::new(
            crate::local_client("http://127.0.0.1:9"),
            crate::S3Config::new("bucket-1", "leases").expect("config"),
        );
        assert!(store.manifest("tables/orders/_manifest").is_ok());
        for bad in ["", "/abs", "a/../b", "a b", "a//b", &"k".repeat(1025)] {
            assert!(
                matches!(store.manifest(bad), Err(Error::InvalidInput { .. })),
                "{bad:?}"
            );
        }
    }

    #[tokio::test]
    async fn stale_base_is_refused_before_sending() {
        let store = crate::S3Store::new(
            crate::local_client("http://127.0.0.1:9"),
            crate::S3Config::new("bucket-1", "leases").expect("config"),
        );
        let m = store.manifest("m").expect("manifest");
        let base = Manifest {
            token: FencingToken::new(5),
            data: vec![],
            version: Version::new("\"x\""),
        };
        // Nothing listens on port 9: a request would fail with Unavailable, not this.
        let refused = |r: Result<FencedOutcome<Manifest, Option<Manifest>>>, token: u64| match r {
            Err(Error::FenceRejected { token: got, .. }) => assert_eq!(got, FencingToken::new(token)),
            other => panic!("token {token}: {other:?}"),
        };
        refused(m.commit(FencingToken::new(4), Some(&base), b"x".to_vec()).await, 4);
        let strict = m.clone().strict();
        refused(strict.commit(FencingToken::new(4), Some(&base), b"x".to_vec()).await, 4);
        refused(strict.commit(FencingToken::new(5), Some(&base), b"x".to_vec()).await, 5);
        for m in [&m, &strict] {
            assert!(matches!(
                m.commit(FencingToken::ZERO, None, b"x".to_vec()).await,
                Err(Error::InvalidInput { .. })
            ));
        }
        // Modes are builder settings: the original is untouched, and the mode shows.
        assert!(format!("{m:?}").contains("NotOlder"), "{m:?}");
        assert!(format!("{strict:?}").contains("Newer"), "{strict:?}");
        assert!(format!("{:?}", strict.mode(FenceMode::NotOlder)).contains("NotOlder"));
    }
}
