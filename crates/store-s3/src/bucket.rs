//! The S3 calls the store makes (GetObject, conditional PutObject, conditional
//! DeleteObject, and ListObjectsV2 for listing), each sent once with the store's request
//! options, answers classified.
//!
//! The SDK's own retries are switched off for writes: a conditional PUT whose first
//! attempt applied but whose answer was lost would come back `412` on the SDK's retry
//! and be reported as a conflict, although the write happened. The store re-sends only
//! what S3 said it did not apply (`409 ConditionalRequestConflict`). Reads change
//! nothing, so a GetObject is retried on transient failures (5xx, throttling, lost
//! connections: [`READ_ATTEMPTS`] attempts, short backoff); the count of requests stays
//! one per call when nothing fails.

use std::fmt;
use std::time::Duration;

use aws_sdk_s3::Client;
use aws_sdk_s3::config::retry::RetryConfig;
use aws_sdk_s3::primitives::ByteStream;
use leasehold_core::{Error, Result};
use rand::Rng;

use crate::S3Config;
use crate::error::{Effect, Failure, SentRequests, classify};

/// Sends an SDK request with `overrides` (timeouts, retries), counting what went out:
/// `(the result, whether any attempt was sent)`.
macro_rules! send {
    ($request:expr, $overrides:expr) => {{
        let sent = SentRequests::default();
        let res = $request
            .customize()
            .config_override($overrides.clone())
            .interceptor(sent.clone())
            .send()
            .await;
        (res, sent)
    }};
}

/// The condition of a PUT.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Cond<'a> {
    /// `If-None-Match: *`: only if no object exists under the key.
    Absent,
    /// `If-Match: <etag>`: only if the object's ETag is this one.
    Match(&'a str),
}

/// How a conditional PUT or DELETE ended, when S3 answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Written {
    /// Applied; the new object's ETag (empty for a delete).
    Applied(String),
    /// 412: the condition did not hold.
    PreconditionFailed,
    /// 404 `NoSuchKey` on `If-Match`: there is no object.
    NoSuchKey,
}

/// What a GET found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Found {
    /// No object under the key.
    Missing,
    /// The object's body and ETag.
    Object {
        /// The body.
        body: Vec<u8>,
        /// The ETag, quoted as S3 returns it.
        etag: String,
    },
    /// An object larger than the caller accepts (not downloaded).
    TooLarge {
        /// Its size, or the bytes read before giving up.
        len: u64,
    },
}

/// A client, a bucket and the store's request options.
#[derive(Clone)]
pub(crate) struct Bucket {
    client: Client,
    config: S3Config,
    /// For writes: no SDK retries, the store's timeouts.
    overrides: aws_sdk_s3::config::Builder,
    /// For reads: short SDK retries on transient failures, the store's timeouts.
    read_overrides: aws_sdk_s3::config::Builder,
}

/// Keys per ListObjectsV2 page (S3's largest).
pub(crate) const LIST_PAGE: i32 = 1000;

/// Attempts of one GetObject (the first and up to two retries on transient failures).
pub(crate) const READ_ATTEMPTS: u32 = 3;

impl fmt::Debug for Bucket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Bucket")
            .field("bucket", &self.config.bucket())
            .field("prefix", &self.config.prefix())
            .finish_non_exhaustive()
    }
}

impl Bucket {
    pub(crate) fn new(client: Client, config: S3Config) -> Self {
        let timeouts = config.timeouts(client.config().timeout_config());
        let mut overrides = aws_sdk_s3::Config::builder();
        overrides.set_retry_config(Some(RetryConfig::disabled()));
        overrides.set_timeout_config(Some(timeouts.clone()));
        let mut read_overrides = aws_sdk_s3::Config::builder();
        read_overrides.set_retry_config(Some(
            RetryConfig::standard()
                .with_max_attempts(READ_ATTEMPTS)
                .with_initial_backoff(Duration::from_millis(20))
                .with_max_backoff(Duration::from_millis(500)),
        ));
        read_overrides.set_timeout_config(Some(timeouts));
        Self {
            client,
            config,
            overrides,
            read_overrides,
        }
    }

    pub(crate) fn client(&self) -> &Client {
        &self.client
    }

    pub(crate) fn config(&self) -> &S3Config {
        &self.config
    }

    /// GetObject, reading at most `max_bytes` of body.
    pub(crate) async fn get(&self, key: &str, max_bytes: u64) -> Result<Found> {
        let what = || format!("GetObject {key}");
        let (res, sent) = send!(
            self.client.get_object().bucket(self.config.bucket()).key(key),
            self.read_overrides
        );
        let mut out = match res {
            Ok(out) => out,
            Err(e) => {
                return match classify(e, Effect::Read, sent.was_sent(), &what()) {
                    Failure::NoSuchKey => Ok(Found::Missing),
                    Failure::PreconditionFailed => Err(Error::Unavailable {
                        message: format!("{}: 412 on an unconditional read", what()),
                        source: None,
                    }),
                    Failure::ConcurrentWrite(e) | Failure::Other(e) => Err(e),
                };
            }
        };
        let etag = out.e_tag().map(str::to_owned).ok_or_else(|| no_etag(&what()))?;
        let declared = out.content_length().and_then(|l| u64::try_from(l).ok());
        if let Some(len) = declared.filter(|len| *len > max_bytes) {
            return Ok(Found::TooLarge { len });
        }
        let read_body = async {
            let mut body = Vec::new();
            while let Some(chunk) = out.body.try_next().await? {
                body.extend_from_slice(&chunk);
                if u64::try_from(body.len()).unwrap_or(u64::MAX) > max_bytes {
                    return Ok(Err(u64::try_from(body.len()).unwrap_or(u64::MAX)));
                }
            }
            Ok::<_, aws_sdk_s3::primitives::ByteStreamError>(Ok(body))
        };
        match tokio::time::timeout(self.config.request_timeout(), read_body).await {
            Ok(Ok(Ok(body))) => Ok(Found::Object { body, etag }),
            Ok(Ok(Err(len))) => Ok(Found::TooLarge { len }),
            Ok(Err(e)) => Err(Error::unavailable(format!("{}: reading the body failed", what()), e)),
            Err(_) => Err(Error::Unavailable {
                message: format!("{}: reading the body timed out", what()),
                source: None,
            }),
        }
    }

    /// The keys of the objects whose keys start with `prefix`, in S3's (byte) order:
    /// one ListObjectsV2 per page of up to [`LIST_PAGE`] keys, each page continuing from
    /// the token the one before returned. Retried on transient failures like a GetObject.
    pub(crate) async fn list_keys(&self, prefix: &str) -> Result<Vec<String>> {
        let what = || format!("ListObjectsV2 {prefix}");
        let mut keys = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let request = self
                .client
                .list_objects_v2()
                .bucket(self.config.bucket())
                .prefix(prefix)
                .max_keys(LIST_PAGE)
                .set_continuation_token(token.take());
            let (res, sent) = send!(request, self.read_overrides);
            let out = match res {
                Ok(out) => out,
                Err(e) => {
                    return Err(match classify(e, Effect::Read, sent.was_sent(), &what()) {
                        Failure::ConcurrentWrite(e) | Failure::Other(e) => e,
                        other => Error::Unavailable {
                            message: format!("{}: unexpected answer {other:?}", what()),
                            source: None,
                        },
                    });
                }
            };
            keys.extend(out.contents().iter().filter_map(|o| o.key().map(str::to_owned)));
            match out.next_continuation_token() {
                Some(next) if out.is_truncated() == Some(true) => token = Some(next.to_owned()),
                _ => return Ok(keys),
            }
        }
    }

    /// A conditional PutObject, re-sent (bounded, with backoff) while S3 answers 409.
    pub(crate) async fn put(&self, key: &str, body: Vec<u8>, cond: Cond<'_>, content_type: &str) -> Result<Written> {
        let what = &format!("PutObject {key}");
        let body = &body;
        self.until_settled(what, move || async move {
            let req = self
                .client
                .put_object()
                .bucket(self.config.bucket())
                .key(key)
                .content_type(content_type)
                .body(ByteStream::from(body.clone()));
            let req = match cond {
                Cond::Absent => req.if_none_match("*"),
                Cond::Match(etag) => req.if_match(etag),
            };
            let (res, sent) = send!(req, self.overrides);
            match res {
                Ok(out) => match out.e_tag() {
                    Some(etag) => Ok(Written::Applied(etag.to_owned())),
                    None => Err(Failure::Other(no_etag(what))),
                },
                Err(e) => Err(classify(e, Effect::Write, sent.was_sent(), what)),
            }
        })
        .await
    }

    /// DeleteObject with `If-Match: <etag>`, re-sent (bounded) while S3 answers 409.
    pub(crate) async fn delete(&self, key: &str, etag: &str) -> Result<Written> {
        let what = &format!("DeleteObject {key}");
        self.until_settled(what, move || async move {
            let request = self
                .client
                .delete_object()
                .bucket(self.config.bucket())
                .key(key)
                .if_match(etag);
            let (res, sent) = send!(request, self.overrides);
            match res {
                Ok(_) => Ok(Written::Applied(String::new())),
                Err(e) => Err(classify(e, Effect::Write, sent.was_sent(), what)),
            }
        })
        .await
    }

    /// Sends a conditional write (`attempt` sends it once) until it settles: re-sent,
    /// bounded and with backoff, while S3 answers 409 ([`Bucket::settle`]).
    async fn until_settled<F>(&self, what: &str, mut attempt: impl FnMut() -> F) -> Result<Written>
    where
        F: Future<Output = std::result::Result<Written, Failure>>,
    {
        let mut attempts = 0;
        loop {
            let failure = match attempt().await {
                Ok(written) => return Ok(written),
                Err(failure) => failure,
            };
            if let Some(written) = self.settle(failure, &mut attempts, what).await? {
                return Ok(written);
            }
        }
    }

    /// Turns a failed conditional write into its outcome, or `None` after waiting out
    /// a 409 when another attempt is allowed.
    async fn settle(&self, failure: Failure, attempt: &mut u32, what: &str) -> Result<Option<Written>> {
        match failure {
            Failure::PreconditionFailed => Ok(Some(Written::PreconditionFailed)),
            Failure::NoSuchKey => Ok(Some(Written::NoSuchKey)),
            Failure::Other(e) => Err(e),
            Failure::ConcurrentWrite(e) => {
                let (retries, first) = self.config.conflict_retry_policy();
                if *attempt >= retries {
                    return Err(Error::unavailable(
                        format!("{what}: 409 ConditionalRequestConflict on {} attempts", *attempt + 1),
                        e,
                    ));
                }
                tracing::debug!(
                    call = what,
                    attempt = *attempt,
                    "409 ConditionalRequestConflict; re-sending"
                );
                tokio::time::sleep(conflict_backoff(first, *attempt)).await;
                *attempt += 1;
                Ok(None)
            }
        }
    }
}

/// Exponential backoff with jitter: a random wait in `[d/2, d]`, `d = first · 2^attempt`
/// (capped at two seconds).
fn conflict_backoff(first: Duration, attempt: u32) -> Duration {
    let ceiling = first
        .saturating_mul(1u32 << attempt.min(16))
        .min(Duration::from_secs(2));
    let floor = ceiling / 2;
    floor + (ceiling - floor).mul_f64(rand::rng().random_range(0.0..1.0))
}

fn no_etag(what: &str) -> Error {
    Error::Misconfigured {
        message: format!("{what}: the server returned no ETag, so conditional writes cannot work"),
        source: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_is_capped() {
        let first = Duration::from_millis(20);
        for attempt in 0..20 {
            let d = conflict_backoff(first, attempt);
            let ceiling = first
                .saturating_mul(1u32 << attempt.min(16))
                .min(Duration::from_secs(2));
            assert!(d >= ceiling / 2 && d <= ceiling, "{attempt}: {d:?}");
        }
    }
}
