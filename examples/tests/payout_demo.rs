//! Runs the flagship payout demo as a user would, on the embedded SQLite store and on
//! Postgres (`LEASEHOLD_PG_URL`), and checks the summary line it computes from the
//! database; and once without the fence, where the same run must report the duplicate.
#![allow(missing_docs)]

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const DEMO: &str = env!("CARGO_BIN_EXE_payout-demo");

/// Runs the demo with `args`, killing it if it takes longer than a minute.
fn run(args: &[&str]) -> Output {
    let child = Command::new(DEMO)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {DEMO}: {e}"));
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let started = Instant::now();
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(out) => {
            let out = out.unwrap_or_else(|e| panic!("wait for the demo: {e}"));
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "the demo took {:?}",
                started.elapsed()
            );
            out
        }
        Err(_) => {
            let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).status();
            panic!("the demo did not finish within a minute");
        }
    }
}

/// The summary line's four numbers, checking it is the last line and well formed.
fn summary(out: &Output) -> [i64; 4] {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    let rest = last.strip_prefix("summary: ").unwrap_or_else(|| {
        panic!(
            "last line is not the summary: {stdout}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let keys = [
        "payouts_applied",
        "stale_writes_refused",
        "duplicate_payouts",
        "lost_payouts",
    ];
    let mut values = [0i64; 4];
    let fields: Vec<&str> = rest.split(' ').collect();
    assert_eq!(fields.len(), 4, "{last}");
    for (i, (field, key)) in fields.iter().zip(keys).enumerate() {
        let (k, v) = field
            .split_once('=')
            .unwrap_or_else(|| panic!("bad field {field:?} in {last}"));
        assert_eq!(k, key, "{last}");
        values[i] = v.parse().unwrap_or_else(|e| panic!("{field}: {e}"));
    }
    values
}

fn assert_fenced_run(out: &Output) {
    let [applied, refused, duplicates, lost] = summary(out);
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(
        (applied, duplicates, lost),
        (20, 0, 0),
        "every payout paid exactly once"
    );
    assert!(refused > 0, "the frozen holder's stale write must be refused");
}

#[test]
fn payout_demo_on_embedded_sqlite() {
    assert_fenced_run(&run(&[]));
}

#[test]
fn payout_demo_on_postgres() {
    let url = std::env::var("LEASEHOLD_PG_URL").unwrap_or_else(|_| {
        panic!("LEASEHOLD_PG_URL is not set: run `scripts/stores.sh start postgres` and `eval \"$(scripts/stores.sh env)\"`")
    });
    assert_fenced_run(&run(&["--store", &url]));
}

#[test]
fn without_the_fence_the_demo_reports_the_duplicate_and_fails() {
    let out = run(&["--unfenced"]);
    let [applied, refused, duplicates, lost] = summary(&out);
    assert_eq!(out.status.code(), Some(1), "an unfenced run must fail");
    assert_eq!((applied, refused, duplicates, lost), (21, 0, 1, 0));
}
