//! DynamoDB errors mapped to what the caller should do about them.
//!
//! | DynamoDB / SDK says | read | write (lease write, fenced write, delete) |
//! | --- | --- | --- |
//! | `ConditionalCheckFailedException` | — | lease write: `Ok(Conflict)`; fenced write: [`Error::FenceRejected`] |
//! | throttling ([`RETRYABLE_CODES`]), 429 | `Unavailable` | `Unavailable` (refused before applying) |
//! | 500 `InternalServerError`, 503 and other 5xx | `Unavailable` | `Indeterminate` |
//! | missing table ([`NOT_PROVISIONED_CODE`]; on a fenced write to the caller's table: `Misconfigured`) | `NotProvisioned` | `NotProvisioned` |
//! | access denied, bad credentials, validation ([`MISCONFIGURED_CODES`]), other 4xx | `Misconfigured` | `Misconfigured` |
//! | never sent (before the connector, refused, DNS, connect timeout) | `Unavailable` | `Unavailable` |
//! | timeout after sending, connection lost, unparsable reply | `Unavailable` | `Indeterminate` |
//! | request could not be built | `Misconfigured` | `Misconfigured` |
//!
//! A 500 on a write is *indeterminate*, not unavailable: DynamoDB's request router can
//! answer 500 when it lost patience with the storage node that was applying the write,
//! so the write may be in the table. Reads change nothing, so every failure of a read
//! is safe to retry. Everything but DynamoDB's codes (transport failures, statuses
//! without a known code, "was it sent") is the mapping shared with the S3 store, in
//! `leasehold-aws`.

use std::collections::HashMap;
use std::error::Error as StdError;

use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::operation::delete_item::DeleteItemError;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::AttributeValue;
pub(crate) use leasehold_aws::SentRequests;
use leasehold_aws::{status_kind, transport_kind};
use leasehold_core::Error;
pub(crate) use leasehold_core::store::{Effect, ErrorClass};

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
    "ExpiredTokenException",
    "RequestTimeout",
    "RequestTimeoutException",
];

/// The error code of a request on a table that does not exist ([`ErrorClass::NotProvisioned`]).
pub const NOT_PROVISIONED_CODE: &str = "ResourceNotFoundException";

/// Error codes that mean the store is not set up for this caller: a retry cannot help
/// until an operator acts.
pub const MISCONFIGURED_CODES: &[&str] = &[
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

/// Classifies a service error (DynamoDB answered with an error code and status).
pub(crate) fn classify_service(code: Option<&str>, status: u16, op: Effect) -> ErrorClass {
    match code {
        Some(code) if RETRYABLE_CODES.contains(&code) => ErrorClass::Unavailable,
        // The table does not exist: `DynamoStore::provision` creates it.
        Some(NOT_PROVISIONED_CODE) => ErrorClass::NotProvisioned,
        Some(code) if MISCONFIGURED_CODES.contains(&code) => ErrorClass::Misconfigured,
        _ => status_kind(status, op).0,
    }
}

/// The error code of a service error, if DynamoDB answered with one.
pub(crate) fn service_code<E: ProvideErrorMetadata>(err: &SdkError<E, HttpResponse>) -> Option<&str> {
    err.as_service_error().and_then(ProvideErrorMetadata::code)
}

/// True when a write failed only because its condition did not hold.
fn is_conditional_check_failed<E: ProvideErrorMetadata>(err: &SdkError<E, HttpResponse>) -> bool {
    service_code(err) == Some(CONDITIONAL_CHECK_FAILED)
}

/// The item a failed condition was evaluated on, as DynamoDB returns it with
/// `ReturnValuesOnConditionCheckFailure=ALL_OLD` (`None`: there was no item, or the
/// server did not return it).
pub(crate) type ConditionItem = Option<HashMap<String, AttributeValue>>;

/// The error of a conditional write, which carries the item its failed condition saw.
pub(crate) trait ConditionFailure {
    /// The item the failed condition saw, if this is a failed condition and it came back.
    fn condition_item(self) -> ConditionItem;
}

macro_rules! condition_failure {
    ($($error:ident),*) => {$(
        impl ConditionFailure for $error {
            fn condition_item(self) -> ConditionItem {
                match self {
                    $error::ConditionalCheckFailedException(c) => c.item,
                    _ => None,
                }
            }
        }
    )*};
}
condition_failure!(PutItemError, UpdateItemError, DeleteItemError);

/// What a conditional write's request came to, once it is not a failure to report.
pub(crate) enum Conditional<T> {
    /// The condition held and the write applied: the SDK's output.
    Applied(T),
    /// The condition did not hold and nothing changed: the item it saw.
    Failed(ConditionItem),
}

/// Splits a conditional write's result (`what` on `table`, `sent` as its
/// [`SentRequests`] says): a failed condition is an answer, any other error is mapped
/// with [`map_sdk_error`].
pub(crate) fn conditional<T, E>(
    what: &str,
    table: &str,
    sent: bool,
    result: std::result::Result<T, SdkError<E, HttpResponse>>,
) -> Result<Conditional<T>, Error>
where
    E: ConditionFailure + ProvideErrorMetadata + StdError + Send + Sync + 'static,
{
    match result {
        Ok(out) => Ok(Conditional::Applied(out)),
        Err(e) if is_conditional_check_failed(&e) => Ok(Conditional::Failed(match e {
            SdkError::ServiceError(s) => s.into_err().condition_item(),
            _ => None,
        })),
        Err(e) => Err(map_sdk_error(what, table, Effect::Write, sent, e)),
    }
}

/// An error of a request on the caller's own table (a fenced write): a table that does
/// not exist there is the caller's to create, not `provision`'s, so it is
/// [`Error::Misconfigured`], not [`Error::NotProvisioned`].
pub(crate) fn on_user_table(e: Error) -> Error {
    match e {
        Error::NotProvisioned { message, source } => Error::Misconfigured { message, source },
        other => other,
    }
}

/// Maps any other SDK error of `what` (an operation on `table`) to a lease error;
/// `sent` is the request's [`SentRequests`].
pub(crate) fn map_sdk_error<E>(what: &str, table: &str, op: Effect, sent: bool, err: SdkError<E, HttpResponse>) -> Error
where
    E: ProvideErrorMetadata + StdError + Send + Sync + 'static,
{
    let kind = match &err {
        SdkError::ServiceError(s) => classify_service(s.err().code(), s.raw().status().as_u16(), op),
        other => transport_kind(other, op, sent).map_or(ErrorClass::after_send(op), |c| c.0),
    };
    // Status, code and message (the driver's error stays the source): no dump of the
    // response in a message a person reads.
    let detail = match &err {
        SdkError::ServiceError(s) => format!("HTTP {} {}", s.raw().status().as_u16(), leasehold_aws::summary(&err)),
        other => leasehold_aws::summary(other),
    };
    let message = format!("DynamoDB {what} on table {table}: {detail}");
    kind.error(message, err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_errors() {
        use ErrorClass::*;
        let cases: &[(Option<&str>, u16, Effect, ErrorClass)] = &[
            (
                Some("ProvisionedThroughputExceededException"),
                400,
                Effect::Write,
                Unavailable,
            ),
            (Some("ThrottlingException"), 400, Effect::Write, Unavailable),
            (Some("RequestLimitExceeded"), 400, Effect::Read, Unavailable),
            (Some("TransactionConflictException"), 400, Effect::Write, Unavailable),
            (Some("ResourceNotFoundException"), 400, Effect::Write, NotProvisioned),
            (Some("AccessDeniedException"), 400, Effect::Read, Misconfigured),
            (Some("UnrecognizedClientException"), 400, Effect::Write, Misconfigured),
            (Some("ValidationException"), 400, Effect::Write, Misconfigured),
            (Some("InternalServerError"), 500, Effect::Write, Indeterminate),
            (Some("InternalServerError"), 500, Effect::Read, Unavailable),
            (Some("ServiceUnavailable"), 503, Effect::Write, Indeterminate),
            (None, 503, Effect::Write, Indeterminate),
            (None, 503, Effect::Read, Unavailable),
            (None, 502, Effect::Write, Indeterminate),
            (None, 502, Effect::Read, Unavailable),
            (None, 429, Effect::Write, Unavailable),
            (Some("SomethingNew"), 400, Effect::Write, Misconfigured),
        ];
        for &(code, status, op, want) in cases {
            assert_eq!(classify_service(code, status, op), want, "{code:?} {status} {op:?}");
        }
    }
}
