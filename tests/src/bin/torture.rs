//! The long torture run of one store (`scripts/torture-long.sh` runs it for each).
//!
//! ```text
//! torture --store postgres|mysql|redis|etcd|zookeeper|dynamo|s3 [--seed N] [--port P] [--ttl-ms T]
//!         [--workers N] [--max-minutes M] [--cycles C] [--restarts R] [--proxy-faults F]
//!         [--mutant none|no-fence|blind-release] [--skew] [--instances K] [--permits N]
//! torture --recheck <run dir>      # the checker again, over a run's files (lease or semaphore)
//! ```
//!
//! With `--permits N`, the workers take permits of a semaphore of N permits instead of
//! the one lease (`leasehold_tests::permits` judges the run).
//!
//! With `--instances K`, K runs of the store go side by side, each with a store instance,
//! a seed (`seed + i`) and ports (`port + 20 i`) of its own, and each takes 1/K of the
//! targets. A run stops when its cycles, restarts and proxy faults all reach their
//! targets (defaults 10000, 500, 500 for the store), or after `--max-minutes` (default
//! 600); the binary prints every run's report and their sum, and exits 1 if a checker
//! found a violation. Needs the variables of
//! `eval "$(scripts/stores.sh env)"` and the shared Postgres running.

use std::time::Duration;

use leasehold_tests::stores::StoreKind;
use leasehold_tests::summary::Summary;
use leasehold_tests::torture::{self, Budget, Mutant, RunConfig};

fn fail(what: &str) -> ! {
    eprintln!("torture: {what}");
    std::process::exit(2)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let get = |flag: &str| {
        argv.iter()
            .position(|a| a == flag)
            .and_then(|i| argv.get(i + 1).cloned())
    };
    let num = |flag: &str, default: u64| -> u64 {
        get(flag).map_or(default, |v| v.parse().unwrap_or_else(|e| fail(&format!("{flag}: {e}"))))
    };
    if let Some(dir) = get("--recheck") {
        let (r, permits) =
            torture::recheck(std::path::Path::new(&dir)).unwrap_or_else(|e| fail(&format!("{dir}: {e}")));
        if let Some((n, most)) = permits {
            println!("recheck {dir}: a semaphore of {n} permits, at most {most} permit holders at once");
        }
        println!(
            "recheck {dir}: grants {}, epochs {}, writes sent {}, accepted {}, refused {}, unknown {}, \
             stale refused {} of {}, explained {}, violations {}",
            r.grants,
            r.epochs,
            r.writes_sent,
            r.writes_accepted,
            r.writes_refused,
            r.writes_unknown,
            r.stale.refused,
            r.stale.sent,
            r.explained.len(),
            r.violations.len()
        );
        for v in &r.violations {
            println!("VIOLATION {v}");
        }
        std::process::exit(i32::from(!r.is_clean()));
    }
    let kind = StoreKind::parse(&get("--store").unwrap_or_else(|| fail("missing --store")))
        .unwrap_or_else(|| fail("unknown --store"));
    // Each store its own block of 200 ports; instance i at base + 20 i (etcd takes 13).
    let default_port = 22000
        + 200
            * match kind {
                StoreKind::Postgres => 0,
                StoreKind::Redis => 1,
                StoreKind::Etcd => 2,
                StoreKind::Dynamo => 3,
                StoreKind::S3 => 4,
                StoreKind::ZooKeeper => 5,
                StoreKind::MySql => 6,
            };
    let base = u16::try_from(num("--port", default_port)).unwrap_or_else(|_| fail("--port"));
    let instances = num("--instances", 1);
    if !(1..=10).contains(&instances) {
        fail("--instances must be 1 to 10");
    }
    let seed = num("--seed", 1);
    let max_time = Duration::from_secs(num("--max-minutes", 600) * 60);
    let ttl =
        get("--ttl-ms").map(|t| Duration::from_millis(t.parse().unwrap_or_else(|e| fail(&format!("--ttl-ms: {e}")))));
    let mutant = Mutant::parse(&get("--mutant").unwrap_or_else(|| "none".into())).unwrap_or_else(|| fail("--mutant"));
    let workers = usize::try_from(num("--workers", 3)).unwrap_or(3);
    // The targets are for the store: each instance takes its share.
    let share = |total: u64| total.div_ceil(instances);
    let budget = Budget {
        max_time,
        cycles: share(num("--cycles", 10_000)),
        restarts: share(num("--restarts", 500)),
        proxy_faults: share(num("--proxy-faults", 500)),
    };
    let skew = argv.iter().any(|a| a == "--skew");
    let permits = get("--permits").map(|n| match n.parse::<u32>() {
        Ok(n) if n >= 1 => n,
        _ => fail("--permits must be a number of permits, at least 1"),
    });

    let mut runs = tokio::task::JoinSet::new();
    for i in 0..instances {
        let port = base + u16::try_from(i * 20).unwrap_or_else(|_| fail("--port"));
        let mut cfg = RunConfig::new(kind, seed + i, port, torture::sibling_worker_exe(), max_time);
        cfg.out_dir = cfg.out_dir.with_file_name(format!("long-{}-{port}", kind.name()));
        if let Some(t) = ttl {
            cfg.ttl = t;
        }
        cfg.workers = workers;
        cfg.budget = budget;
        cfg.mutant = mutant;
        cfg.skew = skew;
        cfg.permits = permits;
        runs.spawn(torture::run(cfg));
    }
    let mut reports = Vec::new();
    while let Some(r) = runs.join_next().await {
        match r {
            Ok(report) => {
                println!("{report}");
                reports.push(report);
            }
            Err(e) => fail(&format!("a run failed: {e}")),
        }
    }
    reports.sort_by_key(|r| r.seed);
    let summary = Summary::of(&reports);
    println!("{summary}");
    if !summary.check.is_clean() {
        std::process::exit(1);
    }
}
