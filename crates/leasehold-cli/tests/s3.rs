//! The `leasehold` binary as real processes on an S3 bucket of its own on the tests' moto (`LEASEHOLD_MOTO_ENDPOINT`; without it they fail).

mod common;

use common::{Store, scenarios};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_reaches_the_command_and_matches_the_store() {
    scenarios::token(&Store::s3().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_run_is_refused_or_waits() {
    scenarios::held_then_wait(&Store::s3().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_run_frees_the_lease_after_its_ttl() {
    scenarios::kill9(&Store::s3().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frozen_run_stops_its_command_and_exits_lost() {
    scenarios::frozen(&Store::s3().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forced_release_keeps_the_token() {
    scenarios::forced_release(&Store::s3().await).await;
}
