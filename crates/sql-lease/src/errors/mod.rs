//! Driver errors → [`leasehold_core::Error`] kinds, for what every sqlx driver shares.
//!
//! Each database's own error codes (SQLSTATE for Postgres, result codes for SQLite,
//! server error numbers for MySQL) are classified into the core's [`ErrorClass`] through
//! named constants ([`postgres`], [`sqlite`], [`mysql`]); the rest
//! (pool, I/O, protocol, decode errors) is classified here, by the phase the error
//! happened in: nothing can have applied before a statement was sent.

use leasehold_core::Error;
use leasehold_core::store::{Effect, ErrorClass};

pub mod mysql;
pub mod postgres;
pub mod sqlite;

/// Whose statement failed: constraint violations mean a broken lease table, but bad
/// input on a user's table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// The lease table.
    Lease,
    /// The user's table (a fenced write).
    User,
}

/// When an error happened, which decides whether a write may have applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Getting a connection: nothing was sent.
    Connect,
    /// A statement that changes nothing (a read, a schema check).
    Read,
    /// A statement that may change rows (a lease write, a fenced write, a DDL).
    Write,
}

impl Target {
    /// The class of a violated constraint (unique, foreign key, check): a broken lease
    /// table, but bad input on a user's table.
    pub fn constraint_violated(self) -> ErrorClass {
        match self {
            Target::Lease => ErrorClass::Misconfigured,
            Target::User => ErrorClass::InvalidInput,
        }
    }
}

impl Phase {
    /// The class of an interruption (a shutdown, a killed connection, a failed disk
    /// write): a write may have applied; nothing else did.
    pub fn interrupted(self) -> ErrorClass {
        match self {
            Phase::Write => ErrorClass::Indeterminate,
            Phase::Connect | Phase::Read => ErrorClass::Unavailable,
        }
    }
}

/// The mapping every database shares: a non-database error is classified by the phase
/// it happened in ([`classify`]), a database error by `code_class` (never
/// `Indeterminate` outside a write: a connection that fails while connecting sent
/// nothing, and a read changes nothing, whatever ended it), and `hint`, if any, is added
/// to the context.
pub fn map_with(
    err: sqlx::Error,
    phase: Phase,
    context: &str,
    code_class: impl FnOnce() -> ErrorClass,
    hint: Option<&str>,
) -> Error {
    let class = classify(&err, phase).unwrap_or_else(|| match code_class() {
        ErrorClass::Indeterminate if phase != Phase::Write => ErrorClass::Unavailable,
        class => class,
    });
    match hint {
        Some(hint) => error_of(class, &format!("{context} ({hint})"), err),
        None => error_of(class, context, err),
    }
}

/// Builds the [`Error`] for a class, keeping the driver error as its source.
pub fn error_of(class: ErrorClass, context: &str, err: sqlx::Error) -> Error {
    class.error(format!("{context}: {}", describe(&err)), err)
}

/// Words for a driver error. A database's error is its message and code, without the
/// driver's decorations: Postgres's adds the server's own C source line ("… at line
/// 768"), which reads as a line of the caller's SQL or configuration.
pub fn describe(err: &sqlx::Error) -> String {
    let sqlx::Error::Database(db) = err else {
        return err.to_string();
    };
    let code = match (mysql::number_of(err), db.code()) {
        (Some(n), Some(state)) => format!(" (error {n}, SQLSTATE {state})"),
        (None, Some(code)) => format!(" (code {code})"),
        (Some(n), None) => format!(" (error {n})"),
        (None, None) => String::new(),
    };
    format!("error returned from database: {}{code}", db.message())
}

/// The class of a non-database error.
///
/// Database errors (`sqlx::Error::Database`) are the store crate's to classify; this
/// returns `None` for them.
pub fn classify(err: &sqlx::Error, phase: Phase) -> Option<ErrorClass> {
    use sqlx::Error as E;
    let sent = |phase: Phase| match phase {
        Phase::Write => ErrorClass::after_send(Effect::Write),
        Phase::Connect | Phase::Read => ErrorClass::after_send(Effect::Read),
    };
    Some(match err {
        E::Database(_) => return None,
        E::Io(io) if io.kind() == std::io::ErrorKind::ConnectionRefused => ErrorClass::Unavailable,
        // A connection that broke while a statement was out: it may have run.
        E::Io(_) | E::Protocol(_) | E::WorkerCrashed => sent(phase),
        E::Tls(_) | E::PoolTimedOut | E::PoolClosed => ErrorClass::Unavailable,
        E::Configuration(_)
        | E::TypeNotFound { .. }
        | E::ColumnIndexOutOfBounds { .. }
        | E::ColumnNotFound(_)
        | E::ColumnDecode { .. }
        | E::Decode(_)
        | E::RowNotFound => ErrorClass::Misconfigured,
        E::Encode(_) | E::InvalidArgument(_) => ErrorClass::InvalidInput,
        _ => sent(phase),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phase_decides_whether_io_may_have_applied() {
        let io = || sqlx::Error::Io(std::io::Error::from(std::io::ErrorKind::UnexpectedEof));
        assert_eq!(classify(&io(), Phase::Write), Some(ErrorClass::Indeterminate));
        assert_eq!(classify(&io(), Phase::Read), Some(ErrorClass::Unavailable));
        assert_eq!(classify(&io(), Phase::Connect), Some(ErrorClass::Unavailable));
        let refused = sqlx::Error::Io(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert_eq!(classify(&refused, Phase::Write), Some(ErrorClass::Unavailable));
        assert_eq!(
            classify(&sqlx::Error::PoolTimedOut, Phase::Write),
            Some(ErrorClass::Unavailable)
        );
        assert_eq!(
            classify(&sqlx::Error::ColumnNotFound("x".into()), Phase::Read),
            Some(ErrorClass::Misconfigured)
        );
        assert!(error_of(ErrorClass::Indeterminate, "write", io()).is_indeterminate());
        assert!(error_of(ErrorClass::Unavailable, "write", io()).is_retryable());
    }

    /// A server error the database's codes call "may have applied" (Postgres's
    /// `57P01`, a backend terminated during a failover): a write's outcome is then
    /// unknown, but a read or a connection attempt changed nothing. (The read after a
    /// refused Postgres renewal was reported `Indeterminate` for it.)
    #[test]
    fn only_a_write_is_indeterminate_for_a_database_error() {
        #[derive(Debug)]
        struct Terminated;
        impl std::fmt::Display for Terminated {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("terminating connection due to administrator command")
            }
        }
        impl std::error::Error for Terminated {}
        impl sqlx::error::DatabaseError for Terminated {
            fn message(&self) -> &str {
                "terminating connection due to administrator command"
            }
            fn as_error(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
                self
            }
            fn as_error_mut(&mut self) -> &mut (dyn std::error::Error + Send + Sync + 'static) {
                self
            }
            fn into_error(self: Box<Self>) -> Box<dyn std::error::Error + Send + Sync + 'static> {
                self
            }
            fn kind(&self) -> sqlx::error::ErrorKind {
                sqlx::error::ErrorKind::Other
            }
        }
        let map = |phase| {
            map_with(
                sqlx::Error::Database(Box::new(Terminated)),
                phase,
                "x",
                || ErrorClass::Indeterminate,
                None,
            )
        };
        assert!(map(Phase::Write).is_indeterminate(), "{:?}", map(Phase::Write));
        for phase in [Phase::Read, Phase::Connect] {
            let e = map(phase);
            assert!(e.is_retryable() && !e.is_indeterminate(), "{phase:?}: {e:?}");
        }
    }
}
