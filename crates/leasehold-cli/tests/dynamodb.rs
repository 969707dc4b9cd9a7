//! The `leasehold` binary as real processes on a DynamoDB table of its own on the tests' moto (`LEASEHOLD_MOTO_ENDPOINT`; without it they fail).

mod common;

common::scenarios::scenario_tests!(common::Store::dynamodb().await);
