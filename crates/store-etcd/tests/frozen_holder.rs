//! The shared frozen-holder case (`leasehold_testkit::frozen`) on the shared etcd: a
//! holder process SIGSTOPped past its TTL, a takeover, the holder resumed; its writes to
//! etcd keys, made with `KeyFence` (`EtcdStore::fenced_put`), are refused.
//!
//! Both processes build the same store from the environment: the shared etcd
//! (`LEASEHOLD_ETCD_ENDPOINTS`) under a prefix named after the run, so the lease and every
//! item are the same keys in the test and in the holder.
#![allow(missing_docs)]

mod common;

use std::process::ExitCode;

use common::fixture::Etcd;
use leasehold_testkit::suite::Suite;

fn main() -> ExitCode {
    leasehold_testkit::frozen::main(|run| {
        let prefix = format!("lh-test/store-etcd/frozen-holder/{run}/");
        async move { Suite::<Etcd>(common::store_under(&prefix).await) }
    })
}
