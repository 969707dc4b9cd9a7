//! Opening the store a [`StoreUrl`] names, as a [`LeaseClient`]: what the `leasehold`
//! command and the example programs do with `--store URL`.
//!
//! ```
//! # #[cfg(feature = "sqlite")]
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use leasehold::url::{OpenOptions, StoreUrl};
//! let dir = std::env::temp_dir().join(format!("leasehold-open-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir)?;
//! let url = StoreUrl::parse(&format!("sqlite:{}", dir.join("leases.db").display()))?;
//! let client = url.open(&OpenOptions::default()).await?;
//! let lease = client.acquire("jobs/nightly", std::time::Duration::from_secs(30)).await?;
//! lease.release().await?;
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok(())
//! # }
//! # #[cfg(not(feature = "sqlite"))]
//! # fn main() {}
//! ```

use std::time::Duration;

use crate::url::StoreUrl;
use crate::{ClientConfig, Error, LeaseClient, Result};

/// How [`StoreUrl::open`] opens a store.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct OpenOptions {
    /// The lease client's configuration (its holder label, renewal policy).
    pub client: ClientConfig,
    /// How long one connection attempt may take (default 3 s).
    pub connect_timeout: Duration,
    /// How long one request may take, where the driver bounds it (etcd, ZooKeeper, DynamoDB, S3;
    /// the SQL stores and Redis keep their own defaults). Default 5 s.
    pub request_timeout: Duration,
    /// The SQL stores' lease table (default: `leasehold_leases`).
    pub table: Option<String>,
    /// The etcd key prefix (default: the store's).
    pub etcd_prefix: Option<String>,
    /// Create what the store needs (a SQL table, a DynamoDB table, an S3 bucket, a
    /// ZooKeeper root znode, a SQLite file) when it is missing, instead of answering
    /// [`Error::NotProvisioned`]. Default: false (but see
    /// [`OpenOptions::create_sqlite_file`]).
    pub provision: bool,
    /// Whether a `sqlite:` URL creates its file and table when they are missing, even
    /// without [`OpenOptions::provision`]. Default: true, SQLite being the zero-setup
    /// store. False suits a program that only reads leases: a missing file or table is
    /// then [`Error::NotProvisioned`], as a missing table is on the other stores, so a
    /// mistyped path is an error rather than a new, empty database where no lease is
    /// held.
    pub create_sqlite_file: bool,
    /// How many connections a SQL store's pool may open (default 4).
    pub max_connections: u32,
}

impl Default for OpenOptions {
    fn default() -> Self {
        Self {
            client: ClientConfig::default(),
            connect_timeout: Duration::from_secs(3),
            request_timeout: Duration::from_secs(5),
            table: None,
            etcd_prefix: None,
            provision: false,
            create_sqlite_file: true,
            max_connections: 4,
        }
    }
}

impl OpenOptions {
    /// The defaults with the lease client's configuration `client`.
    pub fn with_client(client: ClientConfig) -> Self {
        Self {
            client,
            ..Self::default()
        }
    }
}

/// An [`Error::InvalidInput`] for a URL the store's driver refuses.
#[allow(dead_code)] // not every feature set has a driver that parses URLs
fn bad_url(e: &(dyn std::error::Error + 'static)) -> Error {
    Error::invalid("store URL", chain(e))
}

/// A server SQL store (Postgres, MySQL): a pool of `options.max_connections` to
/// `connect` (a URL the driver parses), the lease table provisioned if asked, and the
/// store checked and made. The same steps for every database, by its backend's type.
#[cfg(any(feature = "postgres", feature = "mysql"))]
async fn open_sql<B>(url: &StoreUrl, connect: &str, options: &OpenOptions) -> Result<LeaseClient>
where
    B: leasehold_sql::SqlBackend,
{
    use leasehold_sql::errors::{Phase, Target};
    use leasehold_sql::{SqlConfig, SqlDatabase, SqlStore};
    type ConnectOptions<B> =
        <<<B as leasehold_sql::SqlBackend>::Db as sqlx::Database>::Connection as sqlx::Connection>::Options;
    let connect: ConnectOptions<B> = connect.parse().map_err(|e: sqlx::Error| bad_url(&e))?;
    // One connection first: a refused connection or a rejected login answers in
    // milliseconds, and the server's refusal is classified (bad credentials or an
    // unknown database: `Misconfigured`, never retryable), where the pool would retry it
    // until its timeout and then say only that it timed out.
    let limit = options.connect_timeout;
    let context = format!("{} store {url}: cannot connect", url.kind());
    match tokio::time::timeout(limit, <ConnectOptions<B> as sqlx::ConnectOptions>::connect(&connect)).await {
        Ok(Ok(conn)) => {
            let _ = sqlx::Connection::close(conn).await;
        }
        Ok(Err(e)) => {
            return Err(<B::Db as SqlDatabase>::map_error(
                e,
                Phase::Connect,
                Target::Lease,
                &context,
            ));
        }
        Err(_) => {
            return Err(Error::Unavailable {
                message: format!("{context}: no answer within {limit:?}"),
                source: None,
            });
        }
    }
    let pool = match sqlx::pool::PoolOptions::<B::Db>::new()
        .max_connections(options.max_connections)
        .acquire_timeout(options.connect_timeout)
        .connect_with(connect.clone())
        .await
    {
        Ok(pool) => pool,
        // The pool retries a refused connection until its timeout, then says only that
        // it timed out: one more attempt tells the caller why (a refusal or a rejected
        // login answers in milliseconds; a host that drops the packets gets one second).
        Err(sqlx::Error::PoolTimedOut) => {
            let limit = options.connect_timeout;
            let probe = limit.min(Duration::from_secs(1));
            let attempt = <ConnectOptions<B> as sqlx::ConnectOptions>::connect(&connect);
            let why = match tokio::time::timeout(probe, attempt).await {
                Ok(Err(e)) => chain(&e),
                Ok(Ok(conn)) => {
                    let _ = sqlx::Connection::close(conn).await;
                    "the server answered only after the pool gave up; try again".to_owned()
                }
                Err(_) => format!("no answer within another {probe:?}"),
            };
            return Err(Error::Unavailable {
                message: format!("{} store {url}: cannot connect within {limit:?}: {why}", url.kind()),
                source: None,
            });
        }
        Err(e) => {
            return Err(<B::Db as SqlDatabase>::map_error(
                e,
                Phase::Connect,
                Target::Lease,
                &context,
            ));
        }
    };
    let mut config = SqlConfig::new();
    if let Some(t) = &options.table {
        config = config.with_table(t)?;
    }
    if options.provision {
        SqlStore::<B>::provision(&pool, &config).await?;
    }
    LeaseClient::with_config(SqlStore::<B>::new(pool, config).await?, options.client.clone())
}

/// An [`Error::Unavailable`] for a store that cannot be connected to.
#[allow(dead_code)]
fn cannot_connect(url: &StoreUrl, e: &(dyn std::error::Error + 'static)) -> Error {
    Error::Unavailable {
        message: format!("{} store {url}: cannot connect: {}", url.kind(), chain(e)),
        source: None,
    }
}

/// An error with its chain of sources, on one line.
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    // A driver's error may begin with its source's words as well (sqlx: "error with
    // configuration: error with configuration: …"): say them once. Only that leading
    // repeat: a repeat further on may be the message's own ("open a: a: denied").
    let mut parts: Vec<&str> = out.split(": ").collect();
    while parts.len() > 1 && parts[0] == parts[1] {
        parts.remove(0);
    }
    parts.join(": ").replace(['\n', '\r'], " ")
}

/// What a URL of a store whose feature is not enabled answers.
#[allow(dead_code)]
fn not_built(url: &StoreUrl) -> Error {
    Error::Unsupported {
        operation: "opening this store: its feature of the `leasehold` crate is not enabled",
        store: url.kind(),
    }
}

impl StoreUrl {
    /// Connects to the store this URL names, checks its setup (creating it with
    /// [`OpenOptions::provision`]), and returns a lease client on it: a correctness
    /// client ([`LeaseClient::with_config`]) on every store but Redis, whose client is
    /// efficiency-only ([`LeaseClient::efficiency_only`]) by its grade.
    ///
    /// Credentials come from each ecosystem's usual place: the URL or `PGPASSWORD` and
    /// `~/.pgpass`, the AWS default chain. Bound the whole call with a timeout of your
    /// own: some drivers retry connecting.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] (`store URL`) for a URL the driver refuses;
    /// [`Error::Unavailable`] when the store cannot be reached;
    /// [`Error::NotProvisioned`] when it is not set up (a missing table, bucket or root
    /// znode); [`Error::Misconfigured`] when no AWS region is configured (and for
    /// refused credentials, a replica, a wrong table); [`Error::Unsupported`] when the store's feature of this
    /// crate is not enabled.
    pub async fn open(&self, options: &OpenOptions) -> Result<LeaseClient> {
        let config = options.client.clone();
        match self {
            #[cfg(feature = "sqlite")]
            Self::Sqlite { path } => {
                use crate::sqlite::{SqliteConfig, SqliteStore};
                let mut store_config = SqliteConfig::new();
                if let Some(t) = &options.table {
                    store_config = store_config.with_table(t)?;
                }
                let store = if options.provision || options.create_sqlite_file {
                    SqliteStore::open_file(path, store_config).await?
                } else {
                    SqliteStore::open_existing_file(path, store_config).await?
                };
                LeaseClient::with_config(store, config)
            }
            #[cfg(feature = "postgres")]
            Self::Postgres { url: raw } => open_sql::<crate::postgres::PgBackend>(self, raw, options).await,
            #[cfg(feature = "mysql")]
            Self::MySql { url: raw } => {
                // sqlx names the scheme mysql://; mariadb:// is the same protocol.
                let spelled = match raw.split_once("://") {
                    Some((scheme, rest)) if scheme.eq_ignore_ascii_case("mariadb") => format!("mysql://{rest}"),
                    _ => raw.clone(),
                };
                open_sql::<crate::mysql::MySqlBackend>(self, &spelled, options).await
            }
            #[cfg(feature = "etcd")]
            Self::Etcd { endpoints } => {
                use crate::etcd::etcd_client::{Client, ConnectOptions};
                use crate::etcd::{EtcdConfig, EtcdStore};
                let connect = ConnectOptions::new()
                    .with_connect_timeout(options.connect_timeout)
                    .with_timeout(options.request_timeout);
                let client = Client::connect(endpoints.clone(), Some(connect))
                    .await
                    .map_err(|e| cannot_connect(self, &e))?;
                let prefix = options.etcd_prefix.as_deref().unwrap_or(EtcdConfig::DEFAULT_PREFIX);
                let store = EtcdStore::new(client, EtcdConfig::new(prefix)?);
                store.verify().await?;
                LeaseClient::with_config(store, config)
            }
            #[cfg(feature = "zookeeper")]
            Self::ZooKeeper { servers, root } => {
                use crate::zookeeper::{ZooKeeperConfig, ZooKeeperStore};
                let root = root.as_deref().unwrap_or(ZooKeeperConfig::DEFAULT_ROOT);
                let store_config = ZooKeeperConfig::new(root)?.with_request_timeout(options.request_timeout)?;
                if options.provision {
                    ZooKeeperStore::provision(servers, &store_config).await?;
                }
                let store = ZooKeeperStore::connect(servers, store_config).await?;
                store.verify().await?;
                LeaseClient::with_config(store, config)
            }
            #[cfg(feature = "redis")]
            Self::Redis { url: raw } => {
                use crate::redis::{RedisConfig, RedisStore};
                let client = crate::redis::redis::Client::open(raw.as_str()).map_err(|e| bad_url(&e))?;
                let redis_config = RedisConfig::default().with_connect_timeout(options.connect_timeout);
                LeaseClient::efficiency_only(RedisStore::connect(client, redis_config).await?, config)
            }
            #[cfg(feature = "dynamodb")]
            Self::DynamoDb { table, .. } => {
                use crate::dynamodb::aws_sdk_dynamodb;
                use crate::dynamodb::{DynamoConfig, DynamoStore};
                let store_config = DynamoConfig::new(table.as_str())?;
                let sdk = aws_config(self, options).await?;
                let client = aws_sdk_dynamodb::Client::new(&sdk);
                if options.provision {
                    DynamoStore::provision(&client, &store_config).await?;
                }
                let store = DynamoStore::new(client, store_config);
                store.verify().await?;
                LeaseClient::with_config(store, config)
            }
            #[cfg(feature = "s3")]
            Self::S3 {
                bucket,
                prefix,
                endpoint,
                ..
            } => {
                use crate::s3::aws_sdk_s3;
                use crate::s3::{S3Config, S3Store};
                let store_config = S3Config::new(bucket.as_str(), prefix.as_str())?;
                let sdk = aws_config(self, options).await?;
                let s3 = aws_sdk_s3::config::Builder::from(&sdk)
                    .force_path_style(endpoint.is_some())
                    .build();
                let client = aws_sdk_s3::Client::from_conf(s3);
                if options.provision {
                    S3Store::provision(&client, &store_config).await?;
                }
                let store = S3Store::new(client, store_config);
                store.verify().await?;
                LeaseClient::with_config(store, config)
            }
            #[allow(unreachable_patterns)] // every store's feature enabled
            _ => {
                let _ = config;
                Err(not_built(self))
            }
        }
    }
}

/// The AWS configuration from the usual places (environment, profiles, instance
/// metadata), with the URL's region and endpoint ([`StoreUrl::aws_query`]), and bounded
/// timeouts.
#[cfg(any(feature = "dynamodb", feature = "s3"))]
async fn aws_config(url: &StoreUrl, options: &OpenOptions) -> Result<aws_config::SdkConfig> {
    use aws_config::timeout::TimeoutConfig;
    let (region, endpoint) = url.aws_query();
    let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest()).timeout_config(
        TimeoutConfig::builder()
            .connect_timeout(options.connect_timeout)
            .operation_timeout(options.request_timeout)
            .operation_attempt_timeout(options.request_timeout)
            .build(),
    );
    if let Some(r) = region {
        loader = loader.region(aws_config::Region::new(r.to_owned()));
    }
    if let Some(e) = endpoint {
        loader = loader.endpoint_url(e);
    }
    let sdk = loader.load().await;
    if sdk.region().is_none() {
        return Err(Error::Misconfigured {
            message: format!(
                "{} store {url}: no AWS region: add ?region=… to the URL or set AWS_REGION",
                url.kind()
            ),
            source: None,
        });
    }
    Ok(sdk)
}

#[cfg(test)]
mod tests {
    use super::chain;

    #[test]
    fn a_chain_says_each_part_once() {
        // sqlx's configuration error prints its source's words after its own.
        let e = std::io::Error::other("error with configuration: error with configuration: unknown value");
        assert_eq!(chain(&e), "error with configuration: unknown value");
        let e = std::io::Error::other("connect: refused\non two lines");
        assert_eq!(chain(&e), "connect: refused on two lines");
        // A repeat further on is the message's own.
        let e = std::io::Error::other("open a: a: denied");
        assert_eq!(chain(&e), "open a: a: denied");
    }
}
