//! The shared statement counts (`shared/statements.rs`) on real Postgres: the server's
//! own count comes from its log (`log_statement = 'all'` for the store's one
//! connection, read back from the server log by backend pid). Every operation,
//! including a refused acquire and a takeover attempt, is one statement.
#![allow(missing_docs)]

mod common;

use common::shared::statements::{Counted, ServerLog};
use sqlx::postgres::PgPoolOptions;
use sqlx::{Executor, PgPool, Row};

/// The statements one backend executed, from the server's log: only what the log gained
/// after `from` (its size when the backend connected), so that a long log costs nothing
/// and an earlier backend with the same pid is never counted.
pub struct PgLog {
    path: std::path::PathBuf,
    from: u64,
    pid: i32,
    reader: PgPool,
}

impl PgLog {
    /// The log's size now, in bytes.
    async fn size(path: &std::path::Path, reader: &PgPool) -> u64 {
        match std::fs::metadata(path) {
            Ok(m) => m.len(),
            // Not readable by this OS user: ask the server, which writes it.
            Err(_) => {
                let size: i64 = sqlx::query("SELECT (pg_stat_file($1)).size")
                    .bind(path.display().to_string())
                    .fetch_one(reader)
                    .await
                    .unwrap_or_else(|e| panic!("cannot stat the server log {}: {e}", path.display()))
                    .get(0);
                u64::try_from(size).unwrap_or(0)
            }
        }
    }

    /// What the log gained since `from`.
    async fn tail(&self) -> String {
        use std::io::{Read, Seek, SeekFrom};
        let local = std::fs::File::open(&self.path).and_then(|mut f| {
            f.seek(SeekFrom::Start(self.from))?;
            let mut text = String::new();
            f.read_to_string(&mut text)?;
            Ok(text)
        });
        match local {
            Ok(text) => text,
            Err(_) => {
                let from = i64::try_from(self.from).unwrap_or(i64::MAX);
                sqlx::query("SELECT pg_read_file($1, $2, (pg_stat_file($1)).size - $2)")
                    .bind(self.path.display().to_string())
                    .bind(from)
                    .fetch_one(&self.reader)
                    .await
                    .unwrap_or_else(|e| panic!("cannot read the server log {}: {e}", self.path.display()))
                    .get(0)
            }
        }
    }
}

impl ServerLog for PgLog {
    async fn statements(&self) -> Vec<String> {
        let text = self.tail().await;
        let tag = format!("[{}] LOG:  ", self.pid);
        text.lines()
            .filter(|l| l.contains(&tag) && (l.contains("LOG:  execute ") || l.contains("LOG:  statement: ")))
            .map(str::to_owned)
            .collect()
    }
}

impl Counted for common::Pg {
    type Log = PgLog;
    const CLAIM: &'static str = "ON CONFLICT (name) DO UPDATE";

    async fn logged_pool() -> (PgPool, Option<PgLog>, ()) {
        let url = common::pg_url();
        let pool = PgPoolOptions::new()
            .max_connections(1)
            .after_connect(|conn, _| {
                Box::pin(async move {
                    conn.execute("SET log_statement = 'all'").await?;
                    Ok(())
                })
            })
            .connect(&url)
            .await
            .unwrap_or_else(|e| panic!("cannot reach Postgres at {url}: {e}"));
        let pid: i32 = sqlx::query("SELECT pg_backend_pid()")
            .fetch_one(&pool)
            .await
            .expect("backend pid")
            .get(0);
        let path = std::path::Path::new(&leasehold_testkit::env("LEASEHOLD_STORES_DIR"))
            .join("postgres")
            .join("postgres.log");
        let reader = common::pool().await;
        // Taken after the connect, before any statement the test counts: the backend's
        // own `SET` and pid query may fall either side, and neither is counted.
        let from = PgLog::size(&path, &reader).await;
        let log = PgLog {
            path,
            from,
            pid,
            reader,
        };
        (pool, Some(log), ())
    }
}

common::shared::sql_tests!(statements, common::Pg);
