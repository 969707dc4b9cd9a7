//! A holder whose session is connected to a follower of the three-server ensemble
//! (`LEASEHOLD_ZK_ENSEMBLE`), which freezes (SIGSTOP) right after answering a renewal:
//! the leader expires the session from the heartbeats the follower had reported to it,
//! which may be older than the renewal the follower answered, and a challenger connected
//! to the other two servers takes the lease over. The holder must have stopped trusting
//! its lease by then (no early takeover), and the lease must be taken over (the test
//! could not fail otherwise).
//!
//! The long torture run found such early takeovers (docs/RELIABILITY.md, "ZooKeeper: the
//! first long run"): a renewal answered by a follower counted from its own send time.
#![allow(missing_docs)]

mod common;

use std::time::Duration;

use common::ensemble::{Ensemble, pid_of};
use leasehold_core::LeaseClient;
use leasehold_core::testing::process::{freeze, resume};
use leasehold_testkit::cluster::{Cluster, poll_leader};
use tokio::time::Instant;

/// Rounds: the follower may report the renewal before it stops; a round whose report
/// got through shows nothing, so several are run.
const ROUNDS: usize = 6;
const TTL: Duration = Duration::from_secs(1);

/// Resumes the frozen server when dropped, also on failure.
struct Thaw(u32);

impl Drop for Thaw {
    fn drop(&mut self) {
        let _ = resume(self.0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_follower_never_lets_its_holder_outlive_the_session() {
    let ensemble = Ensemble::new("frozen-follower");
    let servers = ensemble.servers();
    let all: Vec<usize> = (0..ensemble.size()).collect();
    let mut early = Vec::new();
    for round in 0..ROUNDS {
        let leader = poll_leader(&ensemble, &all, Duration::from_secs(30))
            .await
            .expect("the ensemble has no leader");
        let follower = (leader + 1) % servers.len();
        wait_serving(&servers[follower]).await;
        let others: Vec<usize> = all.iter().copied().filter(|&i| i != follower).collect();
        // The holder reaches the ensemble through the follower alone; the challenger
        // through the leader and the third server.
        let holder_store = ensemble.store(&[follower]).await;
        let challenger_store = ensemble.store(&others).await;
        let name = format!("frozen-follower-{round}");
        let lease = leasehold_testkit::records::acquired(&holder_store, &name, TTL).await;

        // Two renewals for a steady state, then freeze the follower right after the next.
        for _ in 0..3 {
            let before = lease.valid_until();
            let renewed = renewal_after(&lease, before, Duration::from_secs(5)).await;
            assert!(renewed, "round {round}: the holder did not renew within 5 s");
        }
        let pid = pid_of(follower);
        freeze(pid).await.expect("SIGSTOP the follower");
        let _thaw = Thaw(pid);
        let frozen_at = Instant::now();
        let trusted_until = lease.valid_until();

        let taken = LeaseClient::new(challenger_store.clone())
            .acquire_timeout(&name, TTL, Duration::from_secs(15))
            .await
            .unwrap_or_else(|e| panic!("round {round}: the challenger got no grant within 15 s: {e}"));
        let granted_at = Instant::now();
        println!(
            "round {round}: s{follower} frozen; the holder trusted its lease {:?} longer; the challenger was granted token {} after {:?}",
            trusted_until.saturating_duration_since(frozen_at),
            taken.token(),
            granted_at.duration_since(frozen_at),
        );
        if granted_at < trusted_until {
            early.push((round, trusted_until - granted_at));
        }
        assert!(
            taken.token() > lease.token(),
            "round {round}: the new token is not higher"
        );
        taken.release().await.expect("release");
        drop(_thaw);
        wait_serving(&servers[follower]).await;
    }
    assert!(
        early.is_empty(),
        "granted while the holder still trusted its lease (round, by how much): {early:?}"
    );
}

/// True once `lease` was renewed after its validity stood at `before` (looked at every
/// millisecond, so that the follower is frozen within a few of its answer).
async fn renewal_after(lease: &leasehold_core::Lease, before: Instant, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if lease.valid_until() > before {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    false
}

/// Waits until `server` serves as a follower or leader again (up to 60 s).
async fn wait_serving(server: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if matches!(common::mode(server).await.as_deref(), Some("follower" | "leader")) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{server} does not serve 60 s after it was resumed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
