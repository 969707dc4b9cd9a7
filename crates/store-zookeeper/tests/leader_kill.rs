//! A lease on the three-server ensemble (`LEASEHOLD_ZK_ENSEMBLE`, started by
//! `scripts/stores.sh start zookeeper-ensemble`) survives `kill -9` of the ZooKeeper
//! leader with no double grant, and a lease whose holder process is killed is taken over
//! after its session expires.
//!
//! The killed server is started again with `scripts/stores.sh start-zookeeper-member`
//! when the test ends, also on failure. (A custom harness: this binary is also the
//! worker process that holds the lease and is killed.)
#![allow(missing_docs)]

mod common;

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use common::ensemble::{leader, pid_of, poll_leader, servers};
use leasehold_core::testing::process::{kill9, poll};
use leasehold_core::{AcquireOutcome, FencingToken, LeaseClient, LeaseName, store::CasStore};
use leasehold_testkit::child::Talker;
use tokio::time::Instant;

const WORKER_VAR: &str = "LEASEHOLD_ZK_WORKER_DIR";

fn main() {
    if let Ok(dir) = std::env::var(WORKER_VAR) {
        leasehold_testkit::runtime().block_on(hold(&dir));
        return;
    }
    let rt = leasehold_testkit::runtime();
    let started = Instant::now();
    rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(120), scenario())
            .await
            .unwrap_or_else(|_| panic!("the leader-kill scenario did not finish within 120 s"));
    });
    println!("leader_kill: passed in {:?}", started.elapsed());
}

/// The worker: holds `cluster/killed-holder` (TTL 2 s) until killed.
async fn hold(dir: &str) {
    let store = common::store_on(&leasehold_testkit::zk_ensemble(), dir).await;
    let lease = LeaseClient::new(store)
        .acquire("cluster/killed-holder", Duration::from_secs(2))
        .await
        .unwrap_or_else(|e| panic!("acquire: {e}"));
    println!("granted {}", lease.token().get());
    let cause = lease.lost().await;
    println!("lost {cause}");
    std::future::pending::<()>().await;
}

/// Starts server `index` of the shared ensemble again when dropped.
struct Restart(Option<usize>);

impl Drop for Restart {
    fn drop(&mut self) {
        let Some(i) = self.0 else { return };
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

async fn scenario() {
    let servers = servers();
    let all: Vec<usize> = (0..servers.len()).collect();
    assert!(
        poll_leader(&servers, &all, Duration::from_secs(30)).await.is_some(),
        "the ensemble has no leader"
    );
    let dir = common::unique_dir("leader-kill");
    let cluster = leasehold_testkit::zk_ensemble();
    let store = common::store_on(&cluster, &dir).await;
    let holder = LeaseClient::new(store.clone());
    let name = LeaseName::new("cluster/leader").expect("name");
    let ttl = Duration::from_secs(5);
    let lease = holder
        .acquire(name.as_str(), ttl)
        .await
        .expect("acquire on the ensemble");
    let token = lease.token();
    let granted = store.read(&name).await.expect("read").expect("present");

    // A challenger (another store: another process's sessions) keeps trying all along.
    let challenger_store = common::store_on(&cluster, &dir).await;
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

    let old = leader(&servers, &all).await.expect("a leader");
    let killed_at = Instant::now();
    kill9(pid_of(old)).expect("kill -9 the ZooKeeper leader");
    let _restart = Restart(Some(old));
    let live: Vec<usize> = all.iter().copied().filter(|i| *i != old).collect();
    let new = poll_leader(&servers, &live, Duration::from_secs(30))
        .await
        .unwrap_or_else(|| panic!("no new leader within 30 s of killing s{old}"));
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
    assert_eq!(grants.load(Ordering::SeqCst), 0, "the lease was granted twice");
    let reader = common::store_on(&servers[live[0]], &dir).await;
    let now = reader.read(&name).await.expect("read").expect("present");
    assert_eq!(now.record.holder.as_ref(), Some(lease.holder()));
    assert_eq!(now.record.token, token, "the token changed");
    assert_eq!(now.version, granted.version, "the record was rewritten");
    let c = reader.client().await.expect("client");
    let (counter, _) = c.get_data(&reader.fence_path(&name)).await.expect("counter");
    assert_eq!(
        counter,
        format!("{:020}", token.get()).into_bytes(),
        "a second token was issued"
    );
    println!(
        "leader kill: s{old} killed; new leader s{new} after {election:?}; renewals resumed after {resumed:?}; token {token} unchanged; {} challenger attempts, 0 grants",
        attempts.load(Ordering::SeqCst)
    );
    lease.release().await.expect("release");

    // A holder process killed outright: taken over once its session expires.
    let hold_ttl = Duration::from_secs(2);
    let mut cmd = Command::new(std::env::current_exe().expect("this test binary"));
    cmd.env(WORKER_VAR, &dir);
    let mut worker = Talker::spawn(cmd);
    let line = worker
        .line(Duration::from_secs(20), |l| l.starts_with("granted "))
        .await;
    let held_token: u64 = line["granted ".len()..].parse().expect("a token");
    let taker = LeaseClient::new(common::store_on(&cluster, &dir).await);
    assert!(
        matches!(
            taker.try_acquire("cluster/killed-holder", hold_ttl).await.expect("try"),
            AcquireOutcome::Held { .. }
        ),
        "granted while the holder lives"
    );
    kill9(worker.pid()).expect("kill -9 the holder");
    let killed = Instant::now();
    let taken = taker
        .acquire_timeout("cluster/killed-holder", hold_ttl, Duration::from_secs(20))
        .await
        .expect("takeover after the holder died");
    let after = killed.elapsed();
    assert_eq!(taken.token(), FencingToken::new(held_token + 1));
    // The session lives its timeout after the last heartbeat the ensemble heard (at most
    // a third of it before the kill), rounded up to the tick; the waiter's watch and one
    // claim follow.
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
