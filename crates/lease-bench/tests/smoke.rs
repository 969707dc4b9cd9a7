//! Runs every benchmark with tiny counts against the real stores (started by
//! `scripts/stores.sh start`; `eval "$(scripts/stores.sh env)"`), so the benchmarks
//! cannot rot, and renders the results file it writes into a copy of
//! `docs/PERFORMANCE.md` the way `scripts/bench.sh` does, checking that every table is
//! filled and nothing outside the regions changed.

use std::path::{Path, PathBuf};
use std::process::Command;

use leasehold_bench::data::Results;
use leasehold_bench::{Plan, StoreKind, markers, run};

fn committed_doc() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/PERFORMANCE.md")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_benchmark_runs_on_every_store() {
    let plan = Plan {
        child_exe: Some(env!("CARGO_BIN_EXE_leasehold-bench").into()),
        ..Plan::smoke()
    };
    let r = run(&plan, &StoreKind::ALL)
        .await
        .unwrap_or_else(|e| panic!("benchmark run failed: {e}"));

    assert_eq!(
        r.overhead.len(),
        StoreKind::ALL.len(),
        "the overhead table covers every store"
    );
    for o in &r.overhead {
        assert_eq!(o.ops.len(), 4, "{:?}: four operations", o.store);
        for x in &o.ops {
            assert!(
                x.library.n > 0 && x.floor.n > 0,
                "{:?} {:?}: both sides measured",
                o.store,
                x.op
            );
            assert!(
                x.store_calls >= 1.0 || (o.store == StoreKind::Etcd && x.op == leasehold_bench::overhead::Op::Renew),
                "{:?} {:?}: the library called its store ({})",
                o.store,
                x.op,
                x.store_calls
            );
        }
    }
    let peers: Vec<StoreKind> = r.peers.iter().map(|p| p.store).collect();
    let with_peer: Vec<StoreKind> = StoreKind::ALL.into_iter().filter(|k| k.has_peer()).collect();
    assert_eq!(peers, with_peer, "three peers");
    for p in &r.peers {
        let fenced = p.fenced_floor.as_ref().map(|[a, _, _]| a.n);
        match p.store {
            StoreKind::Redis => assert!(fenced > Some(0), "Redis: the fenced floor ran beside library and peer"),
            other => assert_eq!(
                fenced, None,
                "{other:?}: a fenced floor only where the peer has no token"
            ),
        }
    }
    let scaling: Vec<StoreKind> = StoreKind::ALL.into_iter().filter(|k| k.scales()).collect();
    let mut scaled: Vec<StoreKind> = r.scale.iter().map(|s| s.store).collect();
    scaled.dedup();
    assert_eq!(scaled, scaling, "scale: the stores of StoreKind::scales, in order");
    assert_eq!(
        r.scale.len(),
        scaling.len() * plan.scale_sizes.len(),
        "scale: every size on each of them"
    );
    for s in &r.scale {
        assert_eq!(s.lost, 0, "{:?}: no lease lost while renewing", s.store);
        assert!(s.ops_per_sec > 0.0, "{:?}: renewals were counted", s.store);
    }
    assert_eq!(r.handoff.len(), StoreKind::ALL.len() * plan.handoff_waiters.len());
    for h in &r.handoff {
        assert!(h.latency.n > 0, "{:?} N={}: handoffs timed", h.store, h.waiters);
    }
    assert_eq!(r.contention.len(), StoreKind::ALL.len() * 2);

    // The results file, rendered into a copy of the document by the binary.
    let dir = std::env::temp_dir().join(format!("leasehold-bench-smoke-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let json = dir.join("performance.json");
    let doc = dir.join("PERFORMANCE.md");
    Results::from_report(&r, "cargo test -p leasehold-bench")
        .save(&json)
        .unwrap_or_else(|e| panic!("{e}"));
    let loaded = Results::load(&json).unwrap_or_else(|e| panic!("the results file reads back: {e}"));
    assert_eq!(loaded.overhead.len(), StoreKind::ALL.len());
    assert_eq!(loaded.runs.len(), 1);
    assert!(loaded.plan.smoke);
    std::fs::copy(committed_doc(), &doc).unwrap_or_else(|e| panic!("{e}"));
    let out = Command::new(env!("CARGO_BIN_EXE_leasehold-bench"))
        .arg("render")
        .arg(&json)
        .arg(&doc)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        out.status.success(),
        "render failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let original = std::fs::read_to_string(committed_doc()).unwrap_or_else(|e| panic!("{e}"));
    let md = std::fs::read_to_string(&doc).unwrap_or_else(|e| panic!("{e}"));
    let (before, after) = (
        markers::parse(&original).unwrap_or_else(|e| panic!("{e:?}")),
        markers::parse(&md).unwrap_or_else(|e| panic!("{e:?}")),
    );
    assert_eq!(
        markers::outside(&original, &before),
        markers::outside(&md, &after),
        "rendering changes nothing outside the regions"
    );
    assert_ne!(md, original, "the smoke run's figures replaced the committed ones");
    assert!(md.contains("> **Smoke run**"), "a smoke run says so");
    assert!(md.contains("```sh\ncargo test -p leasehold-bench\n```"));
    assert!(!md.contains("Not measured in this run"), "every table is filled:\n{md}");
    assert!(!md.contains("NaN"), "no undefined figure:\n{md}");
    for k in StoreKind::ALL {
        assert!(md.contains(&format!("| {} | ", k.label())), "{k:?} has rows");
    }
    assert_eq!(
        md.matches("**Above target**").count(),
        StoreKind::ALL.len(),
        "each store says which rows are above target"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `leasehold-bench redis-server-time` runs and counts server time on every side. (Its
/// figures are not compared here: the other test of this file uses the same Redis at
/// the same time, and its commands are counted too.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_server_time_runs() {
    let sides = leasehold_bench::backends::redis_server_time::measure(1, 20)
        .await
        .expect("redis-server-time");
    assert_eq!(sides.len(), 4);
    for side in &sides {
        assert_eq!(side.per_op_us.len(), 1, "{}", side.label);
        let us = side.median_us();
        assert!(us > 0.0 && us.is_finite(), "{}: server time {us} µs", side.label);
    }
}

/// `leasehold-bench client-cpu` runs both sides on an in-process store and on a real
/// one. (The CPU it reads is the whole test process's, which the other tests share, so
/// its figures are not compared here.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_cpu_runs() {
    for kind in [StoreKind::Memory, StoreKind::Redis] {
        let backend = leasehold_bench::backends::open(kind, "smoke-cpu")
            .await
            .unwrap_or_else(|e| panic!("{kind:?}: {e}"));
        let sides = leasehold_bench::client_cpu::measure(&backend, 2, 20, std::time::Duration::ZERO)
            .await
            .unwrap_or_else(|e| panic!("{kind:?}: client-cpu: {e}"));
        let idle = leasehold_bench::client_cpu::measure(&backend, 1, 10, std::time::Duration::from_micros(50))
            .await
            .unwrap_or_else(|e| panic!("{kind:?}: client-cpu --idle-us: {e}"));
        for side in &idle {
            assert_eq!(
                side.acquires.len(),
                10,
                "{kind:?} {} idle: every acquire timed",
                side.label
            );
            assert_eq!(
                side.releases.len(),
                10,
                "{kind:?} {} idle: every release timed",
                side.label
            );
            assert!(
                side.cpu_per_op_us.is_empty(),
                "{kind:?} {} idle: no CPU figure",
                side.label
            );
        }
        for side in &sides {
            assert_eq!(
                side.cpu_per_op_us.len(),
                2,
                "{kind:?} {}: one figure per round",
                side.label
            );
            assert_eq!(side.pairs.len(), 40, "{kind:?} {}: every pair timed", side.label);
            assert_eq!(side.acquires.len(), 40, "{kind:?} {}: every acquire timed", side.label);
            assert_eq!(side.releases.len(), 40, "{kind:?} {}: every release timed", side.label);
            let us = side.median_cpu_us();
            assert!(us.is_finite() && us >= 0.0, "{kind:?} {}: {us} µs", side.label);
        }
    }
}
