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

use std::io::{BufRead, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitCode, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use leasehold_core::{AcquireOutcome, LeaseClient};
use leasehold_sql::HostClock;
use leasehold_sqlite::{SqliteConfig, SqliteStore};

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

/// The stepped process, killed if the test fails half-way.
struct Stepped {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    seen: Vec<String>,
}

impl Drop for Stepped {
    fn drop(&mut self) {
        // Only a child not yet waited on: a reaped pid may already be someone else's.
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

impl Stepped {
    fn spawn(path: &Path, name: &str, fake_monotonic: bool) -> Self {
        let exe = std::env::current_exe().unwrap_or_else(|e| panic!("current_exe: {e}"));
        let mut cmd = Command::new(exe);
        cmd.args(["--worker"])
            .arg(path)
            .arg(name)
            .env("LD_PRELOAD", libfaketime())
            .env("FAKETIME", STEP)
            .env_remove("FAKETIME_DONT_FAKE_MONOTONIC")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped());
        if !fake_monotonic {
            cmd.env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
        }
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("spawn the stepped process: {e}"));
        let stdout = child.stdout.take().unwrap_or_else(|| panic!("worker stdout"));
        let stdin = child.stdin.take();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self {
            child,
            stdin,
            lines,
            seen: Vec::new(),
        }
    }

    /// Waits (at most [`LINE_WAIT`]) for a line starting with `prefix`; returns it.
    fn wait_for(&mut self, prefix: &str) -> String {
        let deadline = Instant::now() + LINE_WAIT;
        loop {
            match self
                .lines
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if line.starts_with(prefix) {
                        return line;
                    }
                }
                Err(RecvTimeoutError::Disconnected) => {
                    panic!("the stepped process exited before {prefix:?}; output: {:?}", self.seen)
                }
                Err(RecvTimeoutError::Timeout) => panic!("timed out waiting for {prefix:?}; output: {:?}", self.seen),
            }
        }
    }

    fn go_on(&mut self) {
        let mut stdin = self.stdin.take().unwrap_or_else(|| panic!("worker stdin"));
        stdin
            .write_all(b"go\n")
            .unwrap_or_else(|e| panic!("tell the stepped process to go on: {e}"));
    }

    fn exit_ok(&mut self) {
        let status = self.child.wait().unwrap_or_else(|e| panic!("wait: {e}"));
        assert!(
            status.success(),
            "the stepped process failed ({status}); output: {:?}",
            self.seen
        );
    }
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

    let mut b = Stepped::spawn(db.path(), &name, fake_monotonic);
    let wall: i64 = b
        .wait_for("wall ")
        .trim_start_matches("wall ")
        .parse()
        .unwrap_or_else(|e| panic!("wall: {e}"));
    let ahead = wall - wall_ms();
    assert!(
        (STEP_MS - 60_000..=STEP_MS + 60_000).contains(&ahead),
        "{mode}: the worker's wall clock is {ahead} ms ahead, not {STEP}: libfaketime did not load"
    );
    // The store's boot clock (CLOCK_BOOTTIME through the vDSO) is the host's in the
    // stepped process too, in either mode.
    let boot: i64 = b
        .wait_for("boot ")
        .trim_start_matches("boot ")
        .parse()
        .unwrap_or_else(|e| panic!("boot: {e}"));
    let skew = boot - HostClock::get().expect("host clock").now_ms();
    assert!(
        skew.abs() < 5_000,
        "{mode}: the worker's boot clock is {skew} ms off this process's: it is faked"
    );
    b.wait_for("watched");
    let tries: Vec<&String> = b
        .seen
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
        b.seen
    );
    assert!(
        lease.is_valid() && lease.loss_cause().is_none(),
        "{mode}: the holder lost its lease"
    );

    lease.release().await.unwrap_or_else(|e| panic!("release: {e}"));
    b.go_on();
    let after = b.wait_for("after release ");
    b.wait_for("done");
    b.exit_ok();
    assert_eq!(
        after,
        format!("after release granted {}", token.next()),
        "{mode}: after the release the stepped process gets the next token; output: {:?}",
        b.seen
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
