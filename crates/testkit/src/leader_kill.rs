//! The leader-kill scenario of the replicated stores, one case for each: on a
//! three-member [`Cluster`],
//!
//! 1. a lease survives `kill -9` of the cluster's leader: a new leader is elected, the
//!    holder's renewals resume, a challenger trying all along is never granted, and the
//!    record and the fence counter are the ones of the first grant (no second token);
//! 2. a lease whose holder process is killed outright is taken over once the store lets
//!    its session expire: within its TTL plus 1 s of the kill, not before half its TTL,
//!    with the next token.
//!
//! A store's `tests/leader_kill.rs` (`harness = false`) implements [`Cluster`] and calls
//! [`main`]: the test binary is also the holder process it kills (run with `--worker`).

use std::future::Future;
use std::process::{Command, ExitCode};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use leasehold_core::store::{CasStore, Linearizable};
use leasehold_core::testing::process::{kill9, poll};
use leasehold_core::{AcquireOutcome, FencingToken, LeaseClient, LeaseName};
use tokio::time::Instant;

use crate::child::Talker;
use crate::cluster::{Cluster, poll_leader};

/// The lease held across the leader's death.
const SURVIVOR: &str = "cluster/leader";
/// Its TTL.
const TTL: Duration = Duration::from_secs(5);
/// The lease of the holder process that is killed.
const KILLED: &str = "cluster/killed-holder";
/// Its TTL.
const HOLD_TTL: Duration = Duration::from_secs(2);
/// How long the holder process and the taker may take to be granted.
const GRANT_WITHIN: Duration = Duration::from_secs(20);

/// The main of a store's `tests/leader_kill.rs`: `start` starts (or finds) the cluster,
/// and the scenario must finish within `limit` after that; run as the holder process,
/// the binary holds a lease on the store that `open` opens from the arguments
/// [`Cluster::process_args`] gave, until it is killed.
pub fn main<C, F, W>(limit: Duration, start: impl FnOnce() -> F, open: impl FnOnce(Vec<String>) -> W) -> ExitCode
where
    C: Cluster,
    F: Future<Output = C>,
    W: Future<Output = C::Store>,
{
    crate::one_test_main(
        "leader_kill",
        |args| {
            crate::runtime().block_on(async { hold(open(args.to_vec()).await).await });
            ExitCode::SUCCESS
        },
        || async move {
            let started = Instant::now();
            // Dropped at the end, also on failure: the cluster cleans up after itself.
            let cluster = start().await;
            tokio::time::timeout(limit, async {
                let live = a_lease_survives_the_leaders_death(&cluster).await;
                a_killed_holder_is_taken_over(&cluster, &live).await;
            })
            .await
            .unwrap_or_else(|_| panic!("the leader-kill scenario did not finish within {limit:?}"));
            drop(cluster);
            println!("leader_kill: passed in {:?}", started.elapsed());
        },
    )
}

/// The holder process: holds [`KILLED`] on `store` (printing `granted <token>`) until it
/// is killed.
async fn hold<S: Linearizable + Clone>(store: S) {
    let lease = LeaseClient::new(store)
        .acquire(KILLED, HOLD_TTL)
        .await
        .unwrap_or_else(|e| panic!("acquire: {e}"));
    println!("granted {}", lease.token().get());
    let cause = lease.lost().await;
    println!("lost {cause}");
    std::future::pending::<()>().await;
}

/// Part 1: kills the leader under a held lease; the members that live on.
async fn a_lease_survives_the_leaders_death<C: Cluster>(cluster: &C) -> Vec<usize> {
    let all: Vec<usize> = (0..cluster.size()).collect();
    assert!(
        poll_leader(cluster, &all, C::ELECTION).await.is_some(),
        "the cluster has no leader"
    );
    let store = cluster.store(&all).await;
    let holder = LeaseClient::new(store.clone());
    let name = LeaseName::new(SURVIVOR).expect("name");
    let lease = holder
        .acquire(name.as_str(), TTL)
        .await
        .expect("acquire on the cluster");
    let token = lease.token();
    let granted = store.read(&name).await.expect("read").expect("present");

    // A challenger (another store: another process's connections) keeps trying all
    // along: it must never be granted.
    let challenger = LeaseClient::new(cluster.store(&all).await);
    let stop = Arc::new(AtomicBool::new(false));
    let grants = Arc::new(AtomicU64::new(0));
    let attempts = Arc::new(AtomicU64::new(0));
    let challenge = {
        let (stop, grants, attempts, name) = (stop.clone(), grants.clone(), attempts.clone(), name.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                attempts.fetch_add(1, Ordering::SeqCst);
                if let Ok(AcquireOutcome::Granted(_)) = challenger.try_acquire(name.as_str(), TTL).await {
                    grants.fetch_add(1, Ordering::SeqCst);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };

    let old = cluster.leader(&all).await.expect("a leader");
    let killed_at = Instant::now();
    cluster.kill(old);
    let live: Vec<usize> = all.iter().copied().filter(|i| *i != old).collect();
    let new = poll_leader(cluster, &live, C::ELECTION)
        .await
        .unwrap_or_else(|| panic!("no new leader within {:?} of killing {}{old}", C::ELECTION, C::MEMBER));
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
    let reader = cluster.store(&live[..1]).await;
    let now = reader.read(&name).await.expect("read").expect("present");
    assert_eq!(now.record.holder.as_ref(), Some(lease.holder()));
    assert_eq!(now.record.token, token, "the token changed");
    assert_eq!(now.version, granted.version, "the record was rewritten");
    assert_eq!(
        cluster.fence_counter(&reader, &name).await,
        Some(format!("{:020}", token.get()).into_bytes()),
        "a second token was issued"
    );
    let m = C::MEMBER;
    println!(
        "leader kill: {m}{old} killed; new leader {m}{new} after {election:?}; renewals resumed after {resumed:?}; token {token} unchanged; {} challenger attempts, 0 grants",
        attempts.load(Ordering::SeqCst)
    );
    lease.release().await.expect("release");
    live
}

/// Part 2: a holder process on the members `live`, killed outright, is taken over once
/// its session expires.
async fn a_killed_holder_is_taken_over<C: Cluster>(cluster: &C, live: &[usize]) {
    let mut cmd = Command::new(std::env::current_exe().expect("this test binary"));
    cmd.arg("--worker").args(cluster.process_args(live));
    let mut worker = Talker::spawn(cmd);
    let line = worker.line(GRANT_WITHIN, |l| l.starts_with("granted ")).await;
    let held_token: u64 = line["granted ".len()..].parse().expect("a token");
    let taker = LeaseClient::new(cluster.store(live).await);
    assert!(
        matches!(
            taker.try_acquire(KILLED, HOLD_TTL).await.expect("try"),
            AcquireOutcome::Held { .. }
        ),
        "granted while the holder lives"
    );
    kill9(worker.pid()).expect("kill -9 the holder");
    let killed = Instant::now();
    let taken = taker
        .acquire_timeout(KILLED, HOLD_TTL, GRANT_WITHIN)
        .await
        .expect("takeover after the holder died");
    let after = killed.elapsed();
    assert_eq!(taken.token(), FencingToken::new(held_token + 1));
    // The store keeps the holder's session for its TTL after the last keep-alive or
    // heartbeat it heard (sent at most a third of the TTL before the kill), deleting its
    // records on the next sweep or tick; the waiter's watch and one claim follow.
    let bound = HOLD_TTL + Duration::from_secs(1);
    assert!(
        after <= bound,
        "takeover took {after:?}, more than TTL {HOLD_TTL:?} + 1 s"
    );
    assert!(
        after >= HOLD_TTL / 2,
        "taken over {after:?} after the kill: before the session could expire"
    );
    println!(
        "killed holder: taken over {after:?} after kill -9 (TTL {HOLD_TTL:?}), token {held_token} -> {}",
        taken.token()
    );
    taken.release().await.expect("release");
}
