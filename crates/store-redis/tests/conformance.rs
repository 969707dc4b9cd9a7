//! The shared suites (`leasehold_testkit::suite_tests!`) against the shared Redis, each
//! test's stores under a key prefix of its own ([`support::fixture::Redis`]): the
//! leasehold-core conformance cases over [`RedisStore::connect`]'s `ConnectionManager`
//! with the pub/sub waiter, and again (`mod multiplexed_connection_polling`) over a bare
//! `MultiplexedConnection` that polls; the fence cases (`mod fence`) on [`HashFence`]
//! writes to fresh hashes beside the store's keys, over the store's connection counting
//! every request it sends ([`support::fence::FencedHash`], the frozen holder's resource
//! too); and the wake-up cases (`mod wake`), the holder and the waiters each on a store of
//! their own (its own connection and pub/sub waiter), on the same keys.
//!
//! [`HashFence`]: leasehold_redis::HashFence
//! [`RedisStore::connect`]: leasehold_redis::RedisStore::connect
#![allow(missing_docs)]

mod support;

leasehold_testkit::suite_tests!(support::fixture::Redis);

/// A caller's `MultiplexedConnection`, no pub/sub client: waiters back off.
mod multiplexed_connection_polling {
    use leasehold_testkit::suite::Suite;
    use redis::aio::MultiplexedConnection;

    use crate::support::fixture::Redis;

    leasehold_core::conformance::conformance_tests!(
        Suite::<Redis<MultiplexedConnection>>::fresh("conformance-mux").await
    );
}
