//! The holder process of the frozen-holder test: the test binary run again as
//! `frozen_holder --worker <redis-url> <key-prefix> <lease-name> <resource-key> <ttl-ms> <label>`.
//!
//! Acquires the lease, prints `GRANTED <token>`, then writes through the fence in a
//! loop: each write adds 1 to the resource hash's `count` and sets `w:<label>:<seq>`
//! to its token, printing `OK <seq>`, `REJECTED <seq>` (the fence refused it) or
//! `ERROR <seq> <error>`. It does **not** check the lease before writing: that models a
//! pause between the check and the write, the case the fence exists for. It stops after
//! five refusals or 30 s, prints `DONE` and exits 0.

use std::io::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use leasehold_core::{ClientConfig, Error, LeaseClient};
use leasehold_redis::{HashFence, RedisConfig, RedisStore};
use tokio::time::Instant;

const REJECTIONS_BEFORE_EXIT: u32 = 5;
const RUN_FOR_AT_MOST: Duration = Duration::from_secs(30);
const PACE: Duration = Duration::from_millis(10);

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// Runs the worker with the arguments after `--worker`.
pub(crate) fn main(args: &[String]) -> ExitCode {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            say(&format!("FATAL runtime: {e}"));
            return ExitCode::FAILURE;
        }
    };
    rt.block_on(run_args(args))
}

async fn run_args(args: &[String]) -> ExitCode {
    let [url, prefix, lease_name, resource, ttl_ms, label] = args else {
        say("FATAL usage: frozen_holder --worker <url> <prefix> <lease> <resource> <ttl-ms> <label>");
        return ExitCode::from(2);
    };
    match run(url, prefix, lease_name, resource, ttl_ms, label).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            say(&format!("FATAL {e}"));
            ExitCode::FAILURE
        }
    }
}

async fn run(
    url: &str,
    prefix: &str,
    lease_name: &str,
    resource: &str,
    ttl_ms: &str,
    label: &str,
) -> Result<(), Error> {
    let ttl = Duration::from_millis(ttl_ms.parse().map_err(|_| Error::invalid("ttl", ttl_ms.to_owned()))?);
    let client = redis::Client::open(url).map_err(|e| Error::invalid("redis url", e.to_string()))?;
    let store = RedisStore::connect(client, RedisConfig::default().with_prefix(prefix)).await?;
    let config = ClientConfig::builder().label(label.to_owned()).build()?;
    let leases = LeaseClient::efficiency_only(store.clone(), config)?;
    let lease = leases.acquire_timeout(lease_name, ttl, Duration::from_secs(10)).await?;
    let token = lease.token();
    say(&format!("GRANTED {token}"));

    let until = Instant::now() + RUN_FOR_AT_MOST;
    let mut rejections = 0;
    let mut seq = 0u64;
    while rejections < REJECTIONS_BEFORE_EXIT && Instant::now() < until {
        seq += 1;
        let write = HashFence::new(resource)
            .incr("count", 1)
            .set(format!("w:{label}:{seq}"), token.to_string());
        match store.fenced_write(&write, token).await {
            Ok(_) => say(&format!("OK {seq}")),
            Err(Error::FenceRejected { .. }) => {
                rejections += 1;
                say(&format!("REJECTED {seq}"));
            }
            Err(e) => say(&format!("ERROR {seq} {e}")),
        }
        tokio::time::sleep(PACE).await;
    }
    say("DONE");
    drop(lease);
    Ok(())
}
