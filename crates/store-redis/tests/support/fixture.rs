//! This crate's part of the shared suites ([`leasehold_testkit::suite`]): [`Redis`] opens
//! stores under key prefixes on the shared server, over a connection of the kind `C`
//! ([`Connection`]), protects [`FencedHash`]es beside their keys and corrupts a record
//! with a plain `SET`; `Suite::<Redis>` is the conformance fixture, the fence fixture and
//! the frozen holder's world, and `TwoStores::<Redis>` the wake-up fixture.

use std::marker::PhantomData;

use async_trait::async_trait;
use leasehold_core::LeaseName;
use leasehold_core::conformance::FencedResource;
use leasehold_core::store::CasStore;
use leasehold_redis::{RedisConfig, RedisStore};
use leasehold_testkit::suite::Backend;
use redis::aio::{ConnectionLike, ConnectionManager, MultiplexedConnection};

use super::fence::FencedHash;

/// The Redis store in the shared suites, over connections of the kind `C`: a place is a
/// key prefix on the shared server.
pub struct Redis<C = ConnectionManager>(PhantomData<fn() -> C>);

/// A kind of connection the suites open stores over.
#[async_trait]
pub trait Connection: ConnectionLike + Clone + Send + Sync + 'static {
    /// A store on the shared server with its keys under `prefix`, over a connection of
    /// this kind of its own.
    async fn store_under(prefix: &str) -> RedisStore<Self>;
}

#[async_trait]
impl Connection for ConnectionManager {
    /// [`RedisStore::connect`]: a `ConnectionManager`, the scripts loaded, releases pushed
    /// to waiters over pub/sub.
    async fn store_under(prefix: &str) -> RedisStore<Self> {
        super::store_under(prefix).await
    }
}

#[async_trait]
impl Connection for MultiplexedConnection {
    /// A caller's `MultiplexedConnection` and no pub/sub client ([`RedisStore::new`],
    /// which sends nothing): waiters back off.
    async fn store_under(prefix: &str) -> RedisStore<Self> {
        let conn = super::admin(&super::shared_url()).await;
        let store = RedisStore::new(conn, RedisConfig::default().with_prefix(prefix)).expect("config");
        assert!(!store.capabilities().notifies_waiters);
        store
    }
}

#[async_trait]
impl<C: Connection> Backend for Redis<C> {
    type Store = RedisStore<C>;

    fn unique_place(tag: &str) -> String {
        super::unique_prefix(tag)
    }

    async fn open(prefix: &str) -> RedisStore<C> {
        C::store_under(prefix).await
    }

    /// The hash `<prefix>fenced/<name>` beside the store's keys (its record keys are
    /// `<prefix>{<name>}`), written over the store's own connection.
    fn resource(store: &RedisStore<C>, name: &str) -> Box<dyn FencedResource> {
        let key = format!("{}fenced/{name}", store.keys().prefix());
        Box::new(FencedHash::at_key(store.connection(), key))
    }

    /// A string where the record hash belongs: what a foreign `SET` would leave.
    async fn corrupt(store: &RedisStore<C>, name: &LeaseName) {
        let _: () = redis::cmd("SET")
            .arg(store.keys().record(name))
            .arg("not a lease record")
            .arg("EX")
            .arg(600)
            .query_async(&mut store.connection())
            .await
            .expect("SET a corrupt record");
    }
}
