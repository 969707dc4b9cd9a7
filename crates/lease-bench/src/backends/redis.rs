//! Redis: `leasehold-redis` (one `EVALSHA` per operation) against the classic single-key
//! lock (`SET NX PX`, compare-and-delete and compare-and-extend scripts).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use leasehold_core::store::CasStore;
use leasehold_redis::{RedisConfig, RedisStore};
use redis::AsyncCommands;
use redis::aio::ConnectionManager;

use super::{Backend, Floor, OpTexts, RawLock, StoreInfo, StoreKind, env, lost, ttl_ms};
use crate::peers::{Cycle, LibraryCycle, POOL, PeerResult, interleave};
use crate::stats::time;
use crate::{Plan, Result, fail};

/// Compare-and-delete: the release of the classic Redis lock (and of rslock).
pub(super) const UNLOCK: &str =
    r"if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end";
/// Compare-and-extend: the renewal of the classic Redis lock.
const EXTEND: &str =
    r"if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end";

/// The least a fenced lock sends to take a free lock: one script on one hash that keeps
/// the holder, the expiry (judged on the server's `TIME`) and the token counter, which
/// outlives every holder. KEYS = lock; ARGV = holder, TTL ms. Reply: the token, or 0
/// while another holder's expiry is ahead. Nothing it reads is checked.
pub(super) const FENCED_GRANT: &str = r"
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local cur = redis.call('HMGET', KEYS[1], 'h', 'x')
if cur[1] and cur[1] ~= '' and tonumber(cur[2]) > now then return 0 end
local token = redis.call('HINCRBY', KEYS[1], 't', 1)
redis.call('HSET', KEYS[1], 'h', ARGV[1], 'x', now + ARGV[2])
return token
";
/// The fenced lock's release: clears the holder while the lock shows that holder and
/// token. KEYS = lock; ARGV = holder, token. Reply: 1, or 0 if it did not hold.
pub(super) const FENCED_RELEASE: &str = r"
local cur = redis.call('HMGET', KEYS[1], 'h', 't')
if cur[1] ~= ARGV[1] or cur[2] ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], 'h', '')
return 1
";

/// The shared Redis, under a prefix of this run.
pub(crate) struct RedisBackend {
    url: String,
    client: redis::Client,
    prefix: String,
    admin: ConnectionManager,
}

impl RedisBackend {
    pub(crate) async fn open(tag: &str) -> Result<Self> {
        let url = env("LEASEHOLD_REDIS_URL")?;
        let client = redis::Client::open(url.as_str()).map_err(|e| fail(format!("redis url {url}: {e}")))?;
        let admin = ConnectionManager::new(client.clone())
            .await
            .map_err(|e| fail(format!("cannot reach Redis at {url}: {e}")))?;
        Ok(Self {
            url,
            client,
            prefix: format!("lhbench:{tag}:"),
            admin,
        })
    }
}

#[async_trait]
impl Backend for RedisBackend {
    async fn store(&self) -> Result<Arc<dyn CasStore>> {
        let store = RedisStore::connect(self.client.clone(), RedisConfig::default().with_prefix(&self.prefix)).await?;
        Ok(Arc::new(store))
    }

    async fn floor(&self) -> Result<Box<dyn Floor>> {
        let conn = ConnectionManager::new(self.client.clone())
            .await
            .map_err(|e| fail(format!("redis: {e}")))?;
        Ok(Box::new(RedisFloor {
            conn,
            prefix: format!("{}raw:", self.prefix),
            unlock: redis::Script::new(UNLOCK),
            extend: redis::Script::new(EXTEND),
        }))
    }

    async fn describe(&self) -> Result<StoreInfo> {
        let mut c = self.admin.clone();
        let info: String = redis::cmd("INFO").arg("server").query_async(&mut c).await?;
        let field = |k: &str| {
            info.lines()
                .find_map(|l| l.strip_prefix(k))
                .map(|v| v.trim().to_owned())
                .unwrap_or_default()
        };
        let config = |name: &'static str| {
            let mut c = self.admin.clone();
            async move {
                let v: Vec<String> = redis::cmd("CONFIG").arg("GET").arg(name).query_async(&mut c).await?;
                Ok::<_, redis::RedisError>(v.get(1).cloned().unwrap_or_default())
            }
        };
        Ok(StoreInfo {
            kind: StoreKind::Redis,
            version: format!("Redis {}", field("redis_version:")),
            settings: vec![
                format!(
                    "appendonly {}, save '{}' (no persistence: the efficiency-only setting of scripts/stores.sh)",
                    config("appendonly").await?,
                    config("save").await?
                ),
                format!("loopback TCP, {}", self.url),
                "library and floor each on their own `ConnectionManager` (one multiplexed connection)".into(),
            ],
            library_ops: OpTexts {
                acquire: "one `EVALSHA` of the write script (`claim`): checks the record and the counter hash, raises the counters in one `HSET`, `HSET`s the record + `PEXPIRE`".into(),
                renew: "one `EVALSHA` (`renew`): checks version, holder and token, `HSET`s the version and TTL fields and the version counter, `PEXPIRE`".into(),
                release: "one `EVALSHA` (`version`, vacant record): rewrite + `PUBLISH` on the release channel".into(),
                takeover: "one `EVALSHA` (`claim`) on the expired (removed) record".into(),
            },
            floor_ops: OpTexts {
                acquire: "`SET key holder NX PX ttl`".into(),
                renew: "`EVALSHA` of `if GET == holder then PEXPIRE`".into(),
                release: "`EVALSHA` of `if GET == holder then DEL` (as rslock)".into(),
                takeover: "`SET key holder NX PX ttl` once Redis has expired the old key".into(),
            },
        })
    }

    async fn peer(&self, plan: &Plan) -> Result<Option<PeerResult>> {
        let lib = LibraryCycle::on(self, plan).await?;
        let peer = RslockCycle {
            manager: rslock::LockManager::from_clients(vec![self.client.clone()]),
            keys: (0..POOL).map(|i| format!("{}peer:rslock:{i}", self.prefix)).collect(),
            ttl: plan.latency_ttl,
        };
        let fenced = FencedCycle {
            conn: ConnectionManager::new(self.client.clone())
                .await
                .map_err(|e| fail(format!("redis: {e}")))?,
            grant: redis::Script::new(FENCED_GRANT),
            release: redis::Script::new(FENCED_RELEASE),
            keys: (0..POOL).map(|i| format!("{}peer:fenced:{i}", self.prefix)).collect(),
            ttl_ms: ttl_ms(plan.latency_ttl),
        };
        let [library, other, fenced] = interleave(plan, [&lib, &peer, &fenced]).await?;
        Ok(Some(PeerResult {
            store: StoreKind::Redis,
            peer: "rslock 0.10 (`LockManager::lock` / `unlock`)".into(),
            library,
            other,
            flush: None,
            fenced_floor: Some(fenced),
        }))
    }

    async fn cleanup(&self) -> Result<()> {
        let mut c = self.admin.clone();
        let pattern = format!("{}*", self.prefix);
        let mut cursor: u64 = 0;
        loop {
            let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(1000)
                .query_async(&mut c)
                .await?;
            if !keys.is_empty() {
                let _: () = c.del(keys).await?;
            }
            if next == 0 {
                return Ok(());
            }
            cursor = next;
        }
    }
}

struct RedisFloor {
    conn: ConnectionManager,
    prefix: String,
    unlock: redis::Script,
    extend: redis::Script,
}

impl RedisFloor {
    /// Runs a compare-and-`op` script on a held lock (1: done, 0: not this holder's).
    async fn on_holder(&self, script: &redis::Script, lock: &RawLock, ttl: Option<Duration>) -> Result<()> {
        let mut c = self.conn.clone();
        let mut call = script.key(&lock.key);
        call.arg(&lock.holder);
        if let Some(ttl) = ttl {
            call.arg(ttl_ms(ttl));
        }
        let n: i64 = call.invoke_async(&mut c).await?;
        if n == 1 {
            Ok(())
        } else {
            Err(lost(self.label(), &lock.key))
        }
    }
}

#[async_trait]
impl Floor for RedisFloor {
    fn label(&self) -> &'static str {
        "redis"
    }

    async fn take(&self, key: &str, holder: &str, ttl: Duration) -> Result<Option<RawLock>> {
        let k = format!("{}{key}", self.prefix);
        let mut c = self.conn.clone();
        let ok: Option<String> = redis::cmd("SET")
            .arg(&k)
            .arg(holder)
            .arg("NX")
            .arg("PX")
            .arg(ttl_ms(ttl))
            .query_async(&mut c)
            .await?;
        Ok(ok.map(|_| RawLock::new(k, holder, String::new())))
    }

    async fn renew(&self, lock: &mut RawLock, ttl: Duration) -> Result<()> {
        self.on_holder(&self.extend, lock, Some(ttl)).await
    }

    async fn release(&self, lock: RawLock) -> Result<()> {
        self.on_holder(&self.unlock, &lock, None).await
    }
}

/// rslock's cycle: `lock` then `unlock` of a free key.
struct RslockCycle {
    manager: rslock::LockManager,
    keys: Vec<String>,
    ttl: Duration,
}

#[async_trait]
impl Cycle for RslockCycle {
    async fn cycle(&self, i: usize) -> Result<(Duration, Duration)> {
        let key = &self.keys[i % self.keys.len()];
        let (acq, lock) = time(self.manager.lock(key.as_str(), self.ttl)).await;
        let lock = lock.map_err(|e| fail(format!("rslock: {key}: {e}")))?;
        let (rel, ()) = time(self.manager.unlock(&lock)).await;
        Ok((acq, rel))
    }
}

/// The fenced floor's cycle: [`FENCED_GRANT`] then [`FENCED_RELEASE`] of a free lock.
struct FencedCycle {
    conn: ConnectionManager,
    grant: redis::Script,
    release: redis::Script,
    keys: Vec<String>,
    ttl_ms: i64,
}

#[async_trait]
impl Cycle for FencedCycle {
    async fn cycle(&self, i: usize) -> Result<(Duration, Duration)> {
        const HOLDER: &str = "bench";
        let key = &self.keys[i % self.keys.len()];
        let mut conn = self.conn.clone();
        let mut grant = self.grant.key(key);
        grant.arg(HOLDER).arg(self.ttl_ms);
        let (acq, token) = time(grant.invoke_async::<u64>(&mut conn)).await;
        let token = token?;
        if token == 0 {
            return Err(fail(format!("fenced floor: {key} was not free")));
        }
        let mut release = self.release.key(key);
        release.arg(HOLDER).arg(token);
        let (rel, released) = time(release.invoke_async::<u64>(&mut conn)).await;
        if released? != 1 {
            return Err(fail(format!("fenced floor: {key} was not released")));
        }
        Ok((acq, rel))
    }
}
