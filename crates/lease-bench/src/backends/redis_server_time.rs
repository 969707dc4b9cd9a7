//! What a lock's acquire + release costs the Redis server itself, by Redis's own
//! accounting: `INFO commandstats` counts the microseconds each command ran (a script's
//! own commands included), free of the network, the client and the machine's scheduling
//! of the caller.
//!
//! Beside each round's server time, the benchmark process's own CPU time per operation
//! ([`crate::machine::cpu_now`]: the caller, the runtime's workers, the Redis client's
//! tasks), which tells the client's side of each lock apart from the server's.
//!
//! Four sides, each a round of `pairs` acquire + release pairs on one connection, the
//! sides alternating round by round: the library (`RedisStore::write` of a free name,
//! then `RedisStore::release`: the write script twice), the one-key design the store
//! did not take (`one_key_write.lua`: the record and its counters in one hash, the
//! expiry a field judged on the server's `TIME`, every field checked as the store's
//! script does), the fenced floor (`FENCED_GRANT` and `FENCED_RELEASE` of
//! `backends/redis.rs`) and the classic lock (`SET NX PX`, then compare-and-delete, as
//! rslock). The statistics are reset before each round (`CONFIG RESETSTAT`: the server
//! must not be shared with other work while this runs).
//!
//! Run by `scripts/redis-server-time.sh`; not part of `scripts/bench.sh`'s results.

use leasehold_core::store::{CasOutcome, CasStore, LeaseRecord, Precondition};
use leasehold_core::{FencingToken, HolderId, LeaseName, Ttl};
use leasehold_redis::{RedisConfig, RedisStore};
use redis::aio::ConnectionManager;

use super::env;
use super::redis::{FENCED_GRANT, FENCED_RELEASE, UNLOCK};
use crate::machine::{cpu_between, cpu_now};
use crate::{Result, fail};

/// The one-key write script (`one_key_write.lua`) after the store scripts' helpers,
/// with the shebang the store's writing scripts carry: it pays for what they all pay
/// for (defining the helpers on each call), and differs only in what it reads and
/// writes.
fn one_key_script() -> redis::Script {
    redis::Script::new(&format!(
        "#!lua\n{}{}",
        include_str!("../../../store-redis/src/prelude.lua"),
        include_str!("one_key_write.lua")
    ))
}

/// One side's server time per operation (µs), one value per round.
#[derive(Debug, Clone)]
pub struct SideTime {
    /// What the side sends.
    pub label: &'static str,
    /// Microseconds of server time per operation (half a pair), per round.
    pub per_op_us: Vec<f64>,
    /// Microseconds of this process's CPU time per operation, per round.
    pub client_cpu_us: Vec<f64>,
}

impl SideTime {
    /// The median over the rounds.
    pub fn median_us(&self) -> f64 {
        crate::stats::median(&self.per_op_us)
    }

    /// The median client CPU per operation over the rounds.
    pub fn median_client_cpu_us(&self) -> f64 {
        crate::stats::median(&self.client_cpu_us)
    }
}

/// Runs `rounds` rounds of `pairs` acquire + release pairs per side on the Redis of
/// `LEASEHOLD_REDIS_URL`, under keys of this run's own, which it deletes at the end.
///
/// # Errors
/// A missing variable, an unreachable Redis, an outcome other than a grant and its
/// release.
pub async fn measure(rounds: usize, pairs: usize) -> Result<Vec<SideTime>> {
    let url = env("LEASEHOLD_REDIS_URL")?;
    let client = redis::Client::open(url.as_str()).map_err(|e| fail(format!("redis url {url}: {e}")))?;
    let prefix = format!("lhtime:{}:", std::process::id());
    let store = RedisStore::connect(client.clone(), RedisConfig::default().with_prefix(&prefix)).await?;
    let mut conn = ConnectionManager::new(client)
        .await
        .map_err(|e| fail(format!("cannot reach Redis at {url}: {e}")))?;
    let name = LeaseName::new("a")?;
    let record = LeaseRecord::held(HolderId::new("bench")?, FencingToken::ZERO, Ttl::from_millis(5_000)?);
    let (grant, release, unlock) = (
        redis::Script::new(FENCED_GRANT),
        redis::Script::new(FENCED_RELEASE),
        redis::Script::new(UNLOCK),
    );
    let one_key = one_key_script();
    let (fenced_key, plain_key, one_key_key) = (
        format!("{prefix}fenced"),
        format!("{prefix}plain"),
        format!("{prefix}onekey"),
    );
    let mut sides = [
        SideTime {
            label: "library (write script: claim, then release)",
            per_op_us: vec![],
            client_cpu_us: vec![],
        },
        SideTime {
            label: "one-key design (one_key_write.lua: claim, then release)",
            per_op_us: vec![],
            client_cpu_us: vec![],
        },
        SideTime {
            label: "fenced floor (FENCED_GRANT, FENCED_RELEASE)",
            per_op_us: vec![],
            client_cpu_us: vec![],
        },
        SideTime {
            label: "classic lock (SET NX PX, compare-and-delete)",
            per_op_us: vec![],
            client_cpu_us: vec![],
        },
    ];
    for _ in 0..rounds {
        for (i, side) in sides.iter_mut().enumerate() {
            let () = redis::cmd("CONFIG").arg("RESETSTAT").query_async(&mut conn).await?;
            let cpu_before = cpu_now();
            for _ in 0..pairs {
                match i {
                    0 => {
                        let CasOutcome::Written(held) = store.write(&name, &Precondition::Claimable, &record).await?
                        else {
                            return Err(fail("the library's name was not free"));
                        };
                        let out = store.release(&name, &held.version, &held.record).await?;
                        if !matches!(out, CasOutcome::Written(_)) {
                            return Err(fail(format!("the library's release conflicted: {out:?}")));
                        }
                    }
                    1 => one_key_pair(&one_key, &one_key_key, &mut conn).await?,
                    2 => {
                        let token: u64 = grant
                            .key(&fenced_key)
                            .arg("bench")
                            .arg(5_000)
                            .invoke_async(&mut conn)
                            .await?;
                        let done: u64 = release
                            .key(&fenced_key)
                            .arg("bench")
                            .arg(token)
                            .invoke_async(&mut conn)
                            .await?;
                        if token == 0 || done != 1 {
                            return Err(fail("the fenced floor's lock was not free"));
                        }
                    }
                    _ => {
                        let set: Option<String> = redis::cmd("SET")
                            .arg(&plain_key)
                            .arg("bench")
                            .arg("NX")
                            .arg("PX")
                            .arg(5_000)
                            .query_async(&mut conn)
                            .await?;
                        let done: u64 = unlock.key(&plain_key).arg("bench").invoke_async(&mut conn).await?;
                        if set.is_none() || done != 1 {
                            return Err(fail("the classic lock was not free"));
                        }
                    }
                }
            }
            let cpu = cpu_between(cpu_before, cpu_now());
            side.client_cpu_us.push(cpu.as_secs_f64() * 1e6 / (2 * pairs) as f64);
            let stats: String = redis::cmd("INFO").arg("commandstats").query_async(&mut conn).await?;
            let usec = command_usec(&stats, "evalsha") + command_usec(&stats, "set");
            side.per_op_us.push(usec / (2 * pairs) as f64);
        }
    }
    if let Some(vacant) = store.read(&name).await? {
        store.purge(&name, &vacant.version).await?;
    }
    let () = redis::cmd("DEL")
        .arg(&fenced_key)
        .arg(&plain_key)
        .arg(&one_key_key)
        .query_async(&mut conn)
        .await?;
    Ok(sides.to_vec())
}

/// One claim and its release by the one-key script on `key`.
async fn one_key_pair(script: &redis::Script, key: &str, conn: &mut ConnectionManager) -> Result<()> {
    let claimed: Vec<String> = script
        .key(key)
        .arg("claim")
        .arg("")
        .arg("bench")
        .arg("0")
        .arg(5_000)
        .arg("lhtime:released")
        .invoke_async(conn)
        .await?;
    let [status, token, version] = claimed.as_slice() else {
        return Err(fail(format!("the one-key claim answered {claimed:?}")));
    };
    if status != "written" {
        return Err(fail(format!("the one-key claim answered {claimed:?}")));
    }
    let released: Vec<String> = script
        .key(key)
        .arg("release")
        .arg(version)
        .arg("bench")
        .arg(token)
        .arg(5_000)
        .arg("lhtime:released")
        .invoke_async(conn)
        .await?;
    if released.first().map(String::as_str) != Some("written") {
        return Err(fail(format!("the one-key release answered {released:?}")));
    }
    Ok(())
}

/// The microseconds `INFO commandstats` reports for `command` (0 if it has not run).
fn command_usec(stats: &str, command: &str) -> f64 {
    let head = format!("cmdstat_{command}:");
    stats
        .lines()
        .find_map(|l| l.strip_prefix(&head))
        .and_then(|fields| fields.split(',').find_map(|f| f.strip_prefix("usec=")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::command_usec;

    #[test]
    fn commandstats_lines_are_read() {
        let stats = "# Commandstats\r\ncmdstat_set:calls=3,usec=12,usec_per_call=4.00,rejected_calls=0,failed_calls=0\r\n\
                     cmdstat_evalsha:calls=2,usec=40,usec_per_call=20.00,rejected_calls=0,failed_calls=0\r\n";
        assert_eq!(command_usec(stats, "evalsha"), 40.0);
        assert_eq!(command_usec(stats, "set"), 12.0);
        assert_eq!(command_usec(stats, "get"), 0.0);
    }
}
