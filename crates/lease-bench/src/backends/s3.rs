//! S3 on moto: `leasehold-s3` (one conditional PutObject per operation) against the bare
//! conditional PUT / DELETE of a hand-written lock.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_s3::Client;
use aws_sdk_s3::error::SdkError;
use aws_sdk_s3::primitives::ByteStream;
use leasehold_core::store::CasStore;
use leasehold_s3::{S3Config, S3Store, local_client};

use super::{Backend, Floor, Observed, OpTexts, RawLock, StoreInfo, StoreKind, env, lost, observed};
use crate::{Result, fail};

/// moto's S3, with a bucket of this run.
pub(crate) struct S3Backend {
    endpoint: String,
    bucket: String,
    admin: Client,
}

impl S3Backend {
    pub(crate) async fn open(tag: &str) -> Result<Self> {
        let endpoint = env("LEASEHOLD_MOTO_ENDPOINT")?;
        let bucket = format!("lhbench-{tag}");
        let admin = local_client(&endpoint);
        admin
            .create_bucket()
            .bucket(&bucket)
            .send()
            .await
            .map_err(|e| fail(format!("cannot create bucket {bucket} on {endpoint}: {e:?}")))?;
        Ok(Self {
            endpoint,
            bucket,
            admin,
        })
    }
}

#[async_trait]
impl Backend for S3Backend {
    async fn store(&self) -> Result<Arc<dyn CasStore>> {
        Ok(Arc::new(S3Store::new(
            local_client(&self.endpoint),
            S3Config::new(&self.bucket, "lib")?,
        )))
    }

    async fn floor(&self) -> Result<Box<dyn Floor>> {
        Ok(Box::new(S3Floor {
            client: local_client(&self.endpoint),
            bucket: self.bucket.clone(),
        }))
    }

    async fn describe(&self) -> Result<StoreInfo> {
        Ok(StoreInfo {
            kind: StoreKind::S3,
            version: format!("{} (S3 emulator, Python)", super::dynamo::moto_version()),
            settings: vec![
                format!(
                    "the same moto server on {} (`scripts/moto_serial.py`, one request at a time); \
                     `leasehold_s3::local_client` (path-style, static credentials) for library and floor",
                    self.endpoint
                ),
                "an emulator's latency is Python's, not S3's: read the ratios".into(),
            ],
            library_ops: OpTexts {
                acquire: "one PutObject (`If-None-Match: *` for a new name, `If-Match: <etag>` after a release) of the JSON record with a random whitespace nonce".into(),
                renew: "one PutObject `If-Match: <etag>`".into(),
                release: "one PutObject `If-Match: <etag>` of the vacant record (the token stays)".into(),
                takeover: "one PutObject `If-Match` on the ETag watched for TTL + margin (the watching GET is not timed)".into(),
            },
            floor_ops: OpTexts {
                acquire: "PutObject `If-None-Match: *`".into(),
                renew: "PutObject `If-Match: <etag>`".into(),
                release: "DeleteObject `If-Match: <etag>`".into(),
                takeover: "PutObject `If-Match` on the ETag read before watching (not timed)".into(),
            },
        })
    }

    async fn cleanup(&self) -> Result<()> {
        let mut token = None;
        loop {
            let out = self
                .admin
                .list_objects_v2()
                .bucket(&self.bucket)
                .set_continuation_token(token)
                .send()
                .await?;
            for o in out.contents() {
                if let Some(k) = o.key() {
                    self.admin.delete_object().bucket(&self.bucket).key(k).send().await?;
                }
            }
            token = out.next_continuation_token().map(str::to_owned);
            if token.is_none() {
                break;
            }
        }
        self.admin.delete_bucket().bucket(&self.bucket).send().await?;
        Ok(())
    }
}

struct S3Floor {
    client: Client,
    bucket: String,
}

fn precondition_failed<E>(e: &SdkError<E, aws_sdk_s3::config::http::HttpResponse>) -> bool {
    e.raw_response().is_some_and(|r| r.status().as_u16() == 412)
}

fn body(holder: &str) -> ByteStream {
    ByteStream::from(format!("{holder} {:016x}", rand::random::<u64>()).into_bytes())
}

impl S3Floor {
    fn key(key: &str) -> String {
        format!("raw/{key}")
    }

    async fn put(&self, key: &str, holder: &str, if_match: Option<&str>) -> Result<Option<RawLock>> {
        let k = Self::key(key);
        let req = self.client.put_object().bucket(&self.bucket).key(&k).body(body(holder));
        let req = match if_match {
            Some(etag) => req.if_match(etag),
            None => req.if_none_match("*"),
        };
        match req.send().await {
            Ok(out) => Ok(Some(RawLock::new(
                k,
                holder,
                out.e_tag().ok_or_else(|| fail("s3 floor: no ETag"))?,
            ))),
            Err(e) if precondition_failed(&e) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }
}

#[async_trait]
impl Floor for S3Floor {
    fn label(&self) -> &'static str {
        "s3"
    }

    async fn take(&self, key: &str, holder: &str, _ttl: Duration) -> Result<Option<RawLock>> {
        self.put(key, holder, None).await
    }

    async fn renew(&self, lock: &mut RawLock, _ttl: Duration) -> Result<()> {
        let k = lock.key.trim_start_matches("raw/").to_owned();
        let next = self
            .put(&k, &lock.holder, Some(&lock.version))
            .await?
            .ok_or_else(|| lost(self.label(), &lock.key))?;
        lock.version = next.version;
        Ok(())
    }

    async fn release(&self, lock: RawLock) -> Result<()> {
        match self
            .client
            .delete_object()
            .bucket(&self.bucket)
            .key(&lock.key)
            .if_match(&lock.version)
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if precondition_failed(&e) => Err(lost(self.label(), &lock.key)),
            Err(e) => Err(e.into()),
        }
    }

    async fn observe(&self, key: &str) -> Result<Observed> {
        let out = self
            .client
            .head_object()
            .bucket(&self.bucket)
            .key(Self::key(key))
            .send()
            .await?;
        Ok(out.e_tag().map(str::to_owned))
    }

    async fn takeover(&self, key: &str, seen: &Observed, holder: &str, _ttl: Duration) -> Result<Option<RawLock>> {
        let seen = observed(self.label(), key, seen)?;
        self.put(key, holder, Some(seen)).await
    }
}
