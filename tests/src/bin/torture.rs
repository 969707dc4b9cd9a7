//! The long torture run of one store (`scripts/torture-long.sh` runs it for each).
//!
//! ```text
//! torture --store postgres|redis|etcd|dynamo|s3 [--seed N] [--port P] [--ttl-ms T]
//!         [--workers N] [--max-minutes M] [--cycles C] [--restarts R] [--proxy-faults F]
//!         [--mutant none|no-fence|blind-release] [--skew]
//! torture --recheck <run dir>      # the checker again, over a finished run's files
//! ```
//!
//! It stops when cycles, restarts and proxy faults all reach their targets (defaults
//! 10000, 500, 500), or after `--max-minutes` (default 600), prints the report, and
//! exits 1 if the checker found a violation. Needs the variables of
//! `eval "$(scripts/stores.sh env)"` and the shared Postgres running.

use std::time::Duration;

use leasehold_tests::stores::StoreKind;
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
        let r = torture::recheck(std::path::Path::new(&dir)).unwrap_or_else(|e| fail(&format!("{dir}: {e}")));
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
    let default_port = match kind {
        StoreKind::Postgres => 21500,
        StoreKind::Redis => 21520,
        StoreKind::Etcd => 21540,
        StoreKind::Dynamo => 21580,
        StoreKind::S3 => 21590,
    };
    let port = u16::try_from(num("--port", default_port)).unwrap_or_else(|_| fail("--port"));
    let mut cfg = RunConfig::new(
        kind,
        num("--seed", 1),
        port,
        torture::sibling_worker_exe(),
        Duration::from_secs(num("--max-minutes", 600) * 60),
    );
    cfg.out_dir = cfg.out_dir.with_file_name(format!("long-{}-{port}", kind.name()));
    if let Some(t) = get("--ttl-ms") {
        cfg.ttl = Duration::from_millis(t.parse().unwrap_or_else(|e| fail(&format!("--ttl-ms: {e}"))));
    }
    cfg.workers = usize::try_from(num("--workers", 3)).unwrap_or(3);
    cfg.budget = Budget {
        max_time: cfg.budget.max_time,
        cycles: num("--cycles", 10_000),
        restarts: num("--restarts", 500),
        proxy_faults: num("--proxy-faults", 500),
    };
    cfg.mutant = Mutant::parse(&get("--mutant").unwrap_or_else(|| "none".into())).unwrap_or_else(|| fail("--mutant"));
    cfg.skew = argv.iter().any(|a| a == "--skew");
    let report = torture::run(cfg).await;
    println!("{report}");
    if !report.check.is_clean() {
        std::process::exit(1);
    }
}
