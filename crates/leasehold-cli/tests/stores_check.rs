//! `leasehold stores check`: a missing table or bucket is one line naming it and the
//! store-error code, `--create` makes it, and a check afterwards passes; an unreachable
//! store is one line too.

mod common;

use std::time::Duration;

use common::{STORE, Store, assert_one_line, code};

const LIMIT: Duration = Duration::from_secs(30);

/// `stores check URL` on moto, with the static test credentials.
async fn check(store: &Store, url: &str, create: bool) -> std::process::Output {
    let mut args = vec!["stores", "check", url];
    if create {
        args.push("--create");
    }
    common::finish(store.moto_cmd(&args).spawn().expect("spawn"), LIMIT).await
}

async fn missing_then_created(url: &str, missing: &str) {
    let store = Store::sqlite().await;
    let out = check(&store, url, false).await;
    let err = assert_one_line(&out, STORE);
    assert!(err.contains(missing), "names what is missing: {err}");
    assert!(err.contains("--create"), "says how to fix it: {err}");
    assert!(
        !err.contains("ErrorMetadata") && !err.contains("SdkBody"),
        "no driver dump: {err}"
    );
    assert!(out.stdout.is_empty(), "{out:?}");

    let out = check(&store, url, true).await;
    assert_eq!(code(&out), 0, "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 3, "{out:?}");
    let out = check(&store, url, false).await;
    assert_eq!(code(&out), 0, "created for good: {out:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_dynamodb_table_is_named_and_created_with_create() {
    let moto = leasehold_testkit::moto_endpoint();
    let table = format!("cli_check_{}", leasehold_testkit::unique_suffix().replace('-', "_"));
    missing_then_created(&format!("dynamodb://{table}?region=us-east-1&endpoint={moto}"), &table).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_s3_bucket_is_named_and_created_with_create() {
    let moto = leasehold_testkit::moto_endpoint();
    let bucket = format!("cli-check-{}", leasehold_testkit::unique_suffix());
    missing_then_created(
        &format!("s3://{bucket}/leases?region=us-east-1&endpoint={moto}"),
        "bucket",
    )
    .await;
}

/// Without `--create`, a missing SQLite file is missing setup too (nothing is created).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_sqlite_file_is_named_and_created_with_create() {
    let store = Store::sqlite().await;
    let path = store.file("not-yet.db");
    missing_then_created(&format!("sqlite:{}", path.display()), "no database file").await;
    assert!(path.exists(), "created by --create");
}

/// `sqlite:~/PATH` is under `$HOME`, as a crontab's `LEASEHOLD_STORE` would write it
/// (no shell expands `~` there): created there by `--create`, and no `~` directory made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sqlite_path_under_tilde_is_in_the_home_directory() {
    let store = Store::sqlite().await;
    let home = store.file("home");
    std::fs::create_dir(&home).expect("home");
    let run = |create: bool| {
        let mut args = vec!["stores", "check", "sqlite:~/leases.db"];
        if create {
            args.push("--create");
        }
        let mut cmd = store.cmd(&args);
        cmd.env("HOME", &home);
        common::finish(cmd.spawn().expect("spawn"), LIMIT)
    };
    let out = run(false).await;
    let err = assert_one_line(&out, STORE);
    assert!(err.contains(&home.join("leases.db").display().to_string()), "{err}");
    let out = run(true).await;
    assert_eq!(code(&out), 0, "{out:?}");
    assert!(home.join("leases.db").exists(), "created under HOME");
    assert!(!store.file("~").exists(), "no directory named ~");
}

/// A URL given twice, differently (the argument and `--store`), is a usage error, not
/// one of them silently; the argument is checked over `LEASEHOLD_STORE` (what every
/// other case here does).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_different_urls_are_a_usage_error() {
    let store = Store::sqlite().await;
    let other = format!("sqlite:{}", store.file("other.db").display());
    let both = |args: &[&str]| {
        let mut c = store.cmd(args);
        c.env_remove("LEASEHOLD_STORE");
        common::finish(c.spawn().expect("spawn"), LIMIT)
    };
    let out = both(&["--store", &store.url, "stores", "check", &other, "--create"]).await;
    let err = assert_one_line(&out, common::USAGE);
    assert!(err.contains("two stores named"), "{err}");
    assert!(!store.file("other.db").exists(), "nothing created: {err}");
    // The same URL twice is one store.
    let out = both(&["--store", &store.url, "stores", "check", &store.url]).await;
    assert_eq!(code(&out), 0, "{out:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_store_is_one_line() {
    let store = Store::sqlite().await;
    for url in common::UNREACHABLE {
        let out = check(&store, url, false).await;
        let err = assert_one_line(&out, STORE);
        assert!(err.contains("connect and setup"), "{url}: {err}");
        assert!(err.contains("Connection refused"), "{url}: {err}");
        assert!(!err.contains("hunter2"), "{url}: {err}");
    }
    let out = check(&store, "nonsense", false).await;
    assert_one_line(&out, common::USAGE);
}

/// ZooKeeper's client retries a refused connection until its request timeout (5 s), so it
/// is not among `common::UNREACHABLE`; the line still says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_zookeeper_is_one_line_that_says_why() {
    let store = Store::sqlite().await;
    let out = check(&store, "zookeeper://127.0.0.1:1/leasehold", false).await;
    let err = assert_one_line(&out, STORE);
    assert!(err.contains("connect and setup"), "{err}");
    assert!(err.contains("127.0.0.1:1: Connection refused"), "{err}");
}
