//! The payout demo's database: one lease table, the batch of payouts, and a log of
//! payout attempts, on SQLite or Postgres; and the worker that pays the batch.
//!
//! Every payout is one fenced `UPDATE` of its row: the row keeps the highest token that
//! has written it (`last_token`), and the guard `last_token <= :token` is part of the
//! statement. A worker that takes the lease first raises the fence on the whole batch to
//! its token (one fenced statement), so any later write by an older holder, to any
//! payout of the batch, is refused by the database.

use std::error::Error;
use std::sync::Arc;
use std::time::Duration;

use leasehold_core::fence::FencedUpdate;
use leasehold_core::{ClientConfig, FencingToken, LeaseClient, store::CasStore};
use leasehold_postgres::{PostgresConfig, PostgresStore};
use leasehold_sqlite::{RowFence, SqlValue, SqliteConfig, SqliteStore};
use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::sqlite::{SqlitePool, SqlitePoolOptions};
use sqlx::{AssertSqlSafe, Row};

/// The demo's error type.
pub(crate) type BoxResult<T> = Result<T, Box<dyn Error + Send + Sync>>;

/// The payouts in the batch.
pub(crate) const PAYOUTS: i64 = 20;
/// The payout during whose (slow) bank call the first worker is frozen.
pub(crate) const FREEZE_AT: i64 = 6;
/// The lease's time to live.
pub(crate) const TTL: Duration = Duration::from_millis(800);
/// How long a bank call takes, and the slow one during which the holder is frozen.
const BANK_CALL: Duration = Duration::from_millis(20);
const SLOW_BANK_CALL: Duration = Duration::from_secs(2);

/// The tables of one demo run.
#[derive(Debug, Clone)]
pub(crate) struct Tables {
    /// The lease table.
    pub(crate) leases: String,
    /// The payouts.
    pub(crate) payouts: String,
    /// The attempts log: one row per payout write attempted, before it is sent.
    pub(crate) attempts: String,
}

impl Tables {
    /// The tables for run `suffix`.
    pub(crate) fn new(suffix: &str) -> Self {
        Self {
            leases: format!("payout_leases_{suffix}"),
            payouts: format!("payouts_{suffix}"),
            attempts: format!("payout_attempts_{suffix}"),
        }
    }
}

/// A connection to the demo's database.
#[derive(Clone)]
pub(crate) enum Db {
    /// Postgres.
    Pg(PgPool),
    /// A SQLite file.
    Lite(SqlitePool, std::path::PathBuf),
}

/// A bound value of the demo's own statements.
#[derive(Debug, Clone)]
pub(crate) enum Val {
    /// An integer.
    I(i64),
    /// Text.
    T(String),
}

/// `sqlx::query($sql)` with each [`Val`] of `$args` bound, for either database.
macro_rules! bound {
    ($sql:expr, $args:expr) => {{
        let mut q = sqlx::query(AssertSqlSafe($sql.to_owned()));
        for a in $args {
            q = match a {
                Val::I(v) => q.bind(*v),
                Val::T(v) => q.bind(v.clone()),
            };
        }
        q
    }};
}

impl Db {
    /// Connects to `store`: a store URL ([`leasehold::url`]: `postgres://…`,
    /// `sqlite:PATH`), or a SQLite file path.
    pub(crate) async fn connect(store: &str) -> BoxResult<Self> {
        let url = if store.contains(':') {
            leasehold::url::StoreUrl::parse(store)?
        } else {
            leasehold::url::StoreUrl::Sqlite { path: store.into() }
        };
        match url {
            leasehold::url::StoreUrl::Postgres { url } => {
                let pool = PgPoolOptions::new()
                    .max_connections(4)
                    .acquire_timeout(Duration::from_secs(10))
                    .connect(&url)
                    .await?;
                Ok(Self::Pg(pool))
            }
            leasehold::url::StoreUrl::Sqlite { path } => {
                let pool = SqlitePoolOptions::new()
                    .max_connections(4)
                    .connect_with(leasehold_sqlite::connect_options(&path))
                    .await?;
                Ok(Self::Lite(pool, path))
            }
            other => Err(format!("the payout demo runs on SQLite or Postgres, not {}", other.kind()).into()),
        }
    }

    /// Placeholder `n` in this dialect.
    pub(crate) fn ph(&self, n: usize) -> String {
        match self {
            Self::Pg(_) => format!("${n}"),
            Self::Lite(..) => format!("?{n}"),
        }
    }

    /// Creates the lease table (if needed) and opens the lease store on it.
    pub(crate) async fn lease_store(&self, table: &str) -> BoxResult<Arc<dyn CasStore>> {
        Ok(match self {
            Self::Pg(pool) => {
                let config = PostgresConfig::new().with_table(table)?;
                PostgresStore::provision(pool, &config).await?;
                Arc::new(PostgresStore::new(pool.clone(), config).await?)
            }
            Self::Lite(pool, _) => {
                let config = SqliteConfig::new().with_table(table)?;
                SqliteStore::provision(pool, &config).await?;
                Arc::new(SqliteStore::new(pool.clone(), config).await?)
            }
        })
    }

    /// Runs a statement; the rows affected.
    pub(crate) async fn exec(&self, sql: &str, args: &[Val]) -> BoxResult<u64> {
        macro_rules! run {
            ($pool:expr) => {{ bound!(sql, args).execute($pool).await?.rows_affected() }};
        }
        Ok(match self {
            Self::Pg(pool) => run!(pool),
            Self::Lite(pool, _) => run!(pool),
        })
    }

    /// Runs a query whose columns are all integers.
    pub(crate) async fn ints(&self, sql: &str, args: &[Val]) -> BoxResult<Vec<Vec<i64>>> {
        macro_rules! run {
            ($pool:expr) => {{
                let rows = bound!(sql, args).fetch_all($pool).await?;
                let mut out = Vec::with_capacity(rows.len());
                for r in &rows {
                    let mut cols = Vec::with_capacity(r.len());
                    for i in 0..r.len() {
                        cols.push(r.try_get::<Option<i64>, _>(i)?.unwrap_or(0));
                    }
                    out.push(cols);
                }
                out
            }};
        }
        Ok(match self {
            Self::Pg(pool) => run!(pool),
            Self::Lite(pool, _) => run!(pool),
        })
    }

    /// A fenced write of `update` with `token`: `Err(FenceRejected)` when the row has
    /// seen a newer token. The fence is generated for this database's type.
    pub(crate) async fn fenced(
        &self,
        update: &FencedUpdate,
        token: FencingToken,
        values: &[(&str, SqlValue)],
        keys: &[(&str, SqlValue)],
    ) -> leasehold_core::Result<u64> {
        macro_rules! run {
            ($db:ty, $pool:expr) => {{
                let fence = RowFence::<$db>::update(update)?;
                let mut write = fence.write(token);
                for (column, v) in values {
                    write = write.value(column, v.clone());
                }
                for (column, v) in keys {
                    write = write.key(column, v.clone());
                }
                write.execute($pool).await.map(|o| o.applied().unwrap_or(0))
            }};
        }
        match self {
            Self::Pg(pool) => run!(sqlx::Postgres, pool),
            Self::Lite(pool, _) => run!(sqlx::Sqlite, pool),
        }
    }

    /// Whether a write transaction could start right now (SQLite: no frozen process is
    /// holding the file's write lock; Postgres: always).
    pub(crate) async fn quiescent(&self) -> bool {
        let Self::Lite(_, path) = self else {
            return true;
        };
        leasehold_sqlite::write_lock_is_free(path).await
    }

    /// Creates the batch: `PAYOUTS` pending payouts.
    pub(crate) async fn create_batch(&self, t: &Tables) -> BoxResult<()> {
        let serial = match self {
            Self::Pg(_) => "BIGSERIAL PRIMARY KEY",
            Self::Lite(..) => "INTEGER PRIMARY KEY AUTOINCREMENT",
        };
        self.exec(
            &format!(
                "CREATE TABLE {} (id BIGINT PRIMARY KEY, batch BIGINT NOT NULL, amount_cents BIGINT NOT NULL, \
                 status TEXT NOT NULL DEFAULT 'pending', paid_by TEXT, paid_token BIGINT, \
                 pay_count BIGINT NOT NULL DEFAULT 0, last_token BIGINT NOT NULL DEFAULT 0)",
                t.payouts
            ),
            &[],
        )
        .await?;
        self.exec(
            &format!(
                "CREATE TABLE {} (seq {serial}, worker TEXT NOT NULL, payout_id BIGINT NOT NULL, token BIGINT NOT NULL)",
                t.attempts
            ),
            &[],
        )
        .await?;
        let values: Vec<String> = (1..=PAYOUTS)
            .map(|i| format!("({i}, 1, {})", 1_000 + (i * 7_919) % 50_000))
            .collect();
        self.exec(
            &format!(
                "INSERT INTO {} (id, batch, amount_cents) VALUES {}",
                t.payouts,
                values.join(", ")
            ),
            &[],
        )
        .await?;
        Ok(())
    }

    /// Drops the run's tables.
    pub(crate) async fn drop_tables(&self, t: &Tables) {
        for table in [&t.payouts, &t.attempts, &t.leases] {
            let _ = self.exec(&format!("DROP TABLE IF EXISTS {table}"), &[]).await;
        }
    }
}

/// What the database says happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Summary {
    /// Payout writes that applied (each increments its payout's `pay_count`).
    pub(crate) payouts_applied: i64,
    /// Attempts carrying a token older than their payout's fence whose write left no
    /// effect (the payout was paid with another token, or not at all).
    pub(crate) stale_writes_refused: i64,
    /// Payouts paid more than once.
    pub(crate) duplicate_payouts: i64,
    /// Payouts never paid.
    pub(crate) lost_payouts: i64,
}

impl Summary {
    /// Reads the summary from the run's rows.
    pub(crate) async fn read(db: &Db, t: &Tables) -> BoxResult<Self> {
        let rows = db
            .ints(
                &format!(
                    "SELECT CAST(COALESCE(SUM(pay_count), 0) AS BIGINT), \
                     CAST(COALESCE(SUM(CASE WHEN pay_count > 1 THEN 1 ELSE 0 END), 0) AS BIGINT), \
                     CAST(COALESCE(SUM(CASE WHEN pay_count = 0 THEN 1 ELSE 0 END), 0) AS BIGINT) FROM {}",
                    t.payouts
                ),
                &[],
            )
            .await?;
        let refused = db
            .ints(
                &format!(
                    "SELECT COUNT(*) FROM {a} a JOIN {p} p ON p.id = a.payout_id \
                     WHERE a.token < p.last_token AND (p.paid_token IS NULL OR p.paid_token <> a.token)",
                    a = t.attempts,
                    p = t.payouts
                ),
                &[],
            )
            .await?;
        let r = rows.first().ok_or("no summary row")?;
        Ok(Self {
            payouts_applied: r[0],
            duplicate_payouts: r[1],
            lost_payouts: r[2],
            stale_writes_refused: refused.first().and_then(|r| r.first()).copied().unwrap_or(0),
        })
    }

    /// The one summary line.
    pub(crate) fn line(&self) -> String {
        format!(
            "summary: payouts_applied={} stale_writes_refused={} duplicate_payouts={} lost_payouts={}",
            self.payouts_applied, self.stale_writes_refused, self.duplicate_payouts, self.lost_payouts
        )
    }

    /// Whether the run shows what the demo claims: nothing lost or duplicated, and the
    /// stale holder's write refused.
    pub(crate) fn ok(&self) -> bool {
        self.duplicate_payouts == 0 && self.lost_payouts == 0 && self.stale_writes_refused > 0
    }
}

/// The lease that guards the batch.
pub(crate) fn lease_name(suffix: &str) -> String {
    format!("payouts/batch-{suffix}")
}

/// A worker: takes the batch's lease, raises the fence, pays every pending payout with
/// fenced writes, and stops at the first refusal. Prints one line per step for the
/// parent (`lease`, `bank-call`, `paid`, `refused`, `done`).
///
/// `unfenced` drops the guard from the payout writes (to show what the fence prevents).
pub(crate) async fn work(db: &Db, t: &Tables, suffix: &str, name: &str, unfenced: bool) -> BoxResult<()> {
    let store = db.lease_store(&t.leases).await?;
    let config = ClientConfig::builder().label(name.to_owned()).build()?;
    let client = LeaseClient::from_dyn(store, config)?;
    let waited = std::time::Instant::now();
    let lease = client
        .acquire_timeout(lease_name(suffix), TTL, Duration::from_secs(20))
        .await?;
    let token = lease.token();
    // A new holder first raises the fence on the whole batch to its token.
    let raise = FencedUpdate::new(&t.payouts, "last_token")?.key("batch")?;
    if !unfenced {
        db.fenced(&raise, token, &[], &[("batch", 1_i64.into())]).await?;
    }
    println!("lease {token} {}", waited.elapsed().as_millis());
    let pending = db
        .ints(
            &format!(
                "SELECT id, amount_cents FROM {} WHERE pay_count = 0 ORDER BY id",
                t.payouts
            ),
            &[],
        )
        .await?;
    let pay = FencedUpdate::new(&t.payouts, "last_token")?
        .set("status")?
        .set("paid_by")?
        .set("paid_token")?
        .increment("pay_count")?
        .key("id")?;
    let log_attempt = format!(
        "INSERT INTO {} (worker, payout_id, token) VALUES ({}, {}, {})",
        t.attempts,
        db.ph(1),
        db.ph(2),
        db.ph(3)
    );
    let unfenced_pay = format!(
        "UPDATE {} SET status = 'paid', paid_by = {}, paid_token = {}, pay_count = pay_count + 1, last_token = {} WHERE id = {}",
        t.payouts,
        db.ph(1),
        db.ph(2),
        db.ph(2),
        db.ph(3)
    );
    let tok = token.to_i64()?;
    for row in pending {
        let (id, cents) = (row[0], row[1]);
        if !lease.is_valid() {
            println!("lost-lease {id}");
            break;
        }
        db.exec(&log_attempt, &[Val::T(name.to_owned()), Val::I(id), Val::I(tok)])
            .await?;
        println!("bank-call {id} {cents}");
        // The bank call: the holder checked its lease above and now waits on the bank.
        let slow = name == "alpha" && id == FREEZE_AT;
        tokio::time::sleep(if slow { SLOW_BANK_CALL } else { BANK_CALL }).await;
        let outcome = if unfenced {
            db.exec(&unfenced_pay, &[Val::T(name.to_owned()), Val::I(tok), Val::I(id)])
                .await
                .map_err(|e| leasehold_core::Error::invalid("payout", e.to_string()))
        } else {
            let values = [
                ("status", "paid".into()),
                ("paid_by", name.into()),
                ("paid_token", tok.into()),
                ("pay_count", 1_i64.into()),
            ];
            db.fenced(&pay, token, &values, &[("id", id.into())]).await
        };
        match outcome {
            Ok(_) => println!("paid {id} {cents}"),
            Err(leasehold_core::Error::FenceRejected { .. }) => {
                println!("refused {id} {token}");
                break;
            }
            Err(e) => return Err(e.into()),
        }
    }
    if lease.is_valid() {
        lease.release().await?;
        println!("released");
    }
    println!("done");
    Ok(())
}
