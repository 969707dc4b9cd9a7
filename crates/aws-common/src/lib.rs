//! # leasehold-aws
//!
//! The one mapping from AWS SDK failures to what a lease caller should do about them,
//! shared by `leasehold-dynamodb` and `leasehold-s3` so that the two stores never
//! disagree on it. Each store adds only its service's error codes
//! ([`status_kind`] is the fallback for a code it does not know).
//!
//! | the SDK says | read | write |
//! |---|---|---|
//! | the request never went out ([`SentRequests`] empty, or [`never_sent`]: connection refused or unreachable, DNS failure, connect timeout) | `Unavailable` | `Unavailable` |
//! | the HTTP client refused the request, or it could not be built | `Misconfigured` | `Misconfigured` |
//! | timeout, lost connection or unreadable answer after the request went out | `Unavailable` | **`Indeterminate`** |
//! | 429 (throttled before processing) | `Unavailable` | `Unavailable` |
//! | 3xx, 401, 403, 501, other 4xx | `Misconfigured` | `Misconfigured` |
//! | other 5xx, 503 included | `Unavailable` | **`Indeterminate`** |
//!
//! A write whose answer was lost *may have applied*: that is
//! `Indeterminate`, never `Unavailable` ("did not apply, safe to
//! retry"). A read changes nothing, so every failure of a read is safe to retry. A 503
//! without a code the service documents as a refusal (S3 `SlowDown`, DynamoDB's
//! throttling codes) counts as "may have applied": a proxy may answer 503 after
//! forwarding the request.
//!
//! "Went out" is recorded, not guessed: a [`SentRequests`] interceptor on each request notes
//! when the SDK hands it to the HTTP connector. A failure before that point is certainly
//! not applied; after it, only a refused connection, a DNS failure or a connect timeout
//! in the error's source chain proves the request was not sent.

//!
//! Both stores wait the same way too: they cannot push a change, so a waiter looks again
//! at least every [`DEFAULT_POLL_INTERVAL`] (or the store config's own), see [`poll`].

mod local;
mod polling;
mod timeouts;

pub use polling::{DEFAULT_POLL_INTERVAL, poll, poll_interval};
pub use timeouts::{DEFAULT_REQUEST_TIMEOUT, bounded, request_timeout};

use std::collections::HashMap;
use std::error::Error as StdError;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::interceptors::context::BeforeTransmitInterceptorContextRef;
use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::ConfigBag;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;
use leasehold_core::store::{Effect, ErrorClass};

/// A failure's class and a few words on why, for the message.
pub type Classified = (ErrorClass, &'static str);

/// Counts the requests the SDK hands to the HTTP connector, by HTTP method (one per
/// attempt). Attach a fresh one to each request (`.customize().interceptor(sent.clone())`)
/// and read [`was_sent`](Self::was_sent) on failure; attached to a client, it counts
/// everything the client sends.
#[derive(Debug, Clone, Default)]
pub struct SentRequests(Arc<Mutex<HashMap<String, u64>>>);

impl SentRequests {
    fn counts(&self) -> MutexGuard<'_, HashMap<String, u64>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether any request reached the connector.
    pub fn was_sent(&self) -> bool {
        self.total() > 0
    }

    /// How many `method` requests reached the connector.
    pub fn get(&self, method: &str) -> u64 {
        self.counts().get(method).copied().unwrap_or(0)
    }

    /// How many requests reached the connector.
    pub fn total(&self) -> u64 {
        self.counts().values().sum()
    }

    /// The counts by method.
    pub fn snapshot(&self) -> HashMap<String, u64> {
        self.counts().clone()
    }

    /// Starts counting again from zero.
    pub fn reset(&self) {
        self.counts().clear();
    }
}

impl Intercept for SentRequests {
    fn name(&self) -> &'static str {
        "leasehold-sent-requests"
    }

    fn read_before_transmit(
        &self,
        context: &BeforeTransmitInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), aws_smithy_runtime_api::box_error::BoxError> {
        *self.counts().entry(context.request().method().to_owned()).or_insert(0) += 1;
        Ok(())
    }
}

/// Classifies a failure that is not a service's answer (dispatch, timeout, an
/// unreadable reply, a request that could not be built). `None` for a service error:
/// the store reads its code first, then falls back to [`status_kind`].
pub fn transport_kind<E, R>(err: &SdkError<E, R>, effect: Effect, sent: bool) -> Option<Classified> {
    let lost = |why| (ErrorClass::after_send(effect), why);
    Some(match err {
        SdkError::ServiceError(_) => return None,
        SdkError::ConstructionFailure(_) => (ErrorClass::Misconfigured, "the request could not be built"),
        SdkError::DispatchFailure(_) if !sent => (ErrorClass::Unavailable, "failed before the request was sent"),
        SdkError::DispatchFailure(d) if d.is_user() => {
            (ErrorClass::Misconfigured, "the HTTP client refused the request")
        }
        SdkError::DispatchFailure(d) if d.as_connector_error().is_some_and(|c| never_sent(c)) => {
            (ErrorClass::Unavailable, "could not connect")
        }
        SdkError::DispatchFailure(_) => lost("the connection failed after the request was sent"),
        SdkError::TimeoutError(_) if !sent => (ErrorClass::Unavailable, "timed out before the request was sent"),
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
pub fn status_kind(status: u16, effect: Effect) -> Classified {
    match status {
        status::TOO_MANY_REQUESTS => (ErrorClass::Unavailable, "throttled"),
        300..=399 => (ErrorClass::Misconfigured, "redirected (wrong region or endpoint?)"),
        401 | 403 => (ErrorClass::Misconfigured, "refused: credentials, signature or clock"),
        status::NOT_IMPLEMENTED => (ErrorClass::Misconfigured, "not implemented by the server"),
        400..=499 => (ErrorClass::Misconfigured, "refused as invalid"),
        500..=599 => (ErrorClass::after_send(effect), "server error"),
        _ => (ErrorClass::after_send(effect), "unexpected HTTP status"),
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
        use ErrorClass::*;
        use std::io::ErrorKind as K;
        let cases: Vec<(Err, Effect, bool, ErrorClass)> = vec![
            (io(K::ConnectionRefused), Effect::Write, true, Unavailable),
            (io(K::HostUnreachable), Effect::Write, true, Unavailable),
            (io(K::ConnectionReset), Effect::Write, true, Indeterminate),
            (io(K::ConnectionReset), Effect::Write, false, Unavailable),
            (io(K::ConnectionReset), Effect::Read, true, Unavailable),
            (SdkError::timeout_error("slow"), Effect::Write, true, Indeterminate),
            (SdkError::timeout_error("slow"), Effect::Write, false, Unavailable),
            (SdkError::timeout_error("slow"), Effect::Read, true, Unavailable),
            (
                SdkError::construction_failure("bad"),
                Effect::Write,
                false,
                Misconfigured,
            ),
            (
                SdkError::dispatch_failure(ConnectorError::timeout("HTTP connect timeout occurred after 1s".into())),
                Effect::Write,
                true,
                Unavailable,
            ),
            (
                SdkError::dispatch_failure(ConnectorError::timeout("HTTP read timeout occurred after 1s".into())),
                Effect::Write,
                true,
                Indeterminate,
            ),
            (
                SdkError::dispatch_failure(ConnectorError::user("bad header".into())),
                Effect::Write,
                true,
                Misconfigured,
            ),
        ];
        for (err, effect, sent, want) in cases {
            let got = transport_kind(&err, effect, sent).map(|c| c.0);
            assert_eq!(got, Some(want), "{err:?} {effect:?} sent={sent}");
        }
    }

    #[test]
    fn statuses() {
        use ErrorClass::*;
        for (status, effect, want) in [
            (429, Effect::Write, Unavailable),
            (503, Effect::Write, Indeterminate),
            (503, Effect::Read, Unavailable),
            (500, Effect::Write, Indeterminate),
            (502, Effect::Read, Unavailable),
            (301, Effect::Read, Misconfigured),
            (403, Effect::Write, Misconfigured),
            (501, Effect::Write, Misconfigured),
            (400, Effect::Write, Misconfigured),
        ] {
            assert_eq!(status_kind(status, effect).0, want, "{status} {effect:?}");
        }
    }
}
