//! ZooKeeper client errors mapped to [`leasehold_core::Error`] kinds.
//!
//! The one question that matters for a lease is whether a failed **write** may have been
//! applied:
//!
//! - The request never reached a server (no server reachable, the client closed, the
//!   session already expired or moved: a server refuses every request of such a
//!   session): it was not applied → [`Error::Unavailable`].
//! - The request was sent and the connection was lost or the answer did not come in
//!   time: the `multi` may have been committed → [`Error::Indeterminate`].
//! - Authentication or ACLs refused it, or a quota: an operator must act →
//!   [`Error::Misconfigured`].
//!
//! A **read** changes nothing, so every transient failure of a read is
//! [`Error::Unavailable`] (retrying is safe).

use std::time::Duration;

use leasehold_core::Error;
use leasehold_core::store::no_answer;
pub(crate) use leasehold_core::store::{Effect, ErrorClass};
use zookeeper_client as zk;

/// The class of a request's failure.
pub(crate) fn classify(e: &zk::Error, op: Effect) -> ErrorClass {
    match e {
        zk::Error::NoHosts | zk::Error::ClientClosed | zk::Error::SessionExpired | zk::Error::SessionMoved => {
            ErrorClass::Unavailable
        }
        zk::Error::NoAuth | zk::Error::AuthFailed | zk::Error::InvalidAcl | zk::Error::QuotaExceeded => {
            ErrorClass::Misconfigured
        }
        zk::Error::BadArguments(_) => ErrorClass::InvalidInput,
        zk::Error::Throttled => ErrorClass::Unavailable,
        _ => ErrorClass::after_send(op),
    }
}

/// `e` as a leasehold error, for the request `what`.
pub(crate) fn map(what: &str, op: Effect, e: zk::Error) -> Error {
    let class = classify(&e, op);
    let message = match class {
        ErrorClass::Indeterminate => format!("ZooKeeper {what}: {e} (it may have applied)"),
        _ => format!("ZooKeeper {what}: {e}"),
    };
    class.error(message, e)
}

/// A request with no answer within `after`.
pub(crate) fn timed_out(what: &str, op: Effect, after: Duration) -> Error {
    no_answer(op, &format!("ZooKeeper {what}"), after)
}

/// A session handshake with no answer within `after`, and `why` (what each server
/// answered a connection attempt): no request was sent, so nothing applied.
pub(crate) fn handshake_unanswered(after: Duration, why: &str) -> Error {
    let source = std::io::Error::new(std::io::ErrorKind::TimedOut, format!("no answer after {after:?}"));
    Error::unavailable(
        format!("ZooKeeper session handshake: no answer within {after:?}: {why}"),
        source,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lost_connection_is_in_doubt_for_writes_only() {
        assert!(map("multi", Effect::Write, zk::Error::ConnectionLoss).is_indeterminate());
        assert!(map("read", Effect::Read, zk::Error::ConnectionLoss).is_retryable());
        assert!(map("multi", Effect::Write, zk::Error::SessionExpired).is_retryable());
        assert!(matches!(
            map("multi", Effect::Write, zk::Error::NoAuth),
            Error::Misconfigured { .. }
        ));
        assert!(timed_out("multi", Effect::Write, Duration::from_secs(1)).is_indeterminate());
    }
}
