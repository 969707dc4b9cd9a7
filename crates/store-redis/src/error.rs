//! Redis errors mapped to [`leasehold_core::Error`] kinds, by what they say about the request.
//!
//! | driver error                                            | read          | write           |
//! |---------------------------------------------------------|---------------|-----------------|
//! | connection refused (nothing was sent)                   | `Unavailable` | `Unavailable`   |
//! | connection dropped, I/O error, timeout (maybe sent)     | `Unavailable` | `Indeterminate` |
//! | server refused before running (`READONLY`, `LOADING`, `BUSY`, `OOM`, `MASTERDOWN`, `TRYAGAIN`, `CLUSTERDOWN`, `NOSCRIPT` after reload) | `Unavailable` | `Unavailable` |
//! | not allowed or wrong topology (`NOPERM`, `NOAUTH`, `WRONGPASS`, `MOVED`, `ASK`, `CROSSSLOT`, authentication, client config) | `Misconfigured` | `Misconfigured` |
//! | any other server error, an unreadable reply             | `Unavailable` | `Indeterminate` |
//!
//! A read has no effect, so "may have applied" means nothing for it: every transport
//! failure of a read is safe to retry.

use std::fmt;
use std::time::Duration;

use leasehold_core::Error;
pub(crate) use leasehold_core::store::Effect;
use leasehold_core::store::{ErrorClass, no_answer};
use redis::{ErrorKind, RedisError, ServerErrorKind};

/// Server error codes that mean the command was refused before it ran.
pub(crate) const NOT_RUN_CODES: &[&str] = &[
    READONLY,
    LOADING,
    BUSY,
    OOM,
    MASTERDOWN,
    TRYAGAIN,
    CLUSTERDOWN,
    NOSCRIPT,
];
/// Server error codes that mean the store is not usable as configured.
pub(crate) const CONFIG_CODES: &[&str] = &[NOPERM, NOAUTH, WRONGPASS, MOVED, ASK, CROSSSLOT];

/// A write sent to a replica.
pub(crate) const READONLY: &str = "READONLY";
/// The server is loading its dataset.
pub(crate) const LOADING: &str = "LOADING";
/// Another script is running past `busy-reply-threshold`.
pub(crate) const BUSY: &str = "BUSY";
/// Out of memory: a `#!lua` script is refused before it runs.
pub(crate) const OOM: &str = "OOM";
/// A replica-only setup lost its master.
pub(crate) const MASTERDOWN: &str = "MASTERDOWN";
/// A cluster slot is migrating.
pub(crate) const TRYAGAIN: &str = "TRYAGAIN";
/// The cluster is down.
pub(crate) const CLUSTERDOWN: &str = "CLUSTERDOWN";
/// The script cache lost the script (it is reloaded once by `redis::Script`).
pub(crate) const NOSCRIPT: &str = "NOSCRIPT";
/// An ACL forbids the command or key.
pub(crate) const NOPERM: &str = "NOPERM";
/// Authentication is required.
pub(crate) const NOAUTH: &str = "NOAUTH";
/// Wrong credentials.
pub(crate) const WRONGPASS: &str = "WRONGPASS";
/// The key lives on another cluster node.
pub(crate) const MOVED: &str = "MOVED";
/// The key is migrating to another cluster node.
pub(crate) const ASK: &str = "ASK";
/// The keys of one call are in different cluster slots.
pub(crate) const CROSSSLOT: &str = "CROSSSLOT";

/// What a driver error means for a call of `what` (`"write of jobs/a"`).
pub(crate) fn from_redis(err: RedisError, effect: Effect, what: impl fmt::Display) -> Error {
    // The driver's words on why (the error stays the source), after its category
    // unless they say it already.
    let (category, detail) = (err.category(), err.to_string());
    let message = if detail.contains(category) {
        format!("redis {what}: {detail}")
    } else {
        format!("redis {what}: {category}: {detail}")
    };
    if err.is_connection_refusal() {
        return Error::unavailable(message, err);
    }
    match err.kind() {
        ErrorKind::AuthenticationFailed | ErrorKind::InvalidClientConfig | ErrorKind::RESP3NotSupported => {
            return Error::misconfigured(message, err);
        }
        ErrorKind::Server(ServerErrorKind::NoPerm | ServerErrorKind::CrossSlot) => {
            return Error::misconfigured(message, err);
        }
        // Raised by the client before anything was sent.
        ErrorKind::Client => return Error::unavailable(message, err),
        _ => {}
    }
    if let Some(code) = err.code() {
        if NOT_RUN_CODES.contains(&code) {
            return Error::unavailable(message, err);
        }
        if CONFIG_CODES.contains(&code) {
            return Error::misconfigured(message, err);
        }
    }
    ErrorClass::after_send(effect).error(message, err)
}

/// A call that ran out of [`crate::RedisConfig::request_timeout`].
pub(crate) fn timed_out(effect: Effect, what: impl fmt::Display, after: Duration) -> Error {
    no_answer(effect, &format!("redis {what}"), after)
}

/// A reply the script cannot have produced (a different script under the same SHA,
/// a proxy rewriting replies).
pub(crate) fn bad_reply(effect: Effect, what: impl fmt::Display, detail: impl Into<String>) -> Error {
    let source = std::io::Error::new(std::io::ErrorKind::InvalidData, detail.into());
    ErrorClass::after_send(effect).error(format!("redis {what}: unexpected script reply"), source)
}

/// What a call does, as its errors name it (`write of jobs/a`): put into words only
/// when an error is made, not on every call.
#[derive(Clone, Copy)]
pub(crate) struct What<'a> {
    op: &'static str,
    of: &'a (dyn fmt::Display + Sync),
}

impl<'a> What<'a> {
    /// `op` of `subject` (a lease name, a key).
    pub(crate) fn of(op: &'static str, subject: &'a (dyn fmt::Display + Sync)) -> Self {
        Self { op, of: subject }
    }
}

impl fmt::Display for What<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} of {}", self.op, self.of)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_names_the_call_it_comes_from() {
        let name = leasehold_core::LeaseName::new("jobs/a").expect("name");
        let what = What::of("write", &name);
        assert_eq!(what.to_string(), "write of jobs/a");
        let e = bad_reply(Effect::Write, what, "status \"odd\"");
        assert!(
            e.to_string().contains("redis write of jobs/a"),
            "the error does not name its call: {e}"
        );
    }

    fn io(kind: std::io::ErrorKind) -> RedisError {
        RedisError::from(std::io::Error::from(kind))
    }

    #[test]
    fn refused_is_unavailable_even_for_writes() {
        let e = from_redis(io(std::io::ErrorKind::ConnectionRefused), Effect::Write, "write");
        assert!(e.is_retryable(), "{e:?}");
        // What failed, and the driver's words on why.
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused).to_string();
        assert!(
            e.to_string().contains(&format!("redis write: I/O error: {refused}")),
            "{e}"
        );
    }

    #[test]
    fn dropped_write_is_indeterminate_dropped_read_unavailable() {
        for kind in [
            std::io::ErrorKind::BrokenPipe,
            std::io::ErrorKind::ConnectionReset,
            std::io::ErrorKind::UnexpectedEof,
            std::io::ErrorKind::TimedOut,
        ] {
            assert!(from_redis(io(kind), Effect::Write, "w").is_indeterminate(), "{kind:?}");
            assert!(from_redis(io(kind), Effect::Read, "r").is_retryable(), "{kind:?}");
        }
    }

    #[test]
    fn server_codes_say_whether_the_script_ran() {
        let server = |code: &str| redis::make_extension_error(code.to_owned(), Some("detail".to_owned()));
        for code in NOT_RUN_CODES {
            assert!(from_redis(server(code), Effect::Write, "w").is_retryable(), "{code}");
        }
        for code in CONFIG_CODES {
            let e = from_redis(server(code), Effect::Write, "w");
            assert!(matches!(e, Error::Misconfigured { .. }), "{code}: {e:?}");
        }
        // An unknown error while running a write script: it may have applied.
        assert!(from_redis(server("ERR"), Effect::Write, "w").is_indeterminate());
        assert!(from_redis(server("ERR"), Effect::Read, "r").is_retryable());
        let auth = RedisError::from((ErrorKind::AuthenticationFailed, "bad password"));
        assert!(matches!(
            from_redis(auth, Effect::Read, "r"),
            Error::Misconfigured { .. }
        ));
    }

    #[test]
    fn timeouts_and_bad_replies_follow_the_effect() {
        assert!(timed_out(Effect::Write, "w", Duration::from_secs(1)).is_indeterminate());
        assert!(timed_out(Effect::Read, "r", Duration::from_secs(1)).is_retryable());
        assert!(bad_reply(Effect::Write, "w", "x").is_indeterminate());
        assert!(bad_reply(Effect::Read, "r", "x").is_retryable());
    }
}
