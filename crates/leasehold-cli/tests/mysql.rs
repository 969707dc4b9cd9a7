//! The `leasehold` binary as real processes on the tests' MariaDB (`LEASEHOLD_MYSQL_URL`; without it they fail).

mod common;

common::scenarios::scenario_tests!(common::Store::mysql().await);
