//! The SQL lease store, written once for every database: one statement per operation
//! (from [`Statements`]), rows decoded by [`crate::row`], errors classified by the
//! database's [`SqlDatabase::map_error`]. A store crate supplies a [`SqlBackend`]: the
//! catalog check of the lease table, how to create it, and (if the database can push)
//! a [`ChangeFeed`] of releases.

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use leasehold_core::store::{
    Capabilities, CasOutcome, CasStore, ClockSource, Current, DeleteOutcome, Grade, LeaseRecord, Linearizable,
    Precondition, Renewal, Stored, Version, Wait, send_batch,
};
use leasehold_core::{Error, LeaseName, NamePrefix, Result};
use sqlx::Pool;

use crate::database::RunError;
use crate::errors::{Phase, Target};
use crate::listing;
use crate::schema::{self, ColumnLimits};
use crate::{
    HostClock, LeaseArgs, LeaseStatement, LeaseTable, RawRow, RenewBatch, RenewalArgs, SqlConfig, SqlDatabase,
    Statements, row, row::Guard, write_statement,
};

/// What a store crate supplies for its database.
#[async_trait]
pub trait SqlBackend: Send + Sync + 'static {
    /// The sqlx database.
    type Db: SqlDatabase;

    /// The store's name in messages and `Debug` (`"PostgresStore"`).
    const STORE: &'static str;

    /// Reads the catalog and checks the lease table: its columns, that `name` is its
    /// key, that the connection may write it. Returns what its columns hold.
    ///
    /// # Errors
    /// [`Error::NotProvisioned`] when the table (or a column `provision` adds) is
    /// missing; [`Error::Misconfigured`] naming what else is wrong; store errors.
    async fn check(pool: &Pool<Self::Db>, table: &LeaseTable) -> Result<ColumnLimits>;

    /// Runs the lease table's idempotent `CREATE TABLE` (`sql`), safely when several
    /// processes do it at once. By default the statement alone: SQLite's file lock and
    /// MySQL's metadata lock queue racing creators, and the ones behind find the table
    /// made.
    ///
    /// # Errors
    /// Store errors, classified.
    async fn create(pool: &Pool<Self::Db>, sql: &str) -> Result<()> {
        <Self::Db as SqlDatabase>::execute(pool, sql)
            .await
            .map_err(|e| <Self::Db as SqlDatabase>::map_error(e, Phase::Write, Target::Lease, "create lease table"))?;
        Ok(())
    }

    /// The feed of releases that wakes waiters, if the database can push one.
    fn feed(pool: &Pool<Self::Db>, table: &LeaseTable) -> Option<Arc<dyn ChangeFeed>>;

    /// Brings an existing lease table created by an earlier version up to date (SQLite:
    /// adds the `boot_id` column), after [`SqlBackend::create`]; safe when several
    /// processes do it at once. By default nothing.
    ///
    /// # Errors
    /// Store errors, classified.
    async fn upgrade(pool: &Pool<Self::Db>, table: &LeaseTable) -> Result<()> {
        let _ = (pool, table);
        Ok(())
    }
}

/// Releases pushed by the database (Postgres: `LISTEN`/`NOTIFY`), waking waiters.
#[async_trait]
pub trait ChangeFeed: Send + Sync + 'static {
    /// A write showed `name` at `version`: a wake-up handed out for an older release is
    /// used up.
    fn claimed(&self, name: &LeaseName, version: &Version);

    /// Waits until `name` may have changed from `seen` in the way `wait` asks for, or
    /// until it is time to look again (see [`Wait`]).
    async fn wait(&self, name: &LeaseName, seen: Option<&Version>, wait: Wait);
}

/// Lease records in a SQL table, judged on the database's clock (Postgres: the server's
/// `now()`; SQLite: the host's boot clock, [`HostClock`]). Cheap to clone; clones
/// share the pool (and the change feed).
pub struct SqlStore<B: SqlBackend> {
    inner: Arc<Inner<B>>,
}

struct Inner<B: SqlBackend> {
    pool: Pool<B::Db>,
    table: LeaseTable,
    statements: Statements,
    list_sql: String,
    purge_sql: String,
    limits: ColumnLimits,
    feed: Option<Arc<dyn ChangeFeed>>,
    clock: Option<&'static HostClock>,
    request_timeout: Duration,
    backend: PhantomData<fn() -> B>,
}

impl<B: SqlBackend> Clone for SqlStore<B> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

impl<B: SqlBackend> fmt::Debug for SqlStore<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct(B::STORE)
            .field("table", &self.inner.table.display())
            .field("limits", &self.inner.limits)
            .finish_non_exhaustive()
    }
}

impl<B: SqlBackend> SqlStore<B> {
    /// The lease table's `CREATE TABLE` as a SQL file, for users who run their own
    /// migrations (the store crates ship the default one as `sql/leasehold_leases.sql`).
    ///
    /// # Errors
    /// Never for a valid config; the signature leaves room for other dialects.
    pub fn schema_sql(config: &SqlConfig) -> Result<String> {
        schema::schema_sql(B::Db::DIALECT, config.lease_table())
    }

    /// Creates the lease table if it does not exist, or adds the columns an earlier
    /// version's table lacks (idempotent; several processes may call it at once). Needs
    /// the privilege to create tables.
    ///
    /// # Errors
    /// [`Error::Misconfigured`] without the privilege or schema, or for a read-only
    /// database; store errors.
    pub async fn provision(pool: &Pool<B::Db>, config: &SqlConfig) -> Result<()> {
        let sql = schema::create_table(B::Db::DIALECT, config.lease_table())?;
        B::create(pool, &sql).await?;
        B::upgrade(pool, config.lease_table()).await
    }

    /// A store on `pool`, after checking the lease table: its columns, that `name` is
    /// its primary key, and what the database needs besides (Postgres: the role may
    /// write it, the server is the primary).
    ///
    /// # Errors
    /// [`Error::NotProvisioned`] when the table (or a column `provision` adds) is
    /// missing; [`Error::Misconfigured`] naming what else is wrong; store errors.
    pub async fn new(pool: Pool<B::Db>, config: SqlConfig) -> Result<Self> {
        let table = config.lease_table().clone();
        let limits = B::check(&pool, &table).await?;
        let statements = Statements::new(B::Db::DIALECT, &table)?;
        let clock = if statements.use_host_clock() {
            Some(HostClock::get()?)
        } else {
            None
        };
        let feed = B::feed(&pool, &table);
        Ok(Self {
            inner: Arc::new(Inner {
                list_sql: listing::list_sql(B::Db::DIALECT, &table),
                purge_sql: listing::purge_sql(B::Db::DIALECT, &table),
                pool,
                table,
                statements,
                limits,
                feed,
                clock,
                request_timeout: config.request_timeout(),
                backend: PhantomData,
            }),
        })
    }

    /// Checks the lease table again (the same checks as [`Self::new`]): run it at
    /// startup or from a health check.
    ///
    /// # Errors
    /// [`Error::NotProvisioned`] when the table (or a column `provision` adds) is
    /// missing; [`Error::Misconfigured`] naming what else is wrong; store errors.
    pub async fn verify(&self) -> Result<()> {
        B::check(&self.inner.pool, &self.inner.table).await.map(|_| ())
    }

    /// The pool the store uses.
    pub fn pool(&self) -> &Pool<B::Db> {
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
}

impl<B: SqlBackend> SqlStore<B> {
    async fn run(
        &self,
        name: &LeaseName,
        statement: &LeaseStatement,
        args: &LeaseArgs,
        phase: Phase,
        what: &str,
    ) -> Result<Vec<RawRow>> {
        let fetch = B::Db::fetch_lease_rows(&self.inner.pool, statement, args);
        let ran = self.in_time(phase, || format!("{what} {name}"), fetch).await?;
        ran.map_err(|e| match e {
            // The table's columns were checked at open: a value of the wrong type in
            // a row (SQLite keeps whatever a writer stored) is a corrupt record.
            RunError::Statement(sqlx::Error::ColumnDecode { index, source }) => {
                Error::corrupt(name.as_str(), format!("column {index}: {source}"))
            }
            e => Self::failed(e, phase, what),
        })
    }

    /// What `op` (a statement on the lease table, in `phase`) answered within the
    /// request timeout. No answer in time is [`Error::Indeterminate`] for a write (it may
    /// have been sent, and applied) and [`Error::Unavailable`] otherwise; `doing` names
    /// the operation in its message.
    async fn in_time<T>(&self, phase: Phase, doing: impl FnOnce() -> String, op: impl Future<Output = T>) -> Result<T> {
        let bound = self.inner.request_timeout;
        let Ok(ran) = tokio::time::timeout(bound, op).await else {
            // The statement may have been sent: a write may have applied.
            let message = format!("{}: no answer within the request timeout of {bound:?}", doing());
            return Err(match phase {
                Phase::Write => Error::Indeterminate { message, source: None },
                Phase::Read | Phase::Connect => Error::Unavailable { message, source: None },
            });
        };
        Ok(ran)
    }

    /// A statement on the lease table for `what`, in `phase`, that failed: classified by
    /// the database, as [`Phase::Connect`] when it failed to get a connection.
    fn failed(e: RunError, phase: Phase, what: &str) -> Error {
        match e {
            RunError::Connect(e) => B::Db::map_error(e, Phase::Connect, Target::Lease, what),
            RunError::Statement(e) => B::Db::map_error(e, phase, Target::Lease, what),
        }
    }

    /// [`Self::in_time`] with a failure of `op` classified ([`Self::failed`]).
    async fn bounded<T>(
        &self,
        phase: Phase,
        what: &str,
        doing: impl FnOnce() -> String,
        op: impl Future<Output = std::result::Result<T, RunError>>,
    ) -> Result<T> {
        self.in_time(phase, doing, op)
            .await?
            .map_err(|e| Self::failed(e, phase, what))
    }

    /// Runs `statement`, a renewal or release of `record` held at `version`
    /// ([`Guard::held`]).
    async fn held_write(
        &self,
        name: &LeaseName,
        statement: &LeaseStatement,
        version: &Version,
        record: &LeaseRecord,
    ) -> Result<CasOutcome> {
        let expect = Precondition::Version(version.clone());
        self.write_with(name, statement, &expect, Guard::held(version, record), record)
            .await
    }

    /// The rows of the read statement for `name` (one, or none), run for `what`.
    async fn read_rows(&self, name: &LeaseName, what: &str) -> Result<Vec<RawRow>> {
        let args = LeaseArgs::read(name, &self.inner.limits)?.with_clock(self.inner.clock);
        self.run(name, &self.inner.statements.read, &args, Phase::Read, what)
            .await
    }

    /// Runs the conditional write `statement` of `record` on `expect`, and reads the
    /// current row when a refused one returns none.
    async fn write_with(
        &self,
        name: &LeaseName,
        statement: &LeaseStatement,
        expect: &Precondition,
        guard: Guard<'_>,
        record: &LeaseRecord,
    ) -> Result<CasOutcome> {
        let args = LeaseArgs::write(name, &self.inner.limits, expect, record)?.with_clock(self.inner.clock);
        let mut rows = self.run(name, statement, &args, Phase::Write, "write lease").await?;
        if rows.is_empty()
            && matches!(expect, Precondition::Version(_))
            && (self.inner.statements.read_after_refused_version_write || statement.reply.is_counted())
        {
            // The write was refused and changed nothing: what is there now answers it.
            rows = self.read_rows(name, "read lease after a refused write").await?;
        }
        let outcome = row::write_outcome(name, guard, &rows)?;
        if let Some(feed) = &self.inner.feed {
            // What the write showed ends a wake-up handed out for an older release.
            match &outcome {
                CasOutcome::Written(s) | CasOutcome::Conflict(Current::Present(s)) => feed.claimed(name, &s.version),
                CasOutcome::Conflict(_) => {}
            }
        }
        Ok(outcome)
    }
}

/// How many renewals one batch carries ([`RenewBatch`]).
pub const RENEWAL_BATCH: usize = 256;

impl<B: SqlBackend> SqlStore<B> {
    /// The renewals of `batch` in one request ([`RenewBatch`]: one statement on
    /// Postgres, an `UPDATE` and its read on MySQL):
    /// renewals whose values are refused before sending answer with their own error,
    /// and a failure of the statement is each sent renewal's.
    async fn renew_batched(&self, statements: &RenewBatch, batch: &[Renewal]) -> Vec<Result<CasOutcome>> {
        let check = |r: &Renewal| RenewalArgs::check(&r.name, &self.inner.limits, &r.version, &r.record);
        send_batch(batch, check, |ready| async move {
            let rows = self
                .run_renewals(statements, &RenewalArgs::of(ready.iter().map(|(_, a)| a)))
                .await?;
            // Each row names its renewal's position in the arrays, from 1.
            let mut by_position: Vec<Vec<RawRow>> = vec![Vec::new(); ready.len()];
            for (position, row) in rows {
                let slot = usize::try_from(position)
                    .ok()
                    .and_then(|p| by_position.get_mut(p.wrapping_sub(1)));
                if let Some(slot) = slot {
                    slot.push(row);
                }
            }
            Ok(ready
                .iter()
                .zip(&by_position)
                .map(|((r, _), rows)| {
                    let outcome = row::write_outcome(&r.name, Guard::held(&r.version, &r.record), rows);
                    if let (Some(feed), Ok(CasOutcome::Written(s) | CasOutcome::Conflict(Current::Present(s)))) =
                        (&self.inner.feed, &outcome)
                    {
                        feed.claimed(&r.name, &s.version);
                    }
                    outcome
                })
                .collect())
        })
        .await
    }

    async fn run_renewals(&self, statements: &RenewBatch, args: &RenewalArgs) -> Result<Vec<(i64, RawRow)>> {
        let what = "renew leases";
        let fetch = B::Db::fetch_renewal_rows(&self.inner.pool, statements, args);
        self.bounded(Phase::Write, what, || what.to_owned(), fetch).await
    }
}

#[async_trait]
impl<B: SqlBackend> CasStore for SqlStore<B> {
    fn capabilities(&self) -> Capabilities {
        Capabilities::new(ClockSource::Store, Grade::Linearizable)
            .with_conflict_returns_current(self.inner.statements.conflict_returns_current)
            .with_notifies_waiters(self.inner.feed.is_some())
    }

    async fn read(&self, name: &LeaseName) -> Result<Option<Stored>> {
        let rows = self.read_rows(name, "read lease").await?;
        row::read_outcome(name, &rows)
    }

    async fn write(&self, name: &LeaseName, expect: &Precondition, record: &LeaseRecord) -> Result<CasOutcome> {
        let statement = write_statement(&self.inner.statements, expect)?;
        self.write_with(name, statement, expect, Guard::of(expect, record.token)?, record)
            .await
    }

    /// One statement that extends the expiry only while the row shows this holder with
    /// this token: it never writes either back over an operator's change. A refused
    /// one answers by count on every database, and is followed by a read of the row.
    async fn renew(&self, name: &LeaseName, version: &Version, record: &LeaseRecord) -> Result<CasOutcome> {
        self.held_write(name, &self.inner.statements.renew, version, record)
            .await
    }

    /// Postgres and MySQL: [`RENEWAL_BATCH`]; SQLite: 1 (one statement per renewal).
    fn renewal_batch(&self) -> usize {
        if self.inner.statements.renew_batch.is_some() {
            RENEWAL_BATCH
        } else {
            1
        }
    }

    /// Postgres: one statement for the whole batch, each row guarded by its own version,
    /// holder and token; MySQL: one `UPDATE` so guarded and one read of the rows
    /// ([`RenewBatch`]). SQLite: one renewal at a time.
    async fn renew_many(&self, batch: &[Renewal]) -> Vec<Result<CasOutcome>> {
        match &self.inner.statements.renew_batch {
            Some(statements) if batch.len() > 1 => self.renew_batched(statements, batch).await,
            _ => {
                let mut out = Vec::with_capacity(batch.len());
                for r in batch {
                    out.push(self.renew(&r.name, &r.version, &r.record).await);
                }
                out
            }
        }
    }

    /// One statement that leaves the row vacant only while it shows this holder with
    /// this token: a row an operator changed by hand (its version untouched) stays as
    /// they left it.
    async fn release(&self, name: &LeaseName, version: &Version, held: &LeaseRecord) -> Result<CasOutcome> {
        if held.is_vacant() {
            return Err(Error::invalid("record", "a release names the holder it releases"));
        }
        self.held_write(name, &self.inner.statements.release, version, held)
            .await
    }

    async fn delete(&self, name: &LeaseName, version: &Version) -> Result<DeleteOutcome> {
        let args = LeaseArgs::delete(name, &self.inner.limits, version)?.with_clock(self.inner.clock);
        let mut rows = self
            .run(name, &self.inner.statements.delete, &args, Phase::Write, "delete lease")
            .await?;
        if rows.is_empty() && !self.inner.statements.conflict_returns_current {
            // (MySQL) the delete was refused and says only that: what is there answers it.
            rows = self.read_rows(name, "read lease after a refused delete").await?;
        }
        row::delete_outcome(name, version, &rows)
    }

    /// One `DELETE` of the row at this version, tombstone and all: the name's token
    /// sequence ends with it.
    async fn purge(&self, name: &LeaseName, version: &Version) -> Result<DeleteOutcome> {
        let what = "purge lease";
        let run = B::Db::execute_on_name(
            &self.inner.pool,
            &self.inner.purge_sql,
            name.as_str(),
            row::version_arg(version),
        );
        let removed = self
            .bounded(Phase::Write, what, || format!("{what} {name}"), run)
            .await?;
        Ok(if removed > 0 {
            DeleteOutcome::Deleted
        } else {
            DeleteOutcome::Conflict(Current::Unknown)
        })
    }

    /// One `SELECT` of the names under the prefix that are not tombstones.
    async fn list(&self, prefix: &NamePrefix) -> Result<Vec<LeaseName>> {
        let what = "list lease names";
        let fetch = B::Db::fetch_names(&self.inner.pool, &self.inner.list_sql, prefix.as_str());
        let raw = self
            .bounded(Phase::Read, what, || format!("{what} under {prefix:?}"), fetch)
            .await?;
        Ok(listing::names(raw))
    }

    /// Postgres and MySQL: one `SELECT` of the server's clock. SQLite: the host's
    /// real-time clock ([`HostClock::wall_ms`]), no round trip.
    async fn store_now_ms(&self) -> Result<Option<u64>> {
        let Some(sql) = crate::statements::server_now_ms_sql(B::Db::DIALECT) else {
            return Ok(Some(HostClock::get()?.wall_ms()));
        };
        let what = "read the server's clock";
        let fetch = B::Db::fetch_i64(&self.inner.pool, &sql);
        let ms = self.bounded(Phase::Read, what, || what.to_owned(), fetch).await?;
        u64::try_from(ms)
            .map(Some)
            .map_err(|_| Error::invalid("the server's clock", format!("{ms} ms is before 1970")))
    }

    async fn wait_for_change(&self, name: &LeaseName, seen: Option<&Version>, wait: Wait) -> Result<()> {
        match &self.inner.feed {
            Some(feed) => feed.wait(name, seen, wait).await,
            None => tokio::time::sleep(wait.after()).await,
        }
        Ok(())
    }
}

impl<B: SqlBackend> Linearizable for SqlStore<B> {}
