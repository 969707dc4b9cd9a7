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
//!
//! The scenario runs twice: once on a lease, and once on both permits of a fenced
//! semaphore of 2 ([`leasehold_core::Semaphore`]), each item guarded by the token of
//! one slot (item `i` by slot `i % 2`): the frozen permit holder is refused by its
//! slot's fence exactly as a frozen lease holder is.

use std::future::Future;
use std::process::{Command, ExitCode};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use leasehold_core::conformance::FencedResource;
use leasehold_core::fence::FenceMode;
use leasehold_core::store::CasStore;
use leasehold_core::testing::process;
use leasehold_core::{ClientConfig, Error, FencingToken, Lease, LeaseClient, Semaphore};

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

/// What the frozen holder holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Held {
    /// One lease.
    Lease,
    /// Both permits of a semaphore of 2.
    Permits,
}

impl Held {
    fn arg(self) -> &'static str {
        match self {
            Self::Lease => "lease",
            Self::Permits => "permits",
        }
    }

    /// The lease's or the semaphore's name, and the items' tag.
    fn tag(self, suffix: &str) -> String {
        match self {
            Self::Lease => suffix.to_owned(),
            Self::Permits => format!("{suffix}-sem"),
        }
    }

    /// Takes what this holds on `client`: the tokens by slot (one for the lease), and
    /// the guards.
    async fn take(self, client: &LeaseClient, suffix: &str) -> Result<(Vec<FencingToken>, Vec<Lease>), Error> {
        let name = lease_name(&self.tag(suffix));
        match self {
            Self::Lease => {
                let lease = client.acquire_timeout(name, TTL, WAIT).await?;
                Ok((vec![lease.token()], vec![lease]))
            }
            Self::Permits => {
                let semaphore = Semaphore::new(client.clone(), name, 2)?;
                let mut tokens = vec![FencingToken::ZERO; 2];
                let mut guards = Vec::new();
                for _ in 0..2 {
                    let permit = semaphore.acquire_timeout(TTL, WAIT).await?;
                    let slot = usize::try_from(permit.slot()).unwrap_or(usize::MAX);
                    *tokens
                        .get_mut(slot)
                        .ok_or_else(|| Error::invalid("slot", format!("{slot} of a semaphore of 2")))? = permit.token();
                    guards.push(permit.into_lease());
                }
                Ok((tokens, guards))
            }
        }
    }
}

fn lease_name(tag: &str) -> String {
    format!("frozen-holder/{tag}")
}

fn item(tag: &str, i: u64) -> String {
    format!("frozen-{tag}-{i}")
}

/// The token guarding item `i`: its slot's (`i % slots`).
fn token_for(tokens: &[FencingToken], i: u64) -> FencingToken {
    let n = u64::try_from(tokens.len()).unwrap_or(1).max(1);
    tokens
        .get(usize::try_from(i % n).unwrap_or(0))
        .copied()
        .unwrap_or(FencingToken::ZERO)
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
            let held = if args.get(1).map(String::as_str) == Some(Held::Permits.arg()) {
                Held::Permits
            } else {
                Held::Lease
            };
            match rt.block_on(async { holder(&open(&suffix).await, &suffix, held).await }) {
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
            scenario(&world, &suffix, Held::Lease).await;
            scenario(&world, &suffix, Held::Permits).await;
        },
    )
}

/// The frozen holder (the worker process). Prints one line per step.
async fn holder(world: &impl World, suffix: &str, held: Held) -> Result<(), String> {
    let config = ClientConfig::builder()
        .label("frozen-holder")
        .build()
        .map_err(|e| e.to_string())?;
    let client = LeaseClient::efficiency_only(world.store().await, config).map_err(|e| e.to_string())?;
    let (tokens, _guards) = held.take(&client, suffix).await.map_err(|e| format!("acquire: {e}"))?;
    for token in &tokens {
        println!("token {token}");
    }
    let tag = held.tag(suffix);
    let mut resources = Vec::new();
    for i in 0..ITEMS {
        resources.push(world.resource(&item(&tag, i)).await);
    }
    for (i, r) in (0..ITEMS / 2).zip(&resources) {
        let token = token_for(&tokens, i);
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
        let token = token_for(&tokens, i);
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
fn spawn_worker(suffix: &str, held: Held) -> Talker {
    let exe = std::env::current_exe().unwrap_or_else(|e| panic!("current_exe: {e}"));
    let mut cmd = Command::new(exe);
    cmd.args(["--worker", suffix, held.arg()]);
    Talker::spawn(cmd)
}

/// The tokens the holder printed, by slot.
fn tokens_of(holder: &Talker) -> Vec<FencingToken> {
    let tokens: Vec<FencingToken> = holder
        .seen()
        .iter()
        .filter_map(|l| l.strip_prefix("token "))
        .filter_map(|t| t.parse().ok())
        .map(FencingToken::new)
        .collect();
    assert!(!tokens.is_empty(), "the holder printed no token: {:?}", holder.seen());
    tokens
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

async fn scenario(world: &impl World, suffix: &str, held: Held) {
    let mut a = spawn_worker(suffix, held);
    a.line(WAIT, |l| l == "ready").await;
    let stale = tokens_of(&a);
    let pid = a.pid();
    freeze_quiet(world, pid).await;

    // The successor: granted once the frozen holder's lease (or permits) expired, never
    // before.
    let client = LeaseClient::efficiency_only(world.store().await, ClientConfig::default())
        .unwrap_or_else(|e| panic!("client: {e}"));
    let (tokens, guards) = held
        .take(&client, suffix)
        .await
        .unwrap_or_else(|e| panic!("the successor was never granted the {held:?}: {e}"));
    assert_eq!(
        tokens.len(),
        stale.len(),
        "the successor holds other slots than the frozen holder"
    );
    for (slot, (token, old)) in tokens.iter().zip(&stale).enumerate() {
        assert!(
            token > old,
            "slot {slot}: the successor's token {token} is not newer than {old}"
        );
    }
    let tag = held.tag(suffix);
    assert_eq!(
        process::process_state(pid),
        Some('T'),
        "the holder must still be frozen at the takeover"
    );
    let mut resources = Vec::new();
    for i in 0..ITEMS {
        let r = world.resource(&item(&tag, i)).await;
        let token = token_for(&tokens, i);
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
        "every write of the resumed holder (tokens {stale:?}, {held:?}) must be refused by the fence; output: {:?}",
        a.seen()
    );
    for (i, r) in (0..ITEMS).zip(&resources) {
        let token = token_for(&tokens, i);
        assert_eq!(
            r.read().await,
            Some((token, value(token, i, false))),
            "item {i} must hold the successor's write"
        );
    }
    for guard in guards {
        guard.release().await.unwrap_or_else(|e| panic!("release: {e}"));
    }
    println!("{held:?}: frozen holder tokens {stale:?}, successor tokens {tokens:?}: {ITEMS} stale writes refused");
}
