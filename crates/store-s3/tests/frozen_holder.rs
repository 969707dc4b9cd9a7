//! The frozen holder, with real processes: the shared case of every store
//! ([`leasehold_testkit::frozen`]) on S3. A worker process holds the lease and commits
//! to fenced manifests; it is SIGSTOPped past its TTL, this process takes the lease over
//! (after watching the frozen holder's record unchanged for a TTL: an observation-clock
//! store) and commits to every manifest; then the worker is resumed, and each of its
//! commits, on the manifest it last committed (or on none), must be refused: 412 on the
//! ETag, then `FenceRejected` from the manifest read back.
//!
//! Against the shared moto (`LEASEHOLD_MOTO_ENDPOINT`), in a bucket of the run's own that
//! both processes create (idempotently, with [`S3Store::provision`]): no two writers race
//! on one ETag here (the holder is frozen while the successor commits), so moto's
//! non-atomic conditional PUT does not matter.
#![allow(missing_docs)]

mod common;

use common::fixture::LeaseBucket;
use leasehold_s3::{S3Config, S3Store};

/// The run's bucket on the shared moto, with the lease store and the manifests in it:
/// the same bucket for the same `run` in the test and in the worker process, created by
/// whichever comes first, kept by the other.
async fn open(run: String) -> LeaseBucket {
    let bucket = format!("lh-s3-frozen-{run}");
    assert!(bucket.len() <= 63, "bucket name too long: {bucket}");
    let client = leasehold_s3::local_client(&common::endpoint());
    let config = S3Config::new(&bucket, "leases").expect("config");
    if let Err(e) = S3Store::provision(&client, &config).await {
        panic!(
            "creating bucket {bucket} at {}: {e} (is moto running? `scripts/stores.sh start moto`)",
            common::endpoint()
        );
    }
    LeaseBucket(S3Store::new(client, config))
}

/// This binary is also the frozen holder: run with `--worker`, it holds the lease.
fn main() -> std::process::ExitCode {
    leasehold_testkit::frozen::main(|run| open(run.to_owned()))
}
