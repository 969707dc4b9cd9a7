//! SQLite's part of the SQL lease store: the catalog check of the lease table, its
//! creation, and opening a database file shared by the processes of one host.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use leasehold_core::Result;
use leasehold_core::fence::Dialect;
use leasehold_sql::errors::sqlite::map_error;
use leasehold_sql::errors::{Phase, Target};
use leasehold_sql::schema::{self, ColumnInfo, ColumnLimits};
use leasehold_sql::{ChangeFeed, FileBackend, LeaseTable, SqlBackend, SqlStore};
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{AssertSqlSafe, Row, Sqlite, SqlitePool};

use crate::config::{DEFAULT_BUSY_TIMEOUT, connect_options, existing_file_options};

/// Lease records in a SQLite table, judged on the host's boot clock: the SQL store over a
/// [`SqlitePool`] on one database **file**, shared by the processes of one host.
///
/// [`SqliteStore::open_file`] opens (creating if missing) a file with
/// [`connect_options`] and creates the table: the zero-setup way in;
/// [`SqliteStore::open_existing_file`] opens one that must exist, table and all.
/// [`SqliteStore::provision`] creates the table on a pool of yours;
/// [`SqliteStore::new`] checks that it exists with the right columns and that `name` is
/// its primary key; [`SqliteStore::verify`] checks again. See the [crate docs](crate)
/// for the guarantee, the clock and the setup. Cheap to clone; clones share the pool.
pub type SqliteStore = SqlStore<SqliteBackend>;

/// SQLite's part of [`SqliteStore`] (never constructed: it names the backend).
#[derive(Debug)]
pub enum SqliteBackend {}

const COLUMNS_SQL: &str = "SELECT name, type AS decl_type, \"notnull\" AS not_null, pk FROM pragma_table_info(?1, ?2)";

/// The names of the lease table's columns (none: no table).
async fn column_names(pool: &SqlitePool, table: &LeaseTable) -> Result<Vec<String>> {
    let ctx = format!("check lease table {}", table.display());
    sqlx::query_scalar("SELECT name FROM pragma_table_info(?1, ?2)")
        .bind(table.name())
        .bind(table.schema().unwrap_or("main"))
        .fetch_all(pool)
        .await
        .map_err(|e| map_error(e, Phase::Read, Target::Lease, &ctx))
}

#[async_trait]
impl SqlBackend for SqliteBackend {
    type Db = Sqlite;
    const STORE: &'static str = "SqliteStore";

    async fn check(pool: &SqlitePool, table: &LeaseTable) -> Result<ColumnLimits> {
        let ctx = format!("check lease table {}", table.display());
        let rows = sqlx::query(COLUMNS_SQL)
            .bind(table.name())
            .bind(table.schema().unwrap_or("main"))
            .fetch_all(pool)
            .await
            .map_err(|e| map_error(e, Phase::Read, Target::Lease, &ctx))?;
        let mut pk = Vec::new();
        let mut columns = Vec::with_capacity(rows.len());
        for r in &rows {
            let decode = || -> std::result::Result<(ColumnInfo, i64), sqlx::Error> {
                Ok((
                    ColumnInfo {
                        name: r.try_get("name")?,
                        decl_type: r.try_get("decl_type")?,
                        not_null: r.try_get("not_null")?,
                    },
                    r.try_get("pk")?,
                ))
            };
            let (info, key) = decode().map_err(|e| map_error(e, Phase::Read, Target::Lease, &ctx))?;
            if key > 0 {
                pk.push(info.name.clone());
            }
            columns.push(info);
        }
        let name_is_key = pk == ["name"];
        let limits = schema::check_columns(Dialect::Sqlite, table, &columns, name_is_key)?;
        Ok(limits)
    }

    /// Adds the columns a table of an earlier version lacks (`boot_id`). Another process
    /// may add one at the same moment: its `duplicate column` is success.
    async fn upgrade(pool: &SqlitePool, table: &LeaseTable) -> Result<()> {
        let have = column_names(pool, table).await?;
        if have.is_empty() {
            return Ok(()); // no table: new() reports it
        }
        for (column, definition) in schema::SQLITE_ADDED_COLUMNS {
            if have.iter().any(|c| c == column) {
                continue;
            }
            let sql = format!(
                "ALTER TABLE {} ADD COLUMN {column} {definition}",
                table.quoted(Dialect::Sqlite)
            );
            if let Err(e) = sqlx::query(AssertSqlSafe(sql)).execute(pool).await {
                if !column_names(pool, table).await?.iter().any(|c| c == column) {
                    return Err(map_error(
                        e,
                        Phase::Write,
                        Target::Lease,
                        &format!("add column {column} to lease table {}", table.display()),
                    ));
                }
            }
            tracing::info!(table = %table.display(), column, "added a column to the lease table");
        }
        Ok(())
    }

    fn feed(pool: &SqlitePool, table: &LeaseTable) -> Option<Arc<dyn ChangeFeed>> {
        Some(crate::feed::DataVersionFeed::new(pool, table))
    }
}

impl FileBackend for SqliteBackend {
    const OPEN_RETRY: Duration = DEFAULT_BUSY_TIMEOUT;

    fn file_options(path: &Path, create: bool) -> SqliteConnectOptions {
        if create {
            connect_options(path)
        } else {
            existing_file_options(path)
        }
    }
}
