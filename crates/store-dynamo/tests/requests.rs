//! Requests per operation, counted twice: calls into the store (CountingStore) and HTTP
//! requests the SDK actually sends (an interceptor). Acquire of a free lease, renewal
//! and release are one request each; a takeover is at most two; a conflict carries the
//! current item in the same request.
#![allow(missing_docs)]

mod common;

use std::time::Duration;

use leasehold_core::testing::{CountingStore, FaultPlan, FaultStore};
use leasehold_core::{
    AcquireOutcome, ClientConfig, FencingToken, HolderId, Lease, LeaseClient, LeaseName, SkewBound, Ttl,
    store::{CasOutcome, CasStore, Current, LeaseRecord, Precondition},
};
use leasehold_dynamodb::DynamoStore;
use tokio::time::Instant;

const TTL: Duration = Duration::from_millis(600);

struct Counted {
    http: leasehold_aws::SentRequests,
    calls: CountingStore<DynamoStore>,
}

impl Counted {
    fn new(table: &str) -> Self {
        let http = leasehold_aws::SentRequests::default();
        let store = DynamoStore::new(
            common::client(Some(&http)),
            leasehold_dynamodb::DynamoConfig::new(table).expect("store"),
        );
        Self {
            http,
            calls: CountingStore::new(store),
        }
    }

    fn reset(&self) {
        self.http.reset();
        self.calls.reset();
    }

    /// (HTTP requests, store round trips) since the last reset.
    fn counts(&self) -> (u64, u64) {
        (self.http.total(), self.calls.counts().round_trips())
    }
}

fn unique(case: &str) -> String {
    common::unique_name("requests", case)
}

/// A holder of `name` on `table`, frozen: its store (faults seeded with `seed`) stops
/// answering right after the grant, so it never renews or releases.
async fn frozen_holder(table: &str, name: &str, seed: u64) -> Lease {
    let frozen = FaultStore::new(common::store_on(table), seed);
    let held = leasehold_testkit::granted(&LeaseClient::new(frozen.clone()), name, TTL, "holder").await;
    frozen.set_plan(FaultPlan::hang());
    held
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_renew_release_are_one_request_each() {
    let (admin, table) = common::fresh_lease_table("requests").await;
    let c = Counted::new(&table);
    let client = LeaseClient::with_config(c.calls.clone(), ClientConfig::default()).expect("client");
    let name = unique("basic");

    c.reset();
    let lease = leasehold_testkit::granted(&client, &name, TTL, "free lease").await;
    let acquire = c.counts();
    assert_eq!(acquire, (1, 1), "acquire of a free lease: (http, calls)");

    c.reset();
    let first = lease.valid_until();
    assert!(
        leasehold_core::testing::process::poll(Duration::from_secs(5), || lease.valid_until() > first).await,
        "no renewal landed"
    );
    let renew = c.counts();
    assert_eq!(renew, (1, 1), "one renewal: (http, calls)");

    c.reset();
    lease.release().await.expect("release");
    let release = c.counts();
    assert_eq!(release, (1, 1), "release: (http, calls)");

    // The vacant record keeps its token: the next grant takes the next one, in one
    // request (the client remembers the vacant record it wrote).
    c.reset();
    let again = leasehold_testkit::granted(&client, &name, TTL, "again").await;
    assert_eq!(again.token(), FencingToken::new(2));
    let reacquire = c.counts();
    assert_eq!(reacquire, (1, 1), "re-acquire after release");
    again.release().await.expect("release");

    // A new client (a new process: every `leasehold run`) knows nothing of the record:
    // its first acquire claims whatever vacant item is there (`Precondition::Vacant`),
    // the token raised by the server, in one request. (Two before: written as for an
    // absent item, refused with the item in the answer, written again on its version.)
    c.reset();
    let newcomer = LeaseClient::with_config(c.calls.clone(), ClientConfig::default()).expect("client");
    let third = leasehold_testkit::granted(&newcomer, &name, TTL, "a new client").await;
    assert_eq!(third.token(), FencingToken::new(3));
    let first_of_new = c.counts();
    assert_eq!(first_of_new, (1, 1), "a new client's first acquire of a released lease");
    eprintln!(
        "requests (http, store calls): acquire {acquire:?}, renew {renew:?}, release {release:?}, \
         re-acquire {reacquire:?}, a new client's first acquire {first_of_new:?}"
    );
    third.release().await.expect("release");
    common::delete_table(&admin, &table).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conflict_returns_the_current_item_in_the_same_request() {
    let (admin, table) = common::fresh_lease_table("requests-conflict").await;
    let c = Counted::new(&table);
    let name = LeaseName::new(unique("conflict")).expect("name");
    let held = LeaseRecord::held(
        HolderId::new("holder").expect("holder"),
        FencingToken::new(4),
        Ttl::new(TTL).expect("ttl"),
    );
    let CasOutcome::Written(first) = c
        .calls
        .write(&name, &Precondition::Absent, &held)
        .await
        .expect("create")
    else {
        panic!("create conflicted")
    };
    c.reset();
    let challenger = LeaseRecord::held(
        HolderId::new("challenger").expect("holder"),
        FencingToken::new(5),
        Ttl::new(TTL).expect("ttl"),
    );
    match c
        .calls
        .write(&name, &Precondition::Absent, &challenger)
        .await
        .expect("write")
    {
        CasOutcome::Conflict(Current::Present(s)) => {
            assert_eq!(s, first, "the conflict must report the stored item exactly");
        }
        other => panic!("expected a conflict with the current item, got {other:?}"),
    }
    assert_eq!(c.counts(), (1, 1), "a conflict with its current item: one request");
    common::delete_table(&admin, &table).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn takeover_is_at_most_two_requests() {
    let (admin, table) = common::fresh_lease_table("requests-takeover").await;
    let name = unique("takeover");

    let held = frozen_holder(&table, &name, 7).await;
    let holder_valid_until = held.valid_until();

    let c = Counted::new(&table);
    let challenger = LeaseClient::with_config(c.calls.clone(), ClientConfig::default()).expect("client");
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut attempts = Vec::new();
    let lease = loop {
        c.reset();
        let outcome = challenger.try_acquire(&name, TTL).await.expect("attempt");
        let counts = c.counts();
        attempts.push(counts);
        assert!(counts.0 <= 2 && counts.1 <= 2, "an attempt took {counts:?}");
        match outcome {
            AcquireOutcome::Granted(l) => break l,
            AcquireOutcome::Held { retry_after, .. } => {
                assert!(Instant::now() < deadline, "never took over");
                tokio::time::sleep(retry_after.min(Duration::from_millis(200))).await;
            }
        }
    };
    assert!(
        Instant::now() >= holder_valid_until,
        "took over before the holder's validity ended"
    );
    assert_eq!(lease.token(), held.token().next());
    eprintln!("takeover attempts (http, store calls): {attempts:?}");
    common::clean_up_takeover(lease, held, &admin, &table).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skew_bound_one_shot_takeover_is_two_requests() {
    let (admin, table) = common::fresh_lease_table("requests-oneshot").await;
    let name = unique("oneshot");
    let held = frozen_holder(&table, &name, 9).await;
    // Clocks agree here; the bound says they may disagree by up to one TTL. A one-shot
    // caller (a fresh client, as a cron-started job has) may take over once the
    // holder's wall-clock expiry plus the bound is past: 2 TTLs after its last write.
    tokio::time::sleep(TTL * 2 + Duration::from_millis(200)).await;
    let c = Counted::new(&table);
    let config = ClientConfig::builder()
        .skew_bound(SkewBound(TTL))
        .build()
        .expect("client config");
    let one_shot = LeaseClient::with_config(c.calls.clone(), config).expect("client");
    // A one-shot caller with a skew bound takes over a dead lease.
    let lease = leasehold_testkit::granted(&one_shot, &name, TTL, "one shot").await;
    let counts = c.counts();
    assert_eq!(counts, (2, 2), "one-shot takeover: read + write");
    assert_eq!(lease.token(), held.token().next());
    eprintln!("one-shot takeover with SkewBound (http, store calls): {counts:?}");
    common::clean_up_takeover(lease, held, &admin, &table).await;
}
