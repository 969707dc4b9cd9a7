//! Stores whose database is a local file (SQLite): the store can open the file itself.

use std::path::Path;
use std::time::Duration;

use leasehold_core::Result;
use sqlx::pool::PoolOptions;
use sqlx::{Connection, Database};

use crate::errors::{Phase, Target};
use crate::{SqlBackend, SqlConfig, SqlDatabase, SqlStore};

/// A [`SqlBackend`] whose database is a file on this host.
pub trait FileBackend: SqlBackend {
    /// The connect options for the database file at `path`, created if missing when
    /// `create` is true (and refused, when false, as a file that cannot be opened).
    fn file_options(path: &Path, create: bool) -> <<Self::Db as Database>::Connection as Connection>::Options;

    /// How long [`SqlStore::open_file`] retries a file that another process is setting
    /// up at the same moment.
    const OPEN_RETRY: Duration;
}

impl<B: FileBackend> SqlStore<B> {
    /// Opens (creating if missing) the database file at `path` with the backend's
    /// connect options, creates the lease table if needed, and opens a store on it: the
    /// zero-setup way in.
    ///
    /// # Errors
    /// [`leasehold_core::Error::Misconfigured`] when the file cannot be opened or holds a
    /// wrong table.
    pub async fn open_file(path: impl AsRef<Path>, config: SqlConfig) -> Result<Self> {
        Self::open_file_retrying(path.as_ref(), config, true).await
    }

    /// Opens a store on the database file at `path` as it is: creates neither the file
    /// nor the table, as a store on a server database needs them made first. What a
    /// program that only reads leases opens, so that a mistyped path is an error rather
    /// than a new, empty database that says no lease is held.
    ///
    /// # Errors
    /// [`leasehold_core::Error::NotProvisioned`] when there is no file at `path` or it
    /// has no lease table; [`leasehold_core::Error::Misconfigured`] when the file cannot
    /// be opened or holds a wrong table.
    pub async fn open_existing_file(path: impl AsRef<Path>, config: SqlConfig) -> Result<Self> {
        let path = path.as_ref();
        if !path.try_exists().unwrap_or(true) {
            return Err(leasehold_core::Error::NotProvisioned {
                message: format!("no database file at {}", path.display()),
                source: None,
            });
        }
        Self::open_file_retrying(path, config, false).await
    }

    async fn open_file_retrying(path: &Path, config: SqlConfig, create: bool) -> Result<Self> {
        // What the driver says only as "unable to open database file", in words.
        let misconfigured = |message: String| leasehold_core::Error::Misconfigured { message, source: None };
        if path.is_dir() {
            return Err(misconfigured(format!(
                "{} is a directory, not a database file",
                path.display()
            )));
        }
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
            && !dir.try_exists().unwrap_or(true)
        {
            return Err(misconfigured(format!(
                "no directory {} for the database file {}: create it first",
                dir.display(),
                path.display()
            )));
        }
        // Several processes opening one new file at once can be refused as busy without
        // waiting (SQLite: switching to WAL, or a read upgraded to a write in WAL mode
        // ignores the busy timeout): retry those, within the backend's bound.
        let deadline = tokio::time::Instant::now() + B::OPEN_RETRY;
        let mut pause = Duration::from_millis(5);
        loop {
            match Self::open_file_once(path, config.clone(), create).await {
                Err(e) if e.is_retryable() && tokio::time::Instant::now() + pause < deadline => {
                    tracing::debug!(error = %e, "database file busy while opening; retrying");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_millis(200));
                }
                other => return other,
            }
        }
    }

    async fn open_file_once(path: &Path, config: SqlConfig, create: bool) -> Result<Self> {
        let pool = PoolOptions::<B::Db>::new()
            .max_connections(4)
            .connect_with(B::file_options(path, create))
            .await
            .map_err(|e| B::Db::map_error(e, Phase::Connect, Target::Lease, &format!("open {}", path.display())))?;
        if create {
            Self::provision(&pool, &config).await?;
        }
        Self::new(pool, config).await
    }
}
