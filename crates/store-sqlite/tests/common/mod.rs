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
    ("an expiry as text", "expires_at_ms = 'soon'"),
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

/// SQLite as the shared SQL cases see it: every test on a database file of its own.
pub struct Lite;

impl shared::db::TestDb for Lite {
    type B = leasehold_sqlite::SqliteBackend;
    type Keep = TempDb;

    async fn fresh(prefix: &str) -> (SqlitePool, TempDb) {
        let db = db_path(prefix);
        (pool(db.path()).await, db)
    }

    fn table(prefix: &str) -> String {
        prefix.to_owned()
    }

    const GOOD_COLUMNS: &'static str = "name VARCHAR(200) NOT NULL PRIMARY KEY, holder VARCHAR(128), \
        fence_token INTEGER NOT NULL, version INTEGER NOT NULL, ttl_ms INTEGER NOT NULL, acquired_at_ms INTEGER NOT NULL, \
        expires_at_ms INTEGER NOT NULL, wall_expires_at_ms INTEGER, deleted INTEGER NOT NULL DEFAULT 0, \
        write_id INTEGER NOT NULL DEFAULT 0, boot_id TEXT NOT NULL DEFAULT ''";

    const WRONG_COLUMNS: &'static [(&'static str, &'static str, &'static str)] = &[
        ("token as text", "fence_token INTEGER", "fence_token TEXT"),
        ("no write_id", ", write_id INTEGER NOT NULL DEFAULT 0", ""),
        (
            "no boot_id (a table of an earlier version)",
            ", boot_id TEXT NOT NULL DEFAULT ''",
            "",
        ),
        ("holder not null", "holder VARCHAR(128)", "holder VARCHAR(128) NOT NULL"),
        ("expiry as text", "expires_at_ms INTEGER", "expires_at_ms TEXT"),
    ];

    /// SQLite stores a value of any type in any column: values of the wrong type too.
    const CORRUPTIONS: &'static [(&'static str, &'static str)] = &[
        ("token as text", "'w1', 'seven', 1000, NULL"),
        ("token as real", "'w1', 2.5, 1000, NULL"),
        ("holder as blob", "x'00ff', 3, 1000, NULL"),
        ("ttl as text", "'w1', 3, 'long', NULL"),
    ];

    const TYPED: bool = false;

    const BAD_MARKS: &'static [&'static str] = &["'abc'", "X'00'"];

    /// Expired in this boot of the host clock the store judges expiry on.
    fn insert_expired(table: &str, name: &str, values: &str) -> String {
        let clock = leasehold_sql::HostClock::get().expect("host clock");
        format!(
            "INSERT INTO \"{table}\" (name, holder, fence_token, ttl_ms, wall_expires_at_ms, expires_at_ms, version, acquired_at_ms, boot_id) \
             VALUES ('{name}', {values}, {}, 1, 0, '{}')",
            clock.now_ms() - 60_000,
            clock.boot_id()
        )
    }

    /// A token that is text and a holder with a space, held in this boot.
    fn corrupt_held_row(table: &str) -> String {
        let clock = leasehold_sql::HostClock::get().expect("host clock");
        format!(
            "INSERT INTO \"{table}\" (name, holder, fence_token, version, ttl_ms, acquired_at_ms, expires_at_ms, boot_id) \
             VALUES (?1, 'not a holder', 'seven', 1, 3600000, 0, {}, '{}')",
            clock.now_ms() + 3_600_000,
            clock.boot_id()
        )
    }

    fn snapshot(table: &str, name: &str) -> String {
        format!(
            "SELECT quote(holder) || quote(fence_token) || quote(version) || quote(ttl_ms) || quote(expires_at_ms) \
             || quote(wall_expires_at_ms) || quote(deleted) || quote(write_id) FROM \"{table}\" WHERE name = '{name}'"
        )
    }
}
