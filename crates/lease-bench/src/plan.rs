//! How much each benchmark measures: the full run and the smoke run.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Counts and durations of one run. In the results file durations are whole
/// milliseconds (`*_ms`); [`child_exe`](Plan::child_exe) is not recorded.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    /// Whether this is the tiny smoke run (the report says so).
    pub smoke: bool,
    /// Samples per operation and side (library, floor) on local stores.
    pub overhead_samples: usize,
    /// Samples per operation and side on the emulator (moto: S3, DynamoDB).
    pub overhead_samples_emulated: usize,
    /// Leading pairs of every interleaved loop that are run but not recorded.
    pub warmup: usize,
    /// Takeovers per side on local stores.
    pub takeover_samples: usize,
    /// Takeovers per side on the emulator.
    pub takeover_samples_emulated: usize,
    /// TTL of the leases in the latency loops (long enough that nothing renews or
    /// expires while measuring).
    #[serde(rename = "latency_ttl_ms", with = "millis")]
    pub latency_ttl: Duration,
    /// Acquire + release cycles per side against each peer.
    pub peer_cycles: usize,
    /// Lease counts of the scale benchmark (the stores of [`StoreKind::scales`](crate::StoreKind::scales)).
    pub scale_sizes: Vec<usize>,
    /// More lease counts of the scale benchmark on MemoryStore alone (where the client's
    /// own CPU is all there is to measure).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scale_sizes_memory: Vec<usize>,
    /// TTL of the scale benchmark's leases (renewed every third of it).
    #[serde(rename = "scale_ttl_ms", with = "millis")]
    pub scale_ttl: Duration,
    /// Waiter counts of the handoff benchmark.
    pub handoff_waiters: Vec<usize>,
    /// Handoffs timed per waiter count.
    pub handoff_max: usize,
    /// TTL of the handoff benchmark's lease.
    #[serde(rename = "handoff_ttl_ms", with = "millis")]
    pub handoff_ttl: Duration,
    /// How long each new holder keeps the lease before releasing it.
    #[serde(rename = "handoff_hold_ms", with = "millis")]
    pub handoff_hold: Duration,
    /// Workers of the contention benchmark.
    pub contention_workers: usize,
    /// How long each contention configuration runs.
    #[serde(rename = "contention_duration_ms", with = "millis")]
    pub contention_duration: Duration,
    /// The `leasehold-bench` executable to run each scale configuration in a fresh process
    /// (`None`: in this process).
    #[serde(skip)]
    pub child_exe: Option<std::path::PathBuf>,
}

impl PartialEq for Plan {
    /// The same counts and durations: what the results file records
    /// ([`child_exe`](Plan::child_exe) aside).
    fn eq(&self, other: &Self) -> bool {
        serde_json::to_value(self).ok() == serde_json::to_value(other).ok()
    }
}

/// A [`Duration`] as whole milliseconds.
mod millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_millis)
    }
}

impl Plan {
    /// The documented full run (a few minutes on two cores).
    pub fn full() -> Self {
        Self {
            smoke: false,
            overhead_samples: 400,
            overhead_samples_emulated: 120,
            warmup: 20,
            takeover_samples: 100,
            takeover_samples_emulated: 40,
            latency_ttl: Duration::from_secs(30),
            peer_cycles: 400,
            scale_sizes: vec![1_000, 10_000],
            scale_sizes_memory: vec![100_000],
            scale_ttl: Duration::from_secs(15),
            handoff_waiters: vec![1, 10, 100],
            handoff_max: 16,
            handoff_ttl: Duration::from_millis(500),
            handoff_hold: Duration::from_millis(50),
            contention_workers: 8,
            contention_duration: Duration::from_secs(2),
            child_exe: None,
        }
    }

    /// Every benchmark with tiny counts (the test suite's smoke run).
    pub fn smoke() -> Self {
        Self {
            smoke: true,
            overhead_samples: 6,
            overhead_samples_emulated: 4,
            warmup: 1,
            takeover_samples: 3,
            takeover_samples_emulated: 2,
            latency_ttl: Duration::from_secs(30),
            peer_cycles: 5,
            scale_sizes: vec![20],
            scale_sizes_memory: Vec::new(),
            scale_ttl: Duration::from_secs(3),
            handoff_waiters: vec![1, 3],
            handoff_max: 3,
            handoff_ttl: Duration::from_millis(400),
            handoff_hold: Duration::from_millis(10),
            contention_workers: 3,
            contention_duration: Duration::from_millis(150),
            child_exe: None,
        }
    }
}
