//! Bad input: one line on stderr, the documented exit code, no panic, in bounded time;
//! and no password in any message.

mod common;

use std::time::{Duration, Instant};

use common::{STORE, Store, USAGE, assert_one_line};

const LIMIT: Duration = Duration::from_secs(20);

async fn expect(store: &Store, args: &[&str], code: i32) -> String {
    let started = Instant::now();
    let out = store.output(args, LIMIT).await;
    let err = assert_one_line(&out, code);
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{args:?} took {:?}",
        started.elapsed()
    );
    assert!(out.stdout.is_empty(), "{args:?}: nothing on stdout: {out:?}");
    err
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_urls_are_usage_errors() {
    let store = Store::sqlite().await;
    for url in [
        "nonsense",
        "ftp://example.com/x",
        "sqlite:",
        "sqlite::memory:",
        "sqlite:leases.db?mode=ro",
        "etcd://host-without-port",
        "etcd://h:99999",
        "dynamodb://t?colour=red",
        "s3://?region=us-east-1",
        "postgres://app:hunter2@",
        "redis://:hunter2@",
    ] {
        let err = expect(&store, &["--store", url, "show", "x"], USAGE).await;
        assert!(err.contains("bad store URL"), "{url}: {err}");
        assert!(!err.contains("hunter2"), "{url}: {err}");
    }
    // The environment variable is read the same way.
    let mut c = store.cmd(&["show", "x"]);
    c.env("LEASEHOLD_STORE", "nonsense://");
    let out = common::finish(c.spawn().expect("spawn"), LIMIT).await;
    assert_one_line(&out, USAGE);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_names_ttls_and_options_are_usage_errors() {
    let store = Store::sqlite().await;
    for args in [
        &["run", "has space", "--", "true"][..],
        &["run", "/leading-slash", "--", "true"],
        &["run", "a//b", "--", "true"],
        &["show", "a/../b"],
        &["release", "--force", "bad*name"],
        &["run", "ok", "--ttl", "banana", "--", "true"],
        &["run", "ok", "--ttl", "1ms", "--", "true"],
        &["run", "ok", "--ttl", "30d", "--", "true"],
        // Valid for the library, too short for a command (`open::MIN_TTL`).
        &["run", "ok", "--ttl", "999ms", "--", "true"],
        &["run", "ok", "--timeout", "soon", "--", "true"],
        &["run", "ok", "--wait", "--timeout", "1s", "--", "true"],
        // A grace the TTL cannot hold: the command of a lost lease would outlive it.
        &["run", "ok", "--ttl", "2s", "--grace", "1s", "--", "true"],
        &["run", "ok", "--grace", "15s", "--", "true"],
        &["run", "ok", "--grace", "300000000000y", "--", "true"],
        &["run", "ok", "--at-least", "8d", "--", "true"],
        &["run", "ok", "--at-least", "later", "--", "true"],
        &["elect", "ok", "--ttl", "10s", "--grace", "5s", "--", "true"],
        &["run", "ok"],
        &["release", "ok"],
        &["frobnicate"],
        &["show"],
        &["elect", "has space", "--", "true"],
        &["elect", "ok", "--ttl", "1ms", "--", "true"],
        &["elect", "ok", "--ttl", "50ms", "--", "true"],
        &["elect", "ok", "--timeout", "soon", "--", "true"],
        &["elect", "ok"],
        &["observe", "a//b"],
        &["observe", "ok", "--count", "0"],
        &["observe", "ok", "--count", "-1"],
        &["observe", "ok", "--interval", "0s"],
        &["observe", "ok", "--interval", "often"],
        &["list", "has space"],
        &["list", "/root"],
        &["list", "a", "b"],
    ] {
        expect(&store, args, USAGE).await;
    }
    // Nothing was written by any of them.
    assert!(store.read("ok").await.is_none());
}

/// A usage error points to the help of the subcommand it is about.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_errors_point_to_the_help_that_answers_them() {
    let store = Store::sqlite().await;
    for (args, help) in [
        (&["frobnicate"][..], "(see leasehold --help)"),
        (&["stores", "frob"], "(see leasehold stores --help)"),
        (&["run"], "(see leasehold run --help)"),
        (&["observe", "x", "--count", "-1"], "(see leasehold observe --help)"),
    ] {
        let err = expect(&store, args, USAGE).await;
        assert!(err.trim_end().ends_with(help), "{args:?}: {err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_stores_are_store_errors_without_passwords() {
    let store = Store::sqlite().await;
    for url in common::UNREACHABLE {
        let err = expect(&store, &["--store", url, "run", "x", "--", "true"], STORE).await;
        assert!(!err.contains("hunter2"), "{url}: {err}");
        // The driver's words on why, not only what failed.
        assert!(err.contains("Connection refused"), "{url}: {err}");
        for args in [&["show", "x"][..], &["elect", "x", "--", "true"], &["observe", "x"]] {
            let mut args = args.to_vec();
            args.splice(0..0, ["--store", url]);
            let err = expect(&store, &args, STORE).await;
            assert!(!err.contains("hunter2"), "{url}: {err}");
            assert!(err.contains("Connection refused"), "{url}: {err}");
        }
    }
}

/// `args` on the store at `url`, whose setup is missing: one line, the store-error code,
/// naming `missing` and the `stores check --create URL` that creates it; that command,
/// run as told, does, and `args` then succeed.
async fn missing_setup_is_created_as_told(store: &Store, url: &str, args: &[&str], missing: &str) {
    let on = |args: &[&str]| {
        let mut all = vec!["--store", url];
        all.extend_from_slice(args);
        common::finish(store.moto_cmd(&all).spawn().expect("spawn"), LIMIT)
    };
    let out = on(args).await;
    let err = assert_one_line(&out, STORE);
    assert!(err.contains(missing), "{err}");
    let told = err
        .trim_end()
        .strip_suffix("' to create it")
        .and_then(|e| e.rsplit_once("; run 'leasehold stores check --create "))
        .map(|(_, url)| url.trim_matches('"'))
        .unwrap_or_else(|| panic!("no 'stores check --create URL' in: {err}"));
    assert_eq!(told, url, "{err}");
    let out = on(&["stores", "check", "--create", told]).await;
    assert_eq!(common::code(&out), 0, "{out:?}");
    let out = on(args).await;
    assert_eq!(common::code(&out), 0, "created as told: {out:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_dynamodb_table_says_how_to_create_it() {
    let store = Store::sqlite().await;
    let moto = leasehold_testkit::moto_endpoint();
    let table = format!("cli_missing_{}", leasehold_testkit::unique_suffix().replace('-', "_"));
    let url = format!("dynamodb://{table}?region=us-east-1&endpoint={moto}");
    missing_setup_is_created_as_told(&store, &url, &["show", "x"], &table).await;
}

/// On a Postgres schema without the lease table (a search_path of its own).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_postgres_table_says_how_to_create_it() {
    use leasehold::postgres::sqlx::{self, AssertSqlSafe};
    let store = Store::sqlite().await;
    let pg = leasehold_testkit::pg_url();
    let pool = common::pg_pool(1).await;
    let schema = format!("cli_missing_{}", leasehold_testkit::unique_suffix().replace('-', "_"));
    sqlx::query(AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
        .execute(&pool)
        .await
        .expect("create the schema");
    let sep = if pg.contains('?') { '&' } else { '?' };
    let url = format!("{pg}{sep}options=-csearch_path%3D{schema}");
    missing_setup_is_created_as_told(&store, &url, &["run", "x", "--", "true"], "leasehold_leases").await;
    sqlx::query(AssertSqlSafe(format!("DROP SCHEMA {schema} CASCADE")))
        .execute(&pool)
        .await
        .expect("drop the schema");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_zookeeper_root_says_how_to_create_it() {
    let store = Store::sqlite().await;
    let root = format!("/cli-missing-{}", leasehold_testkit::unique_suffix());
    let url = format!("zookeeper://{}{root}", leasehold_testkit::zk_addr());
    missing_setup_is_created_as_told(&store, &url, &["list"], &root).await;
}

/// The commands that only read or release leases create no SQLite file: a mistyped path
/// is a store error naming the missing file (not an empty database where nothing is
/// held), and `stores check --create` creates it as told.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_sqlite_file_is_not_created_by_reading_commands() {
    let store = Store::sqlite().await;
    let path = store.file("typo.db");
    let url = format!("sqlite:{}", path.display());
    for args in [
        &["show", "x"][..],
        &["show", "x", "--json"],
        &["list"],
        &["release", "--force", "x"],
        &["observe", "x", "--count", "1"],
        &["stores", "check"],
    ] {
        let mut all = vec!["--store", url.as_str()];
        all.extend_from_slice(args);
        let err = expect(&store, &all, STORE).await;
        assert!(err.contains("no database file at"), "{args:?}: {err}");
        let left: Vec<_> = std::fs::read_dir(&store.dir)
            .expect("test dir")
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|f| f.starts_with("typo"))
            .collect();
        assert!(left.is_empty(), "{args:?} created {left:?}");
    }
    missing_setup_is_created_as_told(&store, &url, &["show", "x"], "no database file at").await;
}

/// A SQLite file's journal mode and tables.
async fn sqlite_state(conn: &mut leasehold::sqlite::sqlx::SqliteConnection) -> (String, Vec<String>) {
    use leasehold::sqlite::sqlx;
    let mode: String = sqlx::query_scalar("PRAGMA journal_mode")
        .fetch_one(&mut *conn)
        .await
        .expect("mode");
    let tables: Vec<String> = sqlx::query_scalar("SELECT name FROM sqlite_master ORDER BY name")
        .fetch_all(&mut *conn)
        .await
        .expect("tables");
    (mode, tables)
}

/// A SQLite file of another program, without the lease table, is refused as not set up
/// and left as it was: no table added, its journal mode unchanged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_sqlite_file_is_left_as_it_was() {
    use leasehold::sqlite::sqlx::{self, Connection, Executor, sqlite::SqliteConnectOptions};
    let store = Store::sqlite().await;
    let path = store.file("other-app.db");
    let (options, table) = (SqliteConnectOptions::new(), "CREATE TABLE t (x INTEGER)");
    let mut conn = sqlx::SqliteConnection::connect_with(&options.filename(&path).create_if_missing(true))
        .await
        .expect("create");
    conn.execute(table).await.expect("table");
    let before = sqlite_state(&mut conn).await;
    assert_eq!(before, ("delete".to_owned(), vec!["t".to_owned()]));
    let url = format!("sqlite:{}", path.display());
    for args in [&["show", "x"][..], &["list"], &["stores", "check"]] {
        let mut all = vec!["--store", url.as_str()];
        all.extend_from_slice(args);
        let err = expect(&store, &all, STORE).await;
        assert!(err.contains("leasehold_leases: does not exist"), "{args:?}: {err}");
        assert_eq!(sqlite_state(&mut conn).await, before, "{args:?} changed the file");
    }
}

/// An empty `LEASEHOLD_STORE` is unset (as `${X:-}` leaves it): the default store, which
/// `list` does not create and `run` does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_store_variable_means_the_default_store() {
    let store = Store::sqlite().await;
    let home = store.file("home");
    let default = home.join(".local/share/leasehold/leases.db");
    let on_default = |args: &[&str]| {
        let mut c = store.cmd(args);
        c.env("LEASEHOLD_STORE", "")
            .env("HOME", &home)
            .env_remove("XDG_DATA_HOME");
        common::finish(c.spawn().expect("spawn"), LIMIT)
    };
    let err = assert_one_line(&on_default(&["list"]).await, STORE);
    assert!(
        err.contains(&format!("no database file at {}", default.display())),
        "{err}"
    );
    assert!(!home.exists(), "list created {}", home.display());
    // The command it names makes the default store, directory and all.
    assert!(
        err.trim_end()
            .ends_with("run 'leasehold stores check --create' to create it"),
        "{err}"
    );
    let out = on_default(&["stores", "check", "--create"]).await;
    assert_eq!(common::code(&out), 0, "{out:?}");
    assert!(default.exists(), "stores check --create makes the default store");
    std::fs::remove_dir_all(&home).expect("remove the default store");
    let out = on_default(&["run", "x", "--", "true"]).await;
    assert_eq!(common::code(&out), 0, "{out:?}");
    assert!(default.exists(), "run creates the default store");
    let out = on_default(&["list"]).await;
    assert_eq!(common::code(&out), 0, "{out:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_that_cannot_run() {
    let store = Store::sqlite().await;
    let name = store.name("nocmd");
    expect(&store, &["run", &name, "--", "/nonexistent/command"], 127).await;
    // The lease was released: the next run gets it at once.
    let out = store.output(&["run", &name, "--", "true"], LIMIT).await;
    assert_eq!(common::code(&out), 0, "{out:?}");
}

/// A `--timeout` that runs out while the store keeps failing (here a SQLite file another
/// process keeps write-locked) is a store error saying how it failed, not "held by
/// someone else": a cron job's exit code tells an outage from contention.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_on_a_failing_store_is_a_store_error() {
    use leasehold::sqlite::sqlx::{self, Connection};
    let store = Store::sqlite().await;
    let path = store.file("leases.db");
    let mut other = sqlx::SqliteConnection::connect_with(&leasehold::sqlite::connect_options(&path))
        .await
        .expect("second connection");
    sqlx::query("BEGIN IMMEDIATE")
        .execute(&mut other)
        .await
        .expect("take the write lock");
    // The busy timeout (4 s) refuses the first attempt; the deadline ends the next.
    let (name, leader) = (store.name("locked"), store.name("locked-election"));
    let run = store.spawn(&["run", &name, "--timeout", "6s", "--", "true"]);
    let elect = store.spawn(&["elect", &leader, "--timeout", "6s", "--", "true"]);
    for (child, what) in [
        (run, format!("lease {name}")),
        (elect, format!("leadership of {leader}")),
    ] {
        let out = common::finish(child, LIMIT).await;
        let err = assert_one_line(&out, STORE);
        assert!(
            err.contains(&format!("{what}: gave up after 6s: store unavailable: ")),
            "{err}"
        );
        assert!(err.contains("database is locked"), "{err}");
    }
    sqlx::query("ROLLBACK").execute(&mut other).await.expect("unlock");
    assert!(store.read(&name).await.is_none(), "a refused write applied");
}
