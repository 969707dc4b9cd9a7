//! The leasehold-core conformance suite against the shared Redis: once over a
//! `ConnectionManager` with the pub/sub waiter, once over a bare
//! `MultiplexedConnection` that polls; the wake-up cases on the pub/sub waiter; and the
//! fence cases on [`HashFence`] writes to fresh hashes.
//!
//! [`HashFence`]: leasehold_redis::HashFence

mod support;

use std::sync::Arc;

use async_trait::async_trait;
use leasehold_core::conformance::Fixture;
use leasehold_core::{LeaseName, store::CasStore};
use leasehold_redis::{RedisConfig, RedisStore};
use redis::aio::ConnectionLike;

struct Fx<C> {
    store: RedisStore<C>,
}

#[async_trait]
impl<C> Fixture for Fx<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    async fn store(&self) -> Arc<dyn CasStore> {
        Arc::new(self.store.clone())
    }

    /// A string where the record hash belongs: what a foreign `SET` would leave.
    async fn corrupt(&self, name: &LeaseName) {
        let mut conn = support::admin(&support::shared_url()).await;
        let _: () = redis::cmd("SET")
            .arg(self.store.keys().record(name))
            .arg("not a lease record")
            .arg("EX")
            .arg(600)
            .query_async(&mut conn)
            .await
            .expect("SET a corrupt record");
    }
}

async fn with_pubsub() -> Fx<redis::aio::ConnectionManager> {
    Fx {
        store: support::shared_store("conformance").await,
    }
}

async fn multiplexed_polling() -> Fx<redis::aio::MultiplexedConnection> {
    let url = support::shared_url();
    let conn = support::admin(&url).await;
    let config = RedisConfig::default().with_prefix(support::unique_prefix("conformance-mux"));
    let store = RedisStore::new(conn, config).expect("config");
    assert!(!store.capabilities().notifies_waiters);
    Fx { store }
}

/// `RedisStore::connect`: a `ConnectionManager`, scripts preloaded, releases pushed to
/// waiters over pub/sub.
mod connection_manager_pubsub {
    use super::*;
    leasehold_core::conformance::conformance_tests!(with_pubsub().await);
}

/// A caller's `MultiplexedConnection`, no pub/sub client: waiters back off.
mod multiplexed_connection_polling {
    use super::*;
    leasehold_core::conformance::conformance_tests!(multiplexed_polling().await);
}

/// The wake-up cases: the holder and the waiters each on a store of their own
/// ([`RedisStore::connect`]: its own connection and pub/sub waiter), on the same keys.
mod wake {
    use std::sync::Arc;

    use async_trait::async_trait;
    use leasehold_core::conformance::WakeFixture;
    use leasehold_core::store::CasStore;
    use leasehold_redis::{RedisConfig, RedisStore};

    use crate::support;

    struct TwoStores;

    #[async_trait]
    impl WakeFixture for TwoStores {
        async fn stores(&self, tag: &str) -> (Arc<dyn CasStore>, Arc<dyn CasStore>) {
            let url = support::shared_url();
            let config = RedisConfig::default().with_prefix(support::unique_prefix(tag));
            let connect = || async {
                RedisStore::connect(support::client(&url), config.clone())
                    .await
                    .unwrap_or_else(|e| panic!("cannot reach Redis at {url}: {e}"))
            };
            (Arc::new(connect().await), Arc::new(connect().await))
        }
    }

    leasehold_core::conformance::wake_tests!(TwoStores);
}

/// The fence cases on Redis hashes: each resource a fresh hash key on the shared
/// server, its value in the field `value`, its mark in the default mark field, written
/// through [`HashFence::apply`](leasehold_redis::HashFence::apply) over a connection
/// that counts every request it sends ([`support::fence::FencedHash`]).
mod fence {
    use async_trait::async_trait;
    use leasehold_core::conformance::{FenceFixture, FencedResource};
    use leasehold_redis::{RedisConfig, RedisStore};
    use redis::aio::MultiplexedConnection;

    use crate::support;
    use crate::support::fence::FencedHash;

    /// Fresh hash keys under a prefix of their own, on the shared server, with the
    /// store's scripts loaded as a user loads them ([`RedisStore::provision`]).
    struct Hashes {
        conn: MultiplexedConnection,
        prefix: String,
    }

    async fn hashes() -> Hashes {
        let conn = support::admin(&support::shared_url()).await;
        RedisStore::provision(&conn, &RedisConfig::default())
            .await
            .unwrap_or_else(|e| panic!("provision: {e}"));
        Hashes {
            conn,
            prefix: support::unique_prefix("fence"),
        }
    }

    #[async_trait]
    impl FenceFixture for Hashes {
        async fn resource(&self, case: &str) -> Box<dyn FencedResource> {
            Box::new(FencedHash::at_key(self.conn.clone(), format!("{}{case}", self.prefix)))
        }
    }

    leasehold_core::conformance::fence_tests!(hashes().await);
}
