//! What the example programs `leader-election` and `scheduled-job` share: printing,
//! start-up retries, the options both take, the `--store` lease client and the `--data`
//! database. Included by each as `#[path = "../cli.rs"] mod cli;`, so each adds its own
//! methods to [`Data`].

use std::error::Error;
use std::io::Write as _;
use std::sync::Arc;
use std::time::Duration;

use leasehold::url::{OpenOptions, StoreUrl};
use leasehold_core::{ClientConfig, LeaseClient};
use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::sqlite::{SqlitePool, SqlitePoolOptions};
use tokio_util::sync::CancellationToken;

/// Every error of the example programs, boxed.
pub(crate) type BoxResult<T> = Result<T, Box<dyn Error + Send + Sync>>;

/// Prints one line to stdout and flushes it (the tests read it as it comes).
pub(crate) fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// The options both programs take: `--store`, `--data`, `--prefix`, `--instance`,
/// `--run-for-ms` (flattened into each program's own, parsed by clap).
#[derive(Debug, clap::Args)]
pub(crate) struct Common {
    /// Where the leases live: a store URL as the `leasehold` command takes it
    /// (sqlite:PATH, postgres://…, etcd://HOST:PORT,…) or `memory`
    /// (default: an SQLite file in the temp directory, shared by all copies).
    #[arg(long, value_name = "URL", default_value_t = default_store())]
    pub(crate) store: String,
    /// Where the program's own tables live, sqlite:PATH or postgres://… (default: the
    /// store's database; required with etcd; an in-memory SQLite with `memory`).
    #[arg(long, value_name = "URL")]
    pub(crate) data: Option<String>,
    /// Prefix of the tables (and etcd keys) this program uses: letters, digits and _.
    #[arg(long, default_value = "demo", value_parser = prefix)]
    pub(crate) prefix: String,
    /// This copy's name in its output and its holder ids.
    #[arg(long, value_name = "ID", default_value_t = format!("pid-{}", std::process::id()))]
    pub(crate) instance: String,
    /// Stop after this many milliseconds (default: run until killed).
    #[arg(long = "run-for-ms", value_name = "MS", value_parser = ms)]
    pub(crate) run_for: Option<Duration>,
}

/// A whole number of milliseconds, for clap.
pub(crate) fn ms(v: &str) -> Result<Duration, String> {
    v.parse()
        .map(Duration::from_millis)
        .map_err(|e| format!("{v:?} is not a whole number of milliseconds: {e}"))
}

/// The default `--store`: an SQLite file in the temp directory.
fn default_store() -> String {
    format!(
        "sqlite:{}",
        std::env::temp_dir().join("leasehold-examples.db").display()
    )
}

fn prefix(v: &str) -> Result<String, String> {
    if !v.is_empty() && v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        Ok(v.to_owned())
    } else {
        Err("letters, digits and _ only".into())
    }
}

impl Common {
    /// Opens the lease store and the data (retrying, see [`retry`]).
    pub(crate) async fn open(&self) -> BoxResult<(LeaseClient, Data)> {
        let client = retry("open the lease store", || {
            lease_client(&self.store, &self.prefix, &self.instance)
        })
        .await?;
        let data = retry("open the data", || Data::open(&self.store, self.data.as_deref())).await?;
        Ok((client, data))
    }

    /// The shutdown token: cancelled after `--run-for-ms`, if given.
    pub(crate) fn shutdown(&self) -> CancellationToken {
        let shutdown = CancellationToken::new();
        if let Some(d) = self.run_for {
            let s = shutdown.clone();
            tokio::spawn(async move {
                tokio::time::sleep(d).await;
                s.cancel();
            });
        }
        shutdown
    }

    /// Prints the `ready` line.
    pub(crate) fn ready(&self) {
        say(&format!("ready instance={} pid={}", self.instance, std::process::id()));
    }

    /// Opens the lease store and the data ([`Common::open`]) for the work under the
    /// lease `name`: the lease client, and what every call of the work shares.
    pub(crate) async fn open_work(&self, name: &str) -> BoxResult<(LeaseClient, Arc<Work>)> {
        let (client, data) = self.open().await?;
        let work = Work {
            data,
            prefix: self.prefix.clone(),
            name: name.to_owned(),
            instance: self.instance.clone(),
        };
        Ok((client, Arc::new(work)))
    }
}

/// What every call of a program's work shares: its data, the `--prefix` of its tables,
/// the name of its lease (the election's, the job's) and this copy's `--instance`.
pub(crate) struct Work {
    /// The program's own tables.
    pub(crate) data: Data,
    /// `--prefix`.
    pub(crate) prefix: String,
    /// The lease's name.
    pub(crate) name: String,
    /// `--instance`.
    pub(crate) instance: String,
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

/// Opens the lease store named by `--store`: `memory`, or any store URL
/// ([`leasehold::url`]), its table (`PREFIX_leases`) or key prefix (`PREFIX/`) the
/// program's own, created if missing ([`StoreUrl::open`]).
pub(crate) async fn lease_client(spec: &str, prefix: &str, label: &str) -> BoxResult<LeaseClient> {
    let config = ClientConfig::builder().label(label.to_owned()).build()?;
    if spec == "memory" {
        return Ok(LeaseClient::with_config(leasehold_core::MemoryStore::new(), config)?);
    }
    let mut options = OpenOptions::with_client(config);
    options.table = Some(format!("{prefix}_leases"));
    options.etcd_prefix = Some(format!("{prefix}/"));
    options.provision = true;
    Ok(StoreUrl::parse(spec)?.open(&options).await?)
}

/// Runs `$body` with `$pool` bound to the pool of `$data` (a [`Data`]), whichever
/// database it is.
macro_rules! on_pool {
    ($data:expr, $pool:ident => $body:expr) => {
        match $data {
            Data::Pg($pool) => $body,
            Data::Lite($pool) => $body,
        }
    };
}
pub(crate) use on_pool;

/// The program's own tables, in Postgres or SQLite.
pub(crate) enum Data {
    /// `--data postgres://…` (or the Postgres lease store's database).
    Pg(PgPool),
    /// `--data sqlite:PATH` (or the SQLite lease store's file).
    Lite(SqlitePool),
}

impl Data {
    /// `sql`, written with Postgres placeholders (`$1`), for this database (`?1` in SQLite).
    pub(crate) fn sql(&self, pg: String) -> String {
        match self {
            Self::Pg(_) => pg,
            Self::Lite(_) => pg.replace('$', "?"),
        }
    }

    /// Opens the database named by `--data` (default: the lease store's own database;
    /// an in-memory SQLite for `memory`; required with etcd).
    pub(crate) async fn open(store: &str, data: Option<&str>) -> BoxResult<Self> {
        let spec = match data {
            Some(d) => d,
            None if store == "memory" => {
                let opts = sqlx::sqlite::SqliteConnectOptions::new().in_memory(true);
                let pool = SqlitePoolOptions::new().max_connections(1).connect_with(opts).await?;
                return Ok(Self::Lite(pool));
            }
            None => store,
        };
        match StoreUrl::parse(spec)? {
            StoreUrl::Postgres { url } => Ok(Self::Pg(PgPoolOptions::new().max_connections(4).connect(&url).await?)),
            StoreUrl::Sqlite { path } => {
                let opts = leasehold_sqlite::connect_options(&path);
                Ok(Self::Lite(
                    SqlitePoolOptions::new().max_connections(1).connect_with(opts).await?,
                ))
            }
            _ if data.is_none() => Err(format!("--data is required with the store {spec}").into()),
            other => Err(format!("--data is a Postgres or SQLite database, not {}", other.kind()).into()),
        }
    }
}
