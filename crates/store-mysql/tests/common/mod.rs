//! What the MySQL tests share: the server from `LEASEHOLD_MYSQL_URL` (a MariaDB that
//! `scripts/stores.sh start mariadb` started) and lease tables of their own.
#![allow(dead_code, unreachable_pub)]

use leasehold_mysql::MySqlStore;
use sqlx::mysql::MySqlPool;

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
    shared::db::server_pool(&mysql_url(), max).await
}

/// A table name no other test run uses.
pub use shared::db::unique_table;

/// Creates (if needed) and opens a lease table.
pub async fn store_on(pool: &MySqlPool, table: &str) -> MySqlStore {
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
    let args = mariadb_args(mode, sql);
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    leasehold_testkit::foreign::cli("mariadb", &refs);
}

/// Whether the `mariadb` client, run as [`operator_in_mode`] runs it, succeeds.
pub fn mariadb_succeeds(mode: &str, sql: &str) -> bool {
    std::process::Command::new("mariadb")
        .args(mariadb_args(mode, sql))
        .output()
        .expect("mariadb runs")
        .status
        .success()
}

/// The `mariadb` client's arguments that run `sql` in the session `sql_mode` `mode`.
fn mariadb_args(mode: &str, sql: &str) -> Vec<String> {
    let mut args = cli_args();
    args.push("-e".into());
    args.push(format!("SET SESSION sql_mode = {mode}; {sql}"));
    args
}

/// MySQL (MariaDB) as the shared SQL cases see it: tables in the server's default
/// engine, InnoDB.
pub struct My;

impl shared::db::TestDb for My {
    type B = leasehold_mysql::MySqlBackend;
    type Keep = ();

    async fn fresh(_prefix: &str) -> (MySqlPool, ()) {
        (pool().await, ())
    }

    const GOOD_COLUMNS: &'static str = "name VARCHAR(200) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY, \
        holder VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NULL, fence_token BIGINT NOT NULL, \
        version BIGINT NOT NULL, ttl_ms BIGINT NOT NULL, acquired_at_ms BIGINT NOT NULL, expires_at_ms BIGINT NOT NULL, \
        wall_expires_at_ms BIGINT NULL, deleted BOOLEAN NOT NULL DEFAULT FALSE";

    const WRONG_COLUMNS: &'static [(&'static str, &'static str, &'static str)] = &[
        ("token as text", "fence_token BIGINT", "fence_token TEXT"),
        ("token unsigned", "fence_token BIGINT", "fence_token BIGINT UNSIGNED"),
        ("version as int", "version BIGINT", "version INT"),
        (
            "holder not null",
            "COLLATE ascii_bin NULL",
            "COLLATE ascii_bin NOT NULL",
        ),
        (
            "another unique key",
            "DEFAULT FALSE",
            "DEFAULT FALSE, UNIQUE KEY (holder)",
        ),
        (
            "expiry as a datetime",
            "expires_at_ms BIGINT",
            "expires_at_ms DATETIME(6)",
        ),
    ];

    const CORRUPTIONS: &'static [(&'static str, &'static str)] =
        &[("the largest token", "'w1', 9223372036854775807, 1000, NULL")];

    fn insert_expired(table: &str, name: &str, values: &str) -> String {
        format!(
            "INSERT INTO `{table}` (name, holder, fence_token, ttl_ms, wall_expires_at_ms, version, acquired_at_ms, expires_at_ms) \
             VALUES ('{name}', {values}, 1, {NOW_MS} - 3600000, {NOW_MS} - 60000)"
        )
    }

    /// A negative token and a holder with a space.
    fn corrupt_held_row(table: &str) -> String {
        format!(
            "INSERT INTO `{table}` (name, holder, fence_token, version, ttl_ms, acquired_at_ms, expires_at_ms) \
             VALUES (?, 'not a holder', -3, 1, 3600000, 0, {NOW_MS} + 3600000)"
        )
    }

    fn snapshot(table: &str, name: &str) -> String {
        format!(
            "SELECT CONCAT_WS('|', holder, fence_token, version, ttl_ms, acquired_at_ms, expires_at_ms, \
             wall_expires_at_ms, deleted) FROM `{table}` WHERE name = '{name}'"
        )
    }

    /// MySQL's refused claim says only that it wrote nothing; the client then reads.
    fn claim_refused(outcome: &leasehold_core::Result<leasehold_core::store::CasOutcome>) -> bool {
        use leasehold_core::store::{CasOutcome, Current};
        matches!(outcome, Ok(CasOutcome::Conflict(Current::Unknown)))
    }
}

/// The server's clock in milliseconds since the epoch, as SQL.
const NOW_MS: &str = "(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000)";

/// Two statements per batch of renewals: the `UPDATE` joined to `JSON_TABLE`, and its
/// read.
impl shared::batched::Batches for My {
    const MARKER: &'static str = "JSON_TABLE(";
    const STATEMENTS_PER_BATCH: u64 = 2;
}

impl shared::request_timeout::Served for My {
    fn url() -> String {
        mysql_url()
    }
}
