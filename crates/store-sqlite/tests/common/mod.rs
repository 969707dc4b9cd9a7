//! What the SQLite tests share: database files under a temporary directory and a lease
//! table.
#![allow(dead_code, unreachable_pub)]

use std::path::PathBuf;

use leasehold_sqlite::{SqliteStore, connect_options};
use sqlx::SqlitePool;
use sqlx::sqlite::SqlitePoolOptions;

#[path = "../shared/mod.rs"]
pub mod shared;

/// A database file in a fresh directory under the system temp dir, removed on drop.
pub struct TempDb(PathBuf);

impl TempDb {
    /// The database file.
    pub fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for TempDb {
    fn drop(&mut self) {
        if let Some(dir) = self.0.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// A fresh database file path in a directory of its own under the system temp dir.
pub fn db_path(prefix: &str) -> TempDb {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir()
        .join("leasehold-store-sqlite-tests")
        .join(format!("{prefix}-{}-{nanos:x}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
    TempDb(dir.join("leases.db"))
}

/// The database file of run `run` (the same path in every process that names the run).
pub fn db_file(prefix: &str, run: &str) -> TempDb {
    let dir = std::env::temp_dir()
        .join("leasehold-store-sqlite-tests")
        .join(format!("{prefix}-{run}"));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
    TempDb(dir.join("leases.db"))
}

/// A pool on `path` with the recommended options.
pub async fn pool(path: &std::path::Path) -> SqlitePool {
    SqlitePoolOptions::new()
        .max_connections(4)
        .connect_with(connect_options(path))
        .await
        .unwrap_or_else(|e| panic!("open {}: {e}", path.display()))
}

/// Creates (if needed) and opens a lease table.
pub async fn store_on(pool: &SqlitePool, table: &str) -> SqliteStore {
    shared::store_on(pool, table).await
}

/// Runs one statement.
#[allow(unused_imports)] // not every test binary runs statements
pub use shared::exec;

/// `SET` clauses that plant an expiry no write of the library makes: beyond the TTL, and
/// at the edge of the column's type.
pub const IMPOSSIBLE_EXPIRIES: &[(&str, &str)] = &[
    (
        "an expiry 100 years ahead",
        "expires_at_ms = expires_at_ms + 3153600000000",
    ),
    (
        "the largest expiry the column holds",
        "expires_at_ms = 9223372036854775807",
    ),
];

/// A store on a database file of its own, for the foreign-writer tests: the store, the
/// lease table's name, and the file (removed when the test ends).
pub async fn foreign_store() -> (SqliteStore, String, TempDb) {
    let db = db_path("foreign");
    let table = "leasehold_leases".to_owned();
    let store = store_on(&pool(db.path()).await, &table).await;
    (store, table, db)
}

/// Runs `sql` with the `sqlite3` shell on `db`, as an operator would (waiting up to 5 s
/// for the store's write lock).
pub fn operator(db: &TempDb, sql: &str) {
    let path = db.path().display().to_string();
    leasehold_testkit::foreign::cli("sqlite3", &["-bail", "-cmd", ".timeout 5000", &path, sql]);
}
