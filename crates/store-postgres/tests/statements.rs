//! The shared statement counts (`shared/statements.rs`) on real Postgres: the server's
//! own count comes from its log (`log_statement = 'all'` for the store's one
//! connection, read back from the server log by backend pid). Every operation,
//! including a refused acquire and a takeover attempt, is one statement.
#![allow(missing_docs)]

mod common;

use common::shared::statements::{Counted, ServerLog};
use sqlx::postgres::PgPoolOptions;
use sqlx::{Executor, PgPool, Row};

/// The statements one backend executed, from the server's log.
pub struct PgLog {
    path: std::path::PathBuf,
    pid: i32,
    reader: PgPool,
}

impl ServerLog for PgLog {
    async fn statements(&self) -> Vec<String> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(t) => t,
            // Not readable by this OS user: let the server read its own log.
            Err(_) => sqlx::query("SELECT pg_read_file($1)")
                .bind(self.path.display().to_string())
                .fetch_one(&self.reader)
                .await
                .unwrap_or_else(|e| panic!("cannot read the server log {}: {e}", self.path.display()))
                .get(0),
        };
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
        let log = PgLog {
            path,
            pid,
            reader: common::pool().await,
        };
        (pool, Some(log), ())
    }
}

common::shared::sql_tests!(statements, common::Pg);
