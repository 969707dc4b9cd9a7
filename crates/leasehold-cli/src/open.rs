//! Opening the store a [`StoreUrl`] names, as a [`LeaseClient`], within a bound.

use std::time::Duration;

use leasehold::{ClientConfig, LeaseClient};

use crate::error::{CliError, describe};
use leasehold::url::StoreUrl;

/// The longest opening a store may take (connecting, checking its table or bucket).
pub(crate) const OPEN_TIMEOUT: Duration = Duration::from_secs(10);

/// How long one connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// How long one request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Opens the store at `url` and a lease client on it, whose holder ids start with
/// `label`. Redis gives an efficiency-only client (by its grade).
///
/// # Errors
/// [`CliError::Usage`] for a URL the store's driver refuses, [`CliError::Store`] when
/// the store cannot be reached within [`OPEN_TIMEOUT`] or is not set up.
pub(crate) async fn open(url: &StoreUrl, label: &str) -> Result<LeaseClient, CliError> {
    let config = ClientConfig::builder()
        .label(label)
        .build()
        .map_err(|e| CliError::from_lease("holder label", &e))?;
    match tokio::time::timeout(OPEN_TIMEOUT, open_inner(url, config)).await {
        Ok(r) => r,
        Err(_) => Err(CliError::Store(format!(
            "{} store {url}: no answer within {}",
            url.kind(),
            humantime::format_duration(OPEN_TIMEOUT)
        ))),
    }
}

async fn open_inner(url: &StoreUrl, config: ClientConfig) -> Result<LeaseClient, CliError> {
    let failed = |e: leasehold::Error| CliError::from_lease(&format!("{} store {url}", url.kind()), &e);
    match url {
        StoreUrl::Sqlite { path } => {
            use leasehold::sqlite::{SqliteConfig, SqliteStore};
            let store = SqliteStore::open_file(path, SqliteConfig::new())
                .await
                .map_err(failed)?;
            LeaseClient::with_config(store, config).map_err(failed)
        }
        StoreUrl::Postgres { url: raw } => {
            use leasehold::postgres::sqlx::postgres::{PgConnectOptions, PgPoolOptions};
            use leasehold::postgres::{PostgresConfig, PostgresStore};
            let options: PgConnectOptions = raw
                .parse()
                .map_err(|e| CliError::Usage(format!("bad store URL '{url}': {}", describe(&e))))?;
            let pool = PgPoolOptions::new()
                .max_connections(4)
                .acquire_timeout(CONNECT_TIMEOUT)
                .connect_with(options)
                .await
                .map_err(|e| CliError::Store(format!("postgres store {url}: cannot connect: {}", describe(&e))))?;
            let store = PostgresStore::new(pool, PostgresConfig::new()).await.map_err(failed)?;
            LeaseClient::with_config(store, config).map_err(failed)
        }
        StoreUrl::MySql { url: raw } => {
            use leasehold::mysql::sqlx::mysql::{MySqlConnectOptions, MySqlPoolOptions};
            use leasehold::mysql::{MySqlConfig, MySqlStore};
            // sqlx names the scheme mysql://; mariadb:// is the same protocol.
            let spelled = match raw.split_once("://") {
                Some((scheme, rest)) if scheme.eq_ignore_ascii_case("mariadb") => format!("mysql://{rest}"),
                _ => raw.clone(),
            };
            let options: MySqlConnectOptions = spelled
                .parse()
                .map_err(|e| CliError::Usage(format!("bad store URL '{url}': {}", describe(&e))))?;
            let pool = MySqlPoolOptions::new()
                .max_connections(4)
                .acquire_timeout(CONNECT_TIMEOUT)
                .connect_with(options)
                .await
                .map_err(|e| CliError::Store(format!("mysql store {url}: cannot connect: {}", describe(&e))))?;
            let store = MySqlStore::new(pool, MySqlConfig::new()).await.map_err(failed)?;
            LeaseClient::with_config(store, config).map_err(failed)
        }
        StoreUrl::Etcd { endpoints } => {
            use leasehold::etcd::etcd_client::{Client, ConnectOptions};
            use leasehold::etcd::{EtcdConfig, EtcdStore};
            let options = ConnectOptions::new()
                .with_connect_timeout(CONNECT_TIMEOUT)
                .with_timeout(REQUEST_TIMEOUT);
            let client = Client::connect(endpoints.clone(), Some(options))
                .await
                .map_err(|e| CliError::Store(format!("etcd store {url}: cannot connect: {}", describe(&e))))?;
            let store = EtcdStore::new(client, EtcdConfig::new(EtcdConfig::DEFAULT_PREFIX).map_err(failed)?);
            store.verify().await.map_err(failed)?;
            LeaseClient::with_config(store, config).map_err(failed)
        }
        StoreUrl::Redis { url: raw } => {
            use leasehold::redis::{RedisConfig, RedisStore};
            let client = leasehold::redis::redis::Client::open(raw.as_str())
                .map_err(|e| CliError::Usage(format!("bad store URL '{url}': {}", describe(&e))))?;
            let store = RedisStore::connect(client, RedisConfig::default().with_connect_timeout(CONNECT_TIMEOUT))
                .await
                .map_err(failed)?;
            LeaseClient::efficiency_only(store, config).map_err(failed)
        }
        StoreUrl::DynamoDb {
            table,
            region,
            endpoint,
        } => {
            use leasehold::dynamodb::aws_sdk_dynamodb;
            use leasehold::dynamodb::{DynamoConfig, DynamoStore};
            let store_config = DynamoConfig::new(table.as_str())
                .map_err(|e| CliError::Usage(format!("bad store URL '{url}': {}", describe(&e))))?;
            let sdk = aws_config(url, region.as_deref(), endpoint.as_deref()).await?;
            let client = aws_sdk_dynamodb::Client::new(&sdk);
            let store = DynamoStore::new(client, store_config);
            store.verify().await.map_err(failed)?;
            LeaseClient::with_config(store, config).map_err(failed)
        }
        StoreUrl::S3 {
            bucket,
            prefix,
            region,
            endpoint,
        } => {
            use leasehold::s3::aws_sdk_s3;
            use leasehold::s3::{S3Config, S3Store};
            let store_config = S3Config::new(bucket.as_str(), prefix.as_str())
                .map_err(|e| CliError::Usage(format!("bad store URL '{url}': {}", describe(&e))))?;
            let sdk = aws_config(url, region.as_deref(), endpoint.as_deref()).await?;
            let s3 = aws_sdk_s3::config::Builder::from(&sdk)
                .force_path_style(endpoint.is_some())
                .build();
            let store = S3Store::new(aws_sdk_s3::Client::from_conf(s3), store_config);
            store.verify().await.map_err(failed)?;
            LeaseClient::with_config(store, config).map_err(failed)
        }
    }
}

/// The AWS configuration from the usual places (environment, profiles, instance
/// metadata), with the URL's region and endpoint, and bounded timeouts.
async fn aws_config(
    url: &StoreUrl,
    region: Option<&str>,
    endpoint: Option<&str>,
) -> Result<aws_config::SdkConfig, CliError> {
    use aws_config::timeout::TimeoutConfig;
    let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest()).timeout_config(
        TimeoutConfig::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .operation_timeout(REQUEST_TIMEOUT)
            .operation_attempt_timeout(REQUEST_TIMEOUT)
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
        return Err(CliError::Usage(format!(
            "{} store {url}: no AWS region: add ?region=… to the URL or set AWS_REGION",
            url.kind()
        )));
    }
    Ok(sdk)
}
