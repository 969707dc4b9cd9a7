//! The frozen holder, with real processes: the shared case of every store
//! ([`leasehold_testkit::frozen`]) on S3. A worker process holds the lease and commits
//! to fenced manifests; it is SIGSTOPped past its TTL, this process takes the lease over
//! (after watching the frozen holder's record unchanged for a TTL: an observation-clock
//! store) and commits to every manifest; then the worker is resumed, and each of its
//! commits, on the manifest it last committed (or on none), must be refused: 412 on the
//! ETag, then `FenceRejected` from the manifest read back.
//!
//! Against the shared moto (`LEASEHOLD_MOTO_ENDPOINT`: the binary's serialized moto of
//! the other suites is the test process's alone), in a bucket of the run's own that both
//! processes create (idempotently, with `S3Store::provision`): no two writers race on one
//! ETag here (the holder is frozen while the successor commits), so moto's non-atomic
//! conditional PUT does not matter.
#![allow(missing_docs)]

mod common;

use std::process::ExitCode;

use common::fixture::S3;
use leasehold_testkit::suite::Suite;

/// This binary is also the frozen holder: run with `--worker`, it holds the lease.
fn main() -> ExitCode {
    leasehold_testkit::frozen::main(|run| {
        let bucket = format!("lh-s3-frozen-{run}");
        async move { Suite::<S3>(common::store_in(&common::endpoint(), &bucket).await) }
    })
}
