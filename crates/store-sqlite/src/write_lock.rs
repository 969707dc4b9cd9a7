//! Whether any connection holds a database file's write lock right now.

use std::path::Path;
use std::time::Duration;

use sqlx::Connection;
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection};

/// Whether a write transaction could start on the database file at `path` right now,
/// without waiting: no connection of any process holds its write lock.
///
/// A process stopped inside a write transaction (a `SIGSTOP`, a debugger) holds the lock
/// and blocks every writer of the file, lease stores included, until it resumes or
/// dies; this tells such a file from a free one. It opens its own connection (no busy
/// timeout), tries `BEGIN IMMEDIATE`, and rolls back at once. A file that cannot be
/// opened counts as locked.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let dir = std::env::temp_dir().join(format!("leasehold-doc-lock-{}", std::process::id()));
/// std::fs::create_dir_all(&dir).expect("dir");
/// let path = dir.join("leases.db");
/// let options = leasehold_sqlite::connect_options(&path);
/// let pool = sqlx::SqlitePool::connect_with(options).await.expect("open");
/// assert!(leasehold_sqlite::write_lock_is_free(&path).await);
/// let mut tx = pool.begin().await.expect("begin");
/// sqlx::query("CREATE TABLE t (x INTEGER)").execute(&mut *tx).await.expect("write");
/// assert!(!leasehold_sqlite::write_lock_is_free(&path).await, "a write transaction is open");
/// tx.rollback().await.expect("rollback");
/// assert!(leasehold_sqlite::write_lock_is_free(&path).await);
/// # std::fs::remove_dir_all(&dir).ok();
/// # }
/// ```
pub async fn write_lock_is_free(path: &Path) -> bool {
    let options = SqliteConnectOptions::new().filename(path).busy_timeout(Duration::ZERO);
    let Ok(mut conn) = SqliteConnection::connect_with(&options).await else {
        return false;
    };
    let free = sqlx::query("BEGIN IMMEDIATE").execute(&mut conn).await.is_ok();
    if free {
        let _ = sqlx::query("ROLLBACK").execute(&mut conn).await;
    }
    let _ = conn.close().await;
    free
}
