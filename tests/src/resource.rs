//! The protected resource of every torture run: two tables on the shared Postgres
//! (`LEASEHOLD_PG_URL`, never restarted by the torture runs), whatever store holds the
//! lease.
//!
//! - `<run>_hw` holds one row, the resource's high-water mark (`last_token`);
//! - `<run>_writes` is append-only: one row per accepted write, `(id, token, worker,
//!   seq, at)`, `id` from a sequence drawn while the high-water row is locked, so `id`
//!   order is commit order.
//!
//! A fenced write is **one statement**: the guard and the effect commit together or not
//! at all ([`fenced_write_sql`]). The mutant drops the guard (`AND last_token <= $1`),
//! which is what the checker must catch.

use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::{AssertSqlSafe, Row};

use crate::checker::ResourceRow;
use crate::stores::is_sql_word;

/// The key of the one high-water row.
pub const RESOURCE_KEY: &str = "r";

/// The resource's table names for a run id (ASCII lowercase letters, digits, `_`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceTables {
    /// The high-water-mark table.
    pub hw: String,
    /// The append-only writes table.
    pub writes: String,
}

impl ResourceTables {
    /// The tables of run `run` (`lht_<run>_hw`, `lht_<run>_writes`).
    ///
    /// # Panics
    /// If `run` holds anything but ASCII lowercase letters, digits and `_` (it is
    /// spliced into SQL).
    pub fn for_run(run: &str) -> Self {
        assert!(is_sql_word(run), "run id {run:?} must be [a-z0-9_]+");
        Self {
            hw: format!("lht_{run}_hw"),
            writes: format!("lht_{run}_writes"),
        }
    }
}

/// The fenced write: one statement that raises the high-water mark if the token is not
/// older than it and appends the write in the same transaction. Binds `$1` token,
/// `$2` worker, `$3` seq; returns the new row's id, or no row when the fence refused.
///
/// `mutant` drops the guard: every write is accepted and lowers the mark.
pub fn fenced_write_sql(tables: &ResourceTables, mutant: bool) -> String {
    let guard = if mutant { "" } else { " AND last_token <= $1" };
    format!(
        "WITH u AS (UPDATE {hw} SET last_token = $1 WHERE name = '{RESOURCE_KEY}'{guard} RETURNING 1) \
         INSERT INTO {writes} (token, worker, seq) SELECT $1, $2, $3 FROM u RETURNING id",
        hw = tables.hw,
        writes = tables.writes
    )
}

/// The query reading the high-water mark.
pub fn high_water_sql(tables: &ResourceTables) -> String {
    format!("SELECT last_token FROM {} WHERE name = '{RESOURCE_KEY}'", tables.hw)
}

/// The controller's handle on the resource.
#[derive(Debug, Clone)]
pub struct Resource {
    pool: PgPool,
    tables: ResourceTables,
}

impl Resource {
    /// Creates the run's tables on the Postgres at `url` (dropping leftovers of a run
    /// with the same id).
    ///
    /// # Errors
    /// If Postgres cannot be reached or refuses the DDL.
    pub async fn create(url: &str, run: &str) -> Result<Self, sqlx::Error> {
        let pool = PgPoolOptions::new()
            .max_connections(2)
            .acquire_timeout(std::time::Duration::from_secs(10))
            .connect(url)
            .await?;
        let tables = ResourceTables::for_run(run);
        let r = Self { pool, tables };
        r.drop_tables().await?;
        for sql in [
            format!(
                "CREATE TABLE {} (name text PRIMARY KEY, last_token bigint NOT NULL)",
                r.tables.hw
            ),
            format!(
                "CREATE TABLE {} (id bigserial PRIMARY KEY, token bigint NOT NULL, worker integer NOT NULL, \
                 seq bigint NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp(), UNIQUE (worker, seq))",
                r.tables.writes
            ),
            format!(
                "INSERT INTO {} (name, last_token) VALUES ('{RESOURCE_KEY}', 0)",
                r.tables.hw
            ),
        ] {
            sqlx::query(AssertSqlSafe(sql)).execute(&r.pool).await?;
        }
        Ok(r)
    }

    /// The run's tables.
    pub fn tables(&self) -> &ResourceTables {
        &self.tables
    }

    /// Every accepted write, in commit order.
    ///
    /// # Errors
    /// If the read fails or a row holds a negative number.
    pub async fn rows(&self) -> Result<Vec<ResourceRow>, sqlx::Error> {
        let sql = format!(
            "SELECT id, token, worker, seq, (extract(epoch FROM at) * 1000)::bigint AS at_ms FROM {} ORDER BY id",
            self.tables.writes
        );
        let rows = sqlx::query(AssertSqlSafe(sql)).fetch_all(&self.pool).await?;
        let conv =
            |v: i64, what: &str| u64::try_from(v).map_err(|e| sqlx::Error::Decode(format!("{what}: {e}").into()));
        rows.iter()
            .map(|row| {
                Ok(ResourceRow {
                    id: row.try_get("id")?,
                    token: conv(row.try_get("token")?, "token")?,
                    worker: u32::try_from(row.try_get::<i32, _>("worker")?)
                        .map_err(|e| sqlx::Error::Decode(format!("worker: {e}").into()))?,
                    seq: conv(row.try_get("seq")?, "seq")?,
                    at_ms: conv(row.try_get("at_ms")?, "at")?,
                })
            })
            .collect()
    }

    /// The high-water mark now.
    ///
    /// # Errors
    /// If the read fails.
    pub async fn high_water(&self) -> Result<i64, sqlx::Error> {
        let row = sqlx::query(AssertSqlSafe(high_water_sql(&self.tables)))
            .fetch_one(&self.pool)
            .await?;
        row.try_get(0)
    }

    /// Drops the run's tables.
    ///
    /// # Errors
    /// If the statement fails.
    pub async fn drop_tables(&self) -> Result<(), sqlx::Error> {
        let sql = format!("DROP TABLE IF EXISTS {}, {}", self.tables.hw, self.tables.writes);
        sqlx::query(AssertSqlSafe(sql)).execute(&self.pool).await?;
        Ok(())
    }
}
