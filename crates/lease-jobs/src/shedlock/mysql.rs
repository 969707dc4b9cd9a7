//! The `CasStore` over ShedLock's table in MySQL or MariaDB.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use leasehold_core::fence::{Dialect, Ident};
use leasehold_core::{
    ClientConfig, Error, LeaseClient, LeaseName, NamePrefix, Result,
    store::{Capabilities, CasOutcome, CasStore, Current, DeleteOutcome, LeaseRecord, Precondition, Stored, Version},
};
use leasehold_sql::errors::mysql::{map_error_for, number, number_of};
use leasehold_sql::errors::{Phase, Target};
use leasehold_sql::schema::MYSQL_ENGINE;
use sqlx::mysql::{MySql, MySqlPool, MySqlPoolOptions, MySqlRow};
use sqlx::{AssertSqlSafe, Row, Transaction};

use super::ShedlockConfig;
use super::columns::{Column, Columns, misconfigured, split_table};
use super::row::{self, RawRow, VersionParts, by_param, parse_version, ttl_param};

/// Leases kept in ShedLock's own `shedlock` table in MySQL or MariaDB (InnoDB), so Rust
/// instances and Java ShedLock instances (`JdbcTemplateLockProvider` with
/// `.usingDbTime()`) of one service exclude each other.
///
/// ## Setup
/// ShedLock's table, as its documentation gives it for MySQL:
///
/// ```sql
/// CREATE TABLE shedlock (name VARCHAR(64) NOT NULL, lock_until TIMESTAMP(3) NOT NULL,
///     locked_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
///     locked_by VARCHAR(255) NOT NULL, PRIMARY KEY (name)) ENGINE=InnoDB;
/// -- Optional, and recommended: the fence column that makes tokens linearizable.
/// ALTER TABLE shedlock ADD COLUMN fence BIGINT;
/// ```
///
/// ([`ShedlockMySqlStore::provision`] runs exactly this.) `DATETIME` columns and
/// other fractional precisions work too: the times this store writes are cut to the
/// columns' precision. The table must be InnoDB (a store refuses another engine with
/// [`Error::Misconfigured`]). The session time zone must be UTC (sqlx's default,
/// `+00:00`): ShedLock's MySQL statements store `UTC_TIMESTAMP(3)`, and a `TIMESTAMP`
/// column converts from the session's zone; [`ShedlockMySqlStore::new`] refuses a
/// pool whose sessions are not on UTC.
///
/// ## How a Rust lease maps onto a ShedLock row
/// As for Postgres ([the module docs](super)): `locked_by` is the holder (`''` when
/// released, with `lock_until = now`), expiry is `lock_until <= UTC_TIMESTAMP(3)` on the
/// server's clock, as ShedLock's own `UPDATE … WHERE lock_until <= UTC_TIMESTAMP(3)`,
/// tokens live in `fence` (linearizable) or are `locked_at` in microseconds
/// (efficiency-only). Names compare by the table's collation, as ShedLock's do
/// (case-insensitive under MySQL's default collations: `Job` and `job` are one lock).
///
/// ## Cost
/// MySQL has no `RETURNING` on `UPDATE` (MariaDB 10.11 neither), so a write is a short
/// transaction: `BEGIN`, a `SELECT … FOR UPDATE` of the row with the server's clock,
/// the write decided on what that read (the row stays locked, so nothing changes in
/// between; the times written are the clock just read), `COMMIT`: four round trips.
/// A refused write returns the row it read ([`Capabilities::conflict_returns_current`]
/// is true). A read is one `SELECT`.
#[derive(Clone)]
pub struct ShedlockMySqlStore {
    pool: MySqlPool,
    sql: Arc<Sql>,
    fenced: bool,
    name_len: usize,
    /// The time columns' fractional digits, as a unit in microseconds (1000 for 3).
    unit_us: i64,
    timeout: Duration,
    table: String,
}

impl fmt::Debug for ShedlockMySqlStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        row::fmt_store(f, "ShedlockMySqlStore", &self.table, self.fenced)
    }
}

/// A time column in microseconds since 1970, as UTC wall time.
fn micros(col: &str) -> String {
    format!("TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', {col})")
}

/// A bound microsecond count as a time value.
const AT: &str = "TIMESTAMPADD(MICROSECOND, ?, '1970-01-01 00:00:00')";

/// The statements for one table.
#[derive(Debug)]
struct Sql {
    /// `?` name: the row (or nulls) and the clock; `FOR UPDATE` appended inside writes.
    read: String,
    insert: String,
    update: String,
    delete: String,
    list: String,
}

impl Sql {
    fn build(t: &str, fence: Option<&str>) -> Self {
        let fence_col = fence.map_or_else(|| "NULL".to_owned(), |f| format!("r.{f}"));
        let read = format!(
            "SELECT {now} AS now_us, CAST(r.name IS NOT NULL AS SIGNED) AS present, r.locked_by AS locked_by, {at} AS at_us, {until} AS until_us, \
             CAST({fence_col} AS SIGNED) AS fence \
             FROM (SELECT 1 AS one) n LEFT JOIN {t} r ON r.name = ?",
            now = micros("UTC_TIMESTAMP(6)"),
            at = micros("r.locked_at"),
            until = micros("r.lock_until"),
        );
        let (insert, update) = match fence {
            Some(f) => (
                format!("INSERT INTO {t} (name, lock_until, locked_at, locked_by, {f}) VALUES (?, {AT}, {AT}, ?, ?)"),
                format!("UPDATE {t} SET lock_until = {AT}, locked_at = {AT}, locked_by = ?, {f} = ? WHERE name = ?"),
            ),
            None => (
                format!("INSERT INTO {t} (name, lock_until, locked_at, locked_by) VALUES (?, {AT}, {AT}, ?)"),
                format!("UPDATE {t} SET lock_until = {AT}, locked_at = {AT}, locked_by = ? WHERE name = ?"),
            ),
        };
        Self {
            read,
            insert,
            update,
            delete: format!("DELETE FROM {t} WHERE name = ?"),
            list: format!("SELECT name FROM {t} WHERE BINARY LEFT(name, CHAR_LENGTH(?)) = BINARY ?"),
        }
    }
}

/// The row as a locking read found it, with the server's clock.
struct Found {
    now_us: i64,
    row: Option<RawRow>,
}

/// What a write decided.
enum Step {
    /// Write these values (name, at, until, locked_by, fence) by insert or update.
    Put {
        insert: bool,
        at: i64,
        until: i64,
        by: String,
        fence: Option<i64>,
        ttl_ms: i64,
    },
    Delete,
    Refuse(Current),
}

fn found_of(row: &MySqlRow) -> std::result::Result<Found, sqlx::Error> {
    let at_us: Option<i64> = row.try_get("at_us")?;
    let locked_by: Option<String> = row.try_get("locked_by")?;
    let now_us: i64 = row.try_get("now_us")?;
    let until_us: Option<i64> = row.try_get("until_us")?;
    let present: i64 = row.try_get("present")?;
    Ok(Found {
        now_us,
        row: (present != 0).then(|| RawRow {
            locked_by,
            at_us,
            until_us,
            remaining_ms: until_us.map(|u| (u - now_us).max(0) / 1000),
            fence: row.try_get("fence").ok().flatten(),
        }),
    })
}

/// Maps a driver error from `phase` of an operation on the ShedLock table.
fn map_error(e: sqlx::Error, phase: Phase, context: &str) -> Error {
    let remedy = "run ShedlockMySqlStore::provision or ShedLock's DDL";
    map_error_for(e, phase, Target::Lease, context, remedy)
}

fn timed_out(phase: Phase) -> Error {
    let message = "mysql call timed out".to_owned();
    match phase {
        Phase::Write => Error::Indeterminate { message, source: None },
        _ => Error::Unavailable { message, source: None },
    }
}

/// A write's values as the row takes them, checked before anything is sent.
struct Params {
    ttl: i64,
    by: String,
    token: i64,
}

impl Params {
    /// # Errors
    /// [`Error::InvalidInput`] for a TTL or token the row cannot hold, or a claim that
    /// names no holder.
    fn of(expect: &Precondition, record: &LeaseRecord) -> Result<Self> {
        if matches!(expect, Precondition::Claimable) && record.is_vacant() {
            return Err(Error::invalid("record", "a claim must name a holder"));
        }
        Ok(Self {
            ttl: ttl_param(record)?,
            by: by_param(record),
            token: record.token.to_i64()?,
        })
    }
}

impl ShedlockMySqlStore {
    /// Connects to `url` (a `mysql://` URL) and opens the table.
    ///
    /// # Errors
    /// [`Error::Unavailable`] if the server cannot be reached; as [`ShedlockMySqlStore::new`].
    pub async fn connect(url: &str, config: ShedlockConfig) -> Result<Self> {
        let pool = MySqlPoolOptions::new()
            .max_connections(8)
            .acquire_timeout(config.timeout)
            .connect(url)
            .await
            .map_err(|e| map_error(e, Phase::Connect, "connect to mysql"))?;
        Self::new(pool, config).await
    }

    /// Opens the table on an existing pool: checks that it exists with ShedLock's
    /// columns in InnoDB, whether it has the fence column, and that sessions are on UTC.
    ///
    /// # Errors
    /// [`Error::NotProvisioned`] for a missing table; [`Error::Misconfigured`] for a
    /// table this user may not read, a missing column, an unexpected column
    /// type, another engine than InnoDB or a session time zone other than UTC;
    /// [`Error::InvalidInput`] for a bad table or column name.
    pub async fn new(pool: MySqlPool, config: ShedlockConfig) -> Result<Self> {
        let ident = Ident::table(&config.table)?;
        let fence_ident = Ident::column(&config.fence_column)?;
        let (schema, table) = split_table(&config.table);
        let failed = |e| map_error(e, Phase::Read, "check shedlock table");
        let quoted = ident.quoted(Dialect::MySql);
        let check = async {
            let columns = sqlx::query(
                "SELECT COLUMN_NAME AS name, DATA_TYPE AS ty, CAST(CHARACTER_MAXIMUM_LENGTH AS SIGNED) AS len, \
                 CAST(DATETIME_PRECISION AS SIGNED) AS digits FROM information_schema.COLUMNS \
                 WHERE TABLE_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ?",
            )
            .bind(&schema)
            .bind(&table)
            .fetch_all(&pool)
            .await?;
            if columns.is_empty() {
                // `information_schema` hides a table this user has no privilege on: ask
                // the table itself, so that such a table is not reported missing (which
                // `provision` cannot fix). A missing one answers 1146, reported below.
                let probe = format!("SELECT 1 FROM {quoted} LIMIT 0");
                if let Err(e) = sqlx::query(AssertSqlSafe(probe)).fetch_all(&pool).await {
                    if number_of(&e) != Some(number::NO_SUCH_TABLE) {
                        return Err(e);
                    }
                }
            }
            let facts = sqlx::query(
                "SELECT (SELECT ENGINE FROM information_schema.TABLES \
                   WHERE TABLE_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ?) AS engine, \
                 CAST(TIMESTAMPDIFF(SECOND, UTC_TIMESTAMP(), NOW()) AS SIGNED) AS offset_s",
            )
            .bind(&schema)
            .bind(&table)
            .fetch_one(&pool)
            .await?;
            Ok::<_, sqlx::Error>((columns, facts))
        };
        let (columns, facts) = tokio::time::timeout(config.timeout, check)
            .await
            .map_err(|_| timed_out(Phase::Read))?
            .map_err(failed)?;
        let mut found = Columns::new(&config.table, true);
        for r in &columns {
            let name: String = r.try_get("name").map_err(failed)?;
            let column = Column {
                ty: r.try_get("ty").map_err(failed)?,
                len: r.try_get("len").map_err(failed)?,
                digits: r.try_get("digits").map_err(failed)?,
            };
            found.insert(&name, column);
        }
        found.check_exists("ShedlockMySqlStore::provision")?;
        let mut digits = 6;
        for c in ["lock_until", "locked_at"] {
            match found.get(c) {
                Some(col) if col.ty == "timestamp" || col.ty == "datetime" => {
                    digits = digits.min(col.digits.unwrap_or(0));
                }
                other => {
                    return Err(misconfigured(format!(
                        "column {c} of {} must be a TIMESTAMP or DATETIME, found {:?}",
                        config.table,
                        other.map(|col| &col.ty)
                    )));
                }
            }
        }
        found.check_text(&["varchar", "char", "text"])?;
        let fenced = found.fenced(&config.fence_column)?;
        let engine: Option<String> = facts.try_get("engine").map_err(failed)?;
        if !engine.as_deref().is_some_and(|e| e.eq_ignore_ascii_case(MYSQL_ENGINE)) {
            return Err(misconfigured(format!(
                "table {}: its storage engine is {}, this store needs {MYSQL_ENGINE} (row locks, transactions)",
                config.table,
                engine.as_deref().unwrap_or("unknown")
            )));
        }
        let offset: Option<i64> = facts.try_get("offset_s").map_err(failed)?;
        if offset != Some(0) {
            return Err(misconfigured(format!(
                "the session time zone is {offset:?} s off UTC: ShedLock stores UTC_TIMESTAMP(3) in its \
                 TIMESTAMP columns, so sessions must use time_zone = '+00:00' (sqlx's default)"
            )));
        }
        let name_len = found.name_len();
        let fence = fenced.then(|| fence_ident.quoted(Dialect::MySql));
        let unit_us = 10_i64.pow(u32::try_from(6 - digits.clamp(0, 6)).unwrap_or(0));
        Ok(Self {
            pool,
            sql: Arc::new(Sql::build(&ident.quoted(Dialect::MySql), fence.as_deref())),
            fenced,
            name_len,
            unit_us,
            timeout: config.timeout,
            table: config.table,
        })
    }

    /// Creates ShedLock's table (its MySQL DDL, InnoDB) if it does not exist, and adds
    /// the fence column if `fence` is set and the table lacks it.
    ///
    /// # Errors
    /// Server errors; [`Error::InvalidInput`] for a bad table name.
    pub async fn provision(pool: &MySqlPool, table: &str, fence: bool) -> Result<()> {
        let t = Ident::table(table)?.quoted(Dialect::MySql);
        let failed = |e| map_error(e, Phase::Write, "create shedlock table");
        let create = format!(
            "CREATE TABLE IF NOT EXISTS {t} (name VARCHAR(64) NOT NULL, lock_until TIMESTAMP(3) NOT NULL, \
             locked_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3), locked_by VARCHAR(255) NOT NULL, \
             PRIMARY KEY (name)) ENGINE=InnoDB"
        );
        sqlx::query(AssertSqlSafe(create)).execute(pool).await.map_err(failed)?;
        if !fence {
            return Ok(());
        }
        // `ADD COLUMN IF NOT EXISTS` is MariaDB's only: a creator that loses the race
        // gets "duplicate column", which is the state it wanted.
        match sqlx::query(AssertSqlSafe(format!("ALTER TABLE {t} ADD COLUMN fence BIGINT")))
            .execute(pool)
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if number_of(&e) == Some(DUP_FIELDNAME) => Ok(()),
            Err(e) => Err(failed(e)),
        }
    }

    /// Whether the table has the fence column (tokens kept there; linearizable grade).
    pub fn is_fenced(&self) -> bool {
        self.fenced
    }

    /// The pool.
    pub fn pool(&self) -> &MySqlPool {
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

    async fn timed<T>(&self, phase: Phase, f: impl Future<Output = Result<T>>) -> Result<T> {
        tokio::time::timeout(self.timeout, f)
            .await
            .unwrap_or_else(|_| Err(timed_out(phase)))
    }

    fn decode(&self, name: &LeaseName, row: &RawRow) -> Result<Stored> {
        row::decode(self.fenced, name, row)
    }

    /// A time cut to the columns' precision.
    fn cut(&self, us: i64) -> i64 {
        us - us.rem_euclid(self.unit_us)
    }

    /// The row of `name` as it stands, read under a lock inside `tx`.
    async fn locked(&self, tx: &mut Transaction<'static, MySql>, name: &LeaseName) -> Result<Found> {
        let row = sqlx::query(AssertSqlSafe(format!("{} FOR UPDATE", self.sql.read)))
            .bind(name.as_str())
            .fetch_one(&mut **tx)
            .await
            .map_err(|e| map_error(e, Phase::Read, "read shedlock row"))?;
        found_of(&row).map_err(|e| map_error(e, Phase::Read, "decode shedlock row"))
    }

    /// Whether the row is the one `v` names.
    fn matches(row: &RawRow, v: &VersionParts<'_>) -> bool {
        row.at_us == Some(v.at)
            && row.until_us == Some(v.until)
            && row.locked_by.as_deref() == Some(v.by)
            && row.fence == v.fence
    }

    /// A put at the clock `now_us` for `ttl_ms`.
    fn put(&self, insert: bool, now_us: i64, at: Option<i64>, ttl_ms: i64, by: String, fence: Option<i64>) -> Step {
        let now = self.cut(now_us);
        Step::Put {
            insert,
            at: at.unwrap_or(now),
            until: self.cut(now + ttl_ms.saturating_mul(1000)),
            by,
            fence,
            ttl_ms,
        }
    }

    /// Decides a write of `params` on what the locking read found.
    fn decide(&self, name: &LeaseName, expect: &Precondition, params: &Params, f: &Found) -> Result<Step> {
        let refuse = |row: &RawRow| Ok(Step::Refuse(Current::Present(self.decode(name, row)?)));
        let (ttl, by, token) = (params.ttl, params.by.clone(), params.token);
        match (expect, &f.row) {
            (Precondition::Absent, Some(row)) => refuse(row),
            (Precondition::Absent, None) => Ok(self.put(true, f.now_us, None, ttl, by, self.fenced.then_some(token))),
            (Precondition::Claimable, None) => Ok(self.put(true, f.now_us, None, ttl, by, self.fenced.then_some(1))),
            (Precondition::Claimable, Some(row)) => {
                let free = row.until_us.is_some_and(|u| u <= f.now_us) || row.locked_by.as_deref() == Some("");
                let sound = match (self.fenced, row.at_us) {
                    (_, None) => false,
                    (true, Some(_)) => row.fence.is_none_or(|x| x > 0),
                    (false, Some(at)) => at < self.cut(f.now_us),
                };
                if free && sound && row.until_us.is_some() {
                    let fence = self.fenced.then(|| row.fence.unwrap_or(1).saturating_add(1));
                    Ok(self.put(false, f.now_us, None, ttl, by, fence))
                } else {
                    refuse(row)
                }
            }
            (Precondition::Version(v), row) => {
                let Some(row) = row else {
                    return Ok(Step::Refuse(Current::Absent));
                };
                match parse_version(v) {
                    Some(p) if Self::matches(row, &p) => {
                        if self.fenced {
                            Ok(self.put(false, f.now_us, None, ttl, by, Some(token)))
                        } else if p.at == token {
                            // Unfenced: the token is locked_at, kept across renewals.
                            Ok(self.put(false, f.now_us, Some(p.at), ttl, by, None))
                        } else if p.at < self.cut(f.now_us) {
                            Ok(self.put(false, f.now_us, None, ttl, by, None))
                        } else {
                            refuse(row)
                        }
                    }
                    _ => refuse(row),
                }
            }
            // Refused in `write`, before the transaction.
            _ => Err(leasehold_core::store::not_taken("a ShedLock table", expect)),
        }
    }

    /// Sends a decided write inside `tx`; `Ok(false)`: another session inserted the row
    /// first (nothing written).
    async fn apply(&self, tx: &mut Transaction<'static, MySql>, name: &LeaseName, step: &Step) -> Result<bool> {
        let failed = |e| map_error(e, Phase::Write, "write shedlock row");
        let sent = match step {
            Step::Put {
                insert: true,
                at,
                until,
                by,
                fence,
                ..
            } => {
                let q = sqlx::query(AssertSqlSafe(self.sql.insert.as_str()))
                    .bind(name.as_str())
                    .bind(until)
                    .bind(at)
                    .bind(by);
                let q = if self.fenced { q.bind(fence) } else { q };
                q.execute(&mut **tx).await
            }
            Step::Put {
                insert: false,
                at,
                until,
                by,
                fence,
                ..
            } => {
                let q = sqlx::query(AssertSqlSafe(self.sql.update.as_str()))
                    .bind(until)
                    .bind(at)
                    .bind(by);
                let q = if self.fenced { q.bind(fence) } else { q };
                q.bind(name.as_str()).execute(&mut **tx).await
            }
            Step::Delete => {
                sqlx::query(AssertSqlSafe(self.sql.delete.as_str()))
                    .bind(name.as_str())
                    .execute(&mut **tx)
                    .await
            }
            Step::Refuse(_) => return Ok(true),
        };
        let insert = matches!(step, Step::Put { insert: true, .. });
        match sent {
            Ok(_) => Ok(true),
            // Another session inserted the row first, or (two sessions holding the gap
            // lock of the absent row, each inserting) this one was chosen as the
            // deadlock's victim: rolled back, nothing written.
            Err(e) if insert && matches!(number_of(&e), Some(number::DUP_ENTRY | number::LOCK_DEADLOCK)) => Ok(false),
            Err(e) => Err(failed(e)),
        }
    }

    /// One write transaction: the locking read, the decision, the write, the commit.
    async fn transact(&self, name: &LeaseName, decide: impl FnOnce(&Found) -> Result<Step> + Send) -> Result<Step> {
        let mut tx = self
            .pool
            .begin()
            .await
            .map_err(|e| map_error(e, Phase::Connect, "begin"))?;
        let found = self.locked(&mut tx, name).await?;
        let step = decide(&found)?;
        if !self.apply(&mut tx, name, &step).await? {
            return Ok(Step::Refuse(Current::Unknown));
        }
        if matches!(step, Step::Refuse(_)) {
            // Nothing written: the rollback (on drop) only releases the lock.
            return Ok(step);
        }
        tx.commit()
            .await
            .map_err(|e| map_error(e, Phase::Write, "commit shedlock write"))?;
        Ok(step)
    }
}

/// `ER_DUP_FIELDNAME`: the column exists already.
const DUP_FIELDNAME: u16 = 1060;

#[async_trait]
impl CasStore for ShedlockMySqlStore {
    fn capabilities(&self) -> Capabilities {
        row::capabilities(self.fenced)
    }

    /// One `SELECT` of the server's clock (ShedLock's `usingDbTime()`).
    async fn store_now_ms(&self) -> Result<Option<u64>> {
        let us: i64 = self
            .timed(Phase::Read, async {
                sqlx::query_scalar(AssertSqlSafe(format!("SELECT {}", micros("UTC_TIMESTAMP(6)"))))
                    .fetch_one(&self.pool)
                    .await
                    .map_err(|e| map_error(e, Phase::Read, "read the server's clock"))
            })
            .await?;
        u64::try_from(us / 1000)
            .map(Some)
            .map_err(|_| Error::invalid("the server's clock", format!("{us} µs is before 1970")))
    }

    async fn read(&self, name: &LeaseName) -> Result<Option<Stored>> {
        row::check_name(self.name_len, name)?;
        let found = self
            .timed(Phase::Read, async {
                let row = sqlx::query(AssertSqlSafe(self.sql.read.as_str()))
                    .bind(name.as_str())
                    .fetch_one(&self.pool)
                    .await
                    .and_then(|r| found_of(&r))
                    .map_err(|e| map_error(e, Phase::Read, "read shedlock row"))?;
                Ok(row)
            })
            .await?;
        found.row.map(|r| self.decode(name, &r)).transpose()
    }

    async fn write(&self, name: &LeaseName, expect: &Precondition, record: &LeaseRecord) -> Result<CasOutcome> {
        // What this store's write handles, all of it before anything is sent.
        if !matches!(
            expect,
            Precondition::Absent | Precondition::Version(_) | Precondition::Claimable
        ) {
            return Err(leasehold_core::store::not_taken("a ShedLock table", expect));
        }
        row::check_name(self.name_len, name)?;
        let params = Params::of(expect, record)?;
        let step = self
            .timed(
                Phase::Write,
                self.transact(name, |f| self.decide(name, expect, &params, f)),
            )
            .await?;
        Ok(match step {
            Step::Put {
                at,
                until,
                by,
                fence,
                ttl_ms,
                ..
            } => CasOutcome::Written(self.decode(
                name,
                &RawRow {
                    locked_by: Some(by),
                    at_us: Some(at),
                    until_us: Some(until),
                    remaining_ms: Some(ttl_ms),
                    fence,
                },
            )?),
            Step::Refuse(current) => CasOutcome::Conflict(current),
            Step::Delete => CasOutcome::Conflict(Current::Unknown),
        })
    }

    /// One `SELECT` of the names under the prefix (compared byte for byte). A ShedLock
    /// lock whose name is not a valid lease name is left out.
    async fn list(&self, prefix: &NamePrefix) -> Result<Vec<LeaseName>> {
        let names = self
            .timed(Phase::Read, async {
                sqlx::query_scalar(AssertSqlSafe(self.sql.list.as_str()))
                    .bind(prefix.as_str())
                    .bind(prefix.as_str())
                    .fetch_all(&self.pool)
                    .await
                    .map_err(|e| map_error(e, Phase::Read, "list shedlock rows"))
            })
            .await?;
        Ok(row::lease_names(names))
    }

    async fn delete(&self, name: &LeaseName, version: &Version) -> Result<DeleteOutcome> {
        row::check_name(self.name_len, name)?;
        let Some(p) = parse_version(version) else {
            return Ok(DeleteOutcome::Conflict(Current::Unknown));
        };
        let step = self
            .timed(
                Phase::Write,
                self.transact(name, |f| match &f.row {
                    Some(row) if Self::matches(row, &p) => Ok(Step::Delete),
                    Some(row) => Ok(Step::Refuse(Current::Present(self.decode(name, row)?))),
                    None => Ok(Step::Refuse(Current::Absent)),
                }),
            )
            .await?;
        Ok(match step {
            Step::Delete => DeleteOutcome::Deleted,
            Step::Refuse(current) => DeleteOutcome::Conflict(current),
            Step::Put { .. } => DeleteOutcome::Conflict(Current::Unknown),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_quote_the_table_and_bind_every_value() {
        let sql = Sql::build("`ops`.`shedlock`", Some("`fence`"));
        assert!(sql.read.contains("LEFT JOIN `ops`.`shedlock` r ON r.name = ?"));
        assert_eq!(sql.insert.matches('?').count(), 5);
        assert_eq!(sql.update.matches('?').count(), 5);
        let unfenced = Sql::build("`shedlock`", None);
        assert_eq!(unfenced.insert.matches('?').count(), 4);
        assert!(unfenced.read.contains("CAST(NULL AS SIGNED) AS fence"));
    }
}
