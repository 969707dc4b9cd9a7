//! A real holder process frozen past its TTL (SIGSTOP), a takeover, the holder resumed
//! (SIGCONT): every write it attempts after the takeover is refused by the fence, and
//! the data in Redis shows no lost or duplicated effect.

mod support;
#[path = "frozen_holder/worker.rs"]
mod worker;

use std::collections::{BTreeSet, HashMap};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use leasehold_core::testing::process::{freeze, kill9, poll, process_state, resume};
use leasehold_core::{ClientConfig, FencingToken, LeaseClient};
use leasehold_redis::{HashFence, RedisConfig, RedisStore};

const TTL_MS: u64 = 500;

/// Kills the worker if the test fails half way.
struct Worker {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Worker {
    fn spawn(url: &str, prefix: &str, lease: &str, resource: &str, label: &str) -> Self {
        let mut child = Command::new(std::env::current_exe().expect("this test binary"))
            .arg("--worker")
            .args([url, prefix, lease, resource, &TTL_MS.to_string(), label])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn the worker");
        let stdout = child.stdout.take().expect("worker stdout");
        let lines: Arc<Mutex<Vec<String>>> = Arc::default();
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                sink.lock().expect("lines").push(line);
            }
        });
        Self { child, lines }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn lines(&self) -> Vec<String> {
        self.lines.lock().expect("lines").clone()
    }

    fn seqs(&self, word: &str) -> BTreeSet<u64> {
        self.lines()
            .iter()
            .filter_map(|l| l.strip_prefix(word)?.strip_prefix(' '))
            .map(|s| s.parse().expect("seq"))
            .collect()
    }

    fn granted(&self) -> Option<FencingToken> {
        self.lines().iter().find_map(|l| {
            l.strip_prefix("GRANTED ")
                .map(|t| FencingToken::new(t.parse().expect("token")))
        })
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = resume(self.pid());
            let _ = kill9(self.pid());
            let _ = self.child.wait();
        }
    }
}

fn label_seqs(data: &HashMap<String, String>, label: &str) -> BTreeSet<u64> {
    let prefix = format!("w:{label}:");
    data.keys()
        .filter_map(|k| k.strip_prefix(&prefix))
        .map(|s| s.parse().expect("seq"))
        .collect()
}

async fn a_frozen_holder_is_fenced_off_after_a_takeover() {
    let url = support::shared_url();
    let prefix = support::unique_prefix("frozen");
    let lease = "ledger/account-7";
    let resource = format!("{prefix}resource:account-7");
    let mut admin = support::admin(&url).await;

    // 1. The worker (holder A) acquires the lease and writes through the fence.
    let mut a = Worker::spawn(&url, &prefix, lease, &resource, "A");
    assert!(
        poll(Duration::from_secs(15), || a.seqs("OK").len() >= 3).await,
        "the worker never wrote: {:?}",
        a.lines()
    );
    let token_a = a.granted().expect("GRANTED line");

    // 2. Freeze it past its TTL; holder B takes over once Redis expires A's record.
    freeze(a.pid()).await.expect("SIGSTOP the worker");
    let store = RedisStore::connect(support::client(&url), RedisConfig::default().with_prefix(&prefix))
        .await
        .expect("connect");
    let leases = LeaseClient::efficiency_only(store.clone(), ClientConfig::default()).expect("client");
    let b = leases
        .acquire_timeout(lease, Duration::from_secs(5), Duration::from_secs(10))
        .await
        .expect("B takes over the expired lease");
    assert_eq!(b.token(), token_a.next(), "the takeover carries the next token");
    assert_eq!(
        process_state(a.pid()),
        Some('T'),
        "A must still be frozen at the takeover"
    );
    for i in 1..=3 {
        let w = HashFence::new(&resource)
            .incr("count", 1)
            .set(format!("w:B:{i}"), b.token().to_string());
        let out = store.fenced_write(&w, b.token()).await.expect("B's write applies");
        assert!(out.is_applied(), "{out:?}");
    }
    let at_takeover = support::hgetall(&mut admin, &resource).await;
    let a_before = label_seqs(&at_takeover, "A");
    assert!(!a_before.is_empty());

    // 3. Resume A: it keeps writing with its old token until refused five times.
    resume(a.pid()).expect("SIGCONT the worker");
    assert!(
        poll(Duration::from_secs(20), || a.child.try_wait().ok().flatten().is_some()).await,
        "the worker did not finish: {:?}",
        a.lines()
    );
    let status = a.child.wait().expect("wait");
    assert!(status.success(), "worker failed: {status:?} {:?}", a.lines());
    let lines = a.lines();
    assert!(lines.iter().all(|l| !l.starts_with("ERROR")), "{lines:?}");
    assert_eq!(lines.last().map(String::as_str), Some("DONE"), "{lines:?}");

    // 4. The truth, read from Redis.
    let data = support::hgetall(&mut admin, &resource).await;
    let ok = a.seqs("OK");
    let rejected = a.seqs("REJECTED");
    assert!(
        rejected.len() >= 5,
        "A was refused only {} times: {lines:?}",
        rejected.len()
    );
    assert_eq!(
        label_seqs(&data, "A"),
        a_before,
        "a write of the frozen holder applied after the takeover"
    );
    assert_eq!(
        ok, a_before,
        "what A believes it wrote differs from what Redis holds (lost or phantom write)"
    );
    let last_ok = ok.last().copied().unwrap_or(0);
    assert!(
        rejected.iter().all(|&s| s > last_ok),
        "A was refused, then accepted again: ok {ok:?} rejected {rejected:?}"
    );
    assert_eq!(label_seqs(&data, "B"), (1..=3).collect::<BTreeSet<u64>>());
    let entries = data.keys().filter(|k| k.starts_with("w:")).count();
    assert_eq!(
        data.get("count").map(String::as_str),
        Some(entries.to_string().as_str()),
        "count and entries disagree: a lost or duplicated effect"
    );
    assert_eq!(
        data.get(HashFence::DEFAULT_MARK_FIELD),
        Some(&b.token().to_string()),
        "the high-water mark is B's token"
    );
    for (k, v) in &data {
        if k.starts_with("w:A:") {
            assert_eq!(v, &token_a.to_string(), "{k}");
        }
    }
    b.release().await.expect("release");
    let _: () = redis::cmd("DEL")
        .arg(&resource)
        .query_async(&mut admin)
        .await
        .expect("DEL");
}

/// This binary is also the worker process: run with `--worker`, it is the holder.
fn main() -> std::process::ExitCode {
    leasehold_testkit::one_test_main(
        "a_frozen_holder_is_fenced_off_after_a_takeover",
        worker::main,
        a_frozen_holder_is_fenced_off_after_a_takeover,
    )
}
