//! A read-only server (a replica, or `read_only = ON`) is refused with a typed error and
//! nothing is written. The test runs a MariaDB of its own (`$LEASEHOLD_STORES_SCRIPT
//! start mariadb` on port 55316 with its data under
//! `$LEASEHOLD_STORES_DIR/leasehold-tests/mariadb-read-only`): `read_only` is global, and
//! switching it on the shared server would break every other test using it. The
//! application connects as a user without `SUPER` / `READ_ONLY ADMIN` (root may write
//! on a read-only server; an application account may not).
#![allow(missing_docs)]

use std::path::PathBuf;
use std::time::Duration;

use leasehold_core::{Error, LeaseClient};
use leasehold_mysql::{MySqlConfig, MySqlStore};
use sqlx::mysql::{MySqlPool, MySqlPoolOptions};
use sqlx::{AssertSqlSafe, Row};

const PORT: u16 = 55316;

/// `stores.sh` on this test's own port and data dir.
fn script(verb: &str) -> std::process::Output {
    let dir = leasehold_testkit::stores_dir("leasehold-tests/mariadb-read-only");
    std::process::Command::new(PathBuf::from(leasehold_testkit::env("LEASEHOLD_STORES_SCRIPT")))
        .args([verb, "mariadb"])
        .env("LEASEHOLD_STORES_DIR", &dir)
        .env("LEASEHOLD_MYSQL_PORT", PORT.to_string())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("running stores.sh {verb} mariadb: {e}"))
}

/// The server this test owns, stopped (`kill -9`, as `stores.sh stop` does) when dropped.
struct OwnServer;

impl OwnServer {
    fn start() -> Self {
        let out = script("start");
        assert!(
            out.status.success(),
            "stores.sh start mariadb on {PORT} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Self
    }
}

impl Drop for OwnServer {
    fn drop(&mut self) {
        let _ = script("stop");
    }
}

async fn connect(user: &str) -> MySqlPool {
    MySqlPoolOptions::new()
        .max_connections(2)
        .acquire_timeout(Duration::from_secs(10))
        .connect(&format!("mysql://{user}@127.0.0.1:{PORT}/leasehold"))
        .await
        .unwrap_or_else(|e| panic!("connect as {user} to the own MariaDB on {PORT}: {e}"))
}

async fn exec(pool: &MySqlPool, sql: &str) {
    sqlx::query(AssertSqlSafe(sql.to_owned()))
        .execute(pool)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

async fn snapshot(pool: &MySqlPool, table: &str) -> Vec<String> {
    sqlx::query(AssertSqlSafe(format!(
        "SELECT CONCAT_WS('|', name, holder, fence_token, version, expires_at_ms, deleted) FROM `{table}` ORDER BY name"
    )))
    .fetch_all(pool)
    .await
    .expect("snapshot")
    .iter()
    .map(|r| r.get(0))
    .collect()
}

fn assert_read_only_refusal<T: std::fmt::Debug>(what: &str, r: leasehold_core::Result<T>) {
    match r {
        Err(e @ Error::Misconfigured { .. }) => {
            assert!(e.to_string().contains("read-only"), "{what}: {e}");
        }
        other => panic!("{what} on a read-only server: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_server_is_refused_and_nothing_is_written() {
    let _server = OwnServer::start();
    let root = connect("root").await;
    // A leftover of an interrupted run may have left it on.
    exec(&root, "SET GLOBAL read_only = OFF").await;
    exec(&root, "CREATE USER IF NOT EXISTS 'lh_app'@'127.0.0.1'").await;
    exec(
        &root,
        "GRANT SELECT, INSERT, UPDATE ON leasehold.* TO 'lh_app'@'127.0.0.1'",
    )
    .await;
    let table = format!("lh_ro_{}", leasehold_testkit::unique_suffix().replace('-', "_"));
    let config = MySqlConfig::new().with_table(&table).expect("table");
    MySqlStore::provision(&root, &config).await.expect("provision");

    let app = connect("lh_app").await;
    let store = MySqlStore::new(app.clone(), config.clone())
        .await
        .expect("a writable primary opens");
    let client = LeaseClient::new(store.clone());
    let held = client
        .acquire("held", Duration::from_secs(60))
        .await
        .expect("acquire on the primary");
    let before = snapshot(&root, &table).await;

    exec(&root, "SET GLOBAL read_only = ON").await;
    let outcome = async {
        assert_read_only_refusal("MySqlStore::new", MySqlStore::new(app.clone(), config.clone()).await);
        assert_read_only_refusal("verify", store.verify().await);
        // A store opened before the switch: its writes are refused by the server (error
        // 1290), typed, and its row stays as it was.
        assert_read_only_refusal("acquire", client.try_acquire("fresh", Duration::from_secs(5)).await);
        assert_read_only_refusal("release", held.release().await);
        assert_eq!(snapshot(&root, &table).await, before, "a read-only server changed");
    }
    .await;
    exec(&root, "SET GLOBAL read_only = OFF").await;
    outcome
}
