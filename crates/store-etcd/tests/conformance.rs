//! The shared suites (`leasehold_testkit::suite_tests!`) against a real single-member
//! etcd (`LEASEHOLD_ETCD_ENDPOINTS`, started by `scripts/stores.sh start etcd`), each
//! test's stores under a key prefix of its own: the leasehold-core conformance cases;
//! the fence cases (`mod fence`) on a [`leasehold_etcd::KeyFence`], each resource a fresh
//! etcd key (under the store's unique prefix) written with `EtcdStore::fenced_put`, the
//! value as its decimal bytes ([`common::fenced::FencedKey`], the frozen holder's
//! resource too), round trips the requests the store sent to etcd, counted in its one
//! send path ([`leasehold_etcd::EtcdStats`]: every request kind, not only Txns); and the
//! wake-up cases (`mod wake`), the holder's store and the waiters' store two stores (two
//! clients, two sets of watches) on the same keys, as two processes are.
#![allow(missing_docs)]

mod common;

leasehold_testkit::suite_tests!(common::fixture::Etcd);
