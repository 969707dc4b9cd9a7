//! A server that stops answering: each lease statement ends at the store's request
//! timeout, a write as "may have applied" (`Indeterminate`), a read as `Unavailable`,
//! and an acquire whose write got no answer is in doubt, never "did not apply".
#![allow(missing_docs)]

mod common;

use std::str::FromStr;
use std::time::Duration;

use leasehold_core::store::{CasStore, LeaseRecord, Precondition};
use leasehold_core::{Error, FencingToken, HolderId, LeaseName, Ttl};
use leasehold_postgres::{PostgresConfig, PostgresStore};
use leasehold_testkit::proxy::{Proxy, ProxyMode};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

const BOUND: Duration = Duration::from_millis(300);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_server_ends_each_statement_at_the_request_timeout() {
    assert!(PostgresConfig::new().with_request_timeout(Duration::ZERO).is_err());
    let direct = PgConnectOptions::from_str(&common::pg_url()).expect("LEASEHOLD_PG_URL");
    let proxy = Proxy::start(&format!("{}:{}", direct.get_host(), direct.get_port())).await;
    let pool = PgPoolOptions::new()
        .max_connections(2)
        .acquire_timeout(Duration::from_secs(10))
        .connect_with(direct.clone().port(proxy.port()))
        .await
        .expect("connect through the proxy");
    let table = common::unique_table("lh_silent");
    PostgresStore::provision(&pool, &PostgresConfig::new().with_table(&table).expect("table"))
        .await
        .expect("create the table");
    let config = PostgresConfig::new()
        .with_table(&table)
        .expect("table")
        .with_request_timeout(BOUND)
        .expect("bound");
    let store = PostgresStore::new(pool, config).await.expect("open");
    let name = LeaseName::new("silent/pg").expect("name");
    assert!(store.read(&name).await.expect("answers while forwarding").is_none());

    proxy.set_mode(ProxyMode::Withhold);
    let started = tokio::time::Instant::now();
    let read = store.read(&name).await;
    assert!(matches!(read, Err(Error::Unavailable { .. })), "read: {read:?}");
    let record = LeaseRecord::held(
        HolderId::new("w1").expect("holder"),
        FencingToken::FIRST,
        Ttl::from_millis(5000).expect("ttl"),
    );
    let write = store.write(&name, &Precondition::Claimable, &record).await;
    assert!(matches!(write, Err(Error::Indeterminate { .. })), "write: {write:?}");
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(2),
        "two statements took {took:?}, bound {BOUND:?} each"
    );
    leasehold_testkit::endpoints::assert_acquire_is_in_doubt(store, Duration::from_secs(2)).await;

    drop(proxy);
    let pool = common::pool().await;
    common::exec(&pool, &format!("DROP TABLE \"{table}\"")).await;
}
