//! A lease file another process keeps write-locked (a transaction left open, a process
//! frozen inside one): a write waits the busy timeout and is refused as `Unavailable`
//! (nothing applied) before the store's request timeout would leave it in doubt; an
//! acquire says the store failed, never that someone holds the lease.
#![allow(missing_docs)]

use std::time::{Duration, Instant};

use leasehold_core::store::{CasStore, LeaseRecord, Precondition};
use leasehold_core::{FencingToken, HolderId, LeaseClient, LeaseName, Ttl};
use leasehold_sql::DEFAULT_REQUEST_TIMEOUT;
use leasehold_sqlite::{DEFAULT_BUSY_TIMEOUT, SqliteConfig, SqliteStore};
use sqlx::Connection;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_locked_file_is_unavailable_not_in_doubt() {
    assert!(
        DEFAULT_BUSY_TIMEOUT < DEFAULT_REQUEST_TIMEOUT,
        "the busy timeout must end before the request timeout"
    );
    let dir = std::env::temp_dir().join(format!("leasehold-locked-{}", leasehold_testkit::unique_suffix()));
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("leases.db");
    let store = SqliteStore::open_file(&path, SqliteConfig::default())
        .await
        .expect("open");
    // Another connection (as another process would) takes the write lock and keeps it.
    let mut other = sqlx::SqliteConnection::connect_with(&leasehold_sqlite::connect_options(&path))
        .await
        .expect("second connection");
    sqlx::query("BEGIN IMMEDIATE").execute(&mut other).await.expect("lock");

    let name = LeaseName::new("locked/a").expect("name");
    let record = LeaseRecord::held(
        HolderId::new("me").expect("holder"),
        FencingToken::FIRST,
        Ttl::new(Duration::from_secs(30)).expect("ttl"),
    );
    let started = Instant::now();
    let err = store
        .write(&name, &Precondition::Claimable, &record)
        .await
        .expect_err("the file is locked");
    let took = started.elapsed();
    assert!(err.is_retryable() && !err.is_indeterminate(), "{err:?}");
    assert!(err.to_string().contains("locked"), "{err}");
    assert!(took < DEFAULT_REQUEST_TIMEOUT, "took {took:?}");

    let started = Instant::now();
    let err = LeaseClient::new(store.clone())
        .try_acquire("locked/b", Duration::from_secs(30))
        .await
        .expect_err("not granted, and not held by anyone");
    assert!(err.is_retryable(), "{err:?}");
    assert!(
        started.elapsed() < DEFAULT_REQUEST_TIMEOUT,
        "took {:?}",
        started.elapsed()
    );

    sqlx::query("ROLLBACK").execute(&mut other).await.expect("unlock");
    assert!(
        store.read(&name).await.expect("read").is_none(),
        "a refused write applied"
    );
    drop(other);
    let _ = std::fs::remove_dir_all(&dir);
}
