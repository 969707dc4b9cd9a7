//! Shared pieces of this crate's tests: connection settings from the environment,
//! unique roots, the fenced resource, the suites' fixture.
#![allow(dead_code, unreachable_pub)]

pub mod ensemble;
pub mod fenced;
pub mod fixture;

use std::time::Duration;

use leasehold_zookeeper::{ZooKeeperConfig, ZooKeeperStore};

/// A directory znode no other test or run uses (`/lh-test/store-zookeeper/<tag>-<unique>`).
pub fn unique_dir(tag: &str) -> String {
    format!("/lh-test/store-zookeeper/{tag}-{}", leasehold_testkit::unique_suffix())
}

/// A store on the single server, with its root under a fresh directory, provisioned.
pub async fn store(tag: &str) -> ZooKeeperStore {
    store_under(&unique_dir(tag)).await
}

/// A store on the single server with its root `<dir>/leases` (the same znodes in every
/// process that passes the same directory), provisioned.
pub async fn store_under(dir: &str) -> ZooKeeperStore {
    store_on(&leasehold_testkit::zk_addr(), dir).await
}

/// A store on `cluster` with its root `<dir>/leases`, provisioned.
pub async fn store_on(cluster: &str, dir: &str) -> ZooKeeperStore {
    let config = ZooKeeperConfig::new(format!("{dir}/leases"))
        .and_then(|c| c.with_tick_time(leasehold_testkit::zk_tick()))
        .unwrap_or_else(|e| panic!("config: {e}"));
    ZooKeeperStore::provision(cluster, &config)
        .await
        .unwrap_or_else(|e| panic!("provision {dir} on {cluster}: {e}"));
    ZooKeeperStore::connect(cluster, config)
        .await
        .unwrap_or_else(|e| panic!("connect to ZooKeeper at {cluster}: {e}"))
}

/// The directory a store's root is in.
pub fn dir_of(store: &ZooKeeperStore) -> String {
    let root = store.config().root();
    root.strip_suffix("/leases").unwrap_or(root).to_owned()
}

/// Runs `f` and returns its output with the requests `store` sent meanwhile.
pub async fn sent<T>(
    store: &ZooKeeperStore,
    f: impl std::future::Future<Output = T>,
) -> (T, leasehold_zookeeper::ZooKeeperStats) {
    let before = store.stats();
    let out = f.await;
    (out, store.stats().since(&before))
}

/// The answer of ZooKeeper server `addr` (`host:port`) to the four-letter word `word`,
/// or `None` if it does not answer within a second.
pub async fn four_letter(addr: &str, word: &str) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let talk = async {
        let mut s = tokio::net::TcpStream::connect(addr).await.ok()?;
        s.write_all(word.as_bytes()).await.ok()?;
        let mut out = String::new();
        s.read_to_string(&mut out).await.ok()?;
        Some(out)
    };
    tokio::time::timeout(Duration::from_secs(1), talk).await.ok().flatten()
}

/// The `Mode:` a server reports (`leader`, `follower`, `standalone`), if it serves.
pub async fn mode(addr: &str) -> Option<String> {
    let srvr = four_letter(addr, "srvr").await?;
    srvr.lines().find_map(|l| l.strip_prefix("Mode: ")).map(str::to_owned)
}
