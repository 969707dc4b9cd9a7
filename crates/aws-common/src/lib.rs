//! # leasehold-aws
//!
//! The one mapping from AWS SDK failures to what a lease caller should do about them,
//! shared by `leasehold-dynamodb` and `leasehold-s3` so that the two stores never
//! disagree on it. Each store adds only its service's error codes
//! ([`status_kind`] is the fallback for a code it does not know).
//!
//! | the SDK says | read | write |
//! |---|---|---|
//! | the request never went out ([`SentFlag`] not set, or [`never_sent`]: connection refused or unreachable, DNS failure, connect timeout) | `Unavailable` | `Unavailable` |
//! | the HTTP client refused the request, or it could not be built | `Misconfigured` | `Misconfigured` |
//! | timeout, lost connection or unreadable answer after the request went out | `Unavailable` | **`Indeterminate`** |
//! | 429 (throttled before processing) | `Unavailable` | `Unavailable` |
//! | 3xx, 401, 403, 501, other 4xx | `Misconfigured` | `Misconfigured` |
//! | other 5xx, 503 included | `Unavailable` | **`Indeterminate`** |
//!
//! A write whose answer was lost *may have applied*: that is
//! [`leasehold_core::Error::Indeterminate`], never `Unavailable` ("did not apply, safe to
//! retry"). A read changes nothing, so every failure of a read is safe to retry. A 503
//! without a code the service documents as a refusal (S3 `SlowDown`, DynamoDB's
//! throttling codes) counts as "may have applied": a proxy may answer 503 after
//! forwarding the request.
//!
//! "Went out" is recorded, not guessed: a [`SentFlag`] interceptor on each request notes
//! when the SDK hands it to the HTTP connector. A failure before that point is certainly
//! not applied; after it, only a refused connection, a DNS failure or a connect timeout
//! in the error's source chain proves the request was not sent.

use std::error::Error as StdError;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::interceptors::context::BeforeTransmitInterceptorContextRef;
use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::ConfigBag;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;
use leasehold_core::{BoxError, Error};

/// Whether an operation changes the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Nothing is applied (GetItem, GetObject, DescribeTable): every failure is
    /// safe to retry.
    Read,
    /// Something may be applied (UpdateItem, PutObject, DeleteObject, CreateTable): a
    /// failure after sending may have applied.
    Write,
}

/// What a failure means to the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Did not apply; safe to retry ([`Error::Unavailable`]).
    Unavailable,
    /// May have applied ([`Error::Indeterminate`]).
    Indeterminate,
    /// The store is not set up for this caller; a retry cannot help
    /// ([`Error::Misconfigured`]).
    Misconfigured,
}

impl Kind {
    /// A lost answer: a write may have applied, a read did not change anything.
    pub fn after_send(op: Op) -> Self {
        match op {
            Op::Read => Self::Unavailable,
            Op::Write => Self::Indeterminate,
        }
    }

    /// The lease error of this kind.
    pub fn error(self, message: String, source: impl Into<BoxError>) -> Error {
        match self {
            Self::Unavailable => Error::unavailable(message, source),
            Self::Indeterminate => Error::indeterminate(message, source),
            Self::Misconfigured => Error::misconfigured(message, source),
        }
    }
}

/// A failure's kind and a few words on why, for the message.
pub type Classified = (Kind, &'static str);

/// Records whether the SDK handed a request to the HTTP connector: attach a fresh one
/// to each request (`.customize().interceptor(flag.clone())`) and read it on failure.
#[derive(Debug, Clone, Default)]
pub struct SentFlag(Arc<AtomicBool>);

impl SentFlag {
    /// Whether the request reached the connector.
    pub fn was_sent(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

impl Intercept for SentFlag {
    fn name(&self) -> &'static str {
        "leasehold-sent-flag"
    }

    fn read_before_transmit(
        &self,
        _context: &BeforeTransmitInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), aws_smithy_runtime_api::box_error::BoxError> {
        self.0.store(true, Ordering::SeqCst);
        Ok(())
    }
}

/// Classifies a failure that is not a service's answer (dispatch, timeout, an
/// unreadable reply, a request that could not be built). `None` for a service error:
/// the store reads its code first, then falls back to [`status_kind`].
pub fn transport_kind<E, R>(err: &SdkError<E, R>, op: Op, sent: bool) -> Option<Classified> {
    let lost = |why| (Kind::after_send(op), why);
    Some(match err {
        SdkError::ServiceError(_) => return None,
        SdkError::ConstructionFailure(_) => (Kind::Misconfigured, "the request could not be built"),
        SdkError::DispatchFailure(_) if !sent => (Kind::Unavailable, "failed before the request was sent"),
        SdkError::DispatchFailure(d) if d.is_user() => (Kind::Misconfigured, "the HTTP client refused the request"),
        SdkError::DispatchFailure(d) if d.as_connector_error().is_some_and(|c| never_sent(c)) => {
            (Kind::Unavailable, "could not connect")
        }
        SdkError::DispatchFailure(_) => lost("the connection failed after the request was sent"),
        SdkError::TimeoutError(_) if !sent => (Kind::Unavailable, "timed out before the request was sent"),
        SdkError::TimeoutError(_) => lost("timed out waiting for the answer"),
        SdkError::ResponseError(_) => lost("the answer could not be read"),
        _ => lost("unrecognised SDK failure"),
    })
}

/// HTTP statuses read without a service code.
pub mod status {
    /// 429 Too Many Requests: throttled before processing.
    pub const TOO_MANY_REQUESTS: u16 = 429;
    /// 501 Not Implemented: the server lacks the operation (a conditional write).
    pub const NOT_IMPLEMENTED: u16 = 501;
}

/// Classifies a service's answer by its HTTP status alone (a code the store does not
/// know, or none).
pub fn status_kind(status: u16, op: Op) -> Classified {
    match status {
        status::TOO_MANY_REQUESTS => (Kind::Unavailable, "throttled"),
        300..=399 => (Kind::Misconfigured, "redirected (wrong region or endpoint?)"),
        401 | 403 => (Kind::Misconfigured, "refused: credentials, signature or clock"),
        status::NOT_IMPLEMENTED => (Kind::Misconfigured, "not implemented by the server"),
        400..=499 => (Kind::Misconfigured, "refused as invalid"),
        500..=599 => (Kind::after_send(op), "server error"),
        _ => (Kind::after_send(op), "unexpected HTTP status"),
    }
}

/// True when the error chain proves the request never left this machine: the
/// connection was refused or unreachable, the name did not resolve, or connecting
/// timed out. Anything else may have been sent.
pub fn never_sent(err: &(dyn StdError + 'static)) -> bool {
    let mut next = Some(err);
    while let Some(e) = next {
        if e.downcast_ref::<hyper_util::client::legacy::Error>()
            .is_some_and(hyper_util::client::legacy::Error::is_connect)
        {
            return true;
        }
        let refused = e.downcast_ref::<std::io::Error>().is_some_and(|io| {
            matches!(
                io.kind(),
                std::io::ErrorKind::ConnectionRefused
                    | std::io::ErrorKind::AddrNotAvailable
                    | std::io::ErrorKind::NetworkUnreachable
                    | std::io::ErrorKind::HostUnreachable
            )
        });
        if refused {
            return true;
        }
        if e.downcast_ref::<aws_smithy_runtime_api::client::dns::ResolveDnsError>()
            .is_some()
        {
            return true;
        }
        // aws-smithy-http-client's connect timeout reads "HTTP connect timeout occurred
        // after …"; if that wording changes, the failure counts as "may have applied".
        if e.to_string().contains("connect timeout") {
            return true;
        }
        next = e.source();
    }
    false
}

/// Status, code and message of a service error, or the whole source chain of any other
/// failure, for error messages.
pub fn summary<E, R>(err: &SdkError<E, R>) -> String
where
    E: ProvideErrorMetadata + StdError + 'static,
    R: std::fmt::Debug,
{
    match err {
        SdkError::ServiceError(ctx) => format!(
            "{} ({})",
            ctx.err().code().unwrap_or("no error code"),
            ctx.err().message().unwrap_or("no message")
        ),
        other => {
            let mut s = other.to_string();
            let mut next = StdError::source(other);
            while let Some(e) = next {
                s.push_str(": ");
                s.push_str(&e.to_string());
                next = e.source();
            }
            s
        }
    }
}

#[cfg(test)]
mod tests {
    use aws_smithy_runtime_api::client::result::ConnectorError;
    use aws_smithy_types::error::ErrorMetadata;

    use super::*;

    type Err = SdkError<ErrorMetadata, ()>;

    fn io(kind: std::io::ErrorKind) -> Err {
        SdkError::dispatch_failure(ConnectorError::io(Box::new(std::io::Error::from(kind))))
    }

    #[test]
    fn transport_failures() {
        use Kind::*;
        use std::io::ErrorKind as K;
        let cases: Vec<(Err, Op, bool, Kind)> = vec![
            (io(K::ConnectionRefused), Op::Write, true, Unavailable),
            (io(K::HostUnreachable), Op::Write, true, Unavailable),
            (io(K::ConnectionReset), Op::Write, true, Indeterminate),
            (io(K::ConnectionReset), Op::Write, false, Unavailable),
            (io(K::ConnectionReset), Op::Read, true, Unavailable),
            (SdkError::timeout_error("slow"), Op::Write, true, Indeterminate),
            (SdkError::timeout_error("slow"), Op::Write, false, Unavailable),
            (SdkError::timeout_error("slow"), Op::Read, true, Unavailable),
            (SdkError::construction_failure("bad"), Op::Write, false, Misconfigured),
            (
                SdkError::dispatch_failure(ConnectorError::timeout("HTTP connect timeout occurred after 1s".into())),
                Op::Write,
                true,
                Unavailable,
            ),
            (
                SdkError::dispatch_failure(ConnectorError::timeout("HTTP read timeout occurred after 1s".into())),
                Op::Write,
                true,
                Indeterminate,
            ),
            (
                SdkError::dispatch_failure(ConnectorError::user("bad header".into())),
                Op::Write,
                true,
                Misconfigured,
            ),
        ];
        for (err, op, sent, want) in cases {
            let got = transport_kind(&err, op, sent).map(|c| c.0);
            assert_eq!(got, Some(want), "{err:?} {op:?} sent={sent}");
        }
    }

    #[test]
    fn statuses() {
        use Kind::*;
        for (status, op, want) in [
            (429, Op::Write, Unavailable),
            (503, Op::Write, Indeterminate),
            (503, Op::Read, Unavailable),
            (500, Op::Write, Indeterminate),
            (502, Op::Read, Unavailable),
            (301, Op::Read, Misconfigured),
            (403, Op::Write, Misconfigured),
            (501, Op::Write, Misconfigured),
            (400, Op::Write, Misconfigured),
        ] {
            assert_eq!(status_kind(status, op).0, want, "{status} {op:?}");
        }
    }
}
