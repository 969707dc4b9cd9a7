//! The `CasStore` over ShedLock's table.

use std::fmt;
use std::future::Future;
use std::time::Duration;

use async_trait::async_trait;
use leasehold_core::fence::{Dialect, Ident};
use leasehold_core::{
    ClientConfig, Error, LeaseClient, LeaseName, NamePrefix, Result,
    store::{Capabilities, CasOutcome, CasStore, Current, DeleteOutcome, LeaseRecord, Precondition, Stored, Version},
};
use sqlx::postgres::{PgPool, PgPoolOptions, PgRow};
use sqlx::{AssertSqlSafe, Row};

use super::ShedlockConfig;
use super::columns::{Column, Columns, misconfigured, split_table};
use super::error::{self, Op};
use super::row::{self, RawRow, VersionParts, by_param, parse_version, ttl_param};
use super::sql::{Shape, Statements};

/// A statement of this store.
type PgQuery<'q> = sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>;

/// Leases kept in ShedLock's own `shedlock` table in Postgres, so Rust instances and
/// Java ShedLock instances of one service exclude each other. See the module docs.
#[derive(Clone)]
pub struct ShedlockStore {
    pool: PgPool,
    sql: Statements,
    fenced: bool,
    name_len: usize,
    timeout: Duration,
    table: String,
}

impl fmt::Debug for ShedlockStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        row::fmt_store(f, "ShedlockStore", &self.table, self.fenced)
    }
}

impl ShedlockStore {
    /// Connects to `url` and opens the table.
    ///
    /// # Errors
    /// [`Error::Unavailable`] if Postgres cannot be reached; as [`ShedlockStore::new`].
    pub async fn connect(url: &str, config: ShedlockConfig) -> Result<Self> {
        let pool = PgPoolOptions::new()
            .max_connections(8)
            .acquire_timeout(config.timeout)
            .connect(url)
            .await
            .map_err(|e| error::map(Op::Read, e))?;
        Self::new(pool, config).await
    }

    /// Opens the table on an existing pool: checks that it exists with ShedLock's
    /// columns, and whether it has the fence column.
    ///
    /// # Errors
    /// [`Error::NotProvisioned`] for a missing table; [`Error::Misconfigured`] for a
    /// table this user may not read, a missing column or an unexpected column type;
    /// [`Error::InvalidInput`] for a bad table or column name.
    pub async fn new(pool: PgPool, config: ShedlockConfig) -> Result<Self> {
        let ident = Ident::table(&config.table)?;
        let fence_ident = Ident::column(&config.fence_column)?;
        let (schema, table) = split_table(&config.table);
        let quoted = ident.quoted(Dialect::Postgres);
        let check = async {
            let rows = sqlx::query(
                "SELECT column_name::text, data_type::text, character_maximum_length::bigint \
                 FROM information_schema.columns \
                 WHERE table_schema = COALESCE($1, current_schema()) AND table_name = $2",
            )
            .bind(schema)
            .bind(&table)
            .fetch_all(&pool)
            .await?;
            if rows.is_empty() {
                // `information_schema` hides a table this user has no privilege on: ask
                // the table itself, so that such a table is not reported missing (which
                // `provision` cannot fix). A missing one answers `42P01`, reported below.
                let probe = format!("SELECT 1 FROM {quoted} LIMIT 0");
                if let Err(e) = sqlx::query(AssertSqlSafe(probe)).fetch_all(&pool).await {
                    if error::code_of(&e).as_deref() != Some(error::UNDEFINED_TABLE) {
                        return Err(e);
                    }
                }
            }
            Ok(rows)
        };
        let rows = tokio::time::timeout(config.timeout, check)
            .await
            .map_err(|_| error::timed_out(Op::Read))?
            .map_err(|e| error::map(Op::Read, e))?;
        let mut columns = Columns::new(&config.table, false);
        for row in &rows {
            let name: String = row.try_get(0).map_err(|e| error::map(Op::Read, e))?;
            let column = Column {
                ty: row.try_get(1).map_err(|e| error::map(Op::Read, e))?,
                len: row.try_get(2).map_err(|e| error::map(Op::Read, e))?,
                digits: None,
            };
            columns.insert(&name, column);
        }
        columns.check_exists("ShedlockStore::provision")?;
        let mut tz = None;
        for c in ["lock_until", "locked_at"] {
            let this = match columns.ty(c) {
                Some("timestamp without time zone") => false,
                Some("timestamp with time zone") => true,
                other => {
                    return Err(misconfigured(format!(
                        "column {c} of {} must be a TIMESTAMP, found {other:?}",
                        config.table
                    )));
                }
            };
            if tz.is_some_and(|t| t != this) {
                return Err(misconfigured("lock_until and locked_at have different types".into()));
            }
            tz = Some(this);
        }
        columns.check_text(&["character varying", "text"])?;
        let fenced = columns.fenced(&config.fence_column)?;
        let name_len = columns.name_len();
        let shape = Shape {
            table: ident.quoted(Dialect::Postgres),
            fence: fenced.then(|| fence_ident.quoted(Dialect::Postgres)),
            tz: tz.unwrap_or(false),
        };
        Ok(Self {
            pool,
            sql: Statements::build(&shape),
            fenced,
            name_len,
            timeout: config.timeout,
            table: config.table,
        })
    }

    /// Creates ShedLock's table (its recommended Postgres DDL) if it does not exist,
    /// and adds the fence column if `fence` is set.
    ///
    /// # Errors
    /// Postgres errors; [`Error::InvalidInput`] for a bad table name.
    pub async fn provision(pool: &PgPool, table: &str, fence: bool) -> Result<()> {
        let t = Ident::table(table)?.quoted(Dialect::Postgres);
        let create = format!(
            "CREATE TABLE IF NOT EXISTS {t} (name VARCHAR(64) NOT NULL, lock_until TIMESTAMP NOT NULL, \
             locked_at TIMESTAMP NOT NULL, locked_by VARCHAR(255) NOT NULL, PRIMARY KEY (name))"
        );
        let add_fence = format!("ALTER TABLE {t} ADD COLUMN IF NOT EXISTS fence BIGINT");
        let ddl: &[&str] = if fence { &[&create, &add_fence] } else { &[&create] };
        // Serialized with other creators: concurrent `IF NOT EXISTS` DDL can collide.
        leasehold_postgres::run_ddl_serialized(pool, ddl)
            .await
            .map_err(|e| error::map(Op::Write, e))
    }

    /// Whether the table has the fence column (tokens kept there; linearizable grade).
    pub fn is_fenced(&self) -> bool {
        self.fenced
    }

    /// The pool.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// A lease client on this store: a correctness client if the table is fenced, an
    /// efficiency-only client otherwise.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for an invalid client configuration.
    pub fn lease_client(self, config: ClientConfig) -> Result<LeaseClient> {
        let fenced = self.fenced;
        row::lease_client(self, fenced, config)
    }

    fn check_name(&self, name: &LeaseName) -> Result<()> {
        row::check_name(self.name_len, name)
    }

    async fn timed<T>(&self, op: Op, f: impl Future<Output = std::result::Result<T, sqlx::Error>>) -> Result<T> {
        match tokio::time::timeout(self.timeout, f).await {
            Ok(r) => r.map_err(|e| error::map(op, e)),
            Err(_) => Err(error::timed_out(op)),
        }
    }

    fn raw(row: &PgRow) -> Result<RawRow> {
        let get = |e| error::map(Op::Read, e);
        Ok(RawRow {
            locked_by: row.try_get("locked_by").map_err(get)?,
            at_us: row.try_get("at_us").map_err(get)?,
            until_us: row.try_get("until_us").map_err(get)?,
            remaining_ms: row.try_get("remaining_ms").map_err(get)?,
            fence: row.try_get("fence").map_err(get)?,
        })
    }

    /// Binds the parts of the version a write or delete expects: `locked_at` and
    /// `lock_until` in microseconds, `locked_by` and, on a fenced table, the fence.
    fn bind_version<'q>(&self, q: PgQuery<'q>, p: &VersionParts<'q>) -> PgQuery<'q> {
        let q = q.bind(p.at).bind(p.until).bind(p.by);
        if self.fenced { q.bind(p.fence) } else { q }
    }

    /// Sends a write of `name` and reads its outcome: whether it applied, and the row
    /// it wrote or, where it did not apply, the row as it stands (if one is visible).
    async fn send(&self, name: &LeaseName, q: PgQuery<'_>) -> Result<(bool, Option<Stored>)> {
        let rows = self.timed(Op::Write, q.fetch_all(&self.pool)).await?;
        let Some(row) = rows.first() else {
            return Ok((false, None));
        };
        let written: bool = row.try_get("written").map_err(|e| error::map(Op::Write, e))?;
        let stored = row::decode(self.fenced, name, &Self::raw(row)?)?;
        Ok((written, Some(stored)))
    }
}

#[async_trait]
impl CasStore for ShedlockStore {
    fn capabilities(&self) -> Capabilities {
        row::capabilities(self.fenced)
    }

    /// One `SELECT` of the Postgres server's clock (ShedLock's `usingDbTime()`).
    async fn store_now_ms(&self) -> Result<Option<u64>> {
        let ms: i64 = self
            .timed(
                Op::Read,
                sqlx::query_scalar(AssertSqlSafe(
                    "SELECT CAST(FLOOR(EXTRACT(EPOCH FROM now()) * 1000) AS BIGINT)".to_owned(),
                ))
                .fetch_one(&self.pool),
            )
            .await?;
        u64::try_from(ms)
            .map(Some)
            .map_err(|_| Error::invalid("the server's clock", format!("{ms} ms is before 1970")))
    }

    async fn read(&self, name: &LeaseName) -> Result<Option<Stored>> {
        self.check_name(name)?;
        let row = self
            .timed(
                Op::Read,
                sqlx::query(AssertSqlSafe(self.sql.read.clone()))
                    .bind(name.as_str())
                    .fetch_optional(&self.pool),
            )
            .await?;
        row.map(|r| row::decode(self.fenced, name, &Self::raw(&r)?)).transpose()
    }

    async fn write(&self, name: &LeaseName, expect: &Precondition, record: &LeaseRecord) -> Result<CasOutcome> {
        self.check_name(name)?;
        let ttl = ttl_param(record)?;
        let by = by_param(record);
        let token = record.token.to_i64()?;
        let outcome = match expect {
            Precondition::Absent => {
                let q = sqlx::query(AssertSqlSafe(self.sql.create.clone()))
                    .bind(name.as_str())
                    .bind(ttl)
                    .bind(&by);
                let q = if self.fenced { q.bind(token) } else { q };
                self.send(name, q).await?
            }
            Precondition::Claimable => {
                if record.is_vacant() {
                    return Err(Error::invalid("record", "a claim must name a holder"));
                }
                let q = sqlx::query(AssertSqlSafe(self.sql.claim.clone()))
                    .bind(name.as_str())
                    .bind(ttl)
                    .bind(&by);
                self.send(name, q).await?
            }
            Precondition::Version(v) => {
                let Some(p) = parse_version(v) else {
                    // Not a version this store ever issued: nothing can match it.
                    return Ok(CasOutcome::Conflict(match self.read(name).await? {
                        Some(s) => Current::Present(s),
                        None => Current::Absent,
                    }));
                };
                let q = sqlx::query(AssertSqlSafe(self.sql.update.clone()))
                    .bind(name.as_str())
                    .bind(ttl)
                    .bind(&by)
                    .bind(token);
                self.send(name, self.bind_version(q, &p)).await?
            }
            _ => return Err(leasehold_core::store::not_taken("a ShedLock table", expect)),
        };
        Ok(match outcome {
            (true, Some(s)) => CasOutcome::Written(s),
            (false, Some(s)) => CasOutcome::Conflict(Current::Present(s)),
            // No row visible to the statement's snapshot: absent, or created by a
            // transaction that committed while this one ran. Let the caller read.
            (_, None) => CasOutcome::Conflict(Current::Unknown),
        })
    }

    /// One `SELECT` of the names under the prefix. A ShedLock lock whose name is not a
    /// valid lease name (ShedLock allows spaces, for one) is left out: this store cannot
    /// read or write it either.
    async fn list(&self, prefix: &NamePrefix) -> Result<Vec<LeaseName>> {
        let names = self
            .timed(
                Op::Read,
                sqlx::query_scalar(AssertSqlSafe(self.sql.list.clone()))
                    .bind(prefix.as_str())
                    .fetch_all(&self.pool),
            )
            .await?;
        Ok(row::lease_names(names))
    }

    async fn delete(&self, name: &LeaseName, version: &Version) -> Result<DeleteOutcome> {
        self.check_name(name)?;
        let Some(p) = parse_version(version) else {
            return Ok(DeleteOutcome::Conflict(Current::Unknown));
        };
        let q = sqlx::query(AssertSqlSafe(self.sql.delete.clone())).bind(name.as_str());
        Ok(match self.send(name, self.bind_version(q, &p)).await? {
            (true, _) => DeleteOutcome::Deleted,
            (false, Some(s)) => DeleteOutcome::Conflict(Current::Present(s)),
            (false, None) => DeleteOutcome::Conflict(Current::Unknown),
        })
    }
}
