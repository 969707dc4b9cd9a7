//! The shared suites (`leasehold_testkit::suite_tests!`: conformance and fence; DynamoDB
//! pushes no changes to waiters, so no wake-up cases) against a real DynamoDB-compatible
//! server (moto), each case on a lease table of its own ([`common::fixture::Dynamo`]).
//!
//! The fence cases (`mod fence`, and `mod put_item_fence`) run on
//! [`ItemFence`](leasehold_dynamodb::ItemFence): each resource is a fresh item of the
//! resource table beside the case's lease table, its value in the number attribute `v`
//! and its mark in `last_token`, written through the crate's public fence API
//! (`UpdateItem` and `PutItem`: each has its own guard) and read plainly
//! ([`common::item::FencedItem`], also the frozen-holder test's resource).
#![allow(missing_docs)]

mod common;

// The default: conflicts return the current item (`ReturnValuesOnConditionCheckFailure`);
// the fence cases through `ItemFence::update`.
leasehold_testkit::suite_tests!(common::fixture::Dynamo; conformance, fence);

/// The fallback for emulators without `ReturnValuesOnConditionCheckFailure`: conflicts
/// report `Current::Unknown` and the lease client reads.
///
/// Every case but `round_trips_per_operation`, whose takeover section counts the
/// background renewals of a lease the same counting client still holds (`again`): with
/// conflicts that do not carry the item, a refused attempt is a write and a read, and a
/// renewal landing inside it makes three. (The default mode above runs it: there an
/// attempt is one request.)
mod read_on_conflict {
    use leasehold_testkit::suite::Suite;

    use crate::common::fixture::{Dynamo, ReadOnConflict};

    leasehold_core::conformance::conformance_tests!(@all_but_round_trips
        Suite::<Dynamo<ReadOnConflict>>::fresh("read-on-conflict").await);
}

/// The fence cases through `ItemFence::put` (the whole item).
mod put_item_fence {
    use leasehold_testkit::suite::Suite;

    use crate::common::fixture::{Dynamo, PutItems};

    leasehold_core::conformance::fence_tests!(Suite::<Dynamo<PutItems>>::fresh("fence-put").await);
}
