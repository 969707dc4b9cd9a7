//! The frozen-holder case every store runs ([`leasehold_testkit::frozen`]), on the
//! shared Redis: the lease store under a key prefix of the run's own (the same in the
//! test and in its frozen worker process), the items hashes written through
//! [`HashFence`](leasehold_redis::HashFence) ([`support::fence::FencedHash`]).

mod support;

use std::sync::Arc;

use async_trait::async_trait;
use leasehold_core::conformance::FencedResource;
use leasehold_core::store::CasStore;
use leasehold_redis::{RedisConfig, RedisStore};
use leasehold_testkit::frozen::World;
use redis::aio::MultiplexedConnection;

use support::fence::FencedHash;

struct Redis {
    store: RedisStore,
    conn: MultiplexedConnection,
}

#[async_trait]
impl World for Redis {
    async fn store(&self) -> Arc<dyn CasStore> {
        Arc::new(self.store.clone())
    }

    async fn resource(&self, name: &str) -> Box<dyn FencedResource> {
        Box::new(FencedHash::named(self.conn.clone(), name))
    }
}

/// The run's world, built from the environment: a store with the pub/sub waiter, as
/// the other tests connect one, and a plain connection for the items, the store's
/// scripts loaded as a user loads them ([`RedisStore::provision`]).
async fn open(run: String) -> Redis {
    let url = support::shared_url();
    let config = RedisConfig::default().with_prefix(format!("lhtest:frozen:{run}:"));
    let store = RedisStore::connect(support::client(&url), config)
        .await
        .unwrap_or_else(|e| panic!("cannot reach Redis at {url}: {e}"));
    let conn = support::admin(&url).await;
    RedisStore::provision(&conn, &RedisConfig::default())
        .await
        .unwrap_or_else(|e| panic!("provision: {e}"));
    Redis { store, conn }
}

/// This binary is also the frozen holder: run with `--worker`, it is that process.
fn main() -> std::process::ExitCode {
    leasehold_testkit::frozen::main(|run| open(run.to_owned()))
}
