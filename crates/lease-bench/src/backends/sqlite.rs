//! SQLite: `leasehold-sqlite` against the bare upsert lock, in the same database file.

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use leasehold_core::store::CasStore;
use leasehold_sqlite::{SqliteConfig, SqliteStore, connect_options};
use sqlx::Row;
use sqlx::sqlite::{SqlitePool, SqlitePoolOptions};

use super::sql_floor::{Answer, Param, SqlFloor, Statement};
use super::{Backend, Floor, OpTexts, StoreInfo, StoreKind, env};
use crate::{Result, fail};

/// The host clock in Unix milliseconds, as SQLite sees it within one statement.
const NOW_MS: &str = "CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)";

/// A database file of this run under `$LEASEHOLD_STORES_DIR/lease-bench/`.
pub(crate) struct SqliteBackend {
    path: PathBuf,
    admin: SqlitePool,
}

async fn pool(path: &PathBuf) -> Result<SqlitePool> {
    SqlitePoolOptions::new()
        .max_connections(4)
        .connect_with(connect_options(path))
        .await
        .map_err(|e| fail(format!("cannot open {}: {e}", path.display())))
}

impl SqliteBackend {
    pub(crate) async fn open(tag: &str) -> Result<Self> {
        let dir = PathBuf::from(env("LEASEHOLD_STORES_DIR")?).join("leasehold-bench");
        std::fs::create_dir_all(&dir).map_err(|e| fail(format!("cannot create {}: {e}", dir.display())))?;
        let path = dir.join(format!("{tag}.db"));
        let admin = pool(&path).await?;
        sqlx::query(
            "CREATE TABLE IF NOT EXISTS raw_locks (name TEXT PRIMARY KEY, holder TEXT, token INTEGER NOT NULL, \
             expires_at_ms INTEGER NOT NULL)",
        )
        .execute(&admin)
        .await?;
        Ok(Self { path, admin })
    }
}

#[async_trait]
impl Backend for SqliteBackend {
    async fn store(&self) -> Result<Arc<dyn CasStore>> {
        Ok(Arc::new(SqliteStore::open_file(&self.path, SqliteConfig::new()).await?))
    }

    async fn floor(&self) -> Result<Box<dyn Floor>> {
        use Param::{Holder, Name, Token, TtlMs};
        Ok(Box::new(SqlFloor {
            label: "sqlite",
            rows_affected: sqlx::sqlite::SqliteQueryResult::rows_affected,
            pool: pool(&self.path).await?,
            take: Statement {
                sql: format!(
                    "INSERT INTO raw_locks (name, holder, token, expires_at_ms) VALUES (?1, ?2, 1, {NOW_MS} + ?3) \
                     ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, token = raw_locks.token + 1, \
                     expires_at_ms = excluded.expires_at_ms \
                     WHERE raw_locks.holder IS NULL OR raw_locks.expires_at_ms <= {NOW_MS} RETURNING token"
                ),
                params: &[Name, Holder, TtlMs],
            },
            answer: Answer::Returning,
            // `max(…, expires_at_ms + 1)`: back-to-back renewals within one millisecond
            // still change the row. SQLite skips the write (and its fsync) of a row that
            // did not change, which no real renewal is; without it most floor renewals of
            // this benchmark were such no-ops.
            renew: Statement {
                sql: format!(
                    "UPDATE raw_locks SET expires_at_ms = max({NOW_MS} + ?3, expires_at_ms + 1) \
                     WHERE name = ?1 AND holder = ?2 AND token = ?4"
                ),
                params: &[Name, Holder, TtlMs, Token],
            },
            release: Statement {
                sql: "UPDATE raw_locks SET holder = NULL WHERE name = ?1 AND holder = ?2 AND token = ?3".into(),
                params: &[Name, Holder, Token],
            },
        }))
    }

    async fn describe(&self) -> Result<StoreInfo> {
        let version: String = sqlx::query_scalar("SELECT sqlite_version()")
            .fetch_one(&self.admin)
            .await?;
        let journal: String = sqlx::query("PRAGMA journal_mode")
            .fetch_one(&self.admin)
            .await?
            .try_get(0)?;
        let sync: i64 = sqlx::query("PRAGMA synchronous")
            .fetch_one(&self.admin)
            .await?
            .try_get(0)?;
        Ok(StoreInfo {
            kind: StoreKind::Sqlite,
            version: format!("SQLite {version} (bundled with sqlx)"),
            settings: vec![
                format!(
                    "journal_mode={journal}, synchronous={sync} (2 = FULL), busy_timeout 5 s: `leasehold_sqlite::connect_options`, \
                     used by library and floor alike"
                ),
                format!("file {}; pools of 4 connections", self.path.display()),
            ],
            library_ops: OpTexts {
                acquire: "one statement: `INSERT … ON CONFLICT (name) DO UPDATE SET col = CASE WHEN claimable THEN new ELSE old END … RETURNING` (validates the stored row, returns it either way)".into(),
                renew: "one statement: `UPDATE … SET version, ttl_ms, expires_at_ms WHERE name AND version AND holder AND token AND valid` (one changed row: it wrote; a refused one reads the row after it)".into(),
                release: "one statement: `UPDATE … SET <the vacant record> WHERE name AND version AND token AND valid` (one changed row: it wrote; a refused one reads the row after it)".into(),
                takeover: "the acquire statement on an expired row".into(),
            },
            floor_ops: OpTexts {
                acquire: "`INSERT … ON CONFLICT (name) DO UPDATE … WHERE holder IS NULL OR expired RETURNING token`".into(),
                renew: "`UPDATE … SET expires_at_ms = max(now + ttl, expires_at_ms + 1) WHERE name AND holder AND token` (the `max` makes every back-to-back renewal a real write: SQLite skips writing a row that did not change)".into(),
                release: "`UPDATE … SET holder = NULL WHERE name AND holder AND token`".into(),
                takeover: "the acquire statement on an expired row".into(),
            },
        })
    }

    async fn cleanup(&self) -> Result<()> {
        self.admin.close().await;
        for ext in ["", "-wal", "-shm"] {
            let mut p = self.path.clone().into_os_string();
            p.push(ext);
            let _ = std::fs::remove_file(PathBuf::from(p));
        }
        Ok(())
    }
}
