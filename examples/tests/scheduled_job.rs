//! `scheduled-job` as three real processes killed (`kill -9`) and restarted at random
//! while a 100 ms schedule runs for more than 200 slots, on Postgres and etcd (and
//! briefly on the embedded SQLite store). Checked from the job's own table: every slot
//! ran exactly once.
#![allow(missing_docs)]

mod common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{Db, Proc, etcd_endpoints, pg_url, scratch_dir, serial, unique_prefix, wait_for};
use tokio::time::Instant;

const BIN: &str = env!("CARGO_BIN_EXE_scheduled-job");
const INTERVAL_MS: u64 = 100;

struct Scenario {
    label: &'static str,
    store: String,
    data: String,
    prefix: String,
    /// lock_at_most_for: how long a killed runner's slot waits for its takeover.
    lock: Duration,
    /// How long instances are killed and restarted.
    chaos: Duration,
    /// Kill one instance every this long (0: never).
    kill_every: Duration,
}

fn args(s: &Scenario, instance: &str) -> Vec<String> {
    [
        "--store",
        &s.store,
        "--data",
        &s.data,
        "--prefix",
        &s.prefix,
        "--job",
        "it",
        "--every-ms",
        &INTERVAL_MS.to_string(),
        "--lock-ms",
        &s.lock.as_millis().to_string(),
        "--catch-up-ms",
        "6000",
        "--keep-done-ms",
        "600000",
        "--work-ms",
        "5",
        "--instance",
        instance,
        "--run-for-ms",
        "120000",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect()
}

fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(0))
        .unwrap_or(0)
}

/// A small seeded generator, so a failing run's kill pattern can be replayed.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
}

#[allow(clippy::await_holding_lock)]
async fn run(s: Scenario) {
    let _serial = serial();
    let seed = wall_ms();
    let mut rng = Lcg(seed);
    let names = ["a", "b", "c"];
    let mut procs: Vec<Proc> = names.iter().map(|n| Proc::spawn(BIN, n, &args(&s, n))).collect();
    let dump = |procs: &[Proc]| procs.iter().map(Proc::dump).collect::<Vec<_>>().join("\n");
    for i in 0..procs.len() {
        wait_for(
            "ready",
            Duration::from_secs(40),
            || procs[i].saw("ready").is_some(),
            || dump(&procs),
        )
        .await;
    }
    // Slots from one second after every instance is up.
    let first_slot = (wall_ms() + 1_000).div_ceil(INTERVAL_MS) * INTERVAL_MS;
    let chaos_end = Instant::now() + s.chaos;
    let mut kills = 0;
    while Instant::now() < chaos_end {
        if s.kill_every.is_zero() {
            tokio::time::sleep(chaos_end - Instant::now()).await;
            break;
        }
        let jitter = Duration::from_millis(rng.next(u64::try_from(s.kill_every.as_millis()).unwrap_or(1)));
        tokio::time::sleep(s.kill_every / 2 + jitter).await;
        let victim = usize::try_from(rng.next(3)).unwrap_or(0);
        procs[victim].kill9();
        kills += 1;
        tokio::time::sleep(Duration::from_millis(rng.next(400))).await;
        procs[victim] = Proc::spawn(BIN, &format!("{}-{kills}", names[victim]), &args(&s, names[victim]));
    }
    let last_slot = wall_ms() / INTERVAL_MS * INTERVAL_MS;
    // Let takeovers of the last killed runners finish: a lease TTL, plus catch-up of
    // the restarted copies.
    let settle = s.lock * 2 + Duration::from_secs(3);
    tokio::time::sleep(settle).await;
    for p in &mut procs {
        p.kill9();
    }

    let db = Db::open(&s.data).await;
    let p = &s.prefix;
    let range = format!("job = 'it' AND slot >= {first_slot} AND slot <= {last_slot}");
    let effects = db
        .pairs(&format!(
            "SELECT slot, count(*) FROM {p}_job_effects WHERE {range} GROUP BY slot ORDER BY slot"
        ))
        .await;
    let attempts = db
        .pairs(&format!(
            "SELECT slot, count(*) FROM {p}_job_attempts WHERE {range} GROUP BY slot ORDER BY slot"
        ))
        .await;
    let expected = (last_slot - first_slot) / INTERVAL_MS + 1;
    let ran = u64::try_from(effects.len()).unwrap_or(0);
    let duplicates: Vec<_> = effects.iter().filter(|(_, n)| *n > 1).collect();
    let by_slot: std::collections::BTreeSet<i64> = effects.iter().map(|(s, _)| *s).collect();
    let missed: Vec<u64> = (0..expected)
        .map(|k| first_slot + k * INTERVAL_MS)
        .filter(|slot| !by_slot.contains(&i64::try_from(*slot).unwrap_or(-1)))
        .collect();
    let reruns: i64 = attempts.iter().map(|(_, n)| n - 1).sum();
    eprintln!(
        "{}: slots={expected} ran={ran} duplicates={} missed={} kills={kills} \
         (bodies started again for a slot already done or taken over: {reruns}; seed {seed})",
        s.label,
        duplicates.len(),
        missed.len()
    );
    assert!(duplicates.is_empty(), "{}: slots run twice: {duplicates:?}", s.label);
    assert!(missed.is_empty(), "{}: slots never run: {missed:?}", s.label);
    assert_eq!(ran, expected);
    db.drop_tables(p, &["job_effects", "job_attempts", "job_slots", "leases"])
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_slots_run_exactly_once_under_kill9() {
    run(Scenario {
        label: "postgres",
        store: pg_url(),
        data: pg_url(),
        prefix: unique_prefix("sj"),
        lock: Duration::from_millis(1_000),
        chaos: Duration::from_secs(22),
        kill_every: Duration::from_millis(1_200),
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_slots_run_exactly_once_under_kill9() {
    run(Scenario {
        label: "etcd",
        store: format!("etcd:{}", etcd_endpoints()),
        data: pg_url(),
        prefix: unique_prefix("sj"),
        lock: Duration::from_millis(1_000),
        chaos: Duration::from_secs(22),
        kill_every: Duration::from_millis(1_200),
    })
    .await;
}

/// The default embedded store: three copies on one SQLite file, a few kills.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_slots_run_exactly_once_under_kill9() {
    let dir = scratch_dir("sched");
    run(Scenario {
        label: "sqlite",
        store: format!("sqlite:{}", dir.join("leases.db").display()),
        data: format!("sqlite:{}", dir.join("data.db").display()),
        prefix: "demo".into(),
        lock: Duration::from_millis(1_000),
        chaos: Duration::from_secs(6),
        kill_every: Duration::from_millis(1_500),
    })
    .await;
    let _ = std::fs::remove_dir_all(dir);
}
