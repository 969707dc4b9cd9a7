//! The frozen-holder scenario, one case for every store: a real process holding a lease
//! is SIGSTOPped past its TTL, another holder takes over, the first is resumed, and every
//! write it then makes to the protected resources is refused by the store's fence.
//!
//! A store's `tests/frozen_holder.rs` (`harness = false`) implements [`World`] and calls
//! [`main`]. The test binary plays two roles: run plainly it is the **test** (and the
//! successor), and it re-executes itself with `--worker` as the **frozen holder**:
//!
//! 1. the holder acquires the lease (TTL 600 ms), writes the first half of the items
//!    through the fence with its token, prints `ready` and waits on its stdin;
//! 2. the test freezes it (SIGSTOP), at a moment the store says no write of its is in
//!    flight ([`World::quiescent`]), past its TTL: its renewals stop;
//! 3. the test, as the successor, acquires the lease once the frozen one has expired,
//!    with a newer token, and writes every item with it;
//! 4. the test resumes the holder (SIGCONT) and tells it to go on: it is a *buggy*
//!    holder that ignores its loss signal and writes every item again with its stale
//!    token;
//! 5. every one of those writes must be refused ([`leasehold_core::Error::FenceRejected`]),
//!    and every item must still hold the successor's token and value.

use std::future::Future;
use std::process::{Command, ExitCode};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use leasehold_core::conformance::FencedResource;
use leasehold_core::fence::FenceMode;
use leasehold_core::store::CasStore;
use leasehold_core::testing::process;
use leasehold_core::{ClientConfig, Error, FencingToken, LeaseClient};

use crate::child::Talker;
use tokio::time::Instant;

/// What the scenario needs from a store's test: the same store and resources in the
/// test process and in the worker process (both build it from the environment).
#[async_trait]
pub trait World: Send + Sync {
    /// The lease store.
    async fn store(&self) -> Arc<dyn CasStore>;

    /// The protected resource called `name`: in every process, the same one (created on
    /// its first fenced write).
    async fn resource(&self, name: &str) -> Box<dyn FencedResource>;

    /// Whether no write of the frozen process can be holding the store up right now
    /// (SQLite: no connection holds the file's write lock). Most stores finish a request
    /// whether or not its client is stopped: always true.
    async fn quiescent(&self) -> bool {
        true
    }
}

const ITEMS: u64 = 6;
const TTL: Duration = Duration::from_millis(600);
const WAIT: Duration = Duration::from_secs(30);

fn lease_name(suffix: &str) -> String {
    format!("frozen-holder/{suffix}")
}

fn item(suffix: &str, i: u64) -> String {
    format!("frozen-{suffix}-{i}")
}

fn value(token: FencingToken, i: u64, stale: bool) -> i64 {
    let v = token.get() * 100 + i + if stale { 50 } else { 0 };
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// The main of a store's `tests/frozen_holder.rs`: `open(run)` builds the store's
/// [`World`] from the environment, in the test and in the worker; `run` names this run
/// (the same in both processes), for a store that needs a place of its own (a file).
pub fn main<W, F>(open: impl Fn(&str) -> F) -> ExitCode
where
    W: World + 'static,
    F: Future<Output = W>,
{
    crate::one_test_main(
        "frozen_holder",
        |args| {
            let rt = crate::runtime();
            let suffix = args.first().cloned().unwrap_or_default();
            match rt.block_on(async { holder(&open(&suffix).await, &suffix).await }) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    println!("error {e}");
                    ExitCode::FAILURE
                }
            }
        },
        || async {
            let suffix = crate::unique_suffix();
            let world = open(&suffix).await;
            scenario(&world, &suffix).await;
        },
    )
}

/// The frozen holder (the worker process). Prints one line per step.
async fn holder(world: &impl World, suffix: &str) -> Result<(), String> {
    let config = ClientConfig::builder()
        .label("frozen-holder")
        .build()
        .map_err(|e| e.to_string())?;
    let client = LeaseClient::efficiency_only(world.store().await, config).map_err(|e| e.to_string())?;
    let lease = client
        .acquire_timeout(lease_name(suffix), TTL, WAIT)
        .await
        .map_err(|e| format!("acquire: {e}"))?;
    let token = lease.token();
    println!("token {token}");
    let mut resources = Vec::new();
    for i in 0..ITEMS {
        resources.push(world.resource(&item(suffix, i)).await);
    }
    for (i, r) in (0..ITEMS / 2).zip(&resources) {
        r.write(token, FenceMode::NotOlder, value(token, i, false))
            .await
            .map_err(|e| format!("write {i} while holding the lease: {e}"))?;
        println!("wrote {i}");
    }
    println!("ready");
    let mut line = String::new();
    tokio::task::spawn_blocking(move || std::io::stdin().read_line(&mut line))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("stdin: {e}"))?;
    // Resumed past its lease: a buggy holder ignores the loss signal and writes on.
    for (i, r) in (0..ITEMS).zip(&resources) {
        match r.write(token, FenceMode::NotOlder, value(token, i, true)).await {
            Ok(()) => println!("applied {i}"),
            Err(Error::FenceRejected { token: t, .. }) if t == token => println!("refused {i}"),
            Err(e) => println!("failed {i} {e}"),
        }
    }
    println!("done");
    Ok(())
}

/// The holder process: the test binary re-run with `--worker`.
fn spawn_worker(suffix: &str) -> Talker {
    let exe = std::env::current_exe().unwrap_or_else(|e| panic!("current_exe: {e}"));
    let mut cmd = Command::new(exe);
    cmd.args(["--worker", suffix]);
    Talker::spawn(cmd)
}

/// The token the holder printed.
fn token_of(holder: &Talker) -> FencingToken {
    holder
        .seen()
        .iter()
        .find_map(|l| l.strip_prefix("token "))
        .and_then(|t| t.parse().ok())
        .map(FencingToken::new)
        .unwrap_or_else(|| panic!("the holder printed no token: {:?}", holder.seen()))
}

/// Freezes `pid` at a moment the store says it holds nothing up.
async fn freeze_quiet(world: &impl World, pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        process::freeze(pid).await.unwrap_or_else(|e| panic!("freeze: {e}"));
        if world.quiescent().await {
            return;
        }
        process::resume(pid).unwrap_or_else(|e| panic!("resume: {e}"));
        assert!(Instant::now() < deadline, "the holder never stopped outside a write");
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
}

async fn scenario(world: &impl World, suffix: &str) {
    let mut a = spawn_worker(suffix);
    a.line(WAIT, |l| l == "ready").await;
    let stale = token_of(&a);
    let pid = a.pid();
    freeze_quiet(world, pid).await;

    // The successor: granted once the frozen holder's lease has expired, never before.
    let client = LeaseClient::efficiency_only(world.store().await, ClientConfig::default())
        .unwrap_or_else(|e| panic!("client: {e}"));
    let lease = client
        .acquire_timeout(lease_name(suffix), TTL, WAIT)
        .await
        .unwrap_or_else(|e| panic!("the successor was never granted the lease: {e}"));
    let token = lease.token();
    assert!(token > stale, "the successor's token {token} is not newer than {stale}");
    assert_eq!(
        process::process_state(pid),
        Some('T'),
        "the holder must still be frozen at the takeover"
    );
    let mut resources = Vec::new();
    for i in 0..ITEMS {
        let r = world.resource(&item(suffix, i)).await;
        r.write(token, FenceMode::NotOlder, value(token, i, false))
            .await
            .unwrap_or_else(|e| panic!("the successor's write of item {i} failed: {e}"));
        resources.push(r);
    }

    process::resume(pid).unwrap_or_else(|e| panic!("resume: {e}"));
    a.go_on();
    a.line(WAIT, |l| l == "done").await;
    a.exit_ok();
    let after: Vec<&String> = a
        .seen()
        .iter()
        .skip_while(|l| *l != "ready")
        .filter(|l| !matches!(l.as_str(), "ready" | "done"))
        .collect();
    let refused: Vec<String> = (0..ITEMS).map(|i| format!("refused {i}")).collect();
    assert_eq!(
        after,
        refused.iter().collect::<Vec<_>>(),
        "every write of the resumed holder (token {stale}) must be refused by the fence; output: {:?}",
        a.seen()
    );
    for (i, r) in (0..ITEMS).zip(&resources) {
        assert_eq!(
            r.read().await,
            Some((token, value(token, i, false))),
            "item {i} must hold the successor's write"
        );
    }
    lease.release().await.unwrap_or_else(|e| panic!("release: {e}"));
    println!("frozen holder token {stale}, successor token {token}: {ITEMS} stale writes refused");
}
