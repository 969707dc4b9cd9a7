//! Postgres's part of the SQL lease store: the catalog check of the lease table, its
//! serialized creation, and the `LISTEN` feed of releases.

use std::sync::Arc;

use async_trait::async_trait;
use leasehold_core::Result;
use leasehold_core::fence::Dialect;
use leasehold_sql::errors::postgres::map_error;
use leasehold_sql::errors::{Phase, Target};
use leasehold_sql::schema::{self, ColumnInfo, ColumnLimits};
use leasehold_sql::{ChangeFeed, LeaseTable, SqlBackend, SqlStore};
use sqlx::{PgPool, Postgres, Row};

use crate::notify::Waiters;

/// Lease records in a Postgres table, judged on the server's clock: the SQL store over a
/// [`PgPool`] that reaches the **primary**.
///
/// [`PostgresStore::provision`] creates the table (serialized by an advisory lock, so
/// several processes may call it at once; needs `CREATE` on the schema);
/// [`PostgresStore::new`] checks that the table exists with the right columns, that
/// `name` is its primary key, that the role may read and write it, and that the server
/// is not a standby; [`PostgresStore::verify`] checks again. See the [crate docs](crate)
/// for the guarantee, the clock and the setup. Cheap to clone; clones share the pool and
/// the `LISTEN` connection.
pub type PostgresStore = SqlStore<PgBackend>;

/// Postgres's part of [`PostgresStore`] (never constructed: it names the backend).
#[derive(Debug)]
pub enum PgBackend {}

const COLUMNS_SQL: &str = "SELECT a.attname::text AS name, format_type(a.atttypid, a.atttypmod) AS decl_type, \
     a.attnotnull AS not_null FROM pg_attribute a \
     WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum";

const TABLE_FACTS_SQL: &str = "SELECT pg_is_in_recovery() AS standby, \
     EXISTS (SELECT 1 FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0] \
       WHERE i.indrelid = to_regclass($1) AND i.indisunique AND i.indnkeyatts = 1 AND i.indpred IS NULL \
       AND a.attname = 'name') AS name_unique, \
     COALESCE(has_table_privilege(to_regclass($1), 'SELECT, INSERT, UPDATE'), FALSE) AS writable";

#[async_trait]
impl SqlBackend for PgBackend {
    type Db = Postgres;
    const STORE: &'static str = "PostgresStore";

    async fn check(pool: &PgPool, table: &LeaseTable) -> Result<ColumnLimits> {
        let regclass = table.quoted(Dialect::Postgres);
        let ctx = format!("check lease table {}", table.display());
        let rows = sqlx::query(COLUMNS_SQL)
            .bind(&regclass)
            .fetch_all(pool)
            .await
            .map_err(|e| map_error(e, Phase::Read, Target::Lease, &ctx))?;
        let columns = ColumnInfo::from_rows(&rows, |r| r.try_get("not_null"))
            .map_err(|e| map_error(e, Phase::Read, Target::Lease, &ctx))?;
        let facts = sqlx::query(TABLE_FACTS_SQL)
            .bind(&regclass)
            .fetch_one(pool)
            .await
            .map_err(|e| map_error(e, Phase::Read, Target::Lease, &ctx))?;
        let fact = |c: &str| -> Result<bool> {
            facts
                .try_get::<bool, _>(c)
                .map_err(|e| map_error(e, Phase::Read, Target::Lease, &ctx))
        };
        if fact("standby")? {
            return Err(leasehold_core::Error::Misconfigured {
                message: "the pool reaches a standby (read replica); leases need the primary".into(),
                source: None,
            });
        }
        let limits = schema::check_columns(Dialect::Postgres, table, &columns, fact("name_unique")?)?;
        if !fact("writable")? {
            return Err(leasehold_core::Error::Misconfigured {
                message: format!(
                    "lease table {}: the role lacks SELECT, INSERT or UPDATE on it",
                    table.display()
                ),
                source: None,
            });
        }
        Ok(limits)
    }

    async fn create(pool: &PgPool, sql: &str) -> Result<()> {
        crate::run_ddl_serialized(pool, &[sql])
            .await
            .map_err(|e| map_error(e, Phase::Write, Target::Lease, "create lease table"))
    }

    fn feed(pool: &PgPool, table: &LeaseTable) -> Option<Arc<dyn ChangeFeed>> {
        Some(Arc::new(Waiters::new(pool.clone(), table.channel())))
    }
}
