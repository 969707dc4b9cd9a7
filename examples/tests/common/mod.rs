//! Running the example programs as real processes: spawn, read their event lines,
//! kill, freeze; and reading the truth from their tables.
#![allow(dead_code, unreachable_pub)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use leasehold_core::testing::process::{freeze, kill9, resume};
use sqlx::postgres::{PgPool, PgPoolOptions, PgRow};
use sqlx::sqlite::{SqlitePool, SqlitePoolOptions, SqliteRow};
use tokio::time::Instant;

/// A running example program and the lines it printed, with when they arrived.
pub struct Proc {
    pub name: String,
    pub child: Child,
    pub lines: Arc<Mutex<Vec<(Instant, String)>>>,
}

impl Proc {
    pub fn spawn(bin: &str, name: &str, args: &[String]) -> Self {
        let mut child = Command::new(bin)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {bin}: {e}"));
        let out = child.stdout.take().expect("stdout");
        let lines: Arc<Mutex<Vec<(Instant, String)>>> = Arc::default();
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                sink.lock().expect("lines").push((Instant::now(), line));
            }
        });
        Self {
            name: name.to_owned(),
            child,
            lines,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// When this process first printed a line starting with `prefix`.
    pub fn saw(&self, prefix: &str) -> Option<Instant> {
        self.lines
            .lock()
            .expect("lines")
            .iter()
            .find(|(_, l)| l.starts_with(prefix))
            .map(|(t, _)| *t)
    }

    pub fn count(&self, prefix: &str) -> usize {
        self.lines
            .lock()
            .expect("lines")
            .iter()
            .filter(|(_, l)| l.starts_with(prefix))
            .count()
    }

    pub fn count_since(&self, prefix: &str, since: Instant) -> usize {
        self.lines
            .lock()
            .expect("lines")
            .iter()
            .filter(|(t, l)| *t >= since && l.starts_with(prefix))
            .count()
    }

    pub fn last_line_time(&self, prefix: &str) -> Option<Instant> {
        self.lines
            .lock()
            .expect("lines")
            .iter()
            .rev()
            .find(|(_, l)| l.starts_with(prefix))
            .map(|(t, _)| *t)
    }

    pub fn dump(&self) -> String {
        let lines = self.lines.lock().expect("lines");
        let tail: Vec<&str> = lines.iter().rev().take(30).map(|(_, l)| l.as_str()).collect();
        format!("--- {} (last lines, newest first) ---\n{}", self.name, tail.join("\n"))
    }

    pub fn kill9(&mut self) {
        let _ = kill9(self.pid());
        let _ = self.child.wait();
    }

    pub async fn freeze(&self) {
        freeze(self.pid()).await.expect("freeze");
    }

    pub fn resume(&self) {
        resume(self.pid()).expect("resume");
    }

    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.is_running() {
            let _ = resume(self.pid());
            self.kill9();
        }
    }
}

/// Serializes the process tests of one test binary: each starts several processes
/// with timing assertions, which a 2-core machine should not run side by side.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Polls `cond` every 5 ms until it holds, panicking with `what` (and `dump`) after
/// `timeout`.
pub async fn wait_for(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool, dump: impl Fn() -> String) {
    let ok = leasehold_core::testing::process::poll(timeout, &mut cond).await;
    assert!(ok, "timed out after {timeout:?} waiting for {what}\n{}", dump());
}

/// The last lines of every process.
pub fn dump_all(procs: &[Proc]) -> String {
    procs.iter().map(Proc::dump).collect::<Vec<_>>().join("\n")
}

/// [`wait_for`] `cond` on `procs`, dumping all of them on a timeout.
pub async fn wait_procs(procs: &[Proc], what: &str, timeout: Duration, cond: impl Fn(&[Proc]) -> bool) {
    wait_for(what, timeout, || cond(procs), || dump_all(procs)).await;
}

/// Where a scenario's lease store and the program's tables live.
pub struct Place {
    pub label: &'static str,
    pub store: String,
    pub data: String,
    pub prefix: String,
    /// The scratch directory of the SQLite files, if any.
    scratch: Option<std::path::PathBuf>,
}

impl Place {
    /// Lease store and data in two SQLite files of a fresh scratch directory.
    pub fn sqlite(what: &str) -> Self {
        let dir = scratch_dir(what);
        Self {
            label: "sqlite",
            store: format!("sqlite:{}", dir.join("leases.db").display()),
            data: format!("sqlite:{}", dir.join("data.db").display()),
            prefix: "demo".into(),
            scratch: Some(dir),
        }
    }

    /// Lease store and data on the Postgres server under test, tables named `ex_<what>_…`.
    pub fn postgres(what: &str) -> Self {
        Self {
            label: "postgres",
            store: pg_url(),
            data: pg_url(),
            prefix: unique_prefix(what),
            scratch: None,
        }
    }

    /// Leases in the etcd cluster under test, data on the Postgres server.
    pub fn etcd(what: &str) -> Self {
        Self {
            label: "etcd",
            store: format!("etcd://{}", etcd_endpoints()),
            data: pg_url(),
            prefix: unique_prefix(what),
            scratch: None,
        }
    }

    /// The command line of one copy: `--store`, `--data`, `--prefix`, `--instance` and
    /// `--run-for-ms` from here, then `rest`.
    pub fn args(&self, instance: &str, run_for_ms: u64, rest: &[&str]) -> Vec<String> {
        let run_for = run_for_ms.to_string();
        let common = [
            "--store",
            &self.store,
            "--data",
            &self.data,
            "--prefix",
            &self.prefix,
            "--instance",
            instance,
            "--run-for-ms",
            &run_for,
        ];
        common.iter().chain(rest).map(|s| (*s).to_owned()).collect()
    }

    /// After a passed run: removes the scratch directory of the SQLite files, if any.
    pub fn remove_scratch(&self) {
        if let Some(dir) = &self.scratch {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

pub fn pg_url() -> String {
    std::env::var("LEASEHOLD_PG_URL")
        .unwrap_or_else(|_| panic!("LEASEHOLD_PG_URL is not set: run `eval \"$(scripts/stores.sh env)\"`"))
}

pub fn etcd_endpoints() -> String {
    let eps = std::env::var("LEASEHOLD_ETCD_ENDPOINTS")
        .unwrap_or_else(|_| panic!("LEASEHOLD_ETCD_ENDPOINTS is not set: run `eval \"$(scripts/stores.sh env)\"`"));
    eps.split(',')
        .map(|e| e.trim_start_matches("http://").to_owned())
        .collect::<Vec<_>>()
        .join(",")
}

/// A prefix no other run uses (tables, etcd keys).
pub fn unique_prefix(what: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("ex_{what}_{}_{nanos}", std::process::id())
}

/// A scratch directory for SQLite files.
pub fn scratch_dir(what: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(unique_prefix(what));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// Where the example programs keep their tables.
pub enum Db {
    Pg(PgPool),
    Lite(SqlitePool),
}

impl Db {
    pub async fn open(spec: &str) -> Self {
        if let Some(path) = spec.strip_prefix("sqlite:") {
            let pool = SqlitePoolOptions::new()
                .max_connections(1)
                .connect_with(leasehold_sqlite::connect_options(path))
                .await
                .unwrap_or_else(|e| panic!("open {spec}: {e}"));
            Self::Lite(pool)
        } else {
            let pool = PgPoolOptions::new()
                .max_connections(2)
                .connect(spec)
                .await
                .unwrap_or_else(|e| panic!("Postgres at LEASEHOLD_PG_URL unreachable: {e}"));
            Self::Pg(pool)
        }
    }

    /// The rows of a query, each decoded as a `T` (a tuple of its columns).
    async fn rows<T>(&self, sql: &str) -> Vec<T>
    where
        T: Send + Unpin + for<'r> sqlx::FromRow<'r, PgRow> + for<'r> sqlx::FromRow<'r, SqliteRow>,
    {
        let sql = sqlx::AssertSqlSafe(sql.to_owned());
        match self {
            Self::Pg(p) => sqlx::query_as(sql).fetch_all(p).await,
            Self::Lite(p) => sqlx::query_as(sql).fetch_all(p).await,
        }
        .expect("query")
    }

    /// Rows of a query returning two BIGINT/INTEGER columns.
    pub async fn pairs(&self, sql: &str) -> Vec<(i64, i64)> {
        self.rows(sql).await
    }

    /// Rows of a query returning a BIGINT and a TEXT column.
    pub async fn int_text(&self, sql: &str) -> Vec<(i64, String)> {
        self.rows(sql).await
    }

    /// Drops the tables of `prefix` (Postgres only: SQLite files are removed whole).
    pub async fn drop_tables(&self, prefix: &str, tables: &[&str]) {
        if let Self::Pg(p) = self {
            for t in tables {
                let _ = sqlx::query(sqlx::AssertSqlSafe(format!("DROP TABLE IF EXISTS {prefix}_{t}")))
                    .execute(p)
                    .await;
            }
        }
    }
}
