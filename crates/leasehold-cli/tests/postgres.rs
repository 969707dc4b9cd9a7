//! The `leasehold` binary as real processes on the tests' Postgres (`LEASEHOLD_PG_URL`; without it they fail).

mod common;

common::scenarios::scenario_tests!(common::Store::postgres().await);
