//! Postgres: `leasehold-postgres` (one CTE statement per operation) against the bare
//! `INSERT … ON CONFLICT … RETURNING` lock, and against sqlx's `PgAdvisoryLock`.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use leasehold_core::store::CasStore;
use leasehold_postgres::{PostgresConfig, PostgresStore};
use sqlx::postgres::{PgAdvisoryLock, PgPool, PgPoolOptions, Postgres};
use sqlx::{AssertSqlSafe, Either, Row};

use super::sql_floor::{Answer, Param, SqlFloor, Statement};
use super::sql_server::{POOL_SIZE, SqlServer};
use super::{Backend, Floor, OpTexts, StoreInfo, StoreKind};
use crate::peers::{Cycle, LibraryCycle, POOL, PeerResult, compare};
use crate::stats::{Samples, Summary, time};
use crate::{Plan, Result, fail};

/// The shared Postgres, with tables of this run.
pub(crate) struct PostgresBackend {
    sql: SqlServer<Postgres>,
}

impl PostgresBackend {
    pub(crate) async fn open(tag: &str) -> Result<Self> {
        let sql = SqlServer::open("LEASEHOLD_PG_URL", tag, |t| {
            format!(
                "CREATE TABLE {t} (name TEXT PRIMARY KEY, holder TEXT, token BIGINT NOT NULL, \
                 expires_at TIMESTAMPTZ NOT NULL)"
            )
        })
        .await?;
        PostgresStore::provision(&sql.admin, &PostgresConfig::new().with_table(&sql.lib_table)?).await?;
        Ok(Self { sql })
    }
}

#[async_trait]
impl Backend for PostgresBackend {
    async fn store(&self) -> Result<Arc<dyn CasStore>> {
        let pool = self.sql.pool(POOL_SIZE).await?;
        Ok(Arc::new(
            PostgresStore::new(pool, PostgresConfig::new().with_table(&self.sql.lib_table)?).await?,
        ))
    }

    async fn floor(&self) -> Result<Box<dyn Floor>> {
        use Param::{Holder, Name, Token, TtlMs};
        let t = &self.sql.raw_table;
        Ok(Box::new(SqlFloor {
            label: "postgres",
            rows_affected: sqlx::postgres::PgQueryResult::rows_affected,
            pool: self.sql.pool(POOL_SIZE).await?,
            take: Statement {
                sql: format!(
                    "INSERT INTO {t} AS l (name, holder, token, expires_at) VALUES ($1, $2, 1, now() + $3 * interval '1 millisecond') \
                     ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, token = l.token + 1, expires_at = EXCLUDED.expires_at \
                     WHERE l.holder IS NULL OR l.expires_at <= now() RETURNING token"
                ),
                params: &[Name, Holder, TtlMs],
            },
            answer: Answer::Returning,
            renew: Statement {
                sql: format!(
                    "UPDATE {t} SET expires_at = now() + $3 * interval '1 millisecond' WHERE name = $1 AND holder = $2 AND token = $4"
                ),
                params: &[Name, Holder, TtlMs, Token],
            },
            release: Statement {
                sql: format!("UPDATE {t} SET holder = NULL WHERE name = $1 AND holder = $2 AND token = $3"),
                params: &[Name, Holder, Token],
            },
        }))
    }

    async fn describe(&self) -> Result<StoreInfo> {
        let show = |what: &'static str| async move {
            let row = sqlx::query(AssertSqlSafe(format!("SHOW {what}")))
                .fetch_one(&self.sql.admin)
                .await?;
            Ok::<String, crate::BenchError>(row.try_get::<String, _>(0)?)
        };
        let version: String = sqlx::query_scalar("SHOW server_version")
            .fetch_one(&self.sql.admin)
            .await?;
        Ok(StoreInfo {
            kind: StoreKind::Postgres,
            version: format!("PostgreSQL {version}"),
            settings: vec![
                format!(
                    "fsync={}, synchronous_commit={}, wal_sync_method={}, shared_buffers={}: every lease write waits for its WAL flush",
                    show("fsync").await?,
                    show("synchronous_commit").await?,
                    show("wal_sync_method").await?,
                    show("shared_buffers").await?
                ),
                format!("loopback TCP; sqlx pools of {POOL_SIZE} connections (library, floor and peer each their own)"),
                "leasehold-postgres also keeps one `LISTEN` connection per store for waiters".into(),
            ],
            library_ops: OpTexts {
                acquire: "one statement: `WITH w AS (INSERT … ON CONFLICT (name) DO UPDATE … WHERE claimable AND valid RETURNING …) SELECT … FROM w UNION ALL SELECT current row WHERE NOT EXISTS (w)`".into(),
                renew: "one statement: `UPDATE … SET version, ttl_ms, expires_at WHERE name AND version AND holder AND token AND valid` (one changed row: it wrote; a refused one reads the row after it)".into(),
                release: "one statement: the same guarded `UPDATE` writing the vacant record, `RETURNING pg_notify(…)` to wake waiters".into(),
                takeover: "the acquire statement on an expired row".into(),
            },
            floor_ops: OpTexts {
                acquire: "`INSERT … ON CONFLICT (name) DO UPDATE SET holder, token + 1, expires_at WHERE holder IS NULL OR expires_at <= now() RETURNING token`".into(),
                renew: "`UPDATE … SET expires_at WHERE name AND holder AND token`".into(),
                release: "`UPDATE … SET holder = NULL WHERE name AND holder AND token`".into(),
                takeover: "the acquire statement on an expired row".into(),
            },
        })
    }

    async fn cleanup(&self) -> Result<()> {
        self.sql.drop_tables("").await
    }

    async fn peer(&self, plan: &Plan) -> Result<Option<PeerResult>> {
        let lib = LibraryCycle::on(self, plan).await?;
        let peer = AdvisoryCycle {
            pool: self.sql.pool(POOL_SIZE).await?,
            locks: (0..POOL)
                .map(|i| PgAdvisoryLock::new(format!("{}/peer/{i}", self.sql.lib_table)))
                .collect(),
        };
        let mut result = compare(
            plan,
            StoreKind::Postgres,
            "sqlx 0.9 `PgAdvisoryLock` (`try_acquire` / `release_now`)",
            &lib,
            &peer,
        )
        .await?;
        result.flush = Some(self.wal_flush(plan).await?);
        Ok(Some(result))
    }
}

impl PostgresBackend {
    /// One WAL flush: an upsert of one row of the floor's table committed as every lease
    /// write is (`synchronous_commit = on`), then the same upsert on a connection with
    /// `synchronous_commit = off` (the commit returns before its WAL is flushed),
    /// alternated, `plan.peer_cycles` each. The difference of their p50s is what the
    /// library's durability costs per write, and what an advisory lock does not pay.
    async fn wal_flush(&self, plan: &Plan) -> Result<[Summary; 2]> {
        let durable = self.sql.pool(1).await?;
        let unflushed = PgPoolOptions::new()
            .max_connections(1)
            .after_connect(|conn, _| {
                Box::pin(async move {
                    sqlx::Executor::execute(conn, "SET synchronous_commit = off").await?;
                    Ok(())
                })
            })
            .connect(&self.sql.url)
            .await
            .map_err(|e| fail(format!("cannot reach Postgres: {e}")))?;
        let upsert = format!(
            "INSERT INTO {} (name, holder, token, expires_at) VALUES ('wal-probe', 'probe', 1, now()) \
             ON CONFLICT (name) DO UPDATE SET token = {0}.token + 1, expires_at = now()",
            self.sql.raw_table
        );
        let mut sides = [
            Samples::with_capacity(plan.peer_cycles),
            Samples::with_capacity(plan.peer_cycles),
        ];
        for i in 0..plan.warmup + plan.peer_cycles {
            for (side, p) in [&durable, &unflushed].into_iter().enumerate() {
                let (t, r) = time(sqlx::query(AssertSqlSafe(upsert.clone())).execute(p)).await;
                r?;
                if i >= plan.warmup {
                    sides[side].push(t);
                }
            }
        }
        Ok([sides[0].summary(), sides[1].summary()])
    }
}

/// sqlx's advisory lock: a pooled connection, `pg_try_advisory_lock`, `pg_advisory_unlock`.
struct AdvisoryCycle {
    pool: PgPool,
    locks: Vec<PgAdvisoryLock>,
}

#[async_trait]
impl Cycle for AdvisoryCycle {
    async fn cycle(&self, i: usize) -> Result<(Duration, Duration)> {
        let lock = &self.locks[i % self.locks.len()];
        let (acq, guard) = time(async {
            let conn = self.pool.acquire().await?;
            lock.try_acquire(conn).await
        })
        .await;
        let guard = match guard? {
            Either::Left(g) => g,
            Either::Right(_) => return Err(fail("advisory lock was not free")),
        };
        let (rel, conn) = time(guard.release_now()).await;
        drop(conn?);
        Ok((acq, rel))
    }
}
