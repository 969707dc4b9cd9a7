//! The frozen holder, with real processes: a worker process holds the lease and commits
//! to a fenced manifest in a loop; the test SIGSTOPs it between reading the manifest and
//! committing, past its TTL; this process takes the lease over, raises the fence and
//! commits; then the worker is resumed. Its commit, based on the manifest it read before
//! the pause, must be refused by S3 (412 on the ETag) and reported as `FenceRejected`,
//! and the manifest in the bucket must show every tenure's commits exactly once, in
//! order, with nothing from the old holder after the takeover.
//!
//! Against the shared moto (`LEASEHOLD_MOTO_ENDPOINT`): no two writers race on one ETag
//! here (the stale writer's ETag is long gone), so moto's non-atomic conditional PUT
//! does not matter.
#![allow(missing_docs)]

mod common;
#[path = "frozen_holder/worker.rs"]
mod worker;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{create_bucket, endpoint, unique_bucket, wait_until};
use leasehold_core::testing::process::{freeze, kill9, process_state, resume};
use leasehold_core::{FencingToken, LeaseClient, LeaseName, store::CasStore};
use leasehold_s3::{S3Config, S3Store};
use tokio::time::Instant;

const TTL: Duration = Duration::from_millis(1000);
const LEASE: &str = "jobs/frozen-holder";
const MANIFEST: &str = "tables/frozen/_manifest";

/// The worker process; killed if the test ends early.
struct Worker {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Worker {
    fn spawn(bucket: &str) -> Self {
        let log = std::fs::File::create(format!("{}/frozen-worker.log", common::own_dir())).expect("log");
        let mut child = Command::new(std::env::current_exe().expect("this test binary"))
            .arg("--worker")
            .env("LEASEHOLD_MOTO_ENDPOINT", endpoint())
            .env("LH_S3_BUCKET", bucket)
            .env("LH_S3_PREFIX", "leases")
            .env("LH_S3_LEASE", LEASE)
            .env("LH_S3_MANIFEST", MANIFEST)
            .env("LH_S3_LABEL", "old")
            .env("LH_S3_TTL_MS", TTL.as_millis().to_string())
            .env("LH_S3_PAUSE_MS", "400")
            .env("LH_S3_RUN_MS", "30000")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .expect("spawn worker");
        let stdout = child.stdout.take().expect("stdout");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                sink.lock().expect("lock").push(line);
            }
        });
        Self { child, lines }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn lines(&self) -> Vec<String> {
        self.lines.lock().expect("lock").clone()
    }

    fn count(&self, prefix: &str) -> usize {
        self.lines().iter().filter(|l| l.starts_with(prefix)).count()
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = resume(self.pid());
            let _ = kill9(self.pid());
        }
        let _ = self.child.wait();
    }
}

/// `(label, token, seq)` of each manifest line.
fn entries(data: &[u8]) -> Vec<(String, u64, u64)> {
    String::from_utf8(data.to_vec())
        .expect("utf8 manifest")
        .lines()
        .map(|l| {
            let mut parts = l.split(' ');
            let label = parts.next().expect("label").to_owned();
            let token = parts.next().expect("token").parse().expect("token");
            let seq = parts.next().expect("seq").parse().expect("seq");
            (label, token, seq)
        })
        .collect()
}

fn seq_of(line: &str) -> u64 {
    line.split(' ').nth(1).expect("seq").parse().expect("seq")
}

async fn frozen_holder_commit_is_refused_after_takeover() {
    let client = leasehold_s3::local_client(&endpoint());
    let bucket = unique_bucket("frozen");
    create_bucket(&client, &bucket).await;
    let store = S3Store::new(client, S3Config::new(&bucket, "leases").expect("config"));
    let manifest = store.manifest(MANIFEST).expect("manifest");

    let mut worker = Worker::spawn(&bucket);
    wait_until("the worker's grant and three commits", Duration::from_secs(20), || {
        worker.count("COMMITTED") >= 3 || worker.count("ERROR") > 0
    })
    .await;
    assert_eq!(worker.count("ERROR"), 0, "worker failed: {:?}", worker.lines());
    assert_eq!(worker.lines().first().map(String::as_str), Some("GRANTED 1"));

    // Freeze it right after it read the manifest, before it commits.
    let seen = worker.lines().len();
    wait_until("the worker preparing a commit", Duration::from_secs(5), || {
        worker.lines()[seen..].iter().any(|l| l.starts_with("PREPARED"))
    })
    .await;
    freeze(worker.pid()).await.expect("freeze");
    let frozen_at = Instant::now();
    let at_freeze = worker.lines();
    let prepared = at_freeze
        .iter()
        .rev()
        .find(|l| l.starts_with("PREPARED"))
        .expect("prepared line")
        .clone();
    let stale_seq = seq_of(&prepared);
    assert!(
        prepared.ends_with(" 1"),
        "the frozen commit is based on the old tenure: {prepared}"
    );
    assert!(
        !at_freeze.contains(&format!("COMMITTED {stale_seq}")),
        "frozen too late: {at_freeze:?}"
    );

    // Take over: only after watching the frozen holder's record for a whole TTL.
    let leases = LeaseClient::new(store.clone());
    let lease = leases
        .acquire_timeout(LEASE, TTL, Duration::from_secs(15))
        .await
        .expect("takeover");
    let waited = frozen_at.elapsed();
    assert_eq!(lease.token(), FencingToken::new(2), "a takeover takes the next token");
    assert!(waited >= TTL, "took over {waited:?} after the freeze, before a TTL");
    assert_eq!(process_state(worker.pid()), Some('T'), "the old holder is still frozen");

    // The new holder raises the fence and commits.
    let mut base = manifest.fence(lease.token()).await.expect("fence");
    for seq in 0..3 {
        let mut data = base.data.clone();
        data.extend_from_slice(format!("new 2 {seq}\n").as_bytes());
        base = match manifest.commit(lease.token(), Some(&base), data).await.expect("commit") {
            leasehold_core::fence::FencedOutcome::Applied(m) => m,
            leasehold_core::fence::FencedOutcome::ConditionFailed(c) => panic!("new holder conflicted with {c:?}"),
        };
    }

    // Wake the old holder: its commit, on the manifest it read before the pause, must fail.
    resume(worker.pid()).expect("resume");
    let deadline = Instant::now() + Duration::from_secs(15);
    let status = loop {
        if let Some(status) = worker.child.try_wait().expect("wait") {
            break status;
        }
        assert!(Instant::now() < deadline, "worker still running: {:?}", worker.lines());
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let lines = worker.lines();
    assert!(status.success(), "worker exit {status}: {lines:?}");
    assert_eq!(
        lines.last().map(String::as_str),
        Some(format!("REFUSED {stale_seq}").as_str()),
        "the stale commit, prepared on token 1's manifest, must be refused: {lines:?}"
    );

    // The truth, from the bucket.
    let end = manifest.read().await.expect("read").expect("manifest");
    assert_eq!(end.token, FencingToken::new(2));
    let entries = entries(&end.data);
    let old: Vec<_> = entries.iter().filter(|e| e.0 == "old").collect();
    let new: Vec<_> = entries.iter().filter(|e| e.0 == "new").collect();
    assert_eq!(old.len() + new.len(), entries.len(), "{entries:?}");
    assert!(
        old.iter().all(|e| e.1 == 1) && new.iter().all(|e| e.1 == 2),
        "{entries:?}"
    );
    let old_seqs: Vec<u64> = old.iter().map(|e| e.2).collect();
    assert_eq!(
        old_seqs,
        (0..stale_seq).collect::<Vec<_>>(),
        "old tenure lost or repeated commits"
    );
    assert_eq!(new.iter().map(|e| e.2).collect::<Vec<_>>(), vec![0, 1, 2]);
    let first_new = entries.iter().position(|e| e.0 == "new").expect("new entries");
    assert!(
        entries[first_new..].iter().all(|e| e.0 == "new"),
        "an old-holder commit landed after the takeover: {entries:?}"
    );
    let reported: Vec<u64> = lines
        .iter()
        .filter(|l| l.starts_with("COMMITTED"))
        .map(|l| seq_of(l))
        .collect();
    assert_eq!(reported, old_seqs, "the worker's reports disagree with the bucket");

    let record = store
        .read(&LeaseName::new(LEASE).expect("name"))
        .await
        .expect("read lease")
        .expect("lease record");
    assert_eq!(record.record.token, FencingToken::new(2));
    assert_eq!(record.record.holder.as_ref(), Some(lease.holder()));
    eprintln!(
        "frozen holder: {} old commits, took over {waited:?} after the freeze, stale commit {stale_seq} refused",
        old_seqs.len()
    );
    lease.release().await.expect("release");
}

/// This binary is also the worker process: run with `--worker`, it is the holder.
fn main() -> std::process::ExitCode {
    leasehold_testkit::one_test_main(
        "frozen_holder_commit_is_refused_after_takeover",
        |_| {
            worker::main();
            std::process::ExitCode::SUCCESS
        },
        frozen_holder_commit_is_refused_after_takeover,
    )
}
