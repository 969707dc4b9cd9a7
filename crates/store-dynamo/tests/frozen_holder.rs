//! The frozen-holder test with real processes (rule 4 of docs/DESIGN.md).
//!
//! This binary is its own worker: run with `LEASEHOLD_DYNAMO_FROZEN_WORKER` set, it
//! acquires the lease and appends entries to a ledger item with fenced `UpdateItem`s
//! in a loop, *without* checking its lease (a holder that was paused between its check
//! and its write). The test freezes it with SIGSTOP past its TTL, takes the lease over
//! from this process, writes with the new token, resumes the worker with SIGCONT, and
//! reads the truth from the table: every entry the old holder wrote precedes the new
//! holder's, none is lost or duplicated, and every write it attempted after the
//! takeover was refused by the fence.

mod common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_sdk_dynamodb::operation::update_item::UpdateItemOutput;
use aws_sdk_dynamodb::types::AttributeValue;
use leasehold_core::fence::FencedOutcome;
use leasehold_core::testing::process::{freeze, kill9, poll, process_state, resume};
use leasehold_core::{ClientConfig, Error, FencingToken, LeaseClient, LeaseName, store::CasStore};
use leasehold_dynamodb::{DynamoStore, ItemFence};
use tokio::time::Instant;

const WORKER_ENV: &str = "LEASEHOLD_DYNAMO_FROZEN_WORKER";
const LEASE_TABLE_ENV: &str = "LEASEHOLD_DYNAMO_FROZEN_LEASE_TABLE";
const LEDGER_TABLE_ENV: &str = "LEASEHOLD_DYNAMO_FROZEN_LEDGER_TABLE";
const LEASE_NAME_ENV: &str = "LEASEHOLD_DYNAMO_FROZEN_LEASE_NAME";
const TTL: Duration = Duration::from_millis(1000);
/// The worker stops after this many refused writes.
const REJECTIONS_TO_STOP: u32 = 5;
const LEDGER_KEY: &str = "ledger";

fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("frozen_holder: test");
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    if std::env::var_os(WORKER_ENV).is_some() {
        rt.block_on(worker());
        return;
    }
    println!("running 1 test");
    rt.block_on(frozen_holder_is_fenced_out());
    println!("test frozen_holder_is_fenced_out ... ok");
    println!("\ntest result: ok. 1 passed; 0 failed");
}

fn env(var: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| panic!("worker: {var} not set"))
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// Appends `entry` to the ledger's list, guarded by `token`.
async fn append(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    token: FencingToken,
    entry: &str,
) -> leasehold_core::Result<FencedOutcome<UpdateItemOutput, Option<HashMap<String, AttributeValue>>>> {
    let req = client
        .update_item()
        .table_name(table)
        .key("id", AttributeValue::S(LEDGER_KEY.into()))
        .update_expression("SET #e = list_append(if_not_exists(#e, :empty), :entry)")
        .expression_attribute_names("#e", "entries")
        .expression_attribute_values(":empty", AttributeValue::L(Vec::new()))
        .expression_attribute_values(":entry", AttributeValue::L(vec![AttributeValue::S(entry.into())]));
    ItemFence::new("mark", token)?.update(req).await
}

async fn worker() {
    let client = common::client(None);
    let ledger = env(LEDGER_TABLE_ENV);
    let store = DynamoStore::new(
        client.clone(),
        leasehold_dynamodb::DynamoConfig::new(env(LEASE_TABLE_ENV)).expect("store"),
    );
    let config = ClientConfig::builder()
        .label("frozen-worker")
        .build()
        .expect("client config");
    let leases = LeaseClient::with_config(store, config).expect("client");
    let lease = leases
        .acquire_timeout(env(LEASE_NAME_ENV), TTL, Duration::from_secs(10))
        .await
        .expect("worker acquire");
    let token = lease.token();
    say(&format!("granted {token}"));
    let lost = lease.cancellation();
    tokio::spawn(async move {
        lost.cancelled().await;
        say("lost");
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut rejected = 0;
    let mut seq = 0u64;
    while rejected < REJECTIONS_TO_STOP && Instant::now() < deadline {
        seq += 1;
        // Deliberately no `lease.is_valid()` check: the fence must stop this writer.
        match append(&client, &ledger, token, &format!("t{token}-w{seq}")).await {
            Ok(FencedOutcome::Applied(_)) => say(&format!("ok {seq}")),
            Ok(FencedOutcome::ConditionFailed(_)) => say(&format!("condition {seq}")),
            Err(Error::FenceRejected { .. }) => {
                rejected += 1;
                say(&format!("rejected {seq}"));
            }
            Err(e) => say(&format!("error {seq} {e}")),
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    say("done");
    drop(lease);
}

/// Kills the worker if the test fails before it exits.
struct Worker {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Worker {
    fn lines(&self) -> Vec<String> {
        self.lines.lock().expect("lines").clone()
    }
    fn has(&self, pred: impl Fn(&str) -> bool) -> usize {
        self.lines().iter().filter(|l| pred(l)).count()
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = resume(self.child.id());
            let _ = kill9(self.child.id());
            let _ = self.child.wait();
        }
    }
}

fn spawn_worker(lease_table: &str, ledger: &str, name: &str) -> Worker {
    let mut child = Command::new(std::env::current_exe().expect("current exe"))
        .env(WORKER_ENV, "1")
        .env(LEASE_TABLE_ENV, lease_table)
        .env(LEDGER_TABLE_ENV, ledger)
        .env(LEASE_NAME_ENV, name)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn worker");
    let stdout = child.stdout.take().expect("stdout");
    let lines = Arc::new(Mutex::new(Vec::new()));
    let sink = lines.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            sink.lock().expect("lines").push(line);
        }
    });
    Worker { child, lines }
}

fn seq_of(line: &str, prefix: &str) -> Option<u64> {
    line.strip_prefix(prefix).and_then(|s| s.trim().parse().ok())
}

async fn frozen_holder_is_fenced_out() {
    let admin = common::client(None);
    let lease_table = common::unique_table("frozen-leases");
    let ledger = common::unique_table("frozen-ledger");
    let store = common::lease_store(admin.clone(), &lease_table).await;
    common::create_resource_table(&admin, &ledger).await;
    let name = format!("frozen/{}", std::process::id());

    let mut worker = spawn_worker(&lease_table, &ledger, &name);
    let pid = worker.child.id();
    assert!(
        poll(Duration::from_secs(20), || worker.has(|l| l.starts_with("ok ")) >= 3).await,
        "the worker did not acquire and write: {:?}",
        worker.lines()
    );
    assert_eq!(worker.has(|l| l == "granted 1"), 1, "{:?}", worker.lines());

    freeze(pid).await.expect("freeze worker");
    let frozen_at = Instant::now();
    let lines_before = worker.lines().len();

    // Take over from this process: observation needs the version unchanged for a TTL.
    let b = LeaseClient::new(store.clone());
    let lb = b
        .acquire_timeout(&name, TTL, Duration::from_secs(15))
        .await
        .expect("takeover");
    assert_eq!(lb.token(), FencingToken::new(2));
    assert!(
        frozen_at.elapsed() >= TTL,
        "took over only {:?} after the freeze",
        frozen_at.elapsed()
    );
    assert_eq!(process_state(pid), Some('T'), "the worker must still be frozen");
    for i in 1..=3 {
        match append(&admin, &ledger, lb.token(), &format!("t2-b{i}")).await {
            Ok(FencedOutcome::Applied(_)) => {}
            other => panic!("the new holder's write {i} failed: {other:?}"),
        }
    }

    resume(pid).expect("resume worker");
    assert!(
        poll(Duration::from_secs(30), || worker.has(|l| l == "done") == 1).await,
        "the worker did not finish: {:?}",
        worker.lines()
    );
    let exit_deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = worker.child.try_wait().expect("wait") {
            break status;
        }
        assert!(Instant::now() < exit_deadline, "the worker did not exit");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(status.success(), "worker exit: {status}");
    let lines = worker.lines();

    // The truth, from the table.
    let item = common::get_item(&admin, &ledger, ("id", LEDGER_KEY))
        .await
        .expect("ledger");
    let entries: Vec<String> = match item.get("entries") {
        Some(AttributeValue::L(l)) => l
            .iter()
            .map(|v| match v {
                AttributeValue::S(s) => s.clone(),
                other => panic!("entry {other:?}"),
            })
            .collect(),
        other => panic!("entries {other:?}"),
    };
    assert_eq!(
        item.get("mark"),
        Some(&AttributeValue::N("2".into())),
        "high-water mark"
    );
    let mut unique = entries.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), entries.len(), "duplicated entries: {entries:?}");
    let first_new = entries
        .iter()
        .position(|e| e.starts_with("t2-"))
        .expect("the new holder's entries");
    assert!(
        entries[..first_new].iter().all(|e| e.starts_with("t1-w")),
        "{entries:?}"
    );
    assert_eq!(
        entries[first_new..],
        ["t2-b1", "t2-b2", "t2-b3"],
        "an old-holder write landed after the takeover, or a new one was lost: {entries:?}"
    );
    // The worker's own reports agree with the table: each write it saw applied is
    // there once, each refused one is absent, and it kept trying after it woke.
    for l in &lines {
        if let Some(k) = seq_of(l, "ok ") {
            let e = format!("t1-w{k}");
            assert_eq!(entries.iter().filter(|x| **x == e).count(), 1, "{e} reported ok");
        }
        if let Some(k) = seq_of(l, "rejected ") {
            let e = format!("t1-w{k}");
            assert!(!entries.contains(&e), "{e} was refused but is in the ledger");
        }
    }
    let after_resume = &lines[lines_before..];
    let refused = after_resume.iter().filter(|l| l.starts_with("rejected ")).count();
    assert!(refused >= 5, "the woken holder's writes: {after_resume:?}");
    let applied_after = after_resume.iter().filter(|l| l.starts_with("ok ")).count();
    assert!(
        applied_after <= 1,
        "more than the one write in flight at the freeze applied after waking: {after_resume:?}"
    );

    // The lease table names the new holder.
    let truth = store
        .read(&LeaseName::new(&name).expect("name"))
        .await
        .expect("read")
        .expect("record");
    assert_eq!(truth.record.holder.as_ref(), Some(lb.holder()));
    assert_eq!(truth.record.token, FencingToken::new(2));
    eprintln!(
        "frozen holder: {} old-holder entries before the takeover, {} refused after waking; worker said {:?}",
        first_new, refused, after_resume
    );
    lb.release().await.expect("release");
    drop(worker);
    common::delete_table(&admin, &lease_table).await;
    common::delete_table(&admin, &ledger).await;
}
