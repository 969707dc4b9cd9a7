//! An endpoint that accepts connections and never answers: an acquire sends its
//! `UpdateItem`, gets no answer, and its `GetItem` gets none either. It is "may have
//! applied" (`Indeterminate`), never "did not apply" (before: `Unavailable` after 4 s).
#![allow(missing_docs)]

mod common;

use std::time::Duration;

use leasehold_dynamodb::{DynamoConfig, DynamoStore};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_against_a_silent_endpoint_is_in_doubt() {
    let endpoint = leasehold_testkit::endpoints::silent_server().await;
    let config = DynamoConfig::new("leasehold-silent").expect("config");
    let store = DynamoStore::new(common::client_for(&endpoint, None), config);
    // Two requests, each bounded by the tests' 3 s operation timeout.
    leasehold_testkit::endpoints::assert_acquire_is_in_doubt(store, Duration::from_secs(7)).await;
}
