//! `leader-election` as three real processes on SQLite, Postgres and etcd: the leader is
//! killed (`kill -9`), then the next one frozen (`SIGSTOP`) past its TTL and resumed.
//! Checked from the protected table: at most one leader's writes are accepted at any
//! time, and a new leader leads within the TTL (plus a round trip and process
//! scheduling) of the old one's death.
#![allow(missing_docs)]

mod common;

use std::time::Duration;

use common::{Db, Place, Proc, serial, wait_procs};
use tokio::time::Instant;

const BIN: &str = env!("CARGO_BIN_EXE_leader-election");
/// Slack on top of the TTL for a takeover: the old lease's expiry is at most one TTL
/// after the kill; the waiter's wake-up, one round trip and process scheduling on a
/// busy 2-core machine.
const SLACK: Duration = Duration::from_millis(700);

struct Scenario {
    at: Place,
    ttl: Duration,
}

fn args(s: &Scenario, instance: &str) -> Vec<String> {
    let ttl = s.ttl.as_millis().to_string();
    s.at.args(
        instance,
        90_000,
        &["--election", "it", "--ttl-ms", &ttl, "--write-every-ms", "50"],
    )
}

/// Index of the process that printed `line` first, if any.
fn who_saw(procs: &[Proc], line: &str) -> Option<(usize, Instant)> {
    procs
        .iter()
        .enumerate()
        .filter_map(|(i, p)| p.saw(line).map(|t| (i, t)))
        .min_by_key(|(_, t)| *t)
}

#[allow(clippy::await_holding_lock)]
async fn run(s: Scenario) {
    let _serial = serial();
    let names = ["a", "b", "c"];
    let mut procs: Vec<Proc> = names.iter().map(|n| Proc::spawn(BIN, n, &args(&s, n))).collect();

    // 1. Someone leads with token 1 and writes.
    wait_procs(&procs, "a first leader", Duration::from_secs(40), |p| {
        who_saw(p, "leading token=1").is_some()
    })
    .await;
    let (l1, _) = who_saw(&procs, "leading token=1").expect("leader");
    wait_procs(&procs, "the first leader's writes", Duration::from_secs(10), |p| {
        p[l1].count("write token=1 ok") >= 5
    })
    .await;

    // 2. kill -9 the leader: another one leads within the TTL.
    let killed_at = Instant::now();
    procs[l1].kill9();
    wait_procs(&procs, "a leader after the kill", s.ttl + Duration::from_secs(5), |p| {
        who_saw(p, "leading token=2").is_some()
    })
    .await;
    let (l2, led2) = who_saw(&procs, "leading token=2").expect("leader 2");
    let after_kill = led2 - killed_at;
    eprintln!(
        "{}: new leader {after_kill:?} after the kill (ttl {:?})",
        s.at.label, s.ttl
    );
    assert_ne!(l2, l1);
    assert!(
        after_kill <= s.ttl + SLACK,
        "{}: new leader {after_kill:?} after the kill (ttl {:?})",
        s.at.label,
        s.ttl
    );
    // The killed copy comes back as a candidate.
    let name = names[l1];
    procs[l1] = Proc::spawn(BIN, &format!("{name}-restarted"), &args(&s, name));

    // 3. Freeze the second leader just after one of its writes committed.
    wait_procs(&procs, "the second leader's writes", Duration::from_secs(10), |p| {
        p[l2].count("write token=2 ok") >= 3
    })
    .await;
    let before = procs[l2].count("write token=2 ok");
    wait_procs(&procs, "a fresh write", Duration::from_secs(5), |p| {
        p[l2].count("write token=2 ok") > before
    })
    .await;
    procs[l2].freeze().await;
    let frozen_at = Instant::now();
    wait_procs(
        &procs,
        "a leader after the freeze",
        s.ttl + Duration::from_secs(5),
        |p| who_saw(p, "leading token=3").is_some(),
    )
    .await;
    let (l3, led3) = who_saw(&procs, "leading token=3").expect("leader 3");
    let after_freeze = led3 - frozen_at;
    assert_ne!(l3, l2);
    assert!(
        after_freeze <= s.ttl + SLACK,
        "{}: new leader {after_freeze:?} after the freeze",
        s.at.label
    );
    wait_procs(&procs, "the third leader's writes", Duration::from_secs(10), |p| {
        p[l3].count("write token=3 ok") >= 5
    })
    .await;

    // 4. Resume the frozen leader: it stops leading, and none of its writes is accepted.
    let resumed_at = Instant::now();
    procs[l2].resume();
    wait_procs(&procs, "the resumed leader to stop", Duration::from_secs(5), |p| {
        p[l2].count_since("stopped", resumed_at) + p[l2].count_since("rejected", resumed_at) > 0
    })
    .await;
    // Give it time to try (and fail) any write it had in progress.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let stale_accepted = procs[l2].count_since("write token=2 ok", resumed_at);
    let rejected = procs[l2].count_since("rejected token=2", resumed_at);
    wait_procs(
        &procs,
        "the third leader to keep writing",
        Duration::from_secs(5),
        |p| p[l3].count_since("write token=3 ok", resumed_at) >= 3,
    )
    .await;
    for p in &mut procs {
        p.kill9();
    }

    // 5. The truth, from the table: writes in commit order never go back to an older
    // token, and each token's writes come from one process.
    let db = Db::open(&s.at.data).await;
    let p = &s.at.prefix;
    let writes = db
        .pairs(&format!("SELECT id, token FROM {p}_leader_writes ORDER BY id"))
        .await;
    let tokens: Vec<i64> = writes.iter().map(|(_, t)| *t).collect();
    let backwards = tokens.windows(2).filter(|w| w[1] < w[0]).count();
    let owners = db
        .int_text(&format!(
            "SELECT token, instance FROM {p}_leader_writes GROUP BY token, instance ORDER BY token"
        ))
        .await;
    let mut per_token: std::collections::BTreeMap<i64, Vec<String>> = Default::default();
    for (t, i) in owners {
        per_token.entry(t).or_default().push(i);
    }
    let count = |t: i64| tokens.iter().filter(|x| **x == t).count();
    eprintln!(
        "{}: writes={} by token: 1={} 2={} 3={}; backwards={backwards}; new leader {after_kill:?} after kill -9, \
         {after_freeze:?} after SIGSTOP (ttl {:?}); resumed leader: accepted={stale_accepted} rejected={rejected}",
        s.at.label,
        tokens.len(),
        count(1),
        count(2),
        count(3),
        s.ttl
    );
    assert_eq!(
        backwards, 0,
        "{}: a write with an older token was accepted after a newer one",
        s.at.label
    );
    assert_eq!(
        stale_accepted, 0,
        "{}: the resumed leader's write was accepted",
        s.at.label
    );
    assert!(
        per_token.values().all(|v| v.len() == 1),
        "{}: a token wrote from two processes: {per_token:?}",
        s.at.label
    );
    for t in 1..=3 {
        assert!(count(t) >= 3, "{}: token {t} wrote {} times", s.at.label, count(t));
    }
    db.drop_tables(p, &["leader_writes", "leader_fence", "leases"]).await;
    s.at.remove_scratch();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_leader_killed_then_frozen() {
    run(Scenario {
        at: Place::sqlite("election"),
        ttl: Duration::from_millis(1_000),
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_leader_killed_then_frozen() {
    run(Scenario {
        at: Place::postgres("el"),
        ttl: Duration::from_millis(1_000),
    })
    .await;
}

/// etcd keeps held records alive through sessions whose TTL it raises to its minimum
/// (2 s on default settings), so the election TTL here is 2 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_leader_killed_then_frozen() {
    run(Scenario {
        at: Place::etcd("el"),
        ttl: Duration::from_millis(2_000),
    })
    .await;
}
