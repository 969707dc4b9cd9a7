//! The `leasehold` binary as real processes on a SQLite file.

mod common;

common::scenarios::scenario_tests!(common::Store::sqlite().await);
