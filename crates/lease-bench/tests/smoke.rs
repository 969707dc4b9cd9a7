//! Runs every benchmark with tiny counts against the real stores (started by
//! `scripts/stores.sh start`; `eval "$(scripts/stores.sh env)"`), so the benchmarks
//! cannot rot, and checks the report has every table filled.

use leasehold_bench::{Plan, StoreKind, report, run};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_benchmark_runs_on_every_store() {
    let plan = Plan {
        child_exe: Some(env!("CARGO_BIN_EXE_leasehold-bench").into()),
        ..Plan::smoke()
    };
    let r = run(&plan, &StoreKind::ALL)
        .await
        .unwrap_or_else(|e| panic!("benchmark run failed: {e}"));

    assert_eq!(r.overhead.len(), StoreKind::ALL.len(), "table 2 covers every store");
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
    assert_eq!(
        peers,
        [StoreKind::Postgres, StoreKind::Etcd, StoreKind::Redis],
        "three peers"
    );
    assert_eq!(
        r.scale.len(),
        2 * plan.scale_sizes.len(),
        "scale: MemoryStore and Postgres"
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

    let md = report::render(&r, "cargo test -p leasehold-bench");
    for heading in [
        "## Machine",
        "## Stores",
        "## 1. Overhead against the floor",
        "## 2. Peers, side by side",
        "## 3. Scale",
        "## 4. Handoff and herd",
        "## 5. Contention throughput",
    ] {
        assert!(md.contains(heading), "report has {heading}");
    }
    assert!(!md.contains("Not measured in this run"), "every table is filled:\n{md}");
    assert_eq!(
        md.matches("**Above target**").count(),
        md.matches("*Why, and what it would take*").count(),
        "every row above target is explained"
    );
    assert!(!md.contains("NaN"), "no undefined figure:\n{md}");
}
