//! The three-server ensemble the tests share (`LEASEHOLD_ZK_ENSEMBLE`): its servers,
//! which one leads, their processes.

use std::time::Duration;

use tokio::time::Instant;

/// The ensemble's servers, `host:port` each, in the order of their indexes.
pub fn servers() -> Vec<String> {
    leasehold_testkit::zk_ensemble().split(',').map(str::to_owned).collect()
}

/// The server that is leader now, asked of `live`.
pub async fn leader(servers: &[String], live: &[usize]) -> Option<usize> {
    for &i in live {
        if super::mode(&servers[i]).await.as_deref() == Some("leader") {
            return Some(i);
        }
    }
    None
}

/// The leader among `live`, asked every 100 ms for up to `within`.
pub async fn poll_leader(servers: &[String], live: &[usize], within: Duration) -> Option<usize> {
    let deadline = Instant::now() + within;
    loop {
        if let Some(l) = leader(servers, live).await {
            return Some(l);
        }
        if Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The process id of server `server` (from the script's pid file).
pub fn pid_of(server: usize) -> u32 {
    let file = leasehold_testkit::stores_dir("zookeeper-ensemble").join(format!("s{server}/zookeeper.pid"));
    std::fs::read_to_string(&file)
        .unwrap_or_else(|e| panic!("{file:?}: {e} (start the ensemble with scripts/stores.sh)"))
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("{file:?}: {e}"))
}
