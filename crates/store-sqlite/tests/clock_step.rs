//! A process whose wall clock is stepped (libfaketime, `FAKETIME=+10m`) shares a SQLite
//! file with a holder that keeps renewing: it must be refused for as long as the holder
//! renews (no early takeover), and granted the next token once the holder releases.
//!
//! A plain `main` (harness = false): the binary re-executes itself with `--worker` as
//! the stepped process, with libfaketime preloaded (`scripts/install-deps.sh` installs
//! it). Two modes: a pure wall-clock step (`FAKETIME_DONT_FAKE_MONOTONIC=1`, what an NTP
//! step does), and libfaketime's default, which also offsets the monotonic and boot
//! clocks as libc reports them.
#![allow(missing_docs)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use leasehold_core::{AcquireOutcome, LeaseClient};
use leasehold_sql::HostClock;
use leasehold_sqlite::{SqliteConfig, SqliteStore};
use leasehold_testkit::child::Talker;

const TTL: Duration = Duration::from_millis(1500);
/// How long the stepped process keeps trying while the holder renews: several TTLs.
const WATCH: Duration = Duration::from_millis(4500);
const TRY_EVERY: Duration = Duration::from_millis(100);
const LINE_WAIT: Duration = Duration::from_secs(30);
const STEP: &str = "+10m";
const STEP_MS: i64 = 600_000;

fn wall_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn libfaketime() -> PathBuf {
    if let Ok(p) = std::env::var("LEASEHOLD_LIBFAKETIME") {
        return PathBuf::from(p);
    }
    let found = std::fs::read_dir("/usr/lib")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("faketime/libfaketimeMT.so.1"))
        .find(|p| p.is_file());
    found.unwrap_or_else(|| {
        panic!("libfaketimeMT.so.1 not found under /usr/lib/*/faketime: run scripts/install-deps.sh (or set LEASEHOLD_LIBFAKETIME)")
    })
}

/// The stepped process: reports its clock, tries `name` every [`TRY_EVERY`] for
/// [`WATCH`] (stopping at a grant, which it releases), then, told to go on, tries once
/// more. One line per step.
async fn worker(path: &Path, name: &str) -> Result<(), String> {
    println!("wall {}", wall_ms());
    println!("boot {}", HostClock::get().map_err(|e| e.to_string())?.now_ms());
    let store = SqliteStore::open_file(path, SqliteConfig::new())
        .await
        .map_err(|e| format!("open: {e}"))?;
    let client = LeaseClient::new(store);
    let until = Instant::now() + WATCH;
    while Instant::now() < until {
        match client.try_acquire(name, TTL).await.map_err(|e| format!("try: {e}"))? {
            AcquireOutcome::Held { token, .. } => println!("held {token}"),
            AcquireOutcome::Granted(lease) => {
                println!("granted {}", lease.token());
                lease.release().await.map_err(|e| format!("release: {e}"))?;
                break;
            }
        }
        tokio::time::sleep(TRY_EVERY).await;
    }
    println!("watched");
    let mut line = String::new();
    std::io::stdin()
        .read_line(&mut line)
        .map_err(|e| format!("stdin: {e}"))?;
    match client.try_acquire(name, TTL).await.map_err(|e| format!("try: {e}"))? {
        AcquireOutcome::Held { token, .. } => println!("after release held {token}"),
        AcquireOutcome::Granted(lease) => {
            println!("after release granted {}", lease.token());
            lease.release().await.map_err(|e| format!("release: {e}"))?;
        }
    }
    println!("done");
    Ok(())
}

/// The stepped process: this binary re-run with `--worker`, libfaketime preloaded.
fn spawn_stepped(path: &Path, name: &str, fake_monotonic: bool) -> Talker {
    let exe = std::env::current_exe().unwrap_or_else(|e| panic!("current_exe: {e}"));
    let mut cmd = Command::new(exe);
    cmd.args(["--worker"])
        .arg(path)
        .arg(name)
        .env("LD_PRELOAD", libfaketime())
        .env("FAKETIME", STEP)
        .env_remove("FAKETIME_DONT_FAKE_MONOTONIC");
    if !fake_monotonic {
        cmd.env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
    }
    Talker::spawn(cmd)
}

/// The value of the stepped process's next line `<prefix><number>`.
async fn number(b: &mut Talker, prefix: &str) -> i64 {
    b.line(LINE_WAIT, |l| l.starts_with(prefix))
        .await
        .trim_start_matches(prefix)
        .parse()
        .unwrap_or_else(|e| panic!("{prefix}: {e}"))
}

async fn case(fake_monotonic: bool) {
    let mode = if fake_monotonic {
        "FAKETIME=+10m (monotonic faked too)"
    } else {
        "FAKETIME=+10m FAKETIME_DONT_FAKE_MONOTONIC=1"
    };
    let db = common::db_path("clock-step");
    let store = SqliteStore::open_file(db.path(), SqliteConfig::new())
        .await
        .unwrap_or_else(|e| panic!("open: {e}"));
    let name = format!("clock-step/{}", leasehold_testkit::unique_suffix());
    let holder = LeaseClient::new(store);
    let lease = leasehold_testkit::granted(&holder, &name, TTL, "the holder").await;
    let token = lease.token();

    let mut b = spawn_stepped(db.path(), &name, fake_monotonic);
    let wall = number(&mut b, "wall ").await;
    let ahead = wall - wall_ms();
    assert!(
        (STEP_MS - 60_000..=STEP_MS + 60_000).contains(&ahead),
        "{mode}: the worker's wall clock is {ahead} ms ahead, not {STEP}: libfaketime did not load"
    );
    // The store's boot clock (CLOCK_BOOTTIME through the vDSO) is the host's in the
    // stepped process too, in either mode.
    let boot = number(&mut b, "boot ").await;
    let skew = boot - HostClock::get().expect("host clock").now_ms();
    assert!(
        skew.abs() < 5_000,
        "{mode}: the worker's boot clock is {skew} ms off this process's: it is faked"
    );
    b.line(LINE_WAIT, |l| l == "watched").await;
    let tries: Vec<&String> = b
        .seen()
        .iter()
        .filter(|l| l.starts_with("held ") || l.starts_with("granted "))
        .collect();
    println!(
        "{mode}: {} tries while the holder renewed, first {:?}",
        tries.len(),
        tries.first()
    );
    let held = format!("held {token}");
    assert!(
        tries.len() >= 10 && tries.iter().all(|l| **l == held),
        "{mode}: the stepped process must be refused while the holder (token {token}) renews; output: {:?}",
        b.seen()
    );
    assert!(
        lease.is_valid() && lease.loss_cause().is_none(),
        "{mode}: the holder lost its lease"
    );

    lease.release().await.unwrap_or_else(|e| panic!("release: {e}"));
    b.go_on();
    let after = b.line(LINE_WAIT, |l| l.starts_with("after release ")).await;
    b.line(LINE_WAIT, |l| l == "done").await;
    b.exit_ok();
    assert_eq!(
        after,
        format!("after release granted {}", token.next()),
        "{mode}: after the release the stepped process gets the next token; output: {:?}",
        b.seen()
    );
    println!("{mode}: no early takeover; after the release: {after}");
}

fn main() -> ExitCode {
    leasehold_testkit::one_test_main(
        "clock_step",
        |args| {
            let rt = leasehold_testkit::runtime();
            let (Some(path), Some(name)) = (args.first(), args.get(1)) else {
                println!("error: usage --worker PATH NAME");
                return ExitCode::FAILURE;
            };
            match rt.block_on(worker(Path::new(path), name)) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    println!("error {e}");
                    ExitCode::FAILURE
                }
            }
        },
        || async {
            case(false).await;
            case(true).await;
        },
    )
}
