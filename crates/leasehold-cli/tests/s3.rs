//! The `leasehold` binary as real processes on an S3 bucket of its own on the tests' moto (`LEASEHOLD_MOTO_ENDPOINT`; without it they fail).

mod common;

common::scenarios::scenario_tests!(common::Store::s3().await);
