//! The worker process of the frozen-holder test (`tests/frozen_holder.rs`).
//!
//! It acquires a lease on S3, raises the fence of a manifest, then commits to the
//! manifest in a loop: read the manifest, append a line `<label> <token> <seq>`, pause
//! (the "work" between reading and committing, where the test freezes it), commit on
//! the manifest it read. It deliberately never checks whether its lease is still valid,
//! like a holder that checked just before a long pause: only the fence can stop it.
//!
//! Settings come from the environment: `LEASEHOLD_MOTO_ENDPOINT`, `LH_S3_BUCKET`,
//! `LH_S3_PREFIX`, `LH_S3_LEASE`, `LH_S3_MANIFEST`, `LH_S3_LABEL`, `LH_S3_TTL_MS`,
//! `LH_S3_PAUSE_MS`, `LH_S3_RUN_MS` (the most it runs). It reports on stdout, one line
//! per event: `GRANTED <token>`, `PREPARED <seq> <base token>`, `COMMITTED <seq>`,
//! `CONFLICT <seq>`, `REFUSED <seq>` (then exits 0), `ERROR <what>` (exit 2),
//! `DEADLINE` (exit 3).

use std::io::Write as _;
use std::time::Duration;

use leasehold_core::fence::FencedOutcome;
use leasehold_core::{Error, LeaseClient};
use leasehold_s3::{S3Config, S3Store};
use tokio::time::Instant;

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| fail(&format!("{name} is not set")))
}

fn env_ms(name: &str) -> Duration {
    Duration::from_millis(env(name).parse().unwrap_or_else(|e| fail(&format!("{name}: {e}"))))
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    // A closed pipe means the test is gone; nothing useful to do about it.
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn fail(what: &str) -> ! {
    say(&format!("ERROR {what}"));
    std::process::exit(2)
}

/// Runs the worker (its settings come from the environment).
pub(crate) fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|e| fail(&format!("runtime: {e}")));
    rt.block_on(run());
}

async fn run() {
    let endpoint = env("LEASEHOLD_MOTO_ENDPOINT");
    let label = env("LH_S3_LABEL");
    let ttl = env_ms("LH_S3_TTL_MS");
    let pause = env_ms("LH_S3_PAUSE_MS");
    let deadline = Instant::now() + env_ms("LH_S3_RUN_MS");
    let config = S3Config::new(env("LH_S3_BUCKET"), env("LH_S3_PREFIX"))
        .and_then(|c| c.request_timeout(Duration::from_secs(2)))
        .unwrap_or_else(|e| fail(&e.to_string()));
    let store = S3Store::new(leasehold_s3::local_client(&endpoint), config);
    let client = LeaseClient::with_config(
        store.clone(),
        leasehold_core::ClientConfig::builder()
            .label(label.clone())
            .build()
            .unwrap_or_else(|e| fail(&e.to_string())),
    )
    .unwrap_or_else(|e| fail(&e.to_string()));
    let lease = client
        .acquire_timeout(env("LH_S3_LEASE"), ttl, Duration::from_secs(10))
        .await
        .unwrap_or_else(|e| fail(&format!("acquire: {e}")));
    let token = lease.token();
    let manifest = store
        .manifest(&env("LH_S3_MANIFEST"))
        .unwrap_or_else(|e| fail(&e.to_string()));
    manifest
        .fence(token)
        .await
        .unwrap_or_else(|e| fail(&format!("fence: {e}")));
    say(&format!("GRANTED {token}"));

    let mut seq = 0u64;
    loop {
        if Instant::now() >= deadline {
            say("DEADLINE");
            std::process::exit(3);
        }
        let base = match manifest.read().await {
            Ok(b) => b,
            Err(e) => fail(&format!("read: {e}")),
        };
        let mut data = base.as_ref().map(|m| m.data.clone()).unwrap_or_default();
        data.extend_from_slice(format!("{label} {token} {seq}\n").as_bytes());
        let base_token = base.as_ref().map_or(0, |m| m.token.get());
        say(&format!("PREPARED {seq} {base_token}"));
        tokio::time::sleep(pause).await;
        match manifest.commit(token, base.as_ref(), data).await {
            Ok(FencedOutcome::Applied(_)) => {
                say(&format!("COMMITTED {seq}"));
                seq += 1;
            }
            Ok(FencedOutcome::ConditionFailed(_)) => say(&format!("CONFLICT {seq}")),
            Err(Error::FenceRejected { .. }) => {
                say(&format!("REFUSED {seq}"));
                std::process::exit(0);
            }
            Err(e) => fail(&format!("commit: {e}")),
        }
    }
}
