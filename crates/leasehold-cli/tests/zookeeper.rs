//! The `leasehold` binary as real processes on the tests' ZooKeeper server (`LEASEHOLD_ZK_ADDR`; without it they fail).

mod common;

common::scenarios::scenario_tests!(common::Store::zookeeper().await);
