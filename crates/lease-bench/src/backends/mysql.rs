//! MySQL (MariaDB): `leasehold-mysql` (one statement per operation) against the bare
//! `INSERT … ON DUPLICATE KEY UPDATE` lock whose token comes back as `LAST_INSERT_ID`.

use std::sync::Arc;

use async_trait::async_trait;
use leasehold_core::store::CasStore;
use leasehold_mysql::{MySqlConfig, MySqlStore};
use sqlx::Row;
use sqlx::mysql::{MySql, MySqlQueryResult};

use super::sql_floor::{Answer, Param, SqlFloor, Statement};
use super::sql_server::{POOL_SIZE, SqlServer};
use super::{Backend, Floor, OpTexts, StoreInfo, StoreKind};
use crate::Result;

/// The server's clock in Unix milliseconds, within one statement.
const NOW_MS: &str = "(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000)";

/// The shared MariaDB, with tables of this run.
pub(crate) struct MySqlBackend {
    sql: SqlServer<MySql>,
}

impl MySqlBackend {
    pub(crate) async fn open(tag: &str) -> Result<Self> {
        let sql = SqlServer::open("LEASEHOLD_MYSQL_URL", tag, |t| {
            format!(
                "CREATE TABLE `{t}` (name VARCHAR(200) PRIMARY KEY, holder VARCHAR(128), token BIGINT NOT NULL, \
                 expires_at_ms BIGINT NOT NULL) ENGINE=InnoDB"
            )
        })
        .await?;
        MySqlStore::provision(&sql.admin, &MySqlConfig::new().with_table(&sql.lib_table)?).await?;
        Ok(Self { sql })
    }
}

#[async_trait]
impl Backend for MySqlBackend {
    async fn store(&self) -> Result<Arc<dyn CasStore>> {
        let pool = self.sql.pool(POOL_SIZE).await?;
        Ok(Arc::new(
            MySqlStore::new(pool, MySqlConfig::new().with_table(&self.sql.lib_table)?).await?,
        ))
    }

    /// The hand-written lock: one statement per operation, its `?` placeholders bound
    /// in the order they stand.
    async fn floor(&self) -> Result<Box<dyn Floor>> {
        use Param::{Holder, Name, Token, TtlMs};
        let t = &self.sql.raw_table;
        Ok(Box::new(SqlFloor {
            label: "mysql",
            rows_affected: MySqlQueryResult::rows_affected,
            pool: self.sql.pool(POOL_SIZE).await?,
            // The first assignment decides on the row as it was and sets LAST_INSERT_ID to
            // the next token (or back to 0); the later ones ask whether it did.
            take: Statement {
                sql: format!(
                    "INSERT INTO `{t}` (name, holder, token, expires_at_ms) VALUES (?, ?, LAST_INSERT_ID(1), {NOW_MS} + ?) \
                     ON DUPLICATE KEY UPDATE \
                     token = IF(LAST_INSERT_ID(0) = 0 AND (holder IS NULL OR expires_at_ms <= {NOW_MS}), LAST_INSERT_ID(token + 1), token), \
                     holder = IF(LAST_INSERT_ID() > 0, ?, holder), \
                     expires_at_ms = IF(LAST_INSERT_ID() > 0, {NOW_MS} + ?, expires_at_ms)"
                ),
                params: &[Name, Holder, TtlMs, Holder, TtlMs],
            },
            answer: Answer::InsertId(MySqlQueryResult::last_insert_id),
            // `GREATEST(…, expires_at_ms + 1)`: a renewal within the same millisecond still
            // changes the row (MySQL counts only changed rows as affected).
            renew: Statement {
                sql: format!(
                    "UPDATE `{t}` SET expires_at_ms = GREATEST({NOW_MS} + ?, expires_at_ms + 1) \
                     WHERE name = ? AND holder = ? AND token = ?"
                ),
                params: &[TtlMs, Name, Holder, Token],
            },
            release: Statement {
                sql: format!("UPDATE `{t}` SET holder = NULL WHERE name = ? AND holder = ? AND token = ?"),
                params: &[Name, Holder, Token],
            },
        }))
    }

    async fn describe(&self) -> Result<StoreInfo> {
        let row = sqlx::query(
            "SELECT VERSION(), CAST(@@innodb_flush_log_at_trx_commit AS SIGNED), CAST(@@log_bin AS SIGNED), \
             CAST(@@innodb_buffer_pool_size AS SIGNED)",
        )
        .fetch_one(&self.sql.admin)
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
        self.sql.drop_tables("`").await
    }
}
