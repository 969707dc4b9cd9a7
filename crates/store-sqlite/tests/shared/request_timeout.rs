//! A database server that answers slowly, then not at all, behind a proxy: each lease
//! statement ends at the store's request timeout, a write as "may have applied"
//! (`Indeterminate`), a read as `Unavailable`, and an acquire whose write got no answer
//! is in doubt (`leasehold_testkit::endpoints::slow_then_silent`).

use std::time::Duration;

use leasehold_sql::{SqlConfig, SqlStore};
use leasehold_testkit::proxy::Proxy;

use super::db::{DbOf, Shell, TestDb, q, server_pool};

/// A [`TestDb`] on a server the tests reach by URL.
pub trait Served: TestDb {
    /// The server's URL (`postgres://…`, `mysql://…`).
    fn url() -> String;
}

/// `url` cut around its host and port: `(before, host, port, after)`.
fn parts(url: &str) -> (&str, &str, &str, &str) {
    let start = url.find("://").map_or(0, |i| i + 3);
    let end = url[start..].find('/').map_or(url.len(), |i| start + i);
    let host_start = url[start..end].rfind('@').map_or(start, |i| start + i + 1);
    let (host, port) = url[host_start..end]
        .rsplit_once(':')
        .unwrap_or_else(|| panic!("no port in {url}"));
    (&url[..host_start], host, port, &url[end..])
}

/// The shared case: the store's statements bounded by 300 ms, through a proxy.
pub async fn a_slow_or_silent_server_ends_each_statement_at_the_request_timeout<T: Served>() {
    const BOUND: Duration = Duration::from_millis(300);
    assert!(SqlConfig::new().with_request_timeout(Duration::ZERO).is_err());
    let url = T::url();
    let (before, host, port, after) = parts(&url);
    let proxy = Proxy::start(&format!("{host}:{port}")).await;
    let via_proxy = format!("{before}{host}:{}{after}", proxy.port());
    let pool = server_pool::<DbOf<T>>(&via_proxy, 2).await;
    let table = T::table("lh_slow");
    let config = SqlConfig::new().with_table(&table).expect("table");
    let direct = super::store_on::<T::B>(&server_pool(&url, 2).await, &table).await;
    let store = SqlStore::<T::B>::new(pool, config.with_request_timeout(BOUND).expect("bound"))
        .await
        .expect("open through the proxy");
    leasehold_testkit::endpoints::slow_then_silent(store, direct.clone(), &proxy, BOUND).await;
    drop(proxy);
    <DbOf<T>>::run(direct.pool(), &format!("DROP TABLE {}", q::<DbOf<T>>(&table))).await;
}
