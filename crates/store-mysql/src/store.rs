//! MySQL's part of the SQL lease store: the catalog check of the lease table (columns,
//! primary key, InnoDB, a writable primary) and its creation.

use std::sync::Arc;

use async_trait::async_trait;
use leasehold_core::fence::Dialect;
use leasehold_core::{Error, Result};
use leasehold_sql::errors::mysql::{map_error, number, number_of};
use leasehold_sql::errors::{Phase, Target};
use leasehold_sql::schema::{self, ColumnInfo, ColumnLimits, MYSQL_ENGINE};
use leasehold_sql::{ChangeFeed, LeaseTable, SqlBackend, SqlStore};
use sqlx::{MySql, MySqlPool, Row};

/// Lease records in a MySQL or MariaDB table, judged on the server's clock: the SQL store
/// over a [`MySqlPool`] that reaches the **primary**.
///
/// [`MySqlStore::provision`] creates the table (`CREATE TABLE IF NOT EXISTS … ENGINE=InnoDB`;
/// several processes may call it at once; needs `CREATE` on the database);
/// [`MySqlStore::new`] checks that the table exists with the right columns, that `name`
/// is its primary key and its only unique key, that it is an InnoDB table, and that the
/// server is not read-only; [`MySqlStore::verify`] checks again. See the
/// [crate docs](crate) for the guarantee, the clock and the setup. Cheap to clone;
/// clones share the pool.
pub type MySqlStore = SqlStore<MySqlBackend>;

/// MySQL's part of [`MySqlStore`] (never constructed: it names the backend).
#[derive(Debug)]
pub enum MySqlBackend {}

const COLUMNS_SQL: &str = "SELECT COLUMN_NAME AS name, COLUMN_TYPE AS decl_type, \
     CAST(IS_NULLABLE = 'NO' AS SIGNED) AS not_null FROM information_schema.COLUMNS \
     WHERE TABLE_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION";

const TABLE_FACTS_SQL: &str = "SELECT \
     (SELECT ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ?) AS engine, \
     (SELECT GROUP_CONCAT(COLUMN_NAME ORDER BY SEQ_IN_INDEX) FROM information_schema.STATISTICS \
       WHERE TABLE_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ? AND INDEX_NAME = 'PRIMARY') AS primary_key, \
     CAST((SELECT COUNT(DISTINCT INDEX_NAME) FROM information_schema.STATISTICS \
       WHERE TABLE_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ? AND NON_UNIQUE = 0 AND INDEX_NAME <> 'PRIMARY') AS SIGNED) \
       AS other_unique, \
     CAST(@@global.read_only AS SIGNED) AS read_only";

fn misconfigured(message: String) -> Error {
    Error::Misconfigured { message, source: None }
}

#[async_trait]
impl SqlBackend for MySqlBackend {
    type Db = MySql;
    const STORE: &'static str = "MySqlStore";

    async fn check(pool: &MySqlPool, table: &LeaseTable) -> Result<ColumnLimits> {
        let ctx = format!("check lease table {}", table.display());
        let failed = |e| map_error(e, Phase::Read, Target::Lease, &ctx);
        let rows = sqlx::query(COLUMNS_SQL)
            .bind(table.schema())
            .bind(table.name())
            .fetch_all(pool)
            .await
            .map_err(failed)?;
        let columns = ColumnInfo::from_rows(&rows, |r| Ok(r.try_get::<i64, _>("not_null")? != 0)).map_err(failed)?;
        if columns.is_empty() {
            // `information_schema` hides a table this user has no privilege on: ask the
            // table itself, so that such a table is not reported missing (which
            // `provision` cannot fix). A missing one answers 1146, and is reported below.
            let probe = format!("SELECT 1 FROM {} LIMIT 0", table.quoted(Dialect::MySql));
            if let Err(e) = sqlx::query(sqlx::AssertSqlSafe(probe)).fetch_all(pool).await {
                if number_of(&e) != Some(number::NO_SUCH_TABLE) {
                    return Err(failed(e));
                }
            }
        }
        let mut facts = sqlx::query(TABLE_FACTS_SQL);
        for _ in 0..3 {
            facts = facts.bind(table.schema()).bind(table.name());
        }
        let facts = facts.fetch_one(pool).await.map_err(failed)?;
        let decode = || -> std::result::Result<(Option<String>, Option<String>, i64, i64), sqlx::Error> {
            Ok((
                facts.try_get("engine")?,
                facts.try_get("primary_key")?,
                facts.try_get("other_unique")?,
                facts.try_get("read_only")?,
            ))
        };
        let (engine, primary_key, other_unique, read_only) = decode().map_err(failed)?;
        if read_only != 0 {
            return Err(misconfigured(
                "the server is read-only (a replica, or read_only = ON); leases need the primary".into(),
            ));
        }
        let name_is_key = primary_key.as_deref() == Some("name") && other_unique == 0;
        let limits = schema::check_columns(Dialect::MySql, table, &columns, name_is_key)?;
        match engine.as_deref() {
            Some(e) if e.eq_ignore_ascii_case(MYSQL_ENGINE) => Ok(limits),
            other => Err(misconfigured(format!(
                "lease table {}: its storage engine is {}, leases need {MYSQL_ENGINE} (row locks and atomic \
                 writes): ALTER TABLE {} ENGINE={MYSQL_ENGINE}",
                table.display(),
                other.unwrap_or("unknown"),
                table.quoted(Dialect::MySql)
            ))),
        }
    }

    fn feed(_pool: &MySqlPool, _table: &LeaseTable) -> Option<Arc<dyn ChangeFeed>> {
        None
    }
}
