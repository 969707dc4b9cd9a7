//! The `leasehold` binary as real processes on the tests' etcd (`LEASEHOLD_ETCD_ENDPOINTS`; without it they fail).

mod common;

common::scenarios::scenario_tests!(common::Store::etcd().await);
