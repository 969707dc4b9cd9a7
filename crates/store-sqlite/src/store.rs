//! The SQLite lease store.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use leasehold_core::fence::Dialect;
use leasehold_core::{
    Error, LeaseName, Result,
    store::{
        Capabilities, CasOutcome, CasStore, ClockSource, DeleteOutcome, Grade, LeaseRecord, Linearizable, Precondition,
        Stored, Version,
    },
};
use leasehold_sql::errors::Phase;
use leasehold_sql::schema::{self, ColumnInfo, ColumnLimits};
use leasehold_sql::{LeaseArgs, LeaseStatement, LeaseTable, RawRow, Statements, row, write_statement};
use sqlx::sqlite::{SqlitePoolOptions, SqliteRow};
use sqlx::{AssertSqlSafe, Row, SqlitePool};

use crate::SqliteConfig;
use crate::config::connect_options;
use leasehold_sql::errors::Target;
use leasehold_sql::errors::sqlite::map_error;

/// Lease records in a SQLite table, judged on the host's clock.
///
/// See the [crate docs](crate) for the guarantee, the clock and the setup. Cheap to
/// clone; clones share the pool.
#[derive(Clone)]
pub struct SqliteStore {
    inner: Arc<Inner>,
}

struct Inner {
    pool: SqlitePool,
    table: LeaseTable,
    statements: Statements,
    limits: ColumnLimits,
}

impl fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteStore")
            .field("table", &self.inner.table.display())
            .field("limits", &self.inner.limits)
            .finish_non_exhaustive()
    }
}

const COLUMNS_SQL: &str = "SELECT name, type AS decl_type, \"notnull\" AS not_null, pk FROM pragma_table_info(?1, ?2)";

impl SqliteStore {
    /// The lease table's `CREATE TABLE` as a SQL file, for users who run their own
    /// migrations (the crate ships the default one as `sql/leasehold_leases.sql`).
    ///
    /// # Errors
    /// Never for a valid config; the signature leaves room for other dialects.
    pub fn schema_sql(config: &SqliteConfig) -> Result<String> {
        schema::schema_sql(Dialect::Sqlite, config.lease_table())
    }

    /// Creates the lease table if it does not exist (one idempotent statement; several
    /// processes may call it at once).
    ///
    /// # Errors
    /// [`Error::Misconfigured`] for a read-only or unopenable file; store errors.
    pub async fn provision(pool: &SqlitePool, config: &SqliteConfig) -> Result<()> {
        let sql = schema::create_table(Dialect::Sqlite, config.lease_table())?;
        sqlx::query(AssertSqlSafe(sql))
            .execute(pool)
            .await
            .map_err(|e| map_error(e, Phase::Write, Target::Lease, "create lease table"))?;
        Ok(())
    }

    /// Opens (creating if missing) the database file at `path` with [`connect_options`]
    /// (WAL, `synchronous = FULL`, a busy timeout), creates the lease table if needed, and
    /// opens a store on it: the zero-setup way in.
    ///
    /// # Errors
    /// [`Error::Misconfigured`] when the file cannot be opened or holds a wrong table.
    pub async fn open_file(path: impl AsRef<Path>, config: SqliteConfig) -> Result<Self> {
        // Several processes opening one new file at once can be refused with SQLITE_BUSY
        // without waiting (switching to WAL, or a read upgraded to a write in WAL mode
        // ignores the busy timeout): retry those, within the busy timeout.
        let deadline = tokio::time::Instant::now() + crate::config::DEFAULT_BUSY_TIMEOUT;
        let mut pause = std::time::Duration::from_millis(5);
        loop {
            match Self::open_file_once(path.as_ref(), config.clone()).await {
                Err(e) if e.is_retryable() && tokio::time::Instant::now() + pause < deadline => {
                    tracing::debug!(error = %e, "sqlite file busy while opening; retrying");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(std::time::Duration::from_millis(200));
                }
                other => return other,
            }
        }
    }

    async fn open_file_once(path: &Path, config: SqliteConfig) -> Result<Self> {
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(connect_options(path))
            .await
            .map_err(|e| map_error(e, Phase::Connect, Target::Lease, &format!("open {}", path.display())))?;
        Self::provision(&pool, &config).await?;
        Self::new(pool, config).await
    }

    /// A store on `pool` (connections to one database **file**, shared by the processes
    /// of one host), after checking that the lease table exists with the right columns
    /// and that `name` is its primary key.
    ///
    /// # Errors
    /// [`Error::Misconfigured`] naming what is wrong; store errors.
    pub async fn new(pool: SqlitePool, config: SqliteConfig) -> Result<Self> {
        let table = config.lease_table().clone();
        let limits = Self::check(&pool, &table).await?;
        let statements = Statements::new(Dialect::Sqlite, &table)?;
        Ok(Self {
            inner: Arc::new(Inner {
                pool,
                table,
                statements,
                limits,
            }),
        })
    }

    /// Checks the lease table again (the same checks as [`Self::new`]): run it at
    /// startup or from a health check.
    ///
    /// # Errors
    /// [`leasehold_core::Error::Misconfigured`] naming what is wrong; store errors.
    pub async fn verify(&self) -> Result<()> {
        Self::check(&self.inner.pool, &self.inner.table).await.map(|_| ())
    }

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

    /// The pool the store uses.
    pub fn pool(&self) -> &SqlitePool {
        &self.inner.pool
    }

    /// The lease table.
    pub fn table(&self) -> &LeaseTable {
        &self.inner.table
    }

    /// The longest lease name and holder id the table's columns declare.
    pub fn limits(&self) -> ColumnLimits {
        self.inner.limits
    }

    /// The statements this store runs (for inspection and documentation).
    pub fn statements(&self) -> &Statements {
        &self.inner.statements
    }

    async fn run(
        &self,
        name: &LeaseName,
        statement: &LeaseStatement,
        args: &LeaseArgs,
        phase: Phase,
        what: &str,
    ) -> Result<Vec<RawRow>> {
        let mut conn = self
            .inner
            .pool
            .acquire()
            .await
            .map_err(|e| map_error(e, Phase::Connect, Target::Lease, what))?;
        let query = args.bind(statement, sqlx::query(AssertSqlSafe(statement.sql.clone())));
        let rows: Vec<SqliteRow> = query
            .fetch_all(&mut *conn)
            .await
            .map_err(|e| map_error(e, phase, Target::Lease, what))?;
        rows.iter()
            .map(RawRow::decode)
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| match e {
                // SQLite keeps whatever type a writer stored: a value of the wrong type in
                // a row is a corrupt record, not a wrong schema (that was checked at open).
                sqlx::Error::ColumnDecode { index, source } => {
                    Error::corrupt(name.as_str(), format!("column {index}: {source}"))
                }
                other => map_error(other, phase, Target::Lease, what),
            })
    }
}

#[async_trait]
impl CasStore for SqliteStore {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            clock: ClockSource::Store,
            grade: Grade::Linearizable,
            conflict_returns_current: true,
            notifies_waiters: false,
        }
    }

    async fn read(&self, name: &LeaseName) -> Result<Option<Stored>> {
        let args = LeaseArgs::read(name, &self.inner.limits)?;
        let rows = self
            .run(name, &self.inner.statements.read, &args, Phase::Read, "read lease")
            .await?;
        row::read_outcome(name, &rows)
    }

    async fn write(&self, name: &LeaseName, expect: &Precondition, record: &LeaseRecord) -> Result<CasOutcome> {
        let args = LeaseArgs::write(name, &self.inner.limits, expect, record)?;
        let statement = write_statement(&self.inner.statements, expect);
        let rows = self.run(name, statement, &args, Phase::Write, "write lease").await?;
        row::write_outcome(name, expect, &rows)
    }

    async fn delete(&self, name: &LeaseName, version: &Version) -> Result<DeleteOutcome> {
        let args = LeaseArgs::delete(name, &self.inner.limits, version)?;
        let rows = self
            .run(name, &self.inner.statements.delete, &args, Phase::Write, "delete lease")
            .await?;
        row::delete_outcome(name, &rows)
    }
}

impl Linearizable for SqliteStore {}
