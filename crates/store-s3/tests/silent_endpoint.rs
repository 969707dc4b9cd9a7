//! An endpoint that accepts connections and never answers: an acquire sends its `PUT`,
//! gets no answer, and its `GET` gets none either. It is "may have applied"
//! (`Indeterminate`), never "did not apply" (before: `Unavailable`).
#![allow(missing_docs)]

use std::time::Duration;

use leasehold_s3::{S3Config, S3Store};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_against_a_silent_endpoint_is_in_doubt() {
    let endpoint = leasehold_testkit::endpoints::silent_server().await;
    let config = S3Config::new("bucket-1", "leases")
        .expect("config")
        .with_request_timeout(Duration::from_millis(500))
        .expect("timeout");
    let store = S3Store::new(leasehold_s3::local_client(&endpoint), config);
    leasehold_testkit::endpoints::assert_acquire_is_in_doubt(store, Duration::from_secs(3)).await;
}
