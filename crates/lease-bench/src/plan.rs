//! How much each benchmark measures: the full run and the smoke run.

use std::time::Duration;

/// Counts and durations of one run.
#[derive(Debug, Clone, Default)]
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
    pub latency_ttl: Duration,
    /// Acquire + release cycles per side against each peer.
    pub peer_cycles: usize,
    /// Lease counts of the scale benchmark (MemoryStore and Postgres).
    pub scale_sizes: Vec<usize>,
    /// TTL of the scale benchmark's leases (renewed every third of it).
    pub scale_ttl: Duration,
    /// Waiter counts of the handoff benchmark.
    pub handoff_waiters: Vec<usize>,
    /// Handoffs timed per waiter count.
    pub handoff_max: usize,
    /// TTL of the handoff benchmark's lease.
    pub handoff_ttl: Duration,
    /// How long each new holder keeps the lease before releasing it.
    pub handoff_hold: Duration,
    /// Workers of the contention benchmark.
    pub contention_workers: usize,
    /// How long each contention configuration runs.
    pub contention_duration: Duration,
    /// The `leasehold-bench` executable to run each scale configuration in a fresh process
    /// (`None`: in this process).
    pub child_exe: Option<std::path::PathBuf>,
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
