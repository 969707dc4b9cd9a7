//! The shared suites (`leasehold_testkit::suite_tests!`) against a real single ZooKeeper
//! server (`LEASEHOLD_ZK_ADDR`, started by `scripts/stores.sh start zookeeper`), each
//! test's stores with their roots under a directory of its own: the leasehold-core
//! conformance cases; the fence cases (`mod fence`) on a
//! [`leasehold_zookeeper::NodeFence`], each resource a fresh token-marked znode beside
//! the store's unique root, written with `ZooKeeperStore::fenced_set`, its value as
//! decimal bytes ([`common::fenced::FencedNode`], the frozen holder's resource too), round
//! trips every request the store sent ([`leasehold_zookeeper::ZooKeeperStats::requests`]);
//! and the wake-up cases (`mod wake`), the holder's store and the waiters' store two
//! stores (two sets of sessions and watches) on the same znodes, as two processes are.
#![allow(missing_docs)]

mod common;

leasehold_testkit::suite_tests!(common::fixture::Zk);
