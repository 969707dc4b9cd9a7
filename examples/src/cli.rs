//! What the example programs `leader-election` and `scheduled-job` share: printing,
//! start-up retries, the `--store` lease client and the `--data` database. Included by
//! each as `#[path = "../cli.rs"] mod cli;`, so each adds its own methods to [`Data`].

use std::error::Error;
use std::io::Write as _;
use std::time::Duration;

use leasehold_core::{ClientConfig, LeaseClient};
use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::sqlite::{SqlitePool, SqlitePoolOptions};

/// Every error of the example programs, boxed.
pub(crate) type BoxResult<T> = Result<T, Box<dyn Error + Send + Sync>>;

/// Prints one line to stdout and flushes it (the tests read it as it comes).
pub(crate) fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// Retries start-up steps for a few seconds: copies starting together on one SQLite
/// file can find it locked for a moment.
pub(crate) async fn retry<T, F, Fut>(what: &str, mut f: F) -> BoxResult<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = BoxResult<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        match f().await {
            Ok(v) => return Ok(v),
            Err(e) if tokio::time::Instant::now() < deadline => {
                eprintln!("{what}: {e}; retrying");
                tokio::time::sleep(Duration::from_millis(50 + u64::from(std::process::id() % 50))).await;
            }
            Err(e) => return Err(e),
        }
    }
}

/// Opens the lease store named by `--store`.
pub(crate) async fn lease_client(spec: &str, prefix: &str, label: &str) -> BoxResult<LeaseClient> {
    let config = ClientConfig::builder().label(label.to_owned()).build()?;
    if spec == "memory" {
        return Ok(LeaseClient::with_config(leasehold_core::MemoryStore::new(), config)?);
    }
    if let Some(path) = spec.strip_prefix("sqlite:") {
        let cfg = leasehold_sqlite::SqliteConfig::new().table(&format!("{prefix}_leases"))?;
        let store = leasehold_sqlite::SqliteStore::open_file(path, cfg).await?;
        return Ok(LeaseClient::with_config(store, config)?);
    }
    if spec.starts_with("postgres:") || spec.starts_with("postgresql:") {
        let pool = PgPoolOptions::new().max_connections(4).connect(spec).await?;
        let cfg = leasehold_postgres::PostgresConfig::new().table(&format!("{prefix}_leases"))?;
        leasehold_postgres::PostgresStore::provision(&pool, &cfg).await?;
        let store = leasehold_postgres::PostgresStore::new(pool, cfg).await?;
        return Ok(LeaseClient::with_config(store, config)?);
    }
    if let Some(eps) = spec.strip_prefix("etcd:") {
        let endpoints: Vec<String> = eps
            .split(',')
            .map(|e| {
                if e.contains("://") {
                    e.to_owned()
                } else {
                    format!("http://{e}")
                }
            })
            .collect();
        let client = etcd_client::Client::connect(endpoints, None).await?;
        let store = leasehold_etcd::EtcdStore::new(client, leasehold_etcd::EtcdConfig::new(format!("{prefix}/"))?);
        return Ok(LeaseClient::with_config(store, config)?);
    }
    Err(format!("unknown --store {spec}").into())
}

/// The program's own tables, in Postgres or SQLite.
pub(crate) enum Data {
    /// `--data postgres:URL` (or the Postgres lease store's database).
    Pg(PgPool),
    /// `--data sqlite:PATH` (or the SQLite lease store's file).
    Lite(SqlitePool),
}

impl Data {
    /// Opens the database named by `--data` (default: the lease store's own database;
    /// an in-memory SQLite for `memory`; required with etcd).
    pub(crate) async fn open(store: &str, data: Option<&str>) -> BoxResult<Self> {
        let spec = match data {
            Some(d) => d.to_owned(),
            None if store == "memory" => "sqlite::memory:".to_owned(),
            None if store.starts_with("etcd:") => return Err("--data is required with an etcd store".into()),
            None => store.to_owned(),
        };
        if spec.starts_with("postgres:") || spec.starts_with("postgresql:") {
            return Ok(Self::Pg(PgPoolOptions::new().max_connections(4).connect(&spec).await?));
        }
        if let Some(path) = spec.strip_prefix("sqlite:") {
            let opts = if path == ":memory:" {
                sqlx::sqlite::SqliteConnectOptions::new().in_memory(true)
            } else {
                leasehold_sqlite::connect_options(path)
            };
            let pool = SqlitePoolOptions::new().max_connections(1).connect_with(opts).await?;
            return Ok(Self::Lite(pool));
        }
        Err(format!("unknown --data {spec}").into())
    }
}
