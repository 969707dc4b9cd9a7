//! [`RedisStore`]: the [`CasStore`] contract as one Lua script call per operation.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use leasehold_core::{
    Error, FencingToken, LeaseName, NamePrefix, Result,
    fence::FencedOutcome,
    store::{
        Capabilities, CasOutcome, CasStore, ClockSource, Current, DeleteOutcome, ExpireOutcome, Grade, LeaseRecord,
        Precondition, Renewal, Stored, Version, Wait, send_batch,
    },
};
use redis::ScriptInvocation;
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};

use crate::call::{invoke, with_timeout};
use crate::config::{KeyLayout, RedisConfig};
use crate::error::{self, Effect, What};
use crate::fence::{HashFence, HashWrite};
use crate::listing;
use crate::notify::{Notifier, Now};
use crate::reply::Reply;
use crate::scripts::{self, DELETE_SCRIPT, EXPIRE_SCRIPT, PURGE_SCRIPT, READ_SCRIPT, SEED_SCRIPT, WRITE_SCRIPT};

/// Lease records in Redis, each operation one `EVALSHA` (see the [crate docs](crate)).
///
/// Generic over the async connection the caller supplies: a
/// [`ConnectionManager`] (reconnects by itself; the default) or a
/// [`redis::aio::MultiplexedConnection`], with the caller's TLS, auth, database and
/// timeouts. Cheap to clone: clones share the connection and the pub/sub waiter.
///
/// **Efficiency-only:** it implements [`CasStore`] but not
/// [`leasehold_core::store::Linearizable`]; use it through
/// [`LeaseClient::efficiency_only`](leasehold_core::LeaseClient::efficiency_only).
pub struct RedisStore<C = ConnectionManager> {
    conn: C,
    keys: KeyLayout,
    request_timeout: Option<Duration>,
    notifier: Option<Arc<Notifier>>,
}

impl<C: Clone> Clone for RedisStore<C> {
    fn clone(&self) -> Self {
        Self {
            conn: self.conn.clone(),
            keys: self.keys.clone(),
            request_timeout: self.request_timeout,
            notifier: self.notifier.clone(),
        }
    }
}

impl<C> fmt::Debug for RedisStore<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStore")
            .field("prefix", &self.keys.prefix())
            .field("request_timeout", &self.request_timeout)
            .field("notifies_waiters", &self.notifier.is_some())
            .finish_non_exhaustive()
    }
}

impl RedisStore<ConnectionManager> {
    /// Connects a [`ConnectionManager`] through `client`, loads the scripts, and uses
    /// `client` for the pub/sub waiter too (unless `config.notify_client` names
    /// another).
    ///
    /// Connecting takes at most [`RedisConfig::connect_timeout`] (one attempt, no
    /// retries: a caller that wants to wait longer for Redis to come up retries
    /// `connect`); loading the scripts then takes at most one request timeout.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a bad config; [`Error::Unavailable`] /
    /// [`Error::Misconfigured`] if Redis cannot be reached within the connect timeout or
    /// refuses the scripts.
    pub async fn connect(client: redis::Client, mut config: RedisConfig) -> Result<Self> {
        config.validate()?;
        let bound = config.connect_timeout;
        let manager = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(bound))
            .set_number_of_retries(0)
            .set_max_delay(bound);
        let conn = match tokio::time::timeout(bound, ConnectionManager::new_with_config(client.clone(), manager)).await
        {
            Ok(r) => r.map_err(|e| error::from_redis(e, Effect::Read, "connect"))?,
            Err(_) => {
                return Err(Error::Unavailable {
                    message: format!("no connection to Redis within the connect timeout of {bound:?}"),
                    source: None,
                });
            }
        };
        if config.notify_client.is_none() {
            config.notify_client = Some(client);
        }
        let store = Self::new(conn, config)?;
        store.verify().await?;
        Ok(store)
    }
}

impl<C> RedisStore<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    /// A store over the connection `conn` you made (a `ConnectionManager`, a
    /// multiplexed connection, a cluster connection), with `config`
    /// (`RedisConfig::default()`: no pub/sub waiter). Nothing is sent.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a bad key prefix or timeout.
    pub fn new(conn: C, config: RedisConfig) -> Result<Self> {
        config.validate()?;
        Ok(Self {
            conn,
            keys: KeyLayout::new(&config.key_prefix),
            request_timeout: config.request_timeout,
            notifier: config.notify_client.map(|c| Arc::new(Notifier::new(c))),
        })
    }

    /// Where this store keeps each name's keys.
    pub fn keys(&self) -> &KeyLayout {
        &self.keys
    }

    /// The connection (a clone shares it), for the caller's own commands.
    pub fn connection(&self) -> C {
        self.conn.clone()
    }

    /// Loads the store's scripts into the server's script cache: all that Redis needs
    /// (there is no table to create). Idempotent; several processes may call it at
    /// once. The same as [`RedisStore::verify`] on a store built from `conn` and
    /// `config`.
    ///
    /// # Errors
    /// As [`RedisStore::verify`]; [`Error::InvalidInput`] for a bad config.
    pub async fn provision(conn: &C, config: &RedisConfig) -> Result<()> {
        Self::new(conn.clone(), config.clone())?.verify().await
    }

    /// Checks that the server answers and accepts the store's scripts, by loading
    /// every script into its script cache (`SCRIPT LOAD`), so that the first call of
    /// each costs one round trip. A script missing from the cache later (a restart,
    /// `SCRIPT FLUSH`, a failover) is loaded on demand.
    ///
    /// # Errors
    /// Transport errors as for reads; [`Error::Misconfigured`] if `SCRIPT` is denied.
    pub async fn verify(&self) -> Result<()> {
        for script in scripts::all() {
            let mut conn = self.conn.clone();
            with_timeout(
                self.request_timeout,
                Effect::Read,
                "SCRIPT LOAD",
                script.load_async(&mut conn),
            )
            .await?;
        }
        Ok(())
    }

    /// Raises the token counter of `name` to at least `min` (and to the current
    /// record's token), so the next grant's token is above it; returns the counter.
    ///
    /// This is the way out of the stall after Redis lost the counter (a restart
    /// without persistence, a failover): read the high-water mark of the resources the
    /// lease protects ([`crate::read_high_water`]) and seed the counter with it before
    /// the next grant.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] above `i64::MAX`; [`Error::CorruptRecord`] for a
    /// corrupt record or counter; transport errors as for writes.
    pub async fn seed_fence_counter(&self, name: &LeaseName, min: FencingToken) -> Result<FencingToken> {
        min.to_i64()?;
        let mut inv = SEED_SCRIPT.prepare_invoke();
        inv.key(self.keys.record(name)).key(self.keys.meta(name)).arg(min.get());
        let what = What::of("seed", name);
        let reply = self.call(&inv, Effect::Write, what).await?;
        match reply.status.as_str() {
            "seeded" => {
                let s = reply.text(0)?;
                s.parse::<u64>()
                    .map(FencingToken::new)
                    .map_err(|_| Error::corrupt(name.as_str(), format!("bad token counter {s:?}")))
            }
            "corrupt" => Err(reply.corrupt(name.as_str())),
            other => Err(error::bad_reply(Effect::Write, what, format!("status {other:?}"))),
        }
    }

    /// Applies a fenced write through this store's connection (see [`HashFence`]).
    ///
    /// # Errors
    /// As [`HashFence::apply`].
    pub async fn fenced_write(&self, write: &HashFence, token: FencingToken) -> Result<FencedOutcome<HashWrite>> {
        let mut conn = self.conn.clone();
        write.apply_with_timeout(&mut conn, token, self.request_timeout).await
    }

    async fn call<'w>(&self, inv: &ScriptInvocation<'_>, effect: Effect, what: What<'w>) -> Result<Reply<'w>> {
        let mut conn = self.conn.clone();
        invoke(&mut conn, self.request_timeout, inv, effect, what).await
    }

    /// Runs a script that applies only at a version (`delete`, `purge`, `expire`; `done`
    /// is the status it answers when it applied): `None` if it applied, else the record
    /// it found instead.
    async fn call_checked(
        &self,
        name: &LeaseName,
        inv: &ScriptInvocation<'_>,
        op: &'static str,
        done: &str,
    ) -> Result<Option<Current>> {
        let what = What::of(op, name);
        let reply = self.call(inv, Effect::Write, what).await?;
        match reply.status.as_str() {
            status if status == done => Ok(None),
            "conflict" => Ok(Some(Current::Present(self.claimed(name, reply.stored(name)?)))),
            "conflict_absent" => Ok(Some(Current::Absent)),
            "corrupt" => Err(reply.corrupt(name.as_str())),
            other => Err(error::bad_reply(Effect::Write, what, format!("status {other:?}"))),
        }
    }

    /// Reports a write's outcome (`name` as `stored`) to the waiters: a wake-up handed
    /// out for an older release did its work.
    fn claimed(&self, name: &LeaseName, stored: Stored) -> Stored {
        if let Some(n) = &self.notifier {
            n.claimed(&self.keys.channel(name), &stored.version);
        }
        stored
    }

    /// The record of `name` and its version counter, for waiters: one pipeline.
    async fn now(&self, name: &LeaseName) -> redis::RedisResult<Now> {
        let mut conn = self.conn.clone();
        let ((version, holder), (epoch, counter)) = redis::pipe()
            .cmd("HMGET")
            .arg(self.keys.record(name))
            .arg("v")
            .arg("h")
            .cmd("HMGET")
            .arg(self.keys.meta(name))
            .arg("e")
            .arg("n")
            .query_async(&mut conn)
            .await?;
        Ok(Now {
            version,
            holder,
            epoch,
            counter,
        })
    }
}

/// The script's write mode for a precondition.
fn mode(expect: &Precondition) -> Result<(&'static str, &str)> {
    match expect {
        Precondition::Absent => Ok(("absent", "")),
        Precondition::Version(v) => Ok(("version", v.as_str())),
        Precondition::Claimable => Ok(("claim", "")),
        _ => Err(leasehold_core::store::not_taken("Redis", expect)),
    }
}

impl<C> RedisStore<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    async fn write_mode(&self, name: &LeaseName, mode: &str, expect: &str, record: &LeaseRecord) -> Result<CasOutcome> {
        let inv = self.write_invocation(name, mode, expect, record)?;
        let what = What::of("write", name);
        let reply = self.call(&inv, Effect::Write, what).await?;
        // A release leaves the record vacant; every other write leaves what it sent.
        let wrote = if mode == "release" {
            record.vacated()
        } else {
            record.clone()
        };
        self.write_outcome(name, reply, what, &wrote)
    }

    /// The write script's call for `record` under `name` in `mode`, its values checked.
    fn write_invocation(
        &self,
        name: &LeaseName,
        mode: &str,
        expect: &str,
        record: &LeaseRecord,
    ) -> Result<ScriptInvocation<'static>> {
        // Tokens are signed 64-bit integers in Redis.
        record.token.to_i64()?;
        if record.token == FencingToken::ZERO && mode != "claim" {
            return Err(Error::invalid("fencing token", "0 is never issued"));
        }
        let mut inv = WRITE_SCRIPT.prepare_invoke();
        inv.key(self.keys.record(name))
            .key(self.keys.meta(name))
            .arg(mode)
            .arg(expect)
            .arg(record.holder.as_ref().map_or("", |h| h.as_str()))
            .arg(record.token.get().max(1))
            .arg(record.ttl.as_millis())
            .arg(record.wall_expires_at_ms.map(|w| w.to_string()).unwrap_or_default())
            .arg(self.keys.channel(name));
        Ok(inv)
    }

    /// Renewals in one pipeline of write-script calls: one round trip. A script
    /// missing from the server's cache is loaded and the pipeline sent again, once.
    async fn renew_pipelined(&self, batch: &[Renewal]) -> Vec<Result<CasOutcome>> {
        let prepare =
            |r: &Renewal| self.write_invocation(&r.name, renew_mode(&r.record), r.version.as_str(), &r.record);
        send_batch(batch, prepare, |ready| async move {
            let what = "renewal pipeline";
            let mut pipe = redis::pipe();
            for (_, inv) in &ready {
                pipe.invoke_script(inv);
            }
            let mut conn = self.conn.clone();
            let mut replies = self.send_pipeline(&pipe, &mut conn).await;
            if matches!(&replies, Err(Sent::Redis(e)) if e.code() == Some(NOSCRIPT)) {
                // The server lost its script cache (a restart, `SCRIPT FLUSH`): nothing ran.
                let load = WRITE_SCRIPT.load_async(&mut conn);
                replies = match with_timeout(self.request_timeout, Effect::Read, "SCRIPT LOAD", load).await {
                    Ok(_) => self.send_pipeline(&pipe, &mut conn).await,
                    Err(e) => Err(Sent::Failed(e)),
                };
            }
            let values = replies.map_err(|e| match e {
                Sent::Redis(e) => error::from_redis(e, Effect::Write, what),
                Sent::Failed(e) => e,
            })?;
            if values.len() != ready.len() {
                let why = format!("{} replies to {} renewals", values.len(), ready.len());
                return Err(error::bad_reply(Effect::Write, what, why));
            }
            Ok(values
                .into_iter()
                .zip(&ready)
                .map(|(value, (r, _))| {
                    let what = What::of("renewal", &r.name);
                    Reply::parse(value, Effect::Write, what)
                        .and_then(|reply| self.write_outcome(&r.name, reply, what, &r.record))
                })
                .collect())
        })
        .await
    }

    /// Sends `pipe` on `conn` within the request timeout.
    async fn send_pipeline(
        &self,
        pipe: &redis::Pipeline,
        conn: &mut C,
    ) -> std::result::Result<Vec<redis::Value>, Sent> {
        let call = pipe.query_async::<Vec<redis::Value>>(conn);
        match self.request_timeout {
            Some(d) => match tokio::time::timeout(d, call).await {
                Ok(r) => r.map_err(Sent::Redis),
                Err(_) => Err(Sent::Failed(error::timed_out(Effect::Write, "renewal pipeline", d))),
            },
            None => call.await.map_err(Sent::Redis),
        }
    }

    /// What a write script's reply means; `wrote` is the record the script writes if it
    /// applies (its token, for a grant, the one the script answers).
    fn write_outcome(
        &self,
        name: &LeaseName,
        reply: Reply<'_>,
        what: What<'_>,
        wrote: &LeaseRecord,
    ) -> Result<CasOutcome> {
        match reply.status.as_str() {
            "written" => Ok(CasOutcome::Written(self.claimed(name, reply.written(name, wrote)?))),
            "conflict" => Ok(CasOutcome::Conflict(Current::Present(
                self.claimed(name, reply.stored(name)?),
            ))),
            "conflict_absent" => Ok(CasOutcome::Conflict(Current::Absent)),
            "corrupt" => Err(reply.corrupt(name.as_str())),
            // The counter is the store's own: at its end, the store says so.
            "exhausted" => Err(Error::TokensExhausted {
                name: name.as_str().to_owned(),
            }),
            other => Err(error::bad_reply(Effect::Write, what, format!("status {other:?}"))),
        }
    }
}

/// The write script's mode for a renewal of `record`: a held record is renewed only
/// while it shows its holder and token; a vacant one is written on its version.
fn renew_mode(record: &LeaseRecord) -> &'static str {
    if record.holder.is_some() { "renew" } else { "version" }
}

/// How a pipeline failed: the driver's error (classified once it is known not to be a
/// missing script), or already classified.
enum Sent {
    Redis(redis::RedisError),
    Failed(Error),
}

/// The error code of a script missing from the server's cache.
const NOSCRIPT: &str = "NOSCRIPT";

/// How many renewals one pipeline carries ([`CasStore::renew_many`]).
pub const RENEWAL_BATCH: usize = 128;

#[async_trait]
impl<C> CasStore for RedisStore<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    fn capabilities(&self) -> Capabilities {
        Capabilities::new(ClockSource::Store, Grade::EfficiencyOnly)
            .with_conflict_returns_current(true)
            .with_notifies_waiters(self.notifier.is_some())
    }

    async fn read(&self, name: &LeaseName) -> Result<Option<Stored>> {
        let mut inv = READ_SCRIPT.prepare_invoke();
        inv.key(self.keys.record(name));
        let what = What::of("read", name);
        let reply = self.call(&inv, Effect::Read, what).await?;
        match reply.status.as_str() {
            "ok" => Ok(Some(reply.stored(name)?)),
            "absent" => Ok(None),
            "corrupt" => Err(reply.corrupt(name.as_str())),
            other => Err(error::bad_reply(Effect::Read, what, format!("status {other:?}"))),
        }
    }

    async fn write(&self, name: &LeaseName, expect: &Precondition, record: &LeaseRecord) -> Result<CasOutcome> {
        let (mode, version) = mode(expect)?;
        self.write_mode(name, mode, version, record).await
    }

    async fn delete(&self, name: &LeaseName, version: &Version) -> Result<DeleteOutcome> {
        let mut inv = DELETE_SCRIPT.prepare_invoke();
        inv.key(self.keys.record(name))
            .key(self.keys.meta(name))
            .arg(version.as_str())
            .arg(self.keys.channel(name));
        Ok(match self.call_checked(name, &inv, "delete", "deleted").await? {
            None => DeleteOutcome::Deleted,
            Some(current) => DeleteOutcome::Conflict(current),
        })
    }

    /// Deletes the record and its counter hash (which a plain delete keeps, and which
    /// outlives a record whose `PX` ran out) if the record has `version`, or, the
    /// record being gone, if nothing was written under the name since `version`.
    async fn purge(&self, name: &LeaseName, version: &Version) -> Result<DeleteOutcome> {
        let mut inv = PURGE_SCRIPT.prepare_invoke();
        inv.key(self.keys.record(name))
            .key(self.keys.meta(name))
            .arg(version.as_str());
        Ok(match self.call_checked(name, &inv, "purge", "deleted").await? {
            None => DeleteOutcome::Deleted,
            Some(current) => DeleteOutcome::Conflict(current),
        })
    }

    /// Native expiry: one script gives the counter hash a `PEXPIRE` of `after` (at least
    /// the record's own `PTTL`), if the record has `version` or, the record being gone,
    /// if nothing was written under the name since `version`. The record keeps its own
    /// `PX`. One round trip.
    async fn expire(&self, name: &LeaseName, version: &Version, after: Duration) -> Result<ExpireOutcome> {
        let ms = u64::try_from(after.as_millis()).unwrap_or(u64::MAX).max(1);
        let mut inv = EXPIRE_SCRIPT.prepare_invoke();
        inv.key(self.keys.record(name))
            .key(self.keys.meta(name))
            .arg(version.as_str())
            .arg(ms);
        Ok(match self.call_checked(name, &inv, "expire", "scheduled").await? {
            None => ExpireOutcome::Scheduled,
            Some(current) => ExpireOutcome::Conflict(current),
        })
    }

    /// Renews only if the record still has `version` **and** names this holder with
    /// this token (so even a version reused by a server that lost its data cannot
    /// renew someone else's lease).
    async fn renew(&self, name: &LeaseName, version: &Version, record: &LeaseRecord) -> Result<CasOutcome> {
        self.write_mode(name, renew_mode(record), version.as_str(), record)
            .await
    }

    /// [`RENEWAL_BATCH`]: renewals are pipelined.
    fn renewal_batch(&self) -> usize {
        RENEWAL_BATCH
    }

    /// One pipeline of renewal scripts (one round trip), each guarded by its own
    /// version, holder and token.
    async fn renew_many(&self, batch: &[Renewal]) -> Vec<Result<CasOutcome>> {
        if let [r] = batch {
            return vec![self.renew(&r.name, &r.version, &r.record).await];
        }
        self.renew_pipelined(batch).await
    }

    /// Releases only if the record still has `version` **and** names this holder with
    /// this token: a record an operator changed with `redis-cli` (the version untouched)
    /// stays as they left it.
    async fn release(&self, name: &LeaseName, version: &Version, held: &LeaseRecord) -> Result<CasOutcome> {
        if held.is_vacant() {
            return Err(Error::invalid("record", "a release names the holder it releases"));
        }
        let mut record = held.clone();
        record.wall_expires_at_ms = None;
        self.write_mode(name, "release", version.as_str(), &record).await
    }

    /// `SCAN` with `MATCH P{<prefix>*}` (record keys only, never the counter hashes)
    /// and `COUNT 1000`, the cursor followed back to 0: about one call per 1000 keys in
    /// the database, whatever the prefix. A record Redis expired (held or vacant, each
    /// is written with `PX`) is gone, so it is not listed.
    async fn list(&self, prefix: &NamePrefix) -> Result<Vec<LeaseName>> {
        let mut conn = self.conn.clone();
        listing::list(&mut conn, &self.keys, self.request_timeout, prefix).await
    }

    /// `TIME`: the server's clock, one round trip.
    async fn store_now_ms(&self) -> Result<Option<u64>> {
        let mut conn = self.conn.clone();
        let what = "TIME";
        let (secs, micros): (u64, u64) = with_timeout(
            self.request_timeout,
            Effect::Read,
            what,
            redis::cmd("TIME").query_async(&mut conn),
        )
        .await?;
        Ok(Some(secs.saturating_mul(1000).saturating_add(micros / 1000)))
    }

    async fn wait_for_change(&self, name: &LeaseName, seen: Option<&Version>, wait: Wait) -> Result<()> {
        match &self.notifier {
            Some(n) => {
                n.wait(&self.keys.channel(name), seen, wait, self.now(name)).await;
            }
            None => tokio::time::sleep(wait.after()).await,
        }
        Ok(())
    }
}
