//! The `leasehold` binary as real processes on the tests' Redis (`LEASEHOLD_REDIS_URL`; without it they fail).

mod common;

common::scenarios::scenario_tests!(common::Store::redis().await);
