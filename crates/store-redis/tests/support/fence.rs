//! The fenced resource of this crate's tests: one Redis hash written through
//! [`HashFence`], its value in the field `value`, its mark in the default mark field.
//! The fence conformance cases (`tests/conformance.rs`) and the frozen-holder case
//! (`tests/frozen_holder.rs`) both use it, beside a store's keys
//! ([`super::fixture::Redis`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use leasehold_core::conformance::FencedResource;
use leasehold_core::fence::FenceMode;
use leasehold_core::{FencingToken, Result};
use leasehold_redis::HashFence;
use redis::aio::ConnectionLike;
use redis::{Cmd, Pipeline, RedisFuture, Value};

/// The field that holds a resource's value.
const VALUE: &str = "value";

/// A connection that counts what it sends to Redis: one per command, one per
/// pipeline. A script missing from the server's cache would show here as three
/// (`EVALSHA`, `SCRIPT LOAD`, `EVALSHA`).
#[derive(Clone)]
struct Counting<C> {
    inner: C,
    sent: Arc<AtomicU64>,
}

impl<C: ConnectionLike> ConnectionLike for Counting<C> {
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

/// One hash key: fenced writes through a connection that counts every request it
/// sends, plain reads through the same connection, uncounted.
pub struct FencedHash<C> {
    key: String,
    fenced: Counting<C>,
    plain: C,
}

impl<C: Clone> FencedHash<C> {
    /// The hash at `key`, over `conn` (a connection to a server that has the store's
    /// scripts loaded, as [`leasehold_redis::RedisStore::provision`] loads them).
    pub fn at_key(conn: C, key: String) -> Self {
        Self {
            key,
            fenced: Counting {
                inner: conn.clone(),
                sent: Arc::default(),
            },
            plain: conn,
        }
    }
}

#[async_trait]
impl<C> FencedResource for FencedHash<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
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
