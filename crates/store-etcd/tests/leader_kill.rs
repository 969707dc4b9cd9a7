//! The shared leader-kill scenario (`leasehold_testkit::leader_kill`) on a three-member
//! etcd cluster: a lease survives `kill -9` of the etcd leader, and a lease whose holder
//! process is killed is taken over within its TTL plus a round trip after it expires.
//!
//! The cluster is this test's own (clients on 127.0.0.1:52500-52502, peers 52510-52512,
//! or the next free base in 52500-52599; data under `$LEASEHOLD_STORES_DIR/store-etcd/`),
//! started with the command line of the project's `scripts/stores.sh` and killed at the
//! end, even on failure. (A custom harness: this
//! binary is also the worker that holds the lease and is killed.)
#![allow(missing_docs)]

mod common;

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use async_trait::async_trait;
use etcd_client::Client;
use leasehold_core::LeaseName;
use leasehold_core::testing::process::kill9;
use leasehold_etcd::{EtcdConfig, EtcdStore};
use leasehold_testkit::cluster::Cluster;
use tokio::time::Instant;

/// Candidate client-port bases in this crate's range (52500-52599): clients on
/// `base..base+3`, peers on `base+10..base+13`. Loopback ports here are also in the
/// kernel's ephemeral range, so one may be taken by some connection's source port: the
/// next base is tried then.
const BASES: [u16; 4] = [52500, 52520, 52540, 52560];

fn main() -> ExitCode {
    leasehold_testkit::leader_kill::main(Duration::from_secs(90), OwnCluster::start, |args| async move {
        let [endpoints, prefix] = <[String; 2]>::try_from(args).expect("the holder's endpoints and prefix");
        let endpoints: Vec<String> = endpoints.split(',').map(str::to_owned).collect();
        store_on(&endpoints, &prefix).await
    })
}

/// A store under `prefix` on a client of `endpoints`.
async fn store_on(endpoints: &[String], prefix: &str) -> EtcdStore {
    let config = EtcdConfig::new(prefix).expect("config");
    EtcdStore::new(common::connect(endpoints).await, config)
}

/// This test's own three-member cluster (the command line of `scripts/stores.sh`'s
/// `start_etcd_member`), with data under `$LEASEHOLD_STORES_DIR/store-etcd/`, and the
/// key prefix of this run; every member is killed and reaped when this is dropped, also
/// when the test fails.
struct OwnCluster {
    base: u16,
    members: Vec<std::process::Child>,
    prefix: String,
}

impl OwnCluster {
    async fn start() -> OwnCluster {
        let root = PathBuf::from(leasehold_testkit::env("LEASEHOLD_STORES_DIR"))
            .join("leasehold-etcd")
            .join("leader-kill");
        let mut why = Vec::new();
        for base in BASES {
            let ports: Vec<u16> = (0..3).flat_map(|i| [base + i, base + 10 + i]).collect();
            if let Some(p) = ports
                .iter()
                .find(|p| std::net::TcpListener::bind(("127.0.0.1", **p)).is_err())
            {
                why.push(format!("port {p} busy"));
                continue;
            }
            let _ = std::fs::remove_dir_all(&root);
            let mut cluster = OwnCluster {
                base,
                members: Vec::new(),
                prefix: common::unique_prefix("leader-kill"),
            };
            for i in 0..3 {
                cluster.members.push(cluster.spawn_member(&root, i));
            }
            match cluster.wait_healthy().await {
                Ok(()) => return cluster,
                Err(e) => why.push(format!("base {base}: {e}")),
            }
        }
        panic!("could not start the test cluster: {why:?} (logs under {root:?})");
    }

    fn spawn_member(&self, root: &std::path::Path, i: u16) -> std::process::Child {
        let dir = root.join(format!("m{i}"));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("create {dir:?}: {e}"));
        let log = std::fs::File::create(dir.join("etcd.log")).unwrap_or_else(|e| panic!("log: {e}"));
        let log2 = log.try_clone().unwrap_or_else(|e| panic!("log: {e}"));
        let initial: Vec<String> = (0..3)
            .map(|m| format!("m{m}=http://127.0.0.1:{}", self.base + 10 + m))
            .collect();
        let (c, p) = (self.base + i, self.base + 10 + i);
        std::process::Command::new("etcd")
            .args(["--name", &format!("m{i}")])
            .args(["--data-dir", &dir.join("data").to_string_lossy()])
            .args(["--listen-client-urls", &format!("http://127.0.0.1:{c}")])
            .args(["--advertise-client-urls", &format!("http://127.0.0.1:{c}")])
            .args(["--listen-peer-urls", &format!("http://127.0.0.1:{p}")])
            .args(["--initial-advertise-peer-urls", &format!("http://127.0.0.1:{p}")])
            .args(["--initial-cluster", &initial.join(",")])
            .args([
                "--initial-cluster-state",
                "new",
                "--initial-cluster-token",
                "store-etcd-leader-kill",
            ])
            .args(["--heartbeat-interval", "100", "--election-timeout", "1000"])
            .stdout(log)
            .stderr(log2)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn etcd (is etcd-server installed? scripts/install-deps.sh): {e}"))
    }

    async fn wait_healthy(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(20);
        let endpoints = self.endpoints(&[0, 1, 2]);
        loop {
            if let Some(i) = self
                .members
                .iter_mut()
                .position(|m| matches!(m.try_wait(), Ok(Some(_))))
            {
                self.stop();
                return Err(format!("member m{i} exited at start"));
            }
            if leader(&endpoints, &[0, 1, 2]).await.is_some() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                self.stop();
                return Err("no leader within 20 s".to_owned());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The client URLs of the members `live`.
    fn endpoints(&self, live: &[usize]) -> Vec<String> {
        live.iter()
            .map(|&i| format!("http://127.0.0.1:{}", usize::from(self.base) + i))
            .collect()
    }

    fn stop(&mut self) {
        for m in &mut self.members {
            let _ = m.kill();
            let _ = m.wait();
        }
        self.members.clear();
    }
}

impl Drop for OwnCluster {
    fn drop(&mut self) {
        self.stop();
    }
}

#[async_trait]
impl Cluster for OwnCluster {
    type Store = EtcdStore;

    const MEMBER: &'static str = "m";

    const ELECTION: Duration = Duration::from_secs(15);

    fn size(&self) -> usize {
        3
    }

    async fn store(&self, live: &[usize]) -> EtcdStore {
        store_on(&self.endpoints(live), &self.prefix).await
    }

    async fn leader(&self, live: &[usize]) -> Option<usize> {
        leader(&self.endpoints(&[0, 1, 2]), live).await
    }

    fn kill(&self, member: usize) {
        kill9(self.members[member].id()).expect("kill -9 the etcd leader");
    }

    async fn fence_counter(&self, store: &EtcdStore, name: &LeaseName) -> Option<Vec<u8>> {
        let mut raw = store.client().clone();
        let fence = raw.get(store.fence_key(name), None).await.expect("fence");
        fence.kvs().first().map(|kv| kv.value().to_vec())
    }

    fn process_args(&self, live: &[usize]) -> Vec<String> {
        vec![self.endpoints(live).join(","), self.prefix.clone()]
    }
}

/// The index of the member that is leader now, asked of the live members.
async fn leader(endpoints: &[String], live: &[usize]) -> Option<usize> {
    let mut ids = HashMap::new();
    let mut leader_id = None;
    for &i in live {
        let Ok(mut c) = Client::connect([&endpoints[i]], None).await else {
            continue;
        };
        let Ok(Ok(s)) = tokio::time::timeout(Duration::from_millis(500), c.status()).await else {
            continue;
        };
        if let Some(h) = s.header() {
            ids.insert(h.member_id(), i);
        }
        if s.leader() != 0 {
            leader_id = Some(s.leader());
        }
    }
    leader_id.and_then(|l| ids.get(&l).copied())
}
