//! MySQL (MariaDB): `leasehold-mysql` (one statement per operation) against the bare
//! `INSERT … ON DUPLICATE KEY UPDATE` lock whose token comes back as `LAST_INSERT_ID`.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use leasehold_core::store::CasStore;
use leasehold_mysql::{MySqlConfig, MySqlStore};
use sqlx::mysql::{MySqlPool, MySqlPoolOptions};
use sqlx::{AssertSqlSafe, Row};

use super::{Backend, Floor, OpTexts, RawLock, StoreInfo, StoreKind, env, lost, ttl_ms};
use crate::{Result, fail};

/// Connections per pool (the shared server allows 300 for every helper and test).
const POOL_SIZE: u32 = 10;

/// The server's clock in Unix milliseconds, within one statement.
const NOW_MS: &str = "(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000)";

/// The shared MariaDB, with tables of this run.
pub(crate) struct MySqlBackend {
    url: String,
    lib_table: String,
    raw_table: String,
    admin: MySqlPool,
}

async fn pool(url: &str, size: u32) -> Result<MySqlPool> {
    MySqlPoolOptions::new()
        .max_connections(size)
        .acquire_timeout(Duration::from_secs(10))
        .connect(url)
        .await
        .map_err(|e| fail(format!("cannot reach MySQL at {url}: {e}")))
}

impl MySqlBackend {
    pub(crate) async fn open(tag: &str) -> Result<Self> {
        let url = env("LEASEHOLD_MYSQL_URL")?;
        let admin = pool(&url, 2).await?;
        let lib_table = format!("lhbench_{tag}");
        let raw_table = format!("lhbench_raw_{tag}");
        MySqlStore::provision(&admin, &MySqlConfig::new().with_table(&lib_table)?).await?;
        let create = format!(
            "CREATE TABLE `{raw_table}` (name VARCHAR(200) PRIMARY KEY, holder VARCHAR(128), token BIGINT NOT NULL, \
             expires_at_ms BIGINT NOT NULL) ENGINE=InnoDB"
        );
        sqlx::query(AssertSqlSafe(create)).execute(&admin).await?;
        Ok(Self {
            url,
            lib_table,
            raw_table,
            admin,
        })
    }
}

/// The hand-written lock: one statement per operation.
struct MySqlFloor {
    pool: MySqlPool,
    /// `(name, holder, ttl, holder, ttl)` → `LAST_INSERT_ID()` the token taken, 0 when held.
    take: String,
    /// `(ttl, name, holder, token)` → one affected row when still held.
    renew: String,
    /// `(name, holder, token)` → one affected row when still held.
    release: String,
}

impl MySqlFloor {
    fn new(pool: MySqlPool, t: &str) -> Self {
        // The first assignment decides on the row as it was and sets LAST_INSERT_ID to
        // the next token (or back to 0); the later ones ask whether it did.
        let take = format!(
            "INSERT INTO `{t}` (name, holder, token, expires_at_ms) VALUES (?, ?, LAST_INSERT_ID(1), {NOW_MS} + ?) \
             ON DUPLICATE KEY UPDATE \
             token = IF(LAST_INSERT_ID(0) = 0 AND (holder IS NULL OR expires_at_ms <= {NOW_MS}), LAST_INSERT_ID(token + 1), token), \
             holder = IF(LAST_INSERT_ID() > 0, ?, holder), \
             expires_at_ms = IF(LAST_INSERT_ID() > 0, {NOW_MS} + ?, expires_at_ms)"
        );
        // `GREATEST(…, expires_at_ms + 1)`: a renewal within the same millisecond still
        // changes the row (MySQL counts only changed rows as affected).
        let renew = format!(
            "UPDATE `{t}` SET expires_at_ms = GREATEST({NOW_MS} + ?, expires_at_ms + 1) \
             WHERE name = ? AND holder = ? AND token = ?"
        );
        let release = format!("UPDATE `{t}` SET holder = NULL WHERE name = ? AND holder = ? AND token = ?");
        Self {
            pool,
            take,
            renew,
            release,
        }
    }

    fn held(rows: u64, lock: &RawLock) -> Result<()> {
        if rows == 1 {
            Ok(())
        } else {
            Err(lost("mysql", &lock.key))
        }
    }
}

#[async_trait]
impl Floor for MySqlFloor {
    fn label(&self) -> &'static str {
        "mysql"
    }

    async fn take(&self, key: &str, holder: &str, ttl: Duration) -> Result<Option<RawLock>> {
        let done = sqlx::query(AssertSqlSafe(self.take.as_str()))
            .bind(key)
            .bind(holder)
            .bind(ttl_ms(ttl))
            .bind(holder)
            .bind(ttl_ms(ttl))
            .execute(&self.pool)
            .await?;
        Ok(match done.last_insert_id() {
            0 => None,
            token => Some(RawLock {
                key: key.to_owned(),
                holder: holder.to_owned(),
                version: token.to_string(),
            }),
        })
    }

    async fn renew(&self, lock: &mut RawLock, ttl: Duration) -> Result<()> {
        let token: i64 = lock.version.parse()?;
        let done = sqlx::query(AssertSqlSafe(self.renew.as_str()))
            .bind(ttl_ms(ttl))
            .bind(lock.key.as_str())
            .bind(lock.holder.as_str())
            .bind(token)
            .execute(&self.pool)
            .await?;
        Self::held(done.rows_affected(), lock)
    }

    async fn release(&self, lock: RawLock) -> Result<()> {
        let token: i64 = lock.version.parse()?;
        let done = sqlx::query(AssertSqlSafe(self.release.as_str()))
            .bind(lock.key.as_str())
            .bind(lock.holder.as_str())
            .bind(token)
            .execute(&self.pool)
            .await?;
        Self::held(done.rows_affected(), &lock)
    }
}

#[async_trait]
impl Backend for MySqlBackend {
    async fn store(&self) -> Result<Arc<dyn CasStore>> {
        let pool = pool(&self.url, POOL_SIZE).await?;
        Ok(Arc::new(
            MySqlStore::new(pool, MySqlConfig::new().with_table(&self.lib_table)?).await?,
        ))
    }

    async fn floor(&self) -> Result<Box<dyn Floor>> {
        Ok(Box::new(MySqlFloor::new(
            pool(&self.url, POOL_SIZE).await?,
            &self.raw_table,
        )))
    }

    async fn describe(&self) -> Result<StoreInfo> {
        let row = sqlx::query(
            "SELECT VERSION(), CAST(@@innodb_flush_log_at_trx_commit AS SIGNED), CAST(@@log_bin AS SIGNED), \
             CAST(@@innodb_buffer_pool_size AS SIGNED)",
        )
        .fetch_one(&self.admin)
        .await?;
        let version: String = row.try_get(0)?;
        let flush: i64 = row.try_get(1)?;
        let log_bin: i64 = row.try_get(2)?;
        let buffer: i64 = row.try_get(3)?;
        Ok(StoreInfo {
            kind: StoreKind::MySql,
            version: format!("MariaDB {version}"),
            settings: vec![
                format!(
                    "InnoDB, innodb_flush_log_at_trx_commit={flush} (1: every commit waits for its redo-log flush), \
                     log_bin={log_bin}, innodb_buffer_pool_size={} MiB",
                    buffer / (1024 * 1024)
                ),
                format!("loopback TCP; sqlx pools of {POOL_SIZE} connections (library and floor each their own)"),
            ],
            library_ops: OpTexts {
                acquire: "one statement: `INSERT … ON DUPLICATE KEY UPDATE col = IF(claimable, new, old)`, the token back as `LAST_INSERT_ID(expr)` (0: refused, then a read)".into(),
                renew: "one statement: `UPDATE … SET version, ttl_ms, expires_at_ms WHERE name AND version AND holder AND token AND valid` (one affected row: it wrote)".into(),
                release: "one statement: the same guarded `UPDATE` writing the vacant record".into(),
                takeover: "the acquire statement on an expired row".into(),
            },
            floor_ops: OpTexts {
                acquire: "`INSERT … ON DUPLICATE KEY UPDATE token = IF(holder IS NULL OR expired, LAST_INSERT_ID(token + 1), token), …`, the token as the reply's insert id".into(),
                renew: "`UPDATE … SET expires_at_ms = GREATEST(now + ttl, expires_at_ms + 1) WHERE name AND holder AND token`".into(),
                release: "`UPDATE … SET holder = NULL WHERE name AND holder AND token`".into(),
                takeover: "the acquire statement on an expired row".into(),
            },
        })
    }

    async fn cleanup(&self) -> Result<()> {
        for t in [&self.lib_table, &self.raw_table] {
            sqlx::query(AssertSqlSafe(format!("DROP TABLE IF EXISTS `{t}`")))
                .execute(&self.admin)
                .await?;
        }
        Ok(())
    }
}
