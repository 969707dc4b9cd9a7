//! Worker processes for the multi-process tests: the test binary re-executes itself with
//! `LEASEHOLD_ETCD_WORKER=<mode>`, and `main` runs [`run`] instead of the scenarios.
//!
//! Workers report on stdout, one line per event (`granted <token>`, `ok <seq>`,
//! `rejected <seq>`, `expired <seq>`, `error <seq> <why>`). Tests take their verdicts from the stores;
//! the reports only tell them when to act and prove the checks were not vacuous.
#![allow(dead_code, unreachable_pub)]

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use etcd_client::{Client, Txn, TxnOp};
use leasehold_core::{Error, LeaseClient};
use leasehold_etcd::{EtcdConfig, EtcdStore};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// The environment variable that turns a test binary into a worker.
pub const MODE_VAR: &str = "LEASEHOLD_ETCD_WORKER";

fn var(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("worker: {name} not set"))
}

fn say(line: impl AsRef<str>) {
    println!("{}", line.as_ref());
}

/// Runs as a worker if this process was started as one; returns false otherwise.
pub fn run_if_worker() -> bool {
    let Ok(mode) = std::env::var(MODE_VAR) else {
        return false;
    };
    let rt = leasehold_testkit::runtime();
    rt.block_on(async move {
        match mode.as_str() {
            "increment" => increment().await,
            other => panic!("unknown worker mode {other}"),
        }
    });
    true
}

async fn store_from_env() -> EtcdStore {
    let endpoints: Vec<String> = var("LH_ENDPOINTS").split(',').map(str::to_owned).collect();
    let client = Client::connect(&endpoints, None)
        .await
        .unwrap_or_else(|e| panic!("worker connect: {e}"));
    // Long enough that a request in flight when the worker is frozen gets its answer
    // after SIGCONT instead of timing out (its outcome is then known).
    let config = EtcdConfig::new(var("LH_PREFIX"))
        .and_then(|c| c.with_request_timeout(Duration::from_secs(30)))
        .unwrap_or_else(|e| panic!("worker config: {e}"));
    EtcdStore::new(client, config)
}

fn ttl() -> Duration {
    Duration::from_millis(var("LH_TTL_MS").parse().unwrap_or_else(|e| panic!("LH_TTL_MS: {e}")))
}

/// The lost-update workload: under the lease, read a shared counter, work a little,
/// write counter + 1 with a log entry. `LH_FENCED=1` guards the write with the lease's
/// etcd fence; `0` writes it blindly (after checking the lease before the read, as
/// careful code without a fence does).
async fn increment() {
    let store = store_from_env().await;
    let fenced = var("LH_FENCED") == "1";
    let name = var("LH_NAME");
    let counter = var("LH_COUNTER");
    let log = var("LH_LOG");
    let work = Duration::from_millis(var("LH_WORK_MS").parse().unwrap_or(40));
    let client = LeaseClient::new(store.clone());
    let mut kv = store.client().kv_client();
    let pid = std::process::id();
    let mut seq = 0u64;
    loop {
        let lease = match client.acquire(&name, ttl()).await {
            Ok(l) => l,
            Err(e) => {
                say(format!("error acquire {e}"));
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let fence = match store.fence(&lease) {
            Ok(f) => f,
            Err(e) => {
                say(format!("error fence {e}"));
                continue;
            }
        };
        say(format!("granted {}", lease.token()));
        loop {
            if !lease.is_valid() {
                // Said, so that a holder paused just before this check still reports
                // its step when it resumes (it then waits in `acquire`).
                say(format!("expired {seq}"));
                break;
            }
            let current = match kv.get(counter.clone(), None).await {
                Ok(r) => r
                    .kvs()
                    .first()
                    .and_then(|kv| std::str::from_utf8(kv.value()).ok()?.parse::<u64>().ok())
                    .unwrap_or(0),
                Err(e) => {
                    say(format!("error read {e}"));
                    break;
                }
            };
            tokio::time::sleep(work).await;
            let ops = [
                TxnOp::put(counter.clone(), (current + 1).to_string(), None),
                TxnOp::put(format!("{log}{pid}-{seq}"), lease.token().to_string(), None),
            ];
            seq += 1;
            let result = if fenced {
                store.fenced_txn(&fence, ops).await.map(|_| ())
            } else {
                kv.txn(Txn::new().and_then(ops))
                    .await
                    .map(|_| ())
                    .map_err(|e| Error::Unavailable {
                        message: e.to_string(),
                        source: None,
                    })
            };
            match result {
                Ok(()) => say(format!("ok {seq}")),
                Err(Error::FenceRejected { .. }) => {
                    say(format!("rejected {seq}"));
                    break;
                }
                Err(e) => {
                    say(format!("error write {e}"));
                    break;
                }
            }
        }
        drop(lease);
    }
}

/// A worker process and what it has reported.
pub struct Worker {
    pub pid: u32,
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
    reader: tokio::task::JoinHandle<()>,
}

impl Worker {
    /// Starts this test binary as a worker in `mode` with `env`.
    pub fn spawn(mode: &str, env: &HashMap<&str, String>) -> Worker {
        let exe = std::env::current_exe().unwrap_or_else(|e| panic!("current_exe: {e}"));
        let mut cmd = Command::new(exe);
        cmd.env(MODE_VAR, mode)
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("spawn worker: {e}"));
        let pid = child.id().unwrap_or_else(|| panic!("worker has no pid"));
        let stdout = child.stdout.take().unwrap_or_else(|| panic!("worker stdout"));
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        let reader = tokio::spawn(async move {
            let mut r = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = r.next_line().await {
                sink.lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push(line);
            }
        });
        Worker {
            pid,
            child,
            lines,
            reader,
        }
    }

    /// Every line reported so far.
    pub fn lines(&self) -> Vec<String> {
        self.lines
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// How many reported lines start with `word `.
    pub fn count(&self, word: &str) -> usize {
        let prefix = format!("{word} ");
        self.lines().iter().filter(|l| l.starts_with(&prefix)).count()
    }

    /// Kills the worker (SIGKILL) and reaps it.
    pub async fn kill(mut self) -> Vec<String> {
        let _ = leasehold_core::testing::process::resume(self.pid);
        let _ = self.child.kill().await;
        // The pipe closes with the process: the reader ends after the last line.
        let _ = tokio::time::timeout(Duration::from_secs(5), &mut self.reader).await;
        self.lines()
    }
}
