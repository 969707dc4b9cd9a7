//! etcd client errors mapped to [`leasehold_core::Error`] kinds, through named constants.
//!
//! The one question that matters for a lease is whether a failed **write** may have been
//! applied. etcd answers it in three ways:
//!
//! - The connection was never made (connection refused, unreachable address): the
//!   request was not sent → [`Error::Unavailable`].
//! - etcd refused the request before proposing it to Raft (`no leader`, `too many
//!   requests`, an expired lease): → [`Error::Unavailable`].
//! - The request was sent and the answer is a timeout, a lost connection, a leader change
//!   or anything unrecognised: the proposal may have been committed →
//!   [`Error::Indeterminate`].
//!
//! A **read** changes nothing, so every transient failure of a read is
//! [`Error::Unavailable`] (retrying is safe).

use std::time::Duration;

use leasehold_core::Error;
use leasehold_core::store::no_answer;
pub(crate) use leasehold_core::store::{Effect, ErrorClass};

/// gRPC status codes (from the gRPC specification), as etcd returns them.
pub(crate) mod grpc {
    pub(crate) const CANCELLED: i32 = 1;
    pub(crate) const UNKNOWN: i32 = 2;
    pub(crate) const INVALID_ARGUMENT: i32 = 3;
    pub(crate) const DEADLINE_EXCEEDED: i32 = 4;
    pub(crate) const NOT_FOUND: i32 = 5;
    pub(crate) const PERMISSION_DENIED: i32 = 7;
    pub(crate) const RESOURCE_EXHAUSTED: i32 = 8;
    pub(crate) const FAILED_PRECONDITION: i32 = 9;
    pub(crate) const OUT_OF_RANGE: i32 = 11;
    pub(crate) const UNIMPLEMENTED: i32 = 12;
    pub(crate) const UNAVAILABLE: i32 = 14;
    pub(crate) const UNAUTHENTICATED: i32 = 16;
}

/// etcd server error messages (`api/v3rpc/rpctypes`) whose meaning is "not applied".
pub(crate) mod etcd {
    /// No leader: with or without `require_leader`, the request was not proposed.
    pub(crate) const NO_LEADER: &str = "etcdserver: no leader";
    /// The server is not yet able to serve this API.
    pub(crate) const NOT_CAPABLE: &str = "etcdserver: not capable";
    /// Rate limited before proposing.
    pub(crate) const TOO_MANY_REQUESTS: &str = "etcdserver: too many requests";
    /// The session lease a put referred to has expired or was revoked; the whole
    /// transaction was rejected.
    pub(crate) const LEASE_NOT_FOUND: &str = "etcdserver: requested lease not found";
    /// The keyspace quota is exhausted (NOSPACE alarm): an operator must act.
    pub(crate) const NO_SPACE: &str = "etcdserver: mvcc: database space exceeded";
}

/// The message tonic gives a request whose connection could not be made.
pub(crate) const TONIC_CONNECT_ERROR: &str = "tcp connect error";

/// Classifies a gRPC status by its code and message.
pub(crate) fn classify_status(code: i32, message: &str, connect_failed: bool, op: Effect) -> ErrorClass {
    let maybe_applied = ErrorClass::after_send(op);
    if connect_failed {
        return ErrorClass::Unavailable;
    }
    match code {
        grpc::UNAVAILABLE => {
            if [etcd::NO_LEADER, etcd::NOT_CAPABLE, etcd::TOO_MANY_REQUESTS].contains(&message)
                || message == TONIC_CONNECT_ERROR
            {
                ErrorClass::Unavailable
            } else {
                // Server-side timeouts, leader changes, connections lost mid-request.
                maybe_applied
            }
        }
        grpc::PERMISSION_DENIED | grpc::UNAUTHENTICATED | grpc::UNIMPLEMENTED => ErrorClass::Misconfigured,
        grpc::RESOURCE_EXHAUSTED if message == etcd::NO_SPACE => ErrorClass::Misconfigured,
        grpc::RESOURCE_EXHAUSTED => ErrorClass::Unavailable,
        grpc::NOT_FOUND if message == etcd::LEASE_NOT_FOUND => ErrorClass::Unavailable,
        grpc::INVALID_ARGUMENT => ErrorClass::InvalidInput,
        grpc::FAILED_PRECONDITION | grpc::OUT_OF_RANGE => ErrorClass::Unavailable,
        grpc::CANCELLED | grpc::UNKNOWN | grpc::DEADLINE_EXCEEDED => maybe_applied,
        _ => maybe_applied,
    }
}

/// True when the error says the session lease a write referred to no longer exists.
pub(crate) fn is_lease_not_found(e: &etcd_client::Error) -> bool {
    match e {
        etcd_client::Error::GRpcStatus(s) => s.code() as i32 == grpc::NOT_FOUND && s.message() == etcd::LEASE_NOT_FOUND,
        etcd_client::Error::LeaseKeepAliveError(m) => m.contains("lease not found"),
        _ => false,
    }
}

/// True when a connection could not be made at all (the request was never sent).
fn connect_failed(status: &(dyn std::error::Error + 'static)) -> bool {
    use std::io::ErrorKind as K;
    causes(status).any(|e| {
        e.downcast_ref::<std::io::Error>().is_some_and(|io| {
            matches!(
                io.kind(),
                K::ConnectionRefused | K::AddrNotAvailable | K::HostUnreachable | K::NetworkUnreachable
            )
        })
    })
}

/// The errors under `e`, nearest first.
fn causes<'a>(e: &'a (dyn std::error::Error + 'static)) -> impl Iterator<Item = &'a (dyn std::error::Error + 'static)> {
    std::iter::successors(e.source(), |s| s.source())
}

/// Maps an etcd client error for operation `what` of kind `op`.
pub(crate) fn map(what: &str, op: Effect, e: etcd_client::Error) -> Error {
    use etcd_client::Error as E;
    let kind = match &e {
        E::GRpcStatus(s) => classify_status(s.code() as i32, s.message(), connect_failed(s), op),
        E::TransportError(_) => ErrorClass::Unavailable,
        // The request could not be queued on the stream: it did not go out.
        E::WatchError(_) | E::LeaseKeepAliveError(_) => ErrorClass::Unavailable,
        E::InvalidArgs(_) | E::InvalidUri(_) | E::InvalidMetadataValue(_) => ErrorClass::Misconfigured,
        E::EndpointError(_) | E::EndpointsNotManaged => ErrorClass::Misconfigured,
        _ => ErrorClass::after_send(op),
    };
    let message = format!("etcd {what}: {}", detail(&e));
    kind.error(message, e)
}

/// The driver's words on why, for a message (the error stays the source): a status's
/// own message and, under it, the root cause, such as the refused connection
/// (`tcp connect error: Connection refused (os error 111)`), without the dump of the
/// transport's internals that the status's `Display` carries.
fn detail(e: &etcd_client::Error) -> String {
    let etcd_client::Error::GRpcStatus(status) = e else {
        return e.to_string();
    };
    let mut detail = status.message().to_owned();
    if let Some(root) = causes(status).last().map(ToString::to_string)
        && !detail.contains(&root)
    {
        if !detail.is_empty() {
            detail.push_str(": ");
        }
        detail.push_str(&root);
    }
    if detail.is_empty() {
        // A bare status: its code in words.
        detail = status.code().description().to_owned();
    }
    detail
}

/// The error for a request of kind `op` that got no answer within `timeout`.
pub(crate) fn timed_out(what: &str, op: Effect, timeout: Duration) -> Error {
    no_answer(op, &format!("etcd {what}"), timeout)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_applied_is_unavailable() {
        for m in [
            etcd::NO_LEADER,
            etcd::NOT_CAPABLE,
            etcd::TOO_MANY_REQUESTS,
            TONIC_CONNECT_ERROR,
        ] {
            assert_eq!(
                classify_status(grpc::UNAVAILABLE, m, false, Effect::Write),
                ErrorClass::Unavailable,
                "{m}"
            );
        }
        assert_eq!(
            classify_status(grpc::UNAVAILABLE, "anything", true, Effect::Write),
            ErrorClass::Unavailable
        );
        assert_eq!(
            classify_status(grpc::NOT_FOUND, etcd::LEASE_NOT_FOUND, false, Effect::Write),
            ErrorClass::Unavailable
        );
    }

    #[test]
    fn sent_without_answer_is_indeterminate_for_writes_only() {
        for (code, m) in [
            (grpc::UNAVAILABLE, "etcdserver: request timed out"),
            (grpc::UNAVAILABLE, "etcdserver: leader changed"),
            (grpc::UNAVAILABLE, "error reading a body from connection"),
            (grpc::DEADLINE_EXCEEDED, "timeout expired"),
            (grpc::CANCELLED, "operation was canceled"),
            (grpc::UNKNOWN, "h2 protocol error"),
        ] {
            assert_eq!(
                classify_status(code, m, false, Effect::Write),
                ErrorClass::Indeterminate,
                "{m}"
            );
            assert_eq!(
                classify_status(code, m, false, Effect::Read),
                ErrorClass::Unavailable,
                "{m}"
            );
        }
    }

    #[test]
    fn operator_problems_are_misconfigured() {
        assert_eq!(
            classify_status(
                grpc::PERMISSION_DENIED,
                "etcdserver: permission denied",
                false,
                Effect::Read
            ),
            ErrorClass::Misconfigured
        );
        assert_eq!(
            classify_status(
                grpc::UNAUTHENTICATED,
                "etcdserver: invalid auth token",
                false,
                Effect::Write
            ),
            ErrorClass::Misconfigured
        );
        assert_eq!(
            classify_status(grpc::RESOURCE_EXHAUSTED, etcd::NO_SPACE, false, Effect::Write),
            ErrorClass::Misconfigured
        );
        assert_eq!(
            classify_status(
                grpc::INVALID_ARGUMENT,
                "etcdserver: request is too large",
                false,
                Effect::Write
            ),
            ErrorClass::InvalidInput
        );
    }

    #[test]
    fn timeouts() {
        assert!(timed_out("txn", Effect::Write, Duration::from_secs(1)).is_indeterminate());
        assert!(timed_out("get", Effect::Read, Duration::from_secs(1)).is_retryable());
    }

    #[test]
    fn messages_say_why_without_the_transports_internals() {
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let reason = refused.to_string();
        let mut status = tonic::Status::unavailable(TONIC_CONNECT_ERROR);
        status.set_source(std::sync::Arc::new(refused));
        let e = map("verify", Effect::Read, etcd_client::Error::GRpcStatus(status));
        assert_eq!(
            e.to_string(),
            format!("store unavailable: etcd verify: tcp connect error: {reason}")
        );
        let e = map(
            "txn",
            Effect::Write,
            etcd_client::Error::GRpcStatus(tonic::Status::unavailable("")),
        );
        assert!(
            e.to_string()
                .ends_with("etcd txn: The service is currently unavailable"),
            "{e}"
        );
    }

    #[test]
    fn client_side_errors() {
        let e = map("txn", Effect::Write, etcd_client::Error::InvalidArgs("bad".into()));
        assert!(matches!(e, Error::Misconfigured { .. }), "{e:?}");
        let e = map("txn", Effect::Write, etcd_client::Error::Internal("boom".into()));
        assert!(e.is_indeterminate(), "{e:?}");
        let e = map("get", Effect::Read, etcd_client::Error::Internal("boom".into()));
        assert!(e.is_retryable(), "{e:?}");
    }
}
