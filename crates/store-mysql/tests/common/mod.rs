//! What the MySQL tests share: the server from `LEASEHOLD_MYSQL_URL` (a MariaDB that
//! `scripts/stores.sh start mariadb` started) and lease tables of their own.
#![allow(dead_code, unreachable_pub)]

use std::time::Duration;

use leasehold_mysql::MySqlStore;
use sqlx::mysql::{MySqlPool, MySqlPoolOptions};
use sqlx::{AssertSqlSafe, Executor};

#[path = "../../../store-sqlite/tests/shared/mod.rs"]
pub mod shared;

/// The server under test; panics with a clear message without it.
pub fn mysql_url() -> String {
    leasehold_testkit::env("LEASEHOLD_MYSQL_URL")
}

/// A small pool on the server under test (the server's default `sql_mode`).
pub async fn pool() -> MySqlPool {
    pool_of(8).await
}

/// A pool of at most `max` connections on the server under test.
pub async fn pool_of(max: u32) -> MySqlPool {
    let url = mysql_url();
    MySqlPoolOptions::new()
        .max_connections(max)
        .acquire_timeout(Duration::from_secs(10))
        .connect(&url)
        .await
        .unwrap_or_else(|e| panic!("cannot reach MySQL at {url}: {e}"))
}

/// A table name no other test run uses.
pub fn unique_table(prefix: &str) -> String {
    format!("{prefix}_{}", leasehold_testkit::unique_suffix().replace('-', "_"))
}

/// Creates (if needed) and opens a lease table.
pub async fn store_on(pool: &MySqlPool, table: &str) -> MySqlStore {
    shared::store_on(pool, table).await
}

/// Runs one statement.
pub async fn exec(pool: &MySqlPool, sql: &str) {
    pool.execute(AssertSqlSafe(sql.to_owned()))
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

/// `SET` clauses that plant an expiry no write of the library makes: beyond the TTL, and
/// at the edge of the column's type.
pub const IMPOSSIBLE_EXPIRIES: &[(&str, &str)] = &[
    (
        "an expiry 100 years ahead",
        "expires_at_ms = expires_at_ms + 3155760000000",
    ),
    ("the largest BIGINT expiry", "expires_at_ms = 9223372036854775807"),
];

/// A store on a lease table of its own, for the foreign-writer tests: the store, the
/// table's name, and what must live as long as the test (nothing, here).
pub async fn foreign_store() -> (MySqlStore, String, ()) {
    let table = unique_table("lh_foreign");
    (store_on(&pool().await, &table).await, table, ())
}

/// The `mariadb` command-line client's connection arguments for the server under test
/// (`--no-defaults`: never the machine's own `/etc/mysql` settings).
pub fn cli_args() -> Vec<String> {
    let url = mysql_url();
    let rest = url
        .strip_prefix("mysql://")
        .unwrap_or_else(|| panic!("not a mysql:// URL: {url}"));
    let (auth, rest) = rest.split_once('@').unwrap_or(("root", rest));
    let (user, password) = auth.split_once(':').map_or((auth, None), |(u, p)| (u, Some(p)));
    let (hostport, db) = rest.split_once('/').unwrap_or((rest, ""));
    let (host, port) = hostport.split_once(':').unwrap_or((hostport, "3306"));
    let mut args = vec![
        "--no-defaults".to_owned(),
        "-h".into(),
        host.into(),
        "-P".into(),
        port.into(),
        "-u".into(),
        user.into(),
        "--batch".into(),
    ];
    if let Some(p) = password {
        args.push(format!("-p{p}"));
    }
    args.push(db.into());
    args
}

/// Runs `sql` with the `mariadb` client on the server under test, as an operator would.
/// The shared foreign-writer cases quote identifiers the standard way (`"t"`): the
/// session adds `ANSI_QUOTES` to the server's `sql_mode` for them.
pub fn operator(_: &(), sql: &str) {
    operator_in_mode("CONCAT(@@sql_mode, ',ANSI_QUOTES')", sql);
}

/// Runs `sql` with the `mariadb` client in the session `sql_mode` that `mode` (an SQL
/// expression) gives: `''` lets an operator store what strict mode refuses (MySQL then
/// converts it, with a warning).
pub fn operator_in_mode(mode: &str, sql: &str) {
    let script = format!("SET SESSION sql_mode = {mode}; {sql}");
    let mut args = cli_args();
    args.push("-e".into());
    args.push(script);
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    leasehold_testkit::foreign::cli("mariadb", &refs);
}
