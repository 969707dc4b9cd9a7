//! `SqliteStore::open_existing_file`: what a program that only reads leases opens. A
//! missing file or a file without the lease table is `NotProvisioned`, and nothing is
//! created or changed; a file `open_file` made opens, with its leases.
#![allow(missing_docs)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use leasehold_core::store::CasStore;
use leasehold_core::{Error, LeaseClient, LeaseName};
use leasehold_sqlite::{SqliteConfig, SqliteStore};
use sqlx::Connection;
use sqlx::sqlite::SqliteConnectOptions;

fn dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("leasehold-existing-{}", leasehold_testkit::unique_suffix()));
    std::fs::create_dir_all(&dir).expect("dir");
    dir
}

/// The names of the files in `dir`.
fn files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("read dir")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_file_is_not_provisioned_and_not_created() {
    let dir = dir();
    let path = dir.join("typo.db");
    match SqliteStore::open_existing_file(&path, SqliteConfig::new()).await {
        Err(Error::NotProvisioned { message, .. }) => assert!(message.contains("no database file"), "{message}"),
        other => panic!("a missing file: {other:?}"),
    }
    assert!(files(&dir).is_empty(), "created {:?}", files(&dir));
    std::fs::remove_dir_all(&dir).expect("clean up");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_without_the_table_is_not_provisioned_and_left_as_it_was() {
    let dir = dir();
    let path = dir.join("other-app.db");
    let options = SqliteConnectOptions::new().filename(&path).create_if_missing(true);
    let mut conn = sqlx::SqliteConnection::connect_with(&options).await.expect("create");
    sqlx::query("CREATE TABLE t (x INTEGER)")
        .execute(&mut conn)
        .await
        .expect("table");
    conn.close().await.expect("close");
    let before = std::fs::read(&path).expect("read");
    match SqliteStore::open_existing_file(&path, SqliteConfig::new()).await {
        Err(Error::NotProvisioned { .. }) => {}
        other => panic!("no lease table: {other:?}"),
    }
    // Byte for byte (no table added, the journal mode not switched to WAL), and no
    // side file left beside it.
    assert!(std::fs::read(&path).expect("read") == before, "the file changed");
    assert_eq!(files(&dir), ["other-app.db"]);
    std::fs::remove_dir_all(&dir).expect("clean up");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_file_opens_with_its_leases() {
    let dir = dir();
    let path = dir.join("leases.db");
    let made = SqliteStore::open_file(&path, SqliteConfig::new())
        .await
        .expect("open_file");
    let lease = LeaseClient::new(made)
        .acquire("existing/held", Duration::from_secs(30))
        .await
        .expect("acquire");
    let existing = SqliteStore::open_existing_file(&path, SqliteConfig::new())
        .await
        .expect("open_existing_file");
    let name = LeaseName::new("existing/held").expect("name");
    let seen = existing.read(&name).await.expect("read").expect("a record");
    assert_eq!(seen.record.token, lease.token(), "{seen:?}");
    lease.release().await.expect("release");
    std::fs::remove_dir_all(&dir).expect("clean up");
}

/// `open_file` of a path in a directory that does not exist, or of a directory, says so
/// in words (the driver says only "unable to open database file") and creates nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_directory_or_a_directory_is_named() {
    let dir = dir();
    let missing = dir.join("no").join("such").join("leases.db");
    match SqliteStore::open_file(&missing, SqliteConfig::new()).await {
        Err(Error::Misconfigured { message, .. }) => assert!(
            message.contains(&format!("no directory {}", dir.join("no/such").display())),
            "{message}"
        ),
        other => panic!("a missing directory: {other:?}"),
    }
    match SqliteStore::open_file(&dir, SqliteConfig::new()).await {
        Err(Error::Misconfigured { message, .. }) => {
            assert!(message.contains("is a directory, not a database file"), "{message}");
        }
        other => panic!("a directory: {other:?}"),
    }
    assert!(files(&dir).is_empty(), "created {:?}", files(&dir));
    std::fs::remove_dir_all(&dir).expect("clean up");
}
