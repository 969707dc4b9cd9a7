//! SQLite: `leasehold-sqlite` against the bare upsert lock, in the same database file.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use leasehold_core::store::CasStore;
use leasehold_sqlite::{SqliteConfig, SqliteStore, connect_options};
use sqlx::sqlite::{SqlitePool, SqlitePoolOptions};
use sqlx::{AssertSqlSafe, Row};

use super::{Backend, Floor, Observed, OpTexts, RawLock, StoreInfo, StoreKind, env, ttl_ms};
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
    fn kind(&self) -> StoreKind {
        StoreKind::Sqlite
    }

    async fn store(&self) -> Result<Arc<dyn CasStore>> {
        Ok(Arc::new(SqliteStore::open_file(&self.path, SqliteConfig::new()).await?))
    }

    async fn floor(&self) -> Result<Box<dyn Floor>> {
        Ok(Box::new(SqliteFloor {
            pool: pool(&self.path).await?,
            acquire: format!(
                "INSERT INTO raw_locks (name, holder, token, expires_at_ms) VALUES (?1, ?2, 1, {NOW_MS} + ?3) \
                 ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, token = raw_locks.token + 1, \
                 expires_at_ms = excluded.expires_at_ms \
                 WHERE raw_locks.holder IS NULL OR raw_locks.expires_at_ms <= {NOW_MS} RETURNING token"
            ),
            renew: format!(
                "UPDATE raw_locks SET expires_at_ms = {NOW_MS} + ?3 WHERE name = ?1 AND holder = ?2 AND token = ?4"
            ),
            release: "UPDATE raw_locks SET holder = NULL WHERE name = ?1 AND holder = ?2 AND token = ?3".into(),
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
                renew: "one statement: `UPDATE … SET col = CASE WHEN version matches … RETURNING`".into(),
                release: "one statement: the same guarded `UPDATE` writing the vacant record".into(),
                takeover: "the acquire statement on an expired row".into(),
            },
            floor_ops: OpTexts {
                acquire: "`INSERT … ON CONFLICT (name) DO UPDATE … WHERE holder IS NULL OR expired RETURNING token`".into(),
                renew: "`UPDATE … SET expires_at_ms WHERE name AND holder AND token`".into(),
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

struct SqliteFloor {
    pool: SqlitePool,
    acquire: String,
    renew: String,
    release: String,
}

impl SqliteFloor {
    async fn insert(&self, key: &str, holder: &str, ttl: Duration) -> Result<Option<RawLock>> {
        let token: Option<i64> = sqlx::query_scalar(AssertSqlSafe(self.acquire.as_str()))
            .bind(key)
            .bind(holder)
            .bind(ttl_ms(ttl))
            .fetch_optional(&self.pool)
            .await?;
        Ok(token.map(|t| RawLock {
            key: key.to_owned(),
            holder: holder.to_owned(),
            version: t.to_string(),
        }))
    }
}

#[async_trait]
impl Floor for SqliteFloor {
    async fn acquire(&self, key: &str, holder: &str, ttl: Duration) -> Result<RawLock> {
        self.insert(key, holder, ttl)
            .await?
            .ok_or_else(|| fail(format!("sqlite floor: {key} is not free")))
    }

    async fn renew(&self, lock: &mut RawLock, ttl: Duration) -> Result<()> {
        let token: i64 = lock.version.parse()?;
        let done = sqlx::query(AssertSqlSafe(self.renew.as_str()))
            .bind(&lock.key)
            .bind(&lock.holder)
            .bind(ttl_ms(ttl))
            .bind(token)
            .execute(&self.pool)
            .await?;
        if done.rows_affected() == 1 {
            Ok(())
        } else {
            Err(fail(format!("sqlite floor: lost {}", lock.key)))
        }
    }

    async fn release(&self, lock: RawLock) -> Result<()> {
        let token: i64 = lock.version.parse()?;
        let done = sqlx::query(AssertSqlSafe(self.release.as_str()))
            .bind(&lock.key)
            .bind(&lock.holder)
            .bind(token)
            .execute(&self.pool)
            .await?;
        if done.rows_affected() == 1 {
            Ok(())
        } else {
            Err(fail(format!("sqlite floor: lost {}", lock.key)))
        }
    }

    async fn plant(&self, key: &str, ttl: Duration) -> Result<()> {
        self.insert(key, "raw-crashed", ttl)
            .await?
            .map(drop)
            .ok_or_else(|| fail(format!("sqlite floor: cannot plant {key}")))
    }

    async fn takeover(&self, key: &str, _seen: &Observed, holder: &str, ttl: Duration) -> Result<Option<RawLock>> {
        self.insert(key, holder, ttl).await
    }
}
