//! What a [`crate::SqliteStore`] needs to know besides its pool.

use std::path::Path;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqliteSynchronous};

/// How long a statement waits for another process's write lock before giving up with
/// [`leasehold_core::Error::Unavailable`] (nothing applied). Shorter than the store's
/// request timeout ([`leasehold_sql::DEFAULT_REQUEST_TIMEOUT`], 5 s), which would
/// otherwise end the wait first and leave the write in doubt
/// ([`leasehold_core::Error::Indeterminate`]: the statement still waits, and may apply
/// once the lock is free); keep it so if you shorten the request timeout.
pub const DEFAULT_BUSY_TIMEOUT: Duration = Duration::from_secs(4);

/// Options of a [`crate::SqliteStore`]: the lease table (default `leasehold_leases` in
/// the main database; `schema.name` for an attached database).
///
/// ```
/// use leasehold_sqlite::SqliteConfig;
/// let config = SqliteConfig::new().with_table("my_leases")?;
/// assert_eq!(config.lease_table().name(), "my_leases");
/// assert!(SqliteConfig::new().with_table("x'; --").is_err());
/// # Ok::<(), leasehold_core::Error>(())
/// ```
pub type SqliteConfig = leasehold_sql::SqlConfig;

/// Connect options for a lease database file shared by several processes: created if
/// missing, WAL journal (readers never block the writer), `synchronous = FULL` (a
/// granted lease survives power loss, so no token is issued twice after a reboot), and
/// [`DEFAULT_BUSY_TIMEOUT`] to wait for another process's write.
pub fn connect_options(path: impl AsRef<Path>) -> SqliteConnectOptions {
    existing_file_options(path)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
}

/// [`connect_options`] for a file that must exist: nothing is created, and the file
/// keeps its journal mode (WAL, in a file [`connect_options`] made: the mode stays with
/// the file), so that opening a file that turns out not to be a lease database changes
/// nothing in it.
pub(crate) fn existing_file_options(path: impl AsRef<Path>) -> SqliteConnectOptions {
    SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(false)
        .synchronous(SqliteSynchronous::Full)
        .busy_timeout(DEFAULT_BUSY_TIMEOUT)
}
