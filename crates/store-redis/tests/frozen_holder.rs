//! The frozen-holder case every store runs ([`leasehold_testkit::frozen`]), on the
//! shared Redis: a holder process SIGSTOPped past its TTL, a takeover, the holder
//! resumed; its writes to hashes, made with [`HashFence`](leasehold_redis::HashFence)
//! ([`support::fence::FencedHash`]), are refused.
//!
//! Both processes build the same store from the environment: the shared Redis
//! (`LEASEHOLD_REDIS_URL`) under a key prefix named after the run, with the pub/sub waiter
//! as the other tests connect one, so the lease and every item are the same keys in the
//! test and in the holder.
#![allow(missing_docs)]

mod support;

use std::process::ExitCode;

use leasehold_testkit::suite::Suite;
use support::fixture::Redis;

/// This binary is also the frozen holder: run with `--worker`, it is that process.
fn main() -> ExitCode {
    leasehold_testkit::frozen::main(|run| {
        let prefix = format!("lhtest:frozen:{run}:");
        async move { Suite::<Redis>(support::store_under(&prefix).await) }
    })
}
