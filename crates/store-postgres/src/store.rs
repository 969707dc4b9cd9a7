//! The Postgres lease store.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use leasehold_core::fence::Dialect;
use leasehold_core::{
    LeaseName, Result,
    store::{
        Capabilities, CasOutcome, CasStore, ClockSource, Current, DeleteOutcome, Grade, LeaseRecord, Linearizable,
        Precondition, Stored, Version,
    },
};
use leasehold_sql::errors::Phase;
use leasehold_sql::schema::{self, ColumnInfo, ColumnLimits};
use leasehold_sql::{LeaseArgs, LeaseStatement, LeaseTable, RawRow, Statements, row, write_statement};
use sqlx::postgres::PgRow;
use sqlx::{AssertSqlSafe, PgPool, Row};

use crate::PostgresConfig;
use crate::notify::Waiters;
use leasehold_sql::errors::Target;
use leasehold_sql::errors::postgres::map_error;

/// Lease records in a Postgres table, judged on the server's clock.
///
/// See the [crate docs](crate) for the guarantee, the clock and the setup. Cheap to
/// clone; clones share the pool and the `LISTEN` connection.
#[derive(Clone)]
pub struct PostgresStore {
    inner: Arc<Inner>,
}

struct Inner {
    pool: PgPool,
    table: LeaseTable,
    statements: Statements,
    limits: ColumnLimits,
    waiters: Waiters,
}

impl fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresStore")
            .field("table", &self.inner.table.display())
            .field("limits", &self.inner.limits)
            .finish_non_exhaustive()
    }
}

const COLUMNS_SQL: &str = "SELECT a.attname::text AS name, format_type(a.atttypid, a.atttypmod) AS decl_type, \
     a.attnotnull AS not_null FROM pg_attribute a \
     WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum";

const TABLE_FACTS_SQL: &str = "SELECT pg_is_in_recovery() AS standby, \
     EXISTS (SELECT 1 FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0] \
       WHERE i.indrelid = to_regclass($1) AND i.indisunique AND i.indnkeyatts = 1 AND i.indpred IS NULL \
       AND a.attname = 'name') AS name_unique, \
     COALESCE(has_table_privilege(to_regclass($1), 'SELECT, INSERT, UPDATE'), FALSE) AS writable";

impl PostgresStore {
    /// The lease table's `CREATE TABLE` as a SQL file, for users who run their own
    /// migrations (the crate ships the default one as `sql/leasehold_leases.sql`).
    ///
    /// # Errors
    /// Never for a valid config; the signature leaves room for other dialects.
    pub fn schema_sql(config: &PostgresConfig) -> Result<String> {
        schema::schema_sql(Dialect::Postgres, config.lease_table())
    }

    /// Creates the lease table if it does not exist (one idempotent statement, run
    /// through [`run_ddl_serialized`](crate::run_ddl_serialized), so several processes
    /// may call it at once). Needs `CREATE` on the schema.
    ///
    /// # Errors
    /// [`leasehold_core::Error::Misconfigured`] without the privilege or schema; store errors.
    pub async fn provision(pool: &PgPool, config: &PostgresConfig) -> Result<()> {
        let sql = schema::create_table(Dialect::Postgres, config.lease_table())?;
        crate::run_ddl_serialized(pool, &[&sql])
            .await
            .map_err(|e| map_error(e, Phase::Write, Target::Lease, "create lease table"))
    }

    /// A store on `pool` (which must reach the **primary**), after checking that the
    /// lease table exists with the right columns, that `name` is its primary key, that
    /// the role may read and write it, and that the server is not a standby.
    ///
    /// # Errors
    /// [`leasehold_core::Error::Misconfigured`] naming what is wrong; store errors.
    pub async fn new(pool: PgPool, config: PostgresConfig) -> Result<Self> {
        let table = config.lease_table().clone();
        let limits = Self::check(&pool, &table).await?;
        let statements = Statements::new(Dialect::Postgres, &table)?;
        let waiters = Waiters::new(pool.clone(), table.channel());
        Ok(Self {
            inner: Arc::new(Inner {
                pool,
                table,
                statements,
                limits,
                waiters,
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

    async fn check(pool: &PgPool, table: &LeaseTable) -> Result<ColumnLimits> {
        let regclass = table.quoted(Dialect::Postgres);
        let ctx = format!("check lease table {}", table.display());
        let rows = sqlx::query(COLUMNS_SQL)
            .bind(&regclass)
            .fetch_all(pool)
            .await
            .map_err(|e| map_error(e, Phase::Read, Target::Lease, &ctx))?;
        let columns = rows
            .iter()
            .map(|r| {
                Ok(ColumnInfo {
                    name: r.try_get("name")?,
                    decl_type: r.try_get("decl_type")?,
                    not_null: r.try_get("not_null")?,
                })
            })
            .collect::<std::result::Result<Vec<_>, sqlx::Error>>()
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

    /// The pool the store uses.
    pub fn pool(&self) -> &PgPool {
        &self.inner.pool
    }

    /// The lease table.
    pub fn table(&self) -> &LeaseTable {
        &self.inner.table
    }

    /// The longest lease name and holder id the table's columns hold.
    pub fn limits(&self) -> ColumnLimits {
        self.inner.limits
    }

    /// The statements this store runs (for inspection and documentation).
    pub fn statements(&self) -> &Statements {
        &self.inner.statements
    }

    async fn run(&self, statement: &LeaseStatement, args: &LeaseArgs, phase: Phase, what: &str) -> Result<Vec<RawRow>> {
        let mut conn = self
            .inner
            .pool
            .acquire()
            .await
            .map_err(|e| map_error(e, Phase::Connect, Target::Lease, what))?;
        let query = args.bind(statement, sqlx::query(AssertSqlSafe(statement.sql.clone())));
        let rows: Vec<PgRow> = query
            .fetch_all(&mut *conn)
            .await
            .map_err(|e| map_error(e, phase, Target::Lease, what))?;
        rows.iter()
            .map(RawRow::decode)
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| map_error(e, phase, Target::Lease, what))
    }
}

#[async_trait]
impl CasStore for PostgresStore {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            clock: ClockSource::Store,
            grade: Grade::Linearizable,
            conflict_returns_current: true,
            notifies_waiters: true,
        }
    }

    async fn read(&self, name: &LeaseName) -> Result<Option<Stored>> {
        let args = LeaseArgs::read(name, &self.inner.limits)?;
        let rows = self
            .run(&self.inner.statements.read, &args, Phase::Read, "read lease")
            .await?;
        row::read_outcome(name, &rows)
    }

    async fn write(&self, name: &LeaseName, expect: &Precondition, record: &LeaseRecord) -> Result<CasOutcome> {
        let args = LeaseArgs::write(name, &self.inner.limits, expect, record)?;
        let statement = write_statement(&self.inner.statements, expect);
        let rows = self.run(statement, &args, Phase::Write, "write lease").await?;
        let outcome = row::write_outcome(name, expect, &rows)?;
        // What the write showed ends a wake-up handed out for an older release.
        match &outcome {
            CasOutcome::Written(s) | CasOutcome::Conflict(Current::Present(s)) => {
                self.inner.waiters.claimed(name, &s.version);
            }
            CasOutcome::Conflict(_) => {}
        }
        Ok(outcome)
    }

    async fn delete(&self, name: &LeaseName, version: &Version) -> Result<DeleteOutcome> {
        let args = LeaseArgs::delete(name, &self.inner.limits, version)?;
        let rows = self
            .run(&self.inner.statements.delete, &args, Phase::Write, "delete lease")
            .await?;
        row::delete_outcome(name, &rows)
    }

    async fn wait_for_change(&self, name: &LeaseName, seen: Option<&Version>, max_wait: Duration) -> Result<()> {
        self.inner.waiters.wait(name, seen, max_wait).await;
        Ok(())
    }
}

impl Linearizable for PostgresStore {}
