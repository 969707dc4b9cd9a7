//! The three-server ensemble the tests share (`LEASEHOLD_ZK_ENSEMBLE`) as a
//! [`Cluster`]: stores on some of its servers, which one leads, their processes, a
//! killed server started again.

use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use leasehold_core::LeaseName;
use leasehold_core::testing::process::kill9;
use leasehold_testkit::cluster::Cluster;
use leasehold_zookeeper::ZooKeeperStore;

/// The shared ensemble, and a directory of this test's own for the stores' roots. A
/// server it killed is started again (`scripts/stores.sh start-zookeeper-member`) when it
/// is dropped, also when the test fails.
pub struct Ensemble {
    servers: Vec<String>,
    dir: String,
    killed: Mutex<Option<usize>>,
}

impl Ensemble {
    /// The shared ensemble, with the stores' roots under a fresh directory named after
    /// `tag`.
    pub fn new(tag: &str) -> Self {
        Self {
            servers: leasehold_testkit::zk_ensemble().split(',').map(str::to_owned).collect(),
            dir: super::unique_dir(tag),
            killed: Mutex::new(None),
        }
    }

    /// The servers, `host:port` each, in the order of their indexes.
    pub fn servers(&self) -> &[String] {
        &self.servers
    }

    /// The connect string of the servers `live`.
    fn connect_string(&self, live: &[usize]) -> String {
        let servers: Vec<&str> = live.iter().map(|&i| self.servers[i].as_str()).collect();
        servers.join(",")
    }
}

impl Drop for Ensemble {
    fn drop(&mut self) {
        let killed = self.killed.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(i) = killed.take() else { return };
        let script = leasehold_testkit::env("LEASEHOLD_STORES_SCRIPT");
        let ok = Command::new("bash")
            .args([script.as_str(), "start-zookeeper-member", &i.to_string()])
            .status()
            .is_ok_and(|s| s.success());
        assert!(
            ok || std::thread::panicking(),
            "could not start ZooKeeper server s{i} again"
        );
    }
}

#[async_trait]
impl Cluster for Ensemble {
    type Store = ZooKeeperStore;

    const MEMBER: &'static str = "s";

    const ELECTION: Duration = Duration::from_secs(30);

    fn size(&self) -> usize {
        self.servers.len()
    }

    /// A store connected to the servers `live`, with its root `<dir>/leases`.
    async fn store(&self, live: &[usize]) -> ZooKeeperStore {
        super::store_on(&self.connect_string(live), &self.dir).await
    }

    async fn leader(&self, live: &[usize]) -> Option<usize> {
        for &i in live {
            if super::mode(&self.servers[i]).await.as_deref() == Some("leader") {
                return Some(i);
            }
        }
        None
    }

    fn kill(&self, member: usize) {
        kill9(pid_of(member)).expect("kill -9 the ZooKeeper server");
        *self.killed.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(member);
    }

    async fn fence_counter(&self, store: &ZooKeeperStore, name: &LeaseName) -> Option<Vec<u8>> {
        let c = store.client().await.expect("client");
        let (counter, _) = c.get_data(&store.fence_path(name)).await.expect("counter");
        Some(counter)
    }

    fn process_args(&self, live: &[usize]) -> Vec<String> {
        vec![self.connect_string(live), self.dir.clone()]
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
