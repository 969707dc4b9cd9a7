//! [`S3Store`]: lease records as S3 objects, compare-and-swap on the ETag.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use leasehold_core::{
    Error, LeaseName, NamePrefix, Result,
    store::{
        Capabilities, CasOutcome, CasStore, ClockSource, Current, DeleteOutcome, Grade, LeaseRecord, Linearizable,
        Precondition, Stored, Version, Wait,
    },
};

use crate::bucket::{Bucket, Cond, Found, Written};
use crate::error::{Effect, Failure, SentRequests, classify};
use crate::{ManifestFence, S3Config, body};

/// The largest object the store reads as a lease record; anything bigger under the
/// prefix is [`Error::CorruptRecord`] without being downloaded.
pub const MAX_RECORD_BYTES: u64 = 4096;

/// The content type of lease-record objects.
const RECORD_CONTENT_TYPE: &str = "application/json";

/// Lease records kept as S3 objects under `<prefix>/<lease name>`.
///
/// Every method is one request (plus re-sends after `409 ConditionalRequestConflict`,
/// which S3 did not apply): `read` is a GetObject, `write` a PutObject with
/// `If-None-Match: *` ([`Precondition::Absent`]) or `If-Match: <etag>`
/// ([`Precondition::Version`]), `delete` a DeleteObject with `If-Match: <etag>`. The
/// version is the object's ETag as S3 returns it (quotes included). S3 answers a failed
/// condition with an empty 412, so conflicts report [`Current::Unknown`] (the client then
/// reads), except a 404 on `If-Match`, which is [`Current::Absent`].
///
/// Expiry is judged by observation ([`ClockSource::Observation`]); see the crate docs.
/// Cheap to clone.
#[derive(Clone)]
pub struct S3Store {
    bucket: Arc<Bucket>,
}

impl fmt::Debug for S3Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("S3Store")
            .field("bucket", &self.bucket.config().bucket())
            .field("prefix", &self.bucket.config().prefix())
            .finish_non_exhaustive()
    }
}

impl S3Store {
    /// A store over `client` (built by the caller: credentials, region, endpoint) keeping
    /// its records as `config` says. No request is sent; [`S3Store::verify`] checks the
    /// setup.
    pub fn new(client: aws_sdk_s3::Client, config: S3Config) -> Self {
        Self {
            bucket: Arc::new(Bucket::new(client, config)),
        }
    }

    /// Creates the bucket `config` names if it does not exist (in the client's region),
    /// then checks it as [`S3Store::verify`] does. Idempotent: a bucket this account
    /// already owns is kept as it is. Needs `s3:CreateBucket` besides what `verify`
    /// needs; with your own IaC, call `verify` alone.
    ///
    /// # Errors
    /// [`Error::Misconfigured`] when the name is taken by another account or creating
    /// is not permitted; store errors as for any call.
    pub async fn provision(client: &aws_sdk_s3::Client, config: &S3Config) -> Result<()> {
        let sent = SentRequests::default();
        let created = client
            .create_bucket()
            .bucket(config.bucket())
            .customize()
            .interceptor(sent.clone())
            .send()
            .await;
        if let Err(e) = created {
            let owned = e
                .as_service_error()
                .is_some_and(aws_sdk_s3::operation::create_bucket::CreateBucketError::is_bucket_already_owned_by_you);
            let taken = e
                .as_service_error()
                .is_some_and(aws_sdk_s3::operation::create_bucket::CreateBucketError::is_bucket_already_exists);
            let what = format!("CreateBucket {}", config.bucket());
            if taken {
                return Err(Error::misconfigured(
                    format!("{what}: the name is taken by another account"),
                    e,
                ));
            }
            if !owned {
                return Err(match classify(e, Effect::Write, sent.was_sent(), &what) {
                    Failure::Other(err) | Failure::ConcurrentWrite(err) => err,
                    other => Error::Misconfigured {
                        message: format!("{what}: unexpected answer {other:?}"),
                        source: None,
                    },
                });
            }
        }
        Self::new(client.clone(), config.clone()).verify().await
    }

    /// Where the records are kept.
    pub fn config(&self) -> &S3Config {
        self.bucket.config()
    }

    /// The client the store sends with.
    pub fn client(&self) -> &aws_sdk_s3::Client {
        self.bucket.client()
    }

    /// The object key of a lease name.
    pub fn key_for(&self, name: &LeaseName) -> String {
        self.config().key_for(name)
    }

    /// A fenced manifest in the same bucket, with the same client and request options
    /// (`key` is a full object key, outside the lease prefix or not), in the default
    /// fence mode ([`ManifestFence::strict`] for one commit per grant).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for an invalid key (see [`ManifestFence::new`]).
    pub fn manifest(&self, key: &str) -> Result<ManifestFence> {
        ManifestFence::from_bucket(self.bucket.clone(), key)
    }

    /// Checks that the bucket exists, the credentials may read and write under the
    /// prefix, and the server enforces conditional writes (an S3-compatible server that
    /// ignored `If-None-Match` or `If-Match` would let two holders in at once).
    ///
    /// Six requests on a probe object `<prefix>/~probe-<random>` (a key no lease name
    /// maps to), which it deletes again: create, create again (must be refused), replace
    /// on a wrong ETag (must be refused), read back (must be the first write), delete on a
    /// wrong ETag (must be refused), delete. Needs `s3:DeleteObject` besides the lease
    /// permissions. Run it once at startup, not per lease.
    ///
    /// # Errors
    /// [`Error::NotProvisioned`] for a missing bucket; [`Error::Misconfigured`] naming
    /// what else is wrong; store errors as for any call.
    pub async fn verify(&self) -> Result<()> {
        let key = format!("{}/~probe-{:032x}", self.config().prefix(), rand::random::<u128>());
        let bad = |what: String| Error::Misconfigured {
            message: what,
            source: None,
        };
        let b = &self.bucket;
        let etag = match b.put(&key, b"probe-1".to_vec(), Cond::Absent, "text/plain").await? {
            Written::Applied(etag) => etag,
            other => return Err(bad(format!("creating the probe {key} failed: {other:?}"))),
        };
        let outcome = b.put(&key, b"probe-2".to_vec(), Cond::Absent, "text/plain").await?;
        if outcome != Written::PreconditionFailed {
            return Err(bad(format!(
                "the server ignored If-None-Match: * on {key} ({outcome:?}): unsafe for leases"
            )));
        }
        let wrong = "\"00000000000000000000000000000000\"";
        let outcome = b
            .put(&key, b"probe-3".to_vec(), Cond::Match(wrong), "text/plain")
            .await?;
        if outcome != Written::PreconditionFailed {
            return Err(bad(format!(
                "the server ignored If-Match on PutObject {key} ({outcome:?}): unsafe for leases"
            )));
        }
        match b.get(&key, 64).await? {
            Found::Object { body, etag: read } if body == b"probe-1" && read == etag => {}
            other => {
                return Err(bad(format!(
                    "reading the probe {key} back did not return the first write: {other:?}"
                )));
            }
        }
        let outcome = b.delete(&key, wrong).await?;
        if outcome != Written::PreconditionFailed {
            return Err(bad(format!(
                "the server ignored If-Match on DeleteObject {key} ({outcome:?})"
            )));
        }
        match b.delete(&key, &etag).await? {
            Written::Applied(_) => Ok(()),
            other => Err(bad(format!("deleting the probe {key} failed: {other:?}"))),
        }
    }
}

#[async_trait]
impl CasStore for S3Store {
    fn capabilities(&self) -> Capabilities {
        Capabilities::new(ClockSource::Observation, Grade::Linearizable)
    }

    async fn read(&self, name: &LeaseName) -> Result<Option<Stored>> {
        let key = self.key_for(name);
        match self.bucket.get(&key, MAX_RECORD_BYTES).await? {
            Found::Missing => Ok(None),
            Found::TooLarge { len } => Err(Error::corrupt(
                name.as_str(),
                format!("object {key} is {len} bytes or more, larger than any lease record"),
            )),
            Found::Object { body, etag } => Ok(Some(Stored::new(body::decode(name, &body)?, Version::new(etag)))),
        }
    }

    async fn write(&self, name: &LeaseName, expect: &Precondition, record: &LeaseRecord) -> Result<CasOutcome> {
        let cond = match expect {
            Precondition::Absent => Cond::Absent,
            Precondition::Version(v) => Cond::Match(v.as_str()),
            // Claimable needs a clock of the store's own, and a condition on an ETag
            // cannot say "vacant, any version".
            _ => return Err(leasehold_core::store::not_taken("S3", expect)),
        };
        let key = self.key_for(name);
        match self
            .bucket
            .put(&key, body::encode(record), cond, RECORD_CONTENT_TYPE)
            .await?
        {
            Written::Applied(etag) => Ok(CasOutcome::Written(Stored::new(record.clone(), Version::new(etag)))),
            Written::PreconditionFailed => Ok(CasOutcome::Conflict(Current::Unknown)),
            Written::NoSuchKey => match cond {
                Cond::Match(_) => Ok(CasOutcome::Conflict(Current::Absent)),
                Cond::Absent => Err(Error::Misconfigured {
                    message: format!("PutObject {key}: NoSuchKey on If-None-Match: * (not S3 behaviour)"),
                    source: None,
                }),
            },
        }
    }

    /// ListObjectsV2 of `<prefix>/<name prefix>`, 1000 keys a page. Every object under
    /// the prefix whose key maps back to a valid lease name is listed (a `read` of it
    /// returns the record or [`Error::CorruptRecord`]); others (a leftover
    /// [`S3Store::verify`] probe `~probe-…`, a folder marker `…/`, a key with `//`) are
    /// not, since no lease name reads them.
    /// S3 cannot push: sleeps until the caller's time to look again or
    /// [`S3Config::poll_interval`], whichever is first.
    async fn wait_for_change(&self, _name: &LeaseName, _seen: Option<&Version>, wait: Wait) -> Result<()> {
        leasehold_aws::poll(wait, self.config().poll_interval()).await;
        Ok(())
    }

    async fn list(&self, prefix: &NamePrefix) -> Result<Vec<LeaseName>> {
        let lease_prefix = format!("{}/", self.config().prefix());
        let keys = self
            .bucket
            .list_keys(&format!("{lease_prefix}{}", prefix.as_str()))
            .await?;
        let mut names: Vec<LeaseName> = keys
            .iter()
            .filter_map(|key| name_of(&lease_prefix, key))
            .filter(|n| prefix.matches(n))
            .collect();
        names.sort_unstable();
        names.dedup();
        Ok(names)
    }

    async fn delete(&self, name: &LeaseName, version: &Version) -> Result<DeleteOutcome> {
        let key = self.key_for(name);
        match self.bucket.delete(&key, version.as_str()).await? {
            Written::Applied(_) => Ok(DeleteOutcome::Deleted),
            Written::PreconditionFailed => Ok(DeleteOutcome::Conflict(Current::Unknown)),
            Written::NoSuchKey => Ok(DeleteOutcome::Conflict(Current::Absent)),
        }
    }
}

/// The lease name whose record `key` is (the inverse of [`S3Config::key_for`]), or
/// `None` for a key under `lease_prefix` (`<prefix>/`) that no lease name maps to.
fn name_of(lease_prefix: &str, key: &str) -> Option<LeaseName> {
    LeaseName::new(key.strip_prefix(lease_prefix)?).ok()
}

/// S3 conditional writes are strongly consistent and atomic per key.
impl Linearizable for S3Store {}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> S3Store {
        // Never contacted: port 9 (discard) on loopback is not listened on.
        S3Store::new(
            crate::local_client("http://127.0.0.1:9"),
            S3Config::new("bucket-1", "leases").expect("config"),
        )
    }

    #[test]
    fn capabilities_are_observation_without_current_on_conflict() {
        let caps = store().capabilities();
        assert_eq!(caps.clock, ClockSource::Observation);
        assert_eq!(caps.grade, Grade::Linearizable);
        assert!(!caps.conflict_returns_current);
        assert!(!caps.notifies_waiters);
    }

    #[tokio::test]
    async fn claimable_is_invalid_input_and_sends_nothing() {
        let name = LeaseName::new("a").expect("name");
        let rec = LeaseRecord::held(
            leasehold_core::HolderId::new("w").expect("holder"),
            leasehold_core::FencingToken::FIRST,
            leasehold_core::Ttl::from_millis(1000).expect("ttl"),
        );
        match store().write(&name, &Precondition::Claimable, &rec).await {
            Err(Error::InvalidInput { .. }) => {}
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn keys_are_prefix_slash_name() {
        let name = LeaseName::new("jobs/nightly:2026-11-30").expect("name");
        assert_eq!(store().key_for(&name), "leases/jobs/nightly:2026-11-30");
    }

    #[test]
    fn keys_map_back_to_names() {
        let name = LeaseName::new("jobs/nightly:2026-11-30").expect("name");
        assert_eq!(name_of("leases/", &store().key_for(&name)), Some(name));
        for other in [
            "leases/~probe-0f",
            "leases/jobs/",
            "leases/a//b",
            "leases/",
            "other/jobs/a",
            "leasesx/a",
        ] {
            assert_eq!(name_of("leases/", other), None, "{other}");
        }
    }
}
