//! `leader-election` as three real processes on SQLite, Postgres and etcd: the leader is
//! killed (`kill -9`), then the next one frozen (`SIGSTOP`) past its TTL and resumed.
//! Checked from the protected table: at most one leader's writes are accepted at any
//! time, and a new leader leads within the TTL (plus a round trip and process
//! scheduling) of the old one's death.
#![allow(missing_docs)]

mod common;

use std::time::Duration;

use common::{Db, Proc, etcd_endpoints, pg_url, scratch_dir, serial, unique_prefix, wait_for};
use tokio::time::Instant;

const BIN: &str = env!("CARGO_BIN_EXE_leader-election");
/// Slack on top of the TTL for a takeover: the old lease's expiry is at most one TTL
/// after the kill; the waiter's wake-up, one round trip and process scheduling on a
/// busy 2-core machine.
const SLACK: Duration = Duration::from_millis(700);

struct Scenario {
    label: &'static str,
    store: String,
    data: String,
    prefix: String,
    ttl: Duration,
}

fn args(s: &Scenario, instance: &str) -> Vec<String> {
    [
        "--store",
        &s.store,
        "--data",
        &s.data,
        "--prefix",
        &s.prefix,
        "--election",
        "it",
        "--ttl-ms",
        &s.ttl.as_millis().to_string(),
        "--write-every-ms",
        "50",
        "--instance",
        instance,
        "--run-for-ms",
        "90000",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect()
}

fn dump_all(procs: &[Proc]) -> String {
    procs.iter().map(Proc::dump).collect::<Vec<_>>().join("\n")
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
    wait_for(
        "a first leader",
        Duration::from_secs(40),
        || who_saw(&procs, "leading token=1").is_some(),
        || dump_all(&procs),
    )
    .await;
    let (l1, _) = who_saw(&procs, "leading token=1").expect("leader");
    wait_for(
        "the first leader's writes",
        Duration::from_secs(10),
        || procs[l1].count("write token=1 ok") >= 5,
        || dump_all(&procs),
    )
    .await;

    // 2. kill -9 the leader: another one leads within the TTL.
    let killed_at = Instant::now();
    procs[l1].kill9();
    wait_for(
        "a leader after the kill",
        s.ttl + Duration::from_secs(5),
        || who_saw(&procs, "leading token=2").is_some(),
        || dump_all(&procs),
    )
    .await;
    let (l2, led2) = who_saw(&procs, "leading token=2").expect("leader 2");
    let after_kill = led2 - killed_at;
    eprintln!(
        "{}: new leader {after_kill:?} after the kill (ttl {:?})",
        s.label, s.ttl
    );
    assert_ne!(l2, l1);
    assert!(
        after_kill <= s.ttl + SLACK,
        "{}: new leader {after_kill:?} after the kill (ttl {:?})",
        s.label,
        s.ttl
    );
    // The killed copy comes back as a candidate.
    let name = names[l1];
    procs[l1] = Proc::spawn(BIN, &format!("{name}-restarted"), &args(&s, name));

    // 3. Freeze the second leader just after one of its writes committed.
    wait_for(
        "the second leader's writes",
        Duration::from_secs(10),
        || procs[l2].count("write token=2 ok") >= 3,
        || dump_all(&procs),
    )
    .await;
    let before = procs[l2].count("write token=2 ok");
    wait_for(
        "a fresh write",
        Duration::from_secs(5),
        || procs[l2].count("write token=2 ok") > before,
        || dump_all(&procs),
    )
    .await;
    procs[l2].freeze().await;
    let frozen_at = Instant::now();
    wait_for(
        "a leader after the freeze",
        s.ttl + Duration::from_secs(5),
        || who_saw(&procs, "leading token=3").is_some(),
        || dump_all(&procs),
    )
    .await;
    let (l3, led3) = who_saw(&procs, "leading token=3").expect("leader 3");
    let after_freeze = led3 - frozen_at;
    assert_ne!(l3, l2);
    assert!(
        after_freeze <= s.ttl + SLACK,
        "{}: new leader {after_freeze:?} after the freeze",
        s.label
    );
    wait_for(
        "the third leader's writes",
        Duration::from_secs(10),
        || procs[l3].count("write token=3 ok") >= 5,
        || dump_all(&procs),
    )
    .await;

    // 4. Resume the frozen leader: it stops leading, and none of its writes is accepted.
    let resumed_at = Instant::now();
    procs[l2].resume();
    wait_for(
        "the resumed leader to stop",
        Duration::from_secs(5),
        || procs[l2].count_since("stopped", resumed_at) + procs[l2].count_since("rejected", resumed_at) > 0,
        || dump_all(&procs),
    )
    .await;
    // Give it time to try (and fail) any write it had in progress.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let stale_accepted = procs[l2].count_since("write token=2 ok", resumed_at);
    let rejected = procs[l2].count_since("rejected token=2", resumed_at);
    wait_for(
        "the third leader to keep writing",
        Duration::from_secs(5),
        || procs[l3].count_since("write token=3 ok", resumed_at) >= 3,
        || dump_all(&procs),
    )
    .await;
    for p in &mut procs {
        p.kill9();
    }

    // 5. The truth, from the table: writes in commit order never go back to an older
    // token, and each token's writes come from one process.
    let db = Db::open(&s.data).await;
    let p = &s.prefix;
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
        s.label,
        tokens.len(),
        count(1),
        count(2),
        count(3),
        s.ttl
    );
    assert_eq!(
        backwards, 0,
        "{}: a write with an older token was accepted after a newer one",
        s.label
    );
    assert_eq!(
        stale_accepted, 0,
        "{}: the resumed leader's write was accepted",
        s.label
    );
    assert!(
        per_token.values().all(|v| v.len() == 1),
        "{}: a token wrote from two processes: {per_token:?}",
        s.label
    );
    for t in 1..=3 {
        assert!(count(t) >= 3, "{}: token {t} wrote {} times", s.label, count(t));
    }
    db.drop_tables(p, &["leader_writes", "leader_fence", "leases"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_leader_killed_then_frozen() {
    let dir = scratch_dir("election");
    run(Scenario {
        label: "sqlite",
        store: format!("sqlite:{}", dir.join("leases.db").display()),
        data: format!("sqlite:{}", dir.join("data.db").display()),
        prefix: "demo".into(),
        ttl: Duration::from_millis(1_000),
    })
    .await;
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_leader_killed_then_frozen() {
    run(Scenario {
        label: "postgres",
        store: pg_url(),
        data: pg_url(),
        prefix: unique_prefix("el"),
        ttl: Duration::from_millis(1_000),
    })
    .await;
}

/// etcd keeps held records alive through sessions whose TTL it raises to its minimum
/// (2 s on default settings), so the election TTL here is 2 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_leader_killed_then_frozen() {
    run(Scenario {
        label: "etcd",
        store: format!("etcd:{}", etcd_endpoints()),
        data: pg_url(),
        prefix: unique_prefix("el"),
        ttl: Duration::from_millis(2_000),
    })
    .await;
}
