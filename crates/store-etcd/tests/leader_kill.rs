//! A lease on a three-member etcd cluster survives `kill -9` of the etcd leader, and a
//! lease whose holder process is killed is taken over within its TTL plus a round trip
//! after it expires.
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
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use common::worker::Worker;
use etcd_client::Client;
use leasehold_core::testing::process::{kill9, poll};
use leasehold_core::{AcquireOutcome, FencingToken, LeaseClient, LeaseName, store::CasStore};
use leasehold_etcd::{EtcdConfig, EtcdStore};
use tokio::time::Instant;

/// Candidate client-port bases in this crate's range (52500-52599): clients on
/// `base..base+3`, peers on `base+10..base+13`. Loopback ports here are also in the
/// kernel's ephemeral range, so one may be taken by some connection's source port: the
/// next base is tried then.
const BASES: [u16; 4] = [52500, 52520, 52540, 52560];

fn main() {
    if common::worker::run_if_worker() {
        return;
    }
    let rt = leasehold_testkit::runtime();
    let started = Instant::now();
    let cluster = rt.block_on(Cluster::start());
    rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(90), scenario(&cluster))
            .await
            .unwrap_or_else(|_| panic!("the leader-kill scenario did not finish within 90 s"));
    });
    drop(cluster);
    println!("leader_kill: passed in {:?}", started.elapsed());
}

/// This test's own three-member cluster (the command line of `scripts/stores.sh`'s
/// `start_etcd_member`), with data under `$LEASEHOLD_STORES_DIR/store-etcd/`; every
/// member is killed and reaped when this is dropped, also when the test fails.
struct Cluster {
    base: u16,
    members: Vec<std::process::Child>,
}

impl Cluster {
    async fn start() -> Cluster {
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
            let mut cluster = Cluster {
                base,
                members: Vec::new(),
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
        let endpoints = self.endpoints();
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

    fn endpoints(&self) -> Vec<String> {
        (0..3).map(|i| format!("http://127.0.0.1:{}", self.base + i)).collect()
    }

    fn pid(&self, member: usize) -> u32 {
        self.members[member].id()
    }

    fn stop(&mut self) {
        for m in &mut self.members {
            let _ = m.kill();
            let _ = m.wait();
        }
        self.members.clear();
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop();
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

async fn scenario(cluster: &Cluster) {
    let endpoints = cluster.endpoints();
    let prefix = common::unique_prefix("leader-kill");
    let config = EtcdConfig::new(prefix).expect("config");
    let store = EtcdStore::new(common::connect(&endpoints).await, config.clone());
    let holder = LeaseClient::new(store.clone());
    let name = LeaseName::new("cluster/leader").expect("name");
    let ttl = Duration::from_secs(5);
    let lease = holder
        .acquire(name.as_str(), ttl)
        .await
        .expect("acquire on the cluster");
    let token = lease.token();
    let granted = store.read(&name).await.expect("read").expect("present");

    // A challenger keeps trying all along: it must never be granted.
    let challenger_store = EtcdStore::new(common::connect(&endpoints).await, config.clone());
    let challenger = LeaseClient::new(challenger_store.clone());
    let stop = Arc::new(AtomicBool::new(false));
    let grants = Arc::new(AtomicU64::new(0));
    let attempts = Arc::new(AtomicU64::new(0));
    let challenge = {
        let (stop, grants, attempts, name) = (stop.clone(), grants.clone(), attempts.clone(), name.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                attempts.fetch_add(1, Ordering::SeqCst);
                if let Ok(AcquireOutcome::Granted(_)) = challenger.try_acquire(name.as_str(), ttl).await {
                    grants.fetch_add(1, Ordering::SeqCst);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };

    let old = leader(&endpoints, &[0, 1, 2]).await.expect("a leader");
    let killed_at = Instant::now();
    kill9(cluster.pid(old)).expect("kill -9 the etcd leader");
    let live: Vec<usize> = (0..3).filter(|i| *i != old).collect();
    let deadline = Instant::now() + Duration::from_secs(15);
    let new = loop {
        if let Some(l) = leader(&endpoints, &live).await {
            break l;
        }
        assert!(
            Instant::now() < deadline,
            "no new leader within 15 s of killing member m{old}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let election = killed_at.elapsed();
    // Renewals resume: the validity deadline moves past where it stood at the election.
    let at_election = lease.valid_until();
    assert!(
        poll(Duration::from_secs(10), || lease.valid_until() > at_election).await,
        "no renewal landed after the election"
    );
    let resumed = killed_at.elapsed();
    assert!(
        poll(Duration::from_secs(10), || attempts.load(Ordering::SeqCst) >= 5).await,
        "the challenger made no attempts"
    );
    stop.store(true, Ordering::SeqCst);
    challenge.await.expect("challenger");

    assert!(lease.is_valid(), "the lease was lost: {:?}", lease.loss_cause());
    assert_eq!(lease.loss_cause(), None);
    assert_eq!(grants.load(Ordering::SeqCst), 0, "the lease was granted twice");
    let reader = EtcdStore::new(common::connect(&[endpoints[live[0]].clone()]).await, config.clone());
    let now = reader.read(&name).await.expect("read").expect("present");
    assert_eq!(now.record.holder.as_ref(), Some(lease.holder()));
    assert_eq!(now.record.token, token, "the token changed");
    assert_eq!(now.version, granted.version, "the record was rewritten");
    let mut raw = reader.client().clone();
    let fence = raw.get(reader.fence_key(&name), None).await.expect("fence");
    assert_eq!(
        fence.kvs().first().map(|kv| kv.value().to_vec()),
        Some(format!("{:020}", token.get()).into_bytes()),
        "a second token was issued"
    );
    println!(
        "leader kill: m{old} killed; new leader m{} after {election:?}; renewals resumed after {resumed:?}; token {token} unchanged; {} challenger attempts, 0 grants",
        new,
        attempts.load(Ordering::SeqCst)
    );
    lease.release().await.expect("release");

    // A holder process killed outright: taken over within TTL + a round trip of expiry.
    let live_endpoints: Vec<String> = live.iter().map(|&i| endpoints[i].clone()).collect();
    let kill_name = "cluster/killed-holder";
    let hold_ttl = Duration::from_secs(2);
    let env = HashMap::from([
        ("LH_ENDPOINTS", live_endpoints.join(",")),
        ("LH_PREFIX", config.prefix().to_owned()),
        ("LH_NAME", kill_name.to_owned()),
        ("LH_TTL_MS", hold_ttl.as_millis().to_string()),
    ]);
    let worker = Worker::spawn("hold", &env);
    worker.wait_for("granted", 1, Duration::from_secs(15)).await;
    let held_token = worker.granted_token().expect("token");
    let taker_store = EtcdStore::new(common::connect(&live_endpoints).await, config.clone());
    let taker = LeaseClient::new(taker_store.clone());
    assert!(
        matches!(
            taker.try_acquire(kill_name, hold_ttl).await.expect("try"),
            AcquireOutcome::Held { .. }
        ),
        "granted while the holder lives"
    );
    let pid = worker.pid;
    kill9(pid).expect("kill -9 the holder");
    let killed = Instant::now();
    let _ = worker.kill().await;
    let taken = taker
        .acquire_timeout(kill_name, hold_ttl, Duration::from_secs(15))
        .await
        .expect("takeover after the holder died");
    let after = killed.elapsed();
    assert_eq!(taken.token(), FencingToken::new(held_token + 1));
    // etcd keeps the session until TTL after its last keep-alive (sent at most TTL/3
    // before the kill) and deletes expired leases in a sweep every 500 ms; the waiter's
    // watch and one claim transaction follow.
    let bound = hold_ttl + Duration::from_secs(1);
    assert!(
        after <= bound,
        "takeover took {after:?}, more than TTL {hold_ttl:?} + 1 s"
    );
    assert!(
        after >= hold_ttl / 2,
        "taken over {after:?} after the kill: before the session could expire"
    );
    println!(
        "killed holder: taken over {after:?} after kill -9 (TTL {hold_ttl:?}), token {held_token} -> {}",
        taken.token()
    );
    taken.release().await.expect("release");
}
