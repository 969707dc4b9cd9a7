//! Metrics the client reports: grants, takeovers, renewals, losses by cause.
#![cfg(feature = "testing")]
#![allow(missing_docs)]

use std::time::Duration;

use leasehold_core::testing::{FaultPlan, FaultStore};
use leasehold_core::{LeaseClient, MemoryStore, observe};
use metrics_util::debugging::{DebugValue, DebuggingRecorder};

#[test]
fn grants_renewals_takeovers_and_losses_are_counted() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .expect("rt");
        rt.block_on(async {
            let mem = MemoryStore::new();
            let faulty = FaultStore::new(mem.clone(), 5);
            let a = LeaseClient::new(faulty.clone());
            let b = LeaseClient::new(mem);
            let la = a.acquire("m", Duration::from_secs(3)).await.expect("a");
            tokio::time::sleep(Duration::from_secs(2)).await; // one renewal at 1 s
            faulty.set_plan(FaultPlan::hang());
            let _lb = b.acquire("m", Duration::from_secs(3)).await.expect("b takes over");
            assert!(la.loss_cause().is_some());
        });
    });
    let mut counters = std::collections::HashMap::new();
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        if let DebugValue::Counter(n) = value {
            let labels: Vec<String> = key
                .key()
                .labels()
                .map(|l| format!("{}={}", l.key(), l.value()))
                .collect();
            counters.insert(format!("{}{:?}", key.key().name(), labels), n);
        }
    }
    let get = |k: &str| counters.get(k).copied().unwrap_or(0);
    assert_eq!(get(&format!("{}[]", observe::GRANTS)), 2, "{counters:?}");
    assert_eq!(get(&format!("{}[]", observe::TAKEOVERS)), 1, "{counters:?}");
    assert!(get(&format!("{}[]", observe::RENEWALS)) >= 1, "{counters:?}");
    assert_eq!(
        get(&format!("{}[\"cause=outcome_unknown\"]", observe::LOSSES)),
        1,
        "{counters:?}"
    );
}
