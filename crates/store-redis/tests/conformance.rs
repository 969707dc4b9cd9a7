//! The leasehold-core conformance suite against the shared Redis: once over a
//! `ConnectionManager` with the pub/sub waiter, once over a bare
//! `MultiplexedConnection` that polls; and the fence cases on [`HashFence`] writes to
//! fresh hashes.
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

/// The fence cases on Redis hashes: each resource a fresh hash key on the shared
/// server, its value in the field `value`, its mark in the default mark field, written
/// through [`HashFence::apply`](leasehold_redis::HashFence::apply) over a connection
/// that counts every request it sends.
mod fence {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    use async_trait::async_trait;
    use leasehold_core::conformance::{FenceFixture, FencedResource};
    use leasehold_core::fence::FenceMode;
    use leasehold_core::{FencingToken, Result};
    use leasehold_redis::{HashFence, RedisConfig, RedisStore};
    use redis::aio::{ConnectionLike, MultiplexedConnection};
    use redis::{Cmd, Pipeline, RedisFuture, Value};

    use crate::support;

    /// The field that holds a resource's value.
    const VALUE: &str = "value";

    /// A connection that counts what it sends to Redis: one per command, one per
    /// pipeline. A script missing from the server's cache would show here as three
    /// (`EVALSHA`, `SCRIPT LOAD`, `EVALSHA`).
    #[derive(Clone)]
    struct Counting {
        inner: MultiplexedConnection,
        sent: Arc<AtomicU64>,
    }

    impl ConnectionLike for Counting {
        fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
            self.sent.fetch_add(1, Ordering::SeqCst);
            self.inner.req_packed_command(cmd)
        }

        fn req_packed_commands<'a>(
            &'a mut self,
            pipeline: &'a Pipeline,
            offset: usize,
            count: usize,
        ) -> RedisFuture<'a, Vec<Value>> {
            self.sent.fetch_add(1, Ordering::SeqCst);
            self.inner.req_packed_commands(pipeline, offset, count)
        }

        fn get_db(&self) -> i64 {
            self.inner.get_db()
        }
    }

    /// One hash key: fenced writes through the counting connection, plain reads through
    /// another.
    struct Hash {
        key: String,
        fenced: Counting,
        plain: MultiplexedConnection,
    }

    #[async_trait]
    impl FencedResource for Hash {
        async fn write(&self, token: FencingToken, mode: FenceMode, value: i64) -> Result<()> {
            let mut conn = self.fenced.clone();
            HashFence::new(&self.key)
                .mode(mode)
                .set(VALUE, value.to_string())
                .apply(&mut conn, token)
                .await?
                .or_else(|()| unreachable!("a Redis fenced write has no caller condition"))
                .map(drop)
        }

        async fn read(&self) -> Option<(FencingToken, i64)> {
            let mut conn = self.plain.clone();
            let (mark, value): (Option<String>, Option<String>) = redis::cmd("HMGET")
                .arg(&self.key)
                .arg(HashFence::DEFAULT_MARK_FIELD)
                .arg(VALUE)
                .query_async(&mut conn)
                .await
                .unwrap_or_else(|e| panic!("HMGET {}: {e}", self.key));
            match (mark, value) {
                (None, None) => None,
                (Some(mark), Some(value)) => {
                    let mark = mark
                        .parse::<u64>()
                        .unwrap_or_else(|e| panic!("{}: mark {mark:?}: {e}", self.key));
                    let value = value
                        .parse::<i64>()
                        .unwrap_or_else(|e| panic!("{}: value {value:?}: {e}", self.key));
                    Some((FencingToken::new(mark), value))
                }
                (mark, value) => panic!("{}: mark {mark:?} and value {value:?}: written apart", self.key),
            }
        }

        fn round_trips(&self) -> u64 {
            self.fenced.sent.load(Ordering::SeqCst)
        }
    }

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
            Box::new(Hash {
                key: format!("{}{case}", self.prefix),
                fenced: Counting {
                    inner: self.conn.clone(),
                    sent: Arc::default(),
                },
                plain: self.conn.clone(),
            })
        }
    }

    leasehold_core::conformance::fence_tests!(hashes().await);
}
