//! The frozen holder, with real processes: a worker holds the lease and writes through
//! the fence in a loop; it is SIGSTOPped past its TTL, another holder takes over and
//! writes, the worker is SIGCONTed, and every write it attempts afterwards is refused.
//!
//! Two resources, run side by side:
//! - inside etcd: the worker's writes are transactions guarded by the lease record's
//!   revision (`EtcdStore::fenced_txn`);
//! - outside etcd: a Postgres row (`LEASEHOLD_PG_URL`) updated with leasehold-core's
//!   `FencedUpdate` (`last_token <= :token`) and the grant's token.
//!
//! The verdicts come from the stores: etcd's revisions of the written keys, the row's
//! value and high-water mark. (A custom harness: this binary is also the worker.)
#![allow(missing_docs)]

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::worker::{Worker, fenced_increment};
use etcd_client::{GetOptions, TxnOp};
use leasehold_core::testing::process::{freeze, resume};
use leasehold_core::{FencingToken, LeaseClient};
use tokio::time::Instant;

const TTL_MS: u64 = 2000;

fn main() {
    if common::worker::run_if_worker() {
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("runtime: {e}"));
    let started = Instant::now();
    rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(90), async {
            tokio::join!(frozen_holder_inside_etcd(), frozen_holder_on_postgres());
        })
        .await
        .unwrap_or_else(|_| panic!("the frozen-holder scenarios did not finish within 90 s"));
    });
    println!("frozen_holder: 2 scenarios passed in {:?}", started.elapsed());
}

fn worker_env(store: &leasehold_etcd::EtcdStore, name: &str) -> HashMap<&'static str, String> {
    HashMap::from([
        ("LH_ENDPOINTS", common::endpoints().join(",")),
        ("LH_PREFIX", store.config().prefix().to_owned()),
        ("LH_NAME", name.to_owned()),
        ("LH_TTL_MS", TTL_MS.to_string()),
    ])
}

async fn frozen_holder_inside_etcd() {
    let store = common::store("frozen-etcd").await;
    let name = "frozen/etcd";
    let data = format!("{}data/", store.config().prefix());
    let mut env = worker_env(&store, name);
    env.insert("LH_DATA", data.clone());
    let worker = Worker::spawn("fenced-etcd", &env);
    worker.wait_for("granted", 1, Duration::from_secs(15)).await;
    assert_eq!(worker.granted_token(), Some(1));
    worker.wait_for("ok", 3, Duration::from_secs(10)).await;

    freeze(worker.pid).await.expect("freeze");
    let frozen_at = Instant::now();
    let oks_before = worker.count("ok");
    let challenger = LeaseClient::new(store.clone());
    let lease = challenger
        .acquire_timeout(name, Duration::from_millis(TTL_MS), Duration::from_secs(20))
        .await
        .expect("takeover of the frozen holder's lease");
    let took_over_after = frozen_at.elapsed();
    assert_eq!(lease.token(), FencingToken::new(2), "takeover issues the next token");
    let fence = store.fence(&lease).expect("fence");
    for i in 0..3 {
        store
            .fenced_txn(&fence, [TxnOp::put(format!("{data}2-new{i}"), "x", None)])
            .await
            .expect("the new holder writes")
            .applied()
            .expect("applied");
    }

    resume(worker.pid).expect("resume");
    worker.wait_for("rejected", 5, Duration::from_secs(10)).await;
    let lines = worker.kill().await;

    // The truth, from etcd: every key the old holder wrote predates the takeover grant.
    let mut kv = store.client().kv_client();
    let resp = kv
        .get(data.clone(), Some(GetOptions::new().with_prefix()))
        .await
        .expect("read data");
    let grant_rev = fence.revision();
    let mut old = 0;
    let mut new = 0;
    for kv in resp.kvs() {
        let key = String::from_utf8_lossy(kv.key()).into_owned();
        if key.starts_with(&format!("{data}1-")) {
            old += 1;
            assert!(
                kv.mod_revision() < grant_rev,
                "the frozen holder wrote {key} at revision {} after the takeover at {grant_rev}",
                kv.mod_revision()
            );
        } else {
            new += 1;
        }
    }
    let oks: Vec<&String> = lines.iter().filter(|l| l.starts_with("ok ")).collect();
    let rejected = lines.iter().filter(|l| l.starts_with("rejected ")).count();
    let errors: Vec<&String> = lines.iter().filter(|l| l.starts_with("error ")).collect();
    assert_eq!(
        old,
        oks.len(),
        "acknowledged writes of the old holder vs keys in etcd: {lines:?}"
    );
    assert_eq!(new, 3);
    assert!(errors.is_empty(), "{errors:?}");
    // Every attempt after the first refusal was refused too (the worker never checks).
    let first_rejection = lines
        .iter()
        .position(|l| l.starts_with("rejected "))
        .unwrap_or(lines.len());
    assert!(
        lines[first_rejection..].iter().all(|l| l.starts_with("rejected ")),
        "a write was accepted after a refusal: {lines:?}"
    );
    println!(
        "frozen holder (etcd fence): {} writes before the freeze ({oks_before} seen at freeze), takeover after {took_over_after:?} with token 2, {rejected} writes refused after SIGCONT",
        oks.len()
    );
    lease.release().await.expect("release");
    common::cleanup(&store).await;
}

async fn frozen_holder_on_postgres() {
    let url = leasehold_testkit::pg_url();
    let pool = sqlx::PgPool::connect(&url)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to Postgres at LEASEHOLD_PG_URL: {e}"));
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let table = format!("store_etcd_fence_{}_{nanos:x}", std::process::id());
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "CREATE TABLE {table} (id text PRIMARY KEY, value bigint NOT NULL, last_token bigint NOT NULL)"
    )))
    .execute(&pool)
    .await
    .expect("create table");
    sqlx::query(sqlx::AssertSqlSafe(format!("INSERT INTO {table} VALUES ('row', 0, 0)")))
        .execute(&pool)
        .await
        .expect("insert row");

    let store = common::store("frozen-pg").await;
    let name = "frozen/pg";
    let mut env = worker_env(&store, name);
    env.insert("LH_PG_URL", url.clone());
    env.insert("LH_TABLE", table.clone());
    let worker = Worker::spawn("fenced-pg", &env);
    worker.wait_for("granted", 1, Duration::from_secs(15)).await;
    worker.wait_for("ok", 3, Duration::from_secs(10)).await;

    freeze(worker.pid).await.expect("freeze");
    let challenger = LeaseClient::new(store.clone());
    let lease = challenger
        .acquire_timeout(name, Duration::from_millis(TTL_MS), Duration::from_secs(20))
        .await
        .expect("takeover");
    assert_eq!(lease.token(), FencingToken::new(2));
    // The new holder's first write raises the row's high-water mark to 2.
    for _ in 0..3 {
        fenced_increment(&pool, &table, lease.token())
            .await
            .expect("the new holder's fenced update");
    }

    resume(worker.pid).expect("resume");
    worker.wait_for("rejected", 5, Duration::from_secs(10)).await;
    let lines = worker.kill().await;

    let (value, last_token): (i64, i64) = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT value, last_token FROM {table} WHERE id = 'row'"
    )))
    .fetch_one(&pool)
    .await
    .expect("read row");
    let oks = lines.iter().filter(|l| l.starts_with("ok ")).count();
    let rejected = lines.iter().filter(|l| l.starts_with("rejected ")).count();
    let errors: Vec<&String> = lines.iter().filter(|l| l.starts_with("error ")).collect();
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(last_token, 2, "the row's high-water mark");
    assert_eq!(
        value,
        i64::try_from(oks + 3).unwrap_or(i64::MAX),
        "increments in the row vs acknowledged increments (old holder {oks}, new holder 3): {lines:?}"
    );
    let first_rejection = lines
        .iter()
        .position(|l| l.starts_with("rejected "))
        .unwrap_or(lines.len());
    assert!(
        lines[first_rejection..].iter().all(|l| l.starts_with("rejected ")),
        "an update was accepted after a refusal: {lines:?}"
    );
    println!(
        "frozen holder (Postgres fence): {oks} updates before the freeze, 3 by the new holder, {rejected} refused after SIGCONT; row value {value}, last_token {last_token}"
    );
    lease.release().await.expect("release");
    sqlx::query(sqlx::AssertSqlSafe(format!("DROP TABLE {table}")))
        .execute(&pool)
        .await
        .expect("drop my table");
    common::cleanup(&store).await;
}
