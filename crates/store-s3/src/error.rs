//! S3 answers and SDK failures, mapped to the library's error kinds through named
//! constants.
//!
//! | S3 / SDK | meaning here |
//! |---|---|
//! | 412 `PreconditionFailed` | the condition did not hold: a conflict, nothing changed |
//! | 404 `NoSuchKey` | no object (on `If-Match`: a conflict with an absent record) |
//! | 409 `ConditionalRequestConflict`, `OperationAborted` | another conditional write on the key was in flight; not applied, re-sent with backoff |
//! | 503 `SlowDown` | throttled before applying: [`Error::Unavailable`] |
//! | 400 `RequestTimeout` | the request body was not received: [`Error::Unavailable`] |
//! | 404 `NoSuchBucket` | [`Error::NotProvisioned`] |
//! | a 404 without `NoSuchKey`, 401, 403 (`AccessDenied`, `InvalidAccessKeyId`, `SignatureDoesNotMatch`, `RequestTimeTooSkewed`, …), 3xx redirects, 501 and other 4xx | [`Error::Misconfigured`] |
//! | other 5xx, an unreadable answer, a timeout or a lost connection after the request went out | a write: [`Error::Indeterminate`]; a read: [`Error::Unavailable`] |
//! | a request that never went out (connection refused, DNS failure, connect timeout, a failing credentials provider) | [`Error::Unavailable`] |
//!
//! Everything but the S3 codes (transport failures, statuses without a code, "was it
//! sent") is the mapping shared with the DynamoDB store, in `leasehold-aws`.

use std::error::Error as StdError;

use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
pub(crate) use leasehold_aws::SentRequests;
use leasehold_aws::{status_kind, transport_kind};
pub(crate) use leasehold_core::store::Effect;
use leasehold_core::store::ErrorClass;
use leasehold_core::{BoxError, Error};

/// S3 error codes the store reacts to.
pub(crate) mod code {
    /// A conditional header did not hold (412).
    pub(crate) const PRECONDITION_FAILED: &str = "PreconditionFailed";
    /// No object under the key (404).
    pub(crate) const NO_SUCH_KEY: &str = "NoSuchKey";
    /// The bucket does not exist (404).
    pub(crate) const NO_SUCH_BUCKET: &str = "NoSuchBucket";
    /// Another conditional write on the same key is in flight (409): re-send.
    pub(crate) const CONDITIONAL_REQUEST_CONFLICT: &str = "ConditionalRequestConflict";
    /// A conflicting operation is in progress (409): re-send.
    pub(crate) const OPERATION_ABORTED: &str = "OperationAborted";
    /// Throttled (503): not applied.
    pub(crate) const SLOW_DOWN: &str = "SlowDown";
    /// The server gave up waiting for the request body (400): not applied.
    pub(crate) const REQUEST_TIMEOUT: &str = "RequestTimeout";
    /// Permission missing (403).
    pub(crate) const ACCESS_DENIED: &str = "AccessDenied";
}

/// HTTP statuses the store reacts to.
pub(crate) mod status {
    /// 412 Precondition Failed.
    pub(crate) const PRECONDITION_FAILED: u16 = 412;
    /// 404 Not Found.
    pub(crate) const NOT_FOUND: u16 = 404;
    /// 409 Conflict.
    pub(crate) const CONFLICT: u16 = 409;
    /// 400 Bad Request.
    pub(crate) const BAD_REQUEST: u16 = 400;
    /// 503 Service Unavailable.
    pub(crate) const SERVICE_UNAVAILABLE: u16 = 503;
}

/// What an S3 failure means to the store.
#[derive(Debug)]
pub(crate) enum Failure {
    /// 412: the condition did not hold; nothing changed.
    PreconditionFailed,
    /// 404 `NoSuchKey`: there is no object under the key.
    NoSuchKey,
    /// 409: another conditional write was in flight; this one was not applied.
    ConcurrentWrite(Error),
    /// Everything else, as the library's error.
    Other(Error),
}

/// Classifies a failed S3 call. `what` names the call for messages
/// (`"PutObject leases/a"`); `sent` says whether the request reached the connector.
pub(crate) fn classify<E>(err: SdkError<E, HttpResponse>, op: Effect, sent: bool, what: &str) -> Failure
where
    E: ProvideErrorMetadata + StdError + Send + Sync + 'static,
{
    let kind = kind_of(&err, op, sent);
    let describe = |class: &str| format!("{what}: {class}: {}", summary(&err));
    match kind {
        Kind::PreconditionFailed => Failure::PreconditionFailed,
        Kind::NoSuchKey => Failure::NoSuchKey,
        Kind::ConcurrentWrite => {
            let message = describe("another conditional write on the key was in flight");
            Failure::ConcurrentWrite(Error::unavailable(message, boxed(err)))
        }
        Kind::Other((kind, class)) => Failure::Other(kind.error(describe(class), boxed(err))),
    }
}

fn boxed<E>(err: SdkError<E, HttpResponse>) -> BoxError
where
    E: StdError + Send + Sync + 'static,
{
    Box::new(err)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    PreconditionFailed,
    NoSuchKey,
    ConcurrentWrite,
    Other(leasehold_aws::Classified),
}

fn kind_of<E: ProvideErrorMetadata>(err: &SdkError<E, HttpResponse>, op: Effect, sent: bool) -> Kind {
    match err {
        SdkError::ServiceError(ctx) => service_kind(ctx.raw().status().as_u16(), ctx.err().code(), op),
        other => Kind::Other(
            transport_kind(other, op, sent).unwrap_or((ErrorClass::after_send(op), "unrecognised SDK failure")),
        ),
    }
}

fn service_kind(status: u16, code: Option<&str>, op: Effect) -> Kind {
    use self::code as c;
    use self::status as s;
    match (status, code) {
        (s::PRECONDITION_FAILED, _) | (_, Some(c::PRECONDITION_FAILED)) => Kind::PreconditionFailed,
        (s::NOT_FOUND, Some(c::NO_SUCH_KEY)) => Kind::NoSuchKey,
        (s::NOT_FOUND, Some(c::NO_SUCH_BUCKET)) => {
            Kind::Other((ErrorClass::NotProvisioned, "the bucket does not exist"))
        }
        (s::NOT_FOUND, _) => Kind::Other((
            ErrorClass::Misconfigured,
            "404 without NoSuchKey (wrong endpoint or bucket?)",
        )),
        (s::CONFLICT, Some(c::CONDITIONAL_REQUEST_CONFLICT | c::OPERATION_ABORTED)) => Kind::ConcurrentWrite,
        (s::CONFLICT, _) => Kind::Other((ErrorClass::Unavailable, "refused with 409")),
        (s::SERVICE_UNAVAILABLE, Some(c::SLOW_DOWN)) => Kind::Other((ErrorClass::Unavailable, "throttled (SlowDown)")),
        (s::BAD_REQUEST, Some(c::REQUEST_TIMEOUT)) => {
            Kind::Other((ErrorClass::Unavailable, "the server timed out reading the request"))
        }
        (401 | 403, Some(c::ACCESS_DENIED)) => {
            Kind::Other((ErrorClass::Misconfigured, "access denied (check the IAM policy)"))
        }
        (501, _) => Kind::Other((
            ErrorClass::Misconfigured,
            "not implemented by the server (no conditional writes?)",
        )),
        _ => Kind::Other(status_kind(status, op)),
    }
}

/// Status, code and message of a failure, for error messages.
fn summary<E: ProvideErrorMetadata + StdError + 'static>(err: &SdkError<E, HttpResponse>) -> String {
    match err {
        SdkError::ServiceError(ctx) => format!("HTTP {} {}", ctx.raw().status().as_u16(), leasehold_aws::summary(err)),
        other => leasehold_aws::summary(other),
    }
}

#[cfg(test)]
mod tests {
    use aws_sdk_s3::operation::put_object::PutObjectError;
    use aws_smithy_runtime_api::client::result::ConnectorError;
    use aws_smithy_runtime_api::http::StatusCode;
    use aws_smithy_types::body::SdkBody;
    use aws_smithy_types::error::ErrorMetadata;

    use super::*;

    fn service(status: u16, code: &str) -> SdkError<PutObjectError, HttpResponse> {
        let err = PutObjectError::generic(ErrorMetadata::builder().code(code).message("test").build());
        let status = StatusCode::try_from(status).expect("status");
        SdkError::service_error(err, HttpResponse::new(status, SdkBody::empty()))
    }

    fn class(err: SdkError<PutObjectError, HttpResponse>, op: Effect, sent: bool) -> &'static str {
        match classify(err, op, sent, "PutObject k") {
            Failure::PreconditionFailed => "conflict",
            Failure::NoSuchKey => "absent",
            Failure::ConcurrentWrite(e) => {
                assert!(e.is_retryable(), "{e}");
                "retry"
            }
            Failure::Other(Error::Unavailable { .. }) => "unavailable",
            Failure::Other(Error::Indeterminate { .. }) => "indeterminate",
            Failure::Other(Error::Misconfigured { .. }) => "misconfigured",
            Failure::Other(Error::NotProvisioned { .. }) => "not provisioned",
            Failure::Other(e) => panic!("unexpected {e:?}"),
        }
    }

    #[test]
    fn service_errors() {
        let cases = [
            (412, "PreconditionFailed", "conflict"),
            (404, "NoSuchKey", "absent"),
            (404, "NoSuchBucket", "not provisioned"),
            (404, "", "misconfigured"),
            (409, "ConditionalRequestConflict", "retry"),
            (409, "OperationAborted", "retry"),
            (409, "SomethingElse", "unavailable"),
            (503, "SlowDown", "unavailable"),
            (400, "RequestTimeout", "unavailable"),
            (403, "AccessDenied", "misconfigured"),
            (403, "InvalidAccessKeyId", "misconfigured"),
            (403, "RequestTimeTooSkewed", "misconfigured"),
            (301, "PermanentRedirect", "misconfigured"),
            (501, "NotImplemented", "misconfigured"),
            (400, "InvalidArgument", "misconfigured"),
            (500, "InternalError", "indeterminate"),
            (503, "ServiceUnavailable", "indeterminate"),
        ];
        for (status, code, want) in cases {
            assert_eq!(
                class(service(status, code), Effect::Write, true),
                want,
                "{status} {code}"
            );
        }
        assert_eq!(class(service(500, "InternalError"), Effect::Read, true), "unavailable");
    }

    #[test]
    fn transport_errors() {
        let refused = || {
            SdkError::dispatch_failure(ConnectorError::io(Box::new(std::io::Error::from(
                std::io::ErrorKind::ConnectionRefused,
            ))))
        };
        let reset = || {
            SdkError::dispatch_failure(ConnectorError::io(Box::new(std::io::Error::from(
                std::io::ErrorKind::ConnectionReset,
            ))))
        };
        let timeout = || SdkError::timeout_error("slow");
        let cases = [
            ("refused", refused(), Effect::Write, true, "unavailable"),
            ("reset", reset(), Effect::Write, true, "indeterminate"),
            ("reset, unsent", reset(), Effect::Write, false, "unavailable"),
            ("reset read", reset(), Effect::Read, true, "unavailable"),
            ("timeout", timeout(), Effect::Write, true, "indeterminate"),
            ("timeout, unsent", timeout(), Effect::Write, false, "unavailable"),
            ("timeout read", timeout(), Effect::Read, true, "unavailable"),
            (
                "unbuilt",
                SdkError::construction_failure("bad"),
                Effect::Write,
                false,
                "misconfigured",
            ),
        ];
        for (what, err, effect, sent, want) in cases {
            assert_eq!(class(err, effect, sent), want, "{what}");
        }
        let connect_timeout =
            SdkError::dispatch_failure(ConnectorError::timeout("HTTP connect timeout occurred after 1s".into()));
        assert_eq!(class(connect_timeout, Effect::Write, true), "unavailable");
        let read_timeout =
            SdkError::dispatch_failure(ConnectorError::timeout("HTTP read timeout occurred after 1s".into()));
        assert_eq!(class(read_timeout, Effect::Write, true), "indeterminate");
    }

    #[test]
    fn messages_name_the_call_and_the_code() {
        match classify(service(403, "AccessDenied"), Effect::Write, true, "PutObject leases/a") {
            Failure::Other(e) => {
                let s = e.to_string();
                assert!(s.contains("PutObject leases/a") && s.contains("AccessDenied"), "{s}");
            }
            other => panic!("{other:?}"),
        }
    }
}
