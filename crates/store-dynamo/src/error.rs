//! DynamoDB errors mapped to what the caller should do about them.
//!
//! | DynamoDB / SDK says | read | write (lease write, fenced write, delete) |
//! | --- | --- | --- |
//! | `ConditionalCheckFailedException` | — | lease write: `Ok(Conflict)`; fenced write: [`Error::FenceRejected`] |
//! | throttling ([`RETRYABLE_CODES`]), 503 | `Unavailable` | `Unavailable` (refused before applying) |
//! | 500 `InternalServerError`, other 5xx | `Unavailable` | `Indeterminate` |
//! | missing table, access denied, bad credentials, validation ([`MISCONFIGURED_CODES`]), other 4xx | `Misconfigured` | `Misconfigured` |
//! | could not connect (refused, DNS, connect timeout) | `Unavailable` | `Unavailable` (never sent) |
//! | timeout after sending, connection lost, unparsable reply | `Unavailable` | `Indeterminate` |
//! | request could not be built | `Misconfigured` | `Misconfigured` |
//!
//! A 500 on a write is *indeterminate*, not unavailable: DynamoDB's request router can
//! answer 500 when it lost patience with the storage node that was applying the write,
//! so the write may be in the table. Reads change nothing, so every failure of a read
//! is safe to retry.

use std::error::Error as StdError;

use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::error::{ConnectorError, DisplayErrorContext, ProvideErrorMetadata, SdkError};
use leasehold_core::Error;

/// The write's condition did not hold.
pub(crate) const CONDITIONAL_CHECK_FAILED: &str = "ConditionalCheckFailedException";

/// Error codes of requests DynamoDB refused without applying them, that a later retry
/// (with backoff) can get through: throttling, a competing transaction, credentials
/// about to be refreshed.
pub const RETRYABLE_CODES: &[&str] = &[
    "ProvisionedThroughputExceededException",
    "ThrottlingException",
    "Throttling",
    "RequestLimitExceeded",
    "LimitExceededException",
    "TransactionConflictException",
    "TransactionInProgressException",
    "ReplicatedWriteConflictException",
    "ServiceUnavailable",
    "ServiceUnavailableException",
    "ExpiredTokenException",
    "RequestTimeout",
    "RequestTimeoutException",
];

/// Error codes that mean the store is not set up for this caller: a retry cannot help
/// until an operator acts.
pub const MISCONFIGURED_CODES: &[&str] = &[
    "ResourceNotFoundException",
    "AccessDeniedException",
    "UnrecognizedClientException",
    "InvalidClientTokenId",
    "InvalidSignatureException",
    "IncompleteSignatureException",
    "MissingAuthenticationToken",
    "MissingAuthenticationTokenException",
    "ValidationException",
    "SerializationException",
    "InvalidEndpointException",
    "ItemCollectionSizeLimitExceededException",
];

/// HTTP status of a request refused before it was applied.
const STATUS_SERVICE_UNAVAILABLE: u16 = 503;
/// HTTP status of throttling without a recognised code.
const STATUS_TOO_MANY_REQUESTS: u16 = 429;

/// Whether the request changes the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    /// GetItem, DescribeTable: nothing is applied, every failure is retry-safe.
    Read,
    /// UpdateItem, PutItem, DeleteItem, CreateTable: a failure after sending may have
    /// applied.
    Write,
}

/// What a failure means for the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Unavailable,
    Indeterminate,
    Misconfigured,
}

/// Classifies a service error (DynamoDB answered with an error code and status).
pub(crate) fn classify_service(code: Option<&str>, status: u16, op: Op) -> Kind {
    if let Some(code) = code {
        if RETRYABLE_CODES.contains(&code) {
            return Kind::Unavailable;
        }
        if MISCONFIGURED_CODES.contains(&code) {
            return Kind::Misconfigured;
        }
    }
    match status {
        STATUS_SERVICE_UNAVAILABLE | STATUS_TOO_MANY_REQUESTS => Kind::Unavailable,
        500..=599 => after_send(op),
        _ => Kind::Misconfigured,
    }
}

/// Classifies a failure to get an answer from the HTTP client.
pub(crate) fn classify_dispatch(err: &ConnectorError, op: Op) -> Kind {
    if never_sent(err) {
        Kind::Unavailable
    } else if err.is_user() {
        Kind::Misconfigured
    } else {
        after_send(op)
    }
}

fn after_send(op: Op) -> Kind {
    match op {
        Op::Read => Kind::Unavailable,
        Op::Write => Kind::Indeterminate,
    }
}

/// True when the error chain shows the request never left: the connection could not
/// be made (refused, DNS failure, connect timeout). Anything else may have been sent.
pub(crate) fn never_sent(err: &(dyn StdError + 'static)) -> bool {
    let mut cur = Some(err);
    while let Some(e) = cur {
        if e.downcast_ref::<hyper_util::client::legacy::Error>()
            .is_some_and(hyper_util::client::legacy::Error::is_connect)
        {
            return true;
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            if matches!(
                io.kind(),
                std::io::ErrorKind::ConnectionRefused | std::io::ErrorKind::AddrNotAvailable
            ) {
                return true;
            }
        }
        if e.downcast_ref::<aws_smithy_runtime_api::client::dns::ResolveDnsError>()
            .is_some()
        {
            return true;
        }
        cur = e.source();
    }
    false
}

/// The error code of a service error, if DynamoDB answered with one.
pub(crate) fn service_code<E: ProvideErrorMetadata>(err: &SdkError<E, HttpResponse>) -> Option<&str> {
    err.as_service_error().and_then(ProvideErrorMetadata::code)
}

/// True when a write failed only because its condition did not hold.
pub(crate) fn is_conditional_check_failed<E: ProvideErrorMetadata>(err: &SdkError<E, HttpResponse>) -> bool {
    service_code(err) == Some(CONDITIONAL_CHECK_FAILED)
}

/// Maps any other SDK error of `what` (an operation on `table`) to a lease error.
pub(crate) fn map_sdk_error<E>(what: &str, table: &str, op: Op, err: SdkError<E, HttpResponse>) -> Error
where
    E: ProvideErrorMetadata + StdError + Send + Sync + 'static,
{
    let kind = match &err {
        SdkError::ServiceError(s) => classify_service(s.err().code(), s.raw().status().as_u16(), op),
        SdkError::DispatchFailure(d) => match d.as_connector_error() {
            Some(c) => classify_dispatch(c, op),
            None => after_send(op),
        },
        SdkError::ConstructionFailure(_) => Kind::Misconfigured,
        // The operation (or attempt) timeout fired: the request may be on the wire.
        SdkError::TimeoutError(_) => after_send(op),
        // A reply came but could not be read: the server may have applied the write.
        SdkError::ResponseError(_) => after_send(op),
        _ => after_send(op),
    };
    let message = format!("DynamoDB {what} on table {table}: {}", DisplayErrorContext(&err));
    match kind {
        Kind::Unavailable => Error::unavailable(message, err),
        Kind::Indeterminate => Error::indeterminate(message, err),
        Kind::Misconfigured => Error::misconfigured(message, err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_errors() {
        use Kind::*;
        let cases: &[(Option<&str>, u16, Op, Kind)] = &[
            (
                Some("ProvisionedThroughputExceededException"),
                400,
                Op::Write,
                Unavailable,
            ),
            (Some("ThrottlingException"), 400, Op::Write, Unavailable),
            (Some("RequestLimitExceeded"), 400, Op::Read, Unavailable),
            (Some("TransactionConflictException"), 400, Op::Write, Unavailable),
            (Some("ResourceNotFoundException"), 400, Op::Write, Misconfigured),
            (Some("AccessDeniedException"), 400, Op::Read, Misconfigured),
            (Some("UnrecognizedClientException"), 400, Op::Write, Misconfigured),
            (Some("ValidationException"), 400, Op::Write, Misconfigured),
            (Some("InternalServerError"), 500, Op::Write, Indeterminate),
            (Some("InternalServerError"), 500, Op::Read, Unavailable),
            (Some("ServiceUnavailable"), 503, Op::Write, Unavailable),
            (None, 503, Op::Write, Unavailable),
            (None, 502, Op::Write, Indeterminate),
            (None, 502, Op::Read, Unavailable),
            (None, 429, Op::Write, Unavailable),
            (Some("SomethingNew"), 400, Op::Write, Misconfigured),
        ];
        for &(code, status, op, want) in cases {
            assert_eq!(classify_service(code, status, op), want, "{code:?} {status} {op:?}");
        }
    }

    #[test]
    fn connection_refused_was_never_sent() {
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let c = ConnectorError::io(Box::new(refused));
        assert_eq!(classify_dispatch(&c, Op::Write), Kind::Unavailable);
        let reset = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
        let c = ConnectorError::io(Box::new(reset));
        assert_eq!(classify_dispatch(&c, Op::Write), Kind::Indeterminate);
        assert_eq!(classify_dispatch(&c, Op::Read), Kind::Unavailable);
        let c = ConnectorError::timeout("read timeout".into());
        assert_eq!(classify_dispatch(&c, Op::Write), Kind::Indeterminate);
        let c = ConnectorError::user("bad header".into());
        assert_eq!(classify_dispatch(&c, Op::Write), Kind::Misconfigured);
    }
}
