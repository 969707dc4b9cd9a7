//! The real stores for the scheduler's tests: each opened as a user opens it, once per
//! instance (every instance has a client and connections of its own).
#![allow(dead_code, unreachable_pub)]

use std::time::Duration;

use leasehold::dynamodb::{DynamoConfig, DynamoStore, local_client as dynamodb_local};
use leasehold::postgres::sqlx;
use leasehold::s3::{S3Config, S3Store, local_client as s3_local};
use leasehold::url::{OpenOptions, StoreUrl};
use leasehold::{ClientConfig, LeaseClient};

/// One store of the tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Postgres,
    Sqlite,
    MySql,
    Etcd,
    Redis,
    DynamoDb,
    S3,
    ZooKeeper,
}

/// Where a test's leases live: the URL every instance opens.
#[derive(Debug, Clone)]
pub struct Place {
    pub kind: Kind,
    url: String,
}

impl Place {
    /// A place of its own on the tests' `kind` store (an SQLite file, a DynamoDB table,
    /// an S3 bucket of its own; the shared lease table elsewhere, under names of the
    /// test's own).
    pub async fn new(kind: Kind) -> Self {
        let suffix = leasehold_testkit::unique_suffix();
        let moto = || leasehold_testkit::moto_endpoint();
        let url = match kind {
            Kind::Postgres => leasehold_testkit::pg_url(),
            Kind::MySql => leasehold_testkit::env("LEASEHOLD_MYSQL_URL"),
            Kind::Sqlite => {
                let dir = leasehold_testkit::stores_dir("lease-jobs");
                format!("sqlite:{}", dir.join(format!("jobs-{suffix}.db")).display())
            }
            Kind::Etcd => {
                let hosts: Vec<String> = leasehold_testkit::etcd_endpoints()
                    .iter()
                    .map(|e| e.trim_start_matches("http://").to_owned())
                    .collect();
                format!("etcd://{}", hosts.join(","))
            }
            Kind::Redis => leasehold_testkit::redis_url(),
            Kind::DynamoDb => format!("jobs_{}", suffix.replace('-', "_")),
            Kind::S3 => format!("jobs-{suffix}"),
            // A root znode of its own (made by the first client, which provisions).
            Kind::ZooKeeper => format!("zookeeper://{}/lease-jobs-{suffix}", leasehold_testkit::zk_addr()),
        };
        let place = Self { kind, url };
        // Created once here: the instances' clients only open it.
        match kind {
            Kind::DynamoDb => {
                let config = DynamoConfig::new(place.url.as_str()).expect("table name");
                DynamoStore::provision(&dynamodb_local(&moto()), &config)
                    .await
                    .unwrap_or_else(|e| panic!("moto at LEASEHOLD_MOTO_ENDPOINT: {e}"));
            }
            Kind::S3 => {
                let config = S3Config::new(place.url.as_str(), "leases").expect("bucket name");
                S3Store::provision(&s3_local(&moto()), &config)
                    .await
                    .unwrap_or_else(|e| panic!("moto at LEASEHOLD_MOTO_ENDPOINT: {e}"));
            }
            _ => {}
        }
        place
    }

    /// What the store keeps for lease names starting with `prefix`: the SQL rows
    /// (tombstones included), Redis's and etcd's keys and ZooKeeper's znodes (counters
    /// included), the listed records on DynamoDB and S3.
    pub async fn count_records(&self, client: &LeaseClient, prefix: &str) -> usize {
        let like = format!("{prefix}%");
        match self.kind {
            Kind::Postgres => count_rows(sqlx::PgPool::connect(&self.url).await.expect("postgres"), like).await,
            Kind::Sqlite => {
                let path = self.url.trim_start_matches("sqlite:");
                let pool = sqlx::SqlitePool::connect_with(leasehold::sqlite::connect_options(path))
                    .await
                    .expect("sqlite");
                count_rows(pool, like).await
            }
            // Every key of the names, counter hashes included.
            Kind::Redis => {
                use leasehold::redis::redis::{self, AsyncCommands};
                let client = redis::Client::open(self.url.as_str()).expect("redis url");
                let mut conn = client.get_multiplexed_async_connection().await.expect("redis");
                let mut keys = conn
                    .scan_match::<_, String>(format!("leasehold:{{{prefix}*"))
                    .await
                    .expect("scan");
                let mut n = 0;
                while futures::StreamExt::next(&mut keys).await.is_some() {
                    n += 1;
                }
                n
            }
            // Every key of the names, fence counters included.
            Kind::Etcd => {
                use leasehold::etcd::etcd_client::{Client, GetOptions};
                let mut etcd = Client::connect(leasehold_testkit::etcd_endpoints(), None)
                    .await
                    .expect("etcd");
                let resp = etcd
                    .get(
                        format!("leasehold/{prefix}"),
                        Some(GetOptions::new().with_prefix().with_count_only()),
                    )
                    .await
                    .expect("count keys");
                usize::try_from(resp.count()).expect("a count")
            }
            // Every znode of the names under the place's root, fence counters included
            // (a name's `/` is `%2F` in a znode's name).
            Kind::ZooKeeper => {
                use leasehold::zookeeper::{ZooKeeperConfig, ZooKeeperStore};
                let (servers, root) = self
                    .url
                    .trim_start_matches("zookeeper://")
                    .split_once('/')
                    .expect("a root");
                let config = ZooKeeperConfig::new(format!("/{root}")).expect("root");
                let store = ZooKeeperStore::connect(servers, config).await.expect("zookeeper");
                let zk = store.client().await.expect("zookeeper client");
                let children = zk.list_children(&format!("/{root}")).await.expect("list the root");
                let child_prefix = prefix.replace('/', "%2F");
                children.iter().filter(|c| c.starts_with(&child_prefix)).count()
            }
            _ => {
                let prefix = leasehold::NamePrefix::new(prefix).expect("prefix");
                client.store().list(&prefix).await.expect("list").len()
            }
        }
    }

    /// A client of one instance on this place (creating what the store needs).
    pub async fn client(&self) -> LeaseClient {
        self.client_with(ClientConfig::default()).await
    }

    /// [`Place::client`] with `config`.
    pub async fn client_with(&self, config: ClientConfig) -> LeaseClient {
        match self.kind {
            Kind::DynamoDb => {
                let store = DynamoStore::new(
                    dynamodb_local(&leasehold_testkit::moto_endpoint()),
                    DynamoConfig::new(self.url.as_str()).expect("table name"),
                );
                return LeaseClient::with_config(store, config).expect("client");
            }
            Kind::S3 => {
                let store = S3Store::new(
                    s3_local(&leasehold_testkit::moto_endpoint()),
                    S3Config::new(self.url.as_str(), "leases").expect("bucket name"),
                );
                return LeaseClient::with_config(store, config).expect("client");
            }
            _ => {}
        }
        let url = StoreUrl::parse(&self.url).unwrap_or_else(|e| panic!("{}: {e}", self.url));
        let mut options = OpenOptions::default();
        options.client = config;
        options.provision = true;
        tokio::time::timeout(Duration::from_secs(30), url.open(&options))
            .await
            .unwrap_or_else(|_| panic!("opening {url} took over 30 s"))
            .unwrap_or_else(|e| panic!("{url} unreachable: {e} (start the stores: scripts/stores.sh start)"))
    }
}

/// The rows of the lease table whose names are `LIKE like`, read through `pool`
/// (Postgres or SQLite), which is then closed.
async fn count_rows<DB: sqlx::Database>(pool: sqlx::Pool<DB>, like: String) -> usize
where
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
    DB::Arguments: sqlx::IntoArguments<DB>,
    (i64,): for<'r> sqlx::FromRow<'r, DB::Row>,
    String: sqlx::Type<DB> + for<'q> sqlx::Encode<'q, DB>,
{
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM leasehold_leases WHERE name LIKE $1")
        .bind(like)
        .fetch_one(&pool)
        .await
        .expect("count rows");
    pool.close().await;
    usize::try_from(n).expect("a count")
}

/// The protected data of the tests, in the tests' Postgres whatever store holds the
/// leases: one row per committed slot, with the time of the commit on Postgres's clock.
pub struct Effects {
    pub pool: sqlx::PgPool,
}

/// The schema of this crate's test tables.
const SCHEMA: &str = "lease_jobs_test";

impl Effects {
    pub async fn open() -> Self {
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(8)
            .acquire_timeout(Duration::from_secs(5))
            .connect(&leasehold_testkit::pg_url())
            .await
            .unwrap_or_else(|e| panic!("Postgres at LEASEHOLD_PG_URL unreachable: {e}"));
        leasehold::postgres::run_ddl_serialized(
            &pool,
            &[
                &format!("CREATE SCHEMA IF NOT EXISTS {SCHEMA}"),
                &format!(
                    "CREATE TABLE IF NOT EXISTS {SCHEMA}.effects (job TEXT NOT NULL, slot BIGINT NOT NULL, \
                     token BIGINT NOT NULL, instance TEXT NOT NULL, at_ms BIGINT NOT NULL, PRIMARY KEY (job, slot))"
                ),
            ],
        )
        .await
        .expect("create the effects table");
        Self { pool }
    }

    /// The job's transaction: the slot's row with the commit time, unless the slot is
    /// done. `true` if this run committed it.
    pub async fn commit(&self, job: &str, slot: u64, token: u64, instance: &str) -> Result<bool, String> {
        let done = sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO {SCHEMA}.effects (job, slot, token, instance, at_ms) \
             VALUES ($1, $2, $3, $4, CAST(FLOOR(EXTRACT(EPOCH FROM clock_timestamp()) * 1000) AS BIGINT)) \
             ON CONFLICT (job, slot) DO NOTHING"
        )))
        .bind(job)
        .bind(i64::try_from(slot).map_err(|e| e.to_string())?)
        .bind(i64::try_from(token).map_err(|e| e.to_string())?)
        .bind(instance)
        .execute(&self.pool)
        .await
        .map_err(|e| e.to_string())?;
        Ok(done.rows_affected() == 1)
    }

    /// The rows of `job`: `(slot, instance, at_ms)`, by slot.
    pub async fn rows(&self, job: &str) -> Vec<(i64, String, i64)> {
        sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT slot, instance, at_ms FROM {SCHEMA}.effects WHERE job = $1 ORDER BY slot"
        )))
        .bind(job)
        .fetch_all(&self.pool)
        .await
        .expect("read the effects")
    }
}

/// A job that does at once what `on_slot` does with its slot and answers what it
/// returns (a run without a slot fails).
pub fn slot_job(
    on_slot: impl Fn(leasehold_jobs::Slot) -> leasehold_jobs::SlotOutcome + Send + 'static,
) -> impl FnMut(leasehold_jobs::JobContext) -> std::future::Ready<Result<leasehold_jobs::SlotOutcome, String>> + Send {
    move |ctx| std::future::ready(ctx.slot().map(&on_slot).ok_or_else(|| "no slot".to_owned()))
}

/// Polls `done` every 20 ms until it holds; panics with `what` after `within`.
pub async fn wait_until(within: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + within;
    while !done() {
        assert!(tokio::time::Instant::now() < deadline, "not within {within:?}: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Polls `done` every 50 ms until it holds; panics with `what` after `within`.
pub async fn wait_for<F: Future<Output = bool>>(within: Duration, what: &str, mut done: impl FnMut() -> F) {
    let deadline = tokio::time::Instant::now() + within;
    while !done().await {
        assert!(tokio::time::Instant::now() < deadline, "not within {within:?}: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// One test function per store, each calling `$body(Kind::…)`.
#[macro_export]
macro_rules! on_every_store {
    ($body:ident) => {
        $crate::on_stores!($body;
            postgres Postgres, sqlite Sqlite, mysql MySql, etcd Etcd, redis Redis, dynamodb DynamoDb, s3 S3,
            zookeeper ZooKeeper);
    };
}

/// One test function per store listed (`test_name Kind`), in a module named after
/// `$body`, each calling `$body(Kind::…)`.
#[macro_export]
macro_rules! on_stores {
    ($body:ident; $($store:ident $kind:ident),* $(,)?) => {
        mod $body {
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $store() {
                    $body(common::Kind::$kind).await;
                }
            )*
        }
    };
}
