//! The frozen-holder scenario with real processes, run by both SQL stores' tests.
//!
//! A test file with `harness = false` calls [`main`] with its [`Backend`]. The test
//! binary then plays two roles: run plainly it is the **test**, and it re-executes
//! itself as the **workers**:
//!
//! 1. worker A acquires the lease (TTL 600 ms), raises the fence on the job's items to
//!    its token, and writes the items one by one through fenced writes. It is a *buggy*
//!    holder: it ignores its loss signal and every refusal, and keeps writing;
//! 2. after A's third item the test SIGSTOPs A (at a moment it holds no database lock),
//!    past its TTL;
//! 3. worker B acquires the lease once A's has expired on the database clock, raises
//!    the fence to its own token, logs that moment, and writes the items A has not;
//! 4. the test SIGCONTs A, which carries on with its stale token;
//! 5. the test reads the truth from the database: every item written exactly once (no
//!    lost, no duplicated effect), B's token is A's + 1, and every write A attempted
//!    after B raised the fence (ordered by the database's own sequence on the attempts
//!    log) was refused by the fence and left no effect.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use leasehold_core::fence::{Dialect, FencedUpdate};
use leasehold_core::testing::process;
use leasehold_core::{ClientConfig, Error, FencingToken, LeaseClient, Result, store::CasStore};
use tokio::time::Instant;

use crate::{RowFence, RowWrite, SqlDatabase, SqlValue};

/// What the scenario needs from a store crate.
#[async_trait]
pub trait Backend: Send + Sync + Sized + 'static {
    /// The database (its dialect is that of the harness's own statements).
    type Db: SqlDatabase;

    /// Where the database is (a URL, a file path), read in the test process; passed to
    /// the workers. Panics with a clear message when the environment does not say.
    fn target() -> String;

    /// Connects to `target`, creates the lease table `lease_table` if needed, and opens
    /// a store on it.
    async fn open(target: &str, lease_table: &str) -> Self;

    /// The lease store.
    fn store(&self) -> Arc<dyn CasStore>;

    /// Runs one statement, returning the rows affected.
    async fn execute(&self, sql: &str, args: Vec<SqlValue>) -> Result<u64>;

    /// Runs one query whose columns are all integers.
    async fn query_ints(&self, sql: &str, args: Vec<SqlValue>) -> Result<Vec<Vec<i64>>>;

    /// Runs a fenced write.
    async fn fenced(&self, write: &RowWrite<'_, Self::Db>) -> Result<u64>;

    /// Whether no other connection holds a write lock right now (SQLite: a process
    /// frozen inside a write transaction blocks every writer; Postgres: always true, the
    /// server finishes a statement whether or not its client is stopped).
    async fn quiescent(&self) -> bool {
        true
    }

    /// Removes what the scenario created (Postgres: its tables; SQLite: its file).
    async fn cleanup(&self, tables: &[&str]) {
        for table in tables {
            let _ = self.execute(&format!("DROP TABLE IF EXISTS \"{table}\""), vec![]).await;
        }
    }
}

const ITEMS: i64 = 12;
const FREEZE_AFTER: i64 = 3;
const TTL: Duration = Duration::from_millis(600);
const LEASE: &str = "frozen-holder/job";
const ENV_ROLE: &str = "LEASEHOLD_FROZEN_ROLE";
const ENV_TARGET: &str = "LEASEHOLD_FROZEN_TARGET";
const ENV_SUFFIX: &str = "LEASEHOLD_FROZEN_SUFFIX";
const NAME: &str = "frozen_holder";

struct Tables {
    lease: String,
    items: String,
    attempts: String,
}

impl Tables {
    fn new(suffix: &str) -> Self {
        Self {
            lease: format!("lh_frozen_lease_{suffix}"),
            items: format!("lh_frozen_items_{suffix}"),
            attempts: format!("lh_frozen_attempts_{suffix}"),
        }
    }
}

fn ph(dialect: Dialect, n: usize) -> String {
    match dialect {
        Dialect::Postgres => format!("${n}"),
        _ => format!("?{n}"),
    }
}

/// The entry point of a `harness = false` test file: the worker when re-executed, the
/// test otherwise. Honours a name filter and `--list` like the default harness.
pub fn main<B: Backend>() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("tokio runtime: {e}"));
    if let Ok(role) = std::env::var(ENV_ROLE) {
        let target = std::env::var(ENV_TARGET).unwrap_or_else(|_| panic!("{ENV_TARGET} not set"));
        let suffix = std::env::var(ENV_SUFFIX).unwrap_or_else(|_| panic!("{ENV_SUFFIX} not set"));
        let outcome = runtime.block_on(async {
            tokio::time::timeout(Duration::from_secs(40), worker::<B>(&role, &target, &suffix)).await
        });
        match outcome {
            Ok(Ok(())) => std::process::exit(0),
            Ok(Err(e)) => {
                println!("failed {e}");
                std::process::exit(2)
            }
            Err(_) => {
                println!("failed worker timed out");
                std::process::exit(3)
            }
        }
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--list") {
        println!("{NAME}: test");
        return;
    }
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    if !filters.is_empty() && !filters.iter().any(|f| NAME.contains(f.as_str())) {
        println!("\nrunning 0 tests\n\ntest result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 1 filtered out\n");
        return;
    }
    println!("\nrunning 1 test");
    let started = std::time::Instant::now();
    runtime.block_on(scenario::<B>());
    println!(
        "test {NAME} ... ok\n\ntest result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in {:.2}s\n",
        started.elapsed().as_secs_f64()
    );
}

async fn worker<B: Backend>(role: &str, target: &str, suffix: &str) -> std::result::Result<(), String> {
    let t = Tables::new(suffix);
    let backend = B::open(target, &t.lease).await;
    let config = ClientConfig::builder()
        .label(format!("worker-{role}"))
        .build()
        .map_err(|e| e.to_string())?;
    let client = LeaseClient::from_dyn(backend.store(), config).map_err(|e| e.to_string())?;
    let lease = client
        .acquire_timeout(LEASE, TTL, Duration::from_secs(20))
        .await
        .map_err(|e| format!("acquire: {e}"))?;
    let token = lease.token();
    // A new holder first raises the fence on everything it is about to touch, so a
    // stale holder's later writes to any of it are refused.
    let raise = FencedUpdate::new(&t.items, "last_token")
        .and_then(|f| f.key("job"))
        .and_then(|f| RowFence::<B::Db>::update(&f))
        .map_err(|e| e.to_string())?;
    let rows = backend
        .fenced(&raise.write(token).key("job", 1_i64))
        .await
        .map_err(|e| format!("raise fence: {e}"))?;
    println!("token {token} raised {rows}");
    let attempts_sql = format!(
        "INSERT INTO \"{}\" (worker, item, token) VALUES ({}, {}, {}) RETURNING seq",
        t.attempts,
        ph(<B::Db as SqlDatabase>::DIALECT, 1),
        ph(<B::Db as SqlDatabase>::DIALECT, 2),
        ph(<B::Db as SqlDatabase>::DIALECT, 3)
    );
    let log = |item: i64| {
        let args = vec![
            SqlValue::from(role),
            SqlValue::from(item),
            SqlValue::from(token.to_i64().unwrap_or(-1)),
        ];
        let backend = &backend;
        let sql = &attempts_sql;
        async move {
            let rows = backend
                .query_ints(sql, args)
                .await
                .map_err(|e| format!("log attempt: {e}"))?;
            rows.first()
                .and_then(|r| r.first())
                .copied()
                .ok_or_else(|| "log attempt returned no seq".to_owned())
        }
    };
    let items: Vec<i64> = if role == "A" {
        (1..=ITEMS).collect()
    } else {
        let claimed = log(0).await?;
        println!("claimed {claimed}");
        let sql = format!("SELECT item FROM \"{}\" WHERE writes = 0 ORDER BY item", t.items);
        let rows = backend.query_ints(&sql, vec![]).await.map_err(|e| e.to_string())?;
        rows.into_iter().filter_map(|r| r.first().copied()).collect()
    };
    let write = FencedUpdate::new(&t.items, "last_token")
        .and_then(|f| f.set("writer_token"))
        .and_then(|f| f.increment("writes"))
        .and_then(|f| f.key("item"))
        .and_then(|f| RowFence::<B::Db>::update(&f))
        .map_err(|e| e.to_string())?;
    for item in items {
        let seq = log(item).await?;
        println!("attempt {seq} {item}");
        let w = write
            .write(token)
            .value("writer_token", token.to_i64().unwrap_or(-1))
            .value("writes", 1_i64)
            .key("item", item);
        match backend.fenced(&w).await {
            Ok(_) => println!("ok {seq}"),
            Err(Error::FenceRejected { .. }) => {
                println!("refused {seq}");
                if role != "A" {
                    return Err("the successor's write was refused".into());
                }
                // The buggy holder ignores the refusal and carries on.
            }
            Err(e) => println!("error {seq} {e}"),
        }
        if role == "A" && item == FREEZE_AFTER {
            println!("pausing");
            tokio::time::sleep(Duration::from_millis(400)).await;
        } else if role == "A" {
            tokio::time::sleep(Duration::from_millis(30)).await;
        }
    }
    if role != "A" {
        lease.release().await.map_err(|e| format!("release: {e}"))?;
    }
    println!("done");
    Ok(())
}

/// Kills the workers if the test fails half-way.
struct Workers(Vec<u32>);

impl Drop for Workers {
    fn drop(&mut self) {
        for pid in &self.0 {
            let _ = process::resume(*pid);
            let _ = process::kill9(*pid);
        }
    }
}

fn spawn(role: &str, target: &str, suffix: &str) -> (Child, tokio::sync::mpsc::UnboundedReceiver<String>) {
    let exe = std::env::current_exe().unwrap_or_else(|e| panic!("current_exe: {e}"));
    let mut child = Command::new(exe)
        .env(ENV_ROLE, role)
        .env(ENV_TARGET, target)
        .env(ENV_SUFFIX, suffix)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn worker {role}: {e}"));
    let stdout = child.stdout.take().unwrap_or_else(|| panic!("worker stdout"));
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (child, rx)
}

async fn wait_line(rx: &mut tokio::sync::mpsc::UnboundedReceiver<String>, lines: &mut Vec<String>, want: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(line)) => {
                let hit = line == want;
                lines.push(line);
                if hit {
                    return;
                }
            }
            Ok(None) => panic!("worker exited before printing {want:?}; output: {lines:?}"),
            Err(_) => panic!("timed out waiting for {want:?}; output: {lines:?}"),
        }
    }
}

async fn drain(rx: &mut tokio::sync::mpsc::UnboundedReceiver<String>, lines: &mut Vec<String>) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(line)) => lines.push(line),
            Ok(None) => return,
            Err(_) => panic!("worker did not finish; output: {lines:?}"),
        }
    }
}

fn exit_ok(child: &mut Child, who: &str, lines: &[String]) {
    let status = child.wait().unwrap_or_else(|e| panic!("wait {who}: {e}"));
    assert!(status.success(), "worker {who} failed ({status}); output: {lines:?}");
}

fn token_of(lines: &[String], who: &str) -> u64 {
    lines
        .iter()
        .find_map(|l| l.strip_prefix("token "))
        .and_then(|l| l.split(' ').next())
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("worker {who} printed no token: {lines:?}"))
}

/// Freezes `pid` at a moment it holds no write lock (see [`Backend::quiescent`]).
async fn freeze_quiet<B: Backend>(backend: &B, pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        process::freeze(pid).await.unwrap_or_else(|e| panic!("freeze: {e}"));
        if backend.quiescent().await {
            return;
        }
        process::resume(pid).unwrap_or_else(|e| panic!("resume: {e}"));
        assert!(
            Instant::now() < deadline,
            "worker A never stopped outside a write transaction"
        );
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
}

async fn scenario<B: Backend>() {
    let target = B::target();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let suffix = format!("{}_{nanos:x}", std::process::id());
    let t = Tables::new(&suffix);
    let backend = B::open(&target, &t.lease).await;
    let d = <B::Db as SqlDatabase>::DIALECT;
    let serial = match d {
        Dialect::Postgres => "BIGSERIAL PRIMARY KEY",
        _ => "INTEGER PRIMARY KEY AUTOINCREMENT",
    };
    for sql in [
        format!(
            "CREATE TABLE \"{}\" (item BIGINT PRIMARY KEY, job BIGINT NOT NULL, writes BIGINT NOT NULL DEFAULT 0, \
             writer_token BIGINT NOT NULL DEFAULT 0, last_token BIGINT NOT NULL DEFAULT 0)",
            t.items
        ),
        format!(
            "CREATE TABLE \"{}\" (seq {serial}, worker TEXT NOT NULL, item BIGINT NOT NULL, token BIGINT NOT NULL)",
            t.attempts
        ),
        format!(
            "INSERT INTO \"{}\" (item, job) VALUES {}",
            t.items,
            (1..=ITEMS).map(|i| format!("({i}, 1)")).collect::<Vec<_>>().join(", ")
        ),
    ] {
        backend
            .execute(&sql, vec![])
            .await
            .unwrap_or_else(|e| panic!("setup: {e}"));
    }

    let (mut a, mut a_rx) = spawn("A", &target, &suffix);
    let mut guard = Workers(vec![a.id()]);
    let mut a_lines = Vec::new();
    wait_line(&mut a_rx, &mut a_lines, "pausing").await;
    freeze_quiet(&backend, a.id()).await;

    let (mut b, mut b_rx) = spawn("B", &target, &suffix);
    guard.0.push(b.id());
    let mut b_lines = Vec::new();
    drain(&mut b_rx, &mut b_lines).await;
    exit_ok(&mut b, "B", &b_lines);
    assert_eq!(
        process::process_state(a.id()),
        Some('T'),
        "A must stay frozen until B is done"
    );
    process::resume(a.id()).unwrap_or_else(|e| panic!("resume: {e}"));
    drain(&mut a_rx, &mut a_lines).await;
    exit_ok(&mut a, "A", &a_lines);
    guard.0.clear();

    // The truth, from the database.
    let (token_a, token_b) = (token_of(&a_lines, "A"), token_of(&b_lines, "B"));
    assert_eq!(
        token_b,
        FencingToken::new(token_a).next().get(),
        "takeover takes the next token"
    );
    let items = backend
        .query_ints(
            &format!("SELECT item, writes, writer_token FROM \"{}\" ORDER BY item", t.items),
            vec![],
        )
        .await
        .unwrap_or_else(|e| panic!("read items: {e}"));
    let attempts = backend
        .query_ints(
            &format!(
                "SELECT seq, item, token, CAST(CASE WHEN worker = 'A' THEN 1 ELSE 2 END AS BIGINT) FROM \"{}\" ORDER BY seq",
                t.attempts
            ),
            vec![],
        )
        .await
        .unwrap_or_else(|e| panic!("read attempts: {e}"));
    let claim_seq = attempts
        .iter()
        .find(|r| r[1] == 0 && r[3] == 2)
        .map(|r| r[0])
        .unwrap_or_else(|| panic!("B logged no fence raise: {attempts:?}"));
    let as_i64 = |t: u64| i64::try_from(t).unwrap_or(i64::MAX);
    assert_eq!(items.len(), usize::try_from(ITEMS).unwrap_or(0));
    for row in &items {
        let (item, writes, writer) = (row[0], row[1], row[2]);
        assert_eq!(writes, 1, "item {item} was written {writes} times: {items:?}");
        if writer == as_i64(token_a) {
            let seq = attempts
                .iter()
                .find(|r| r[1] == item && r[3] == 1)
                .map(|r| r[0])
                .unwrap_or_else(|| panic!("no attempt by A for item {item}"));
            assert!(
                seq < claim_seq,
                "A's write of item {item} (seq {seq}) applied after B's fence"
            );
        } else {
            assert_eq!(writer, as_i64(token_b), "item {item} written by an unknown token");
        }
    }
    let late: Vec<i64> = attempts
        .iter()
        .filter(|r| r[3] == 1 && r[0] > claim_seq)
        .map(|r| r[0])
        .collect();
    assert!(!late.is_empty(), "A attempted no write after B's takeover: {a_lines:?}");
    for seq in &late {
        assert!(
            a_lines.contains(&format!("refused {seq}")),
            "A's write {seq} after the takeover was not refused: {a_lines:?}"
        );
    }
    let written_by_b = items.iter().filter(|r| r[2] == as_i64(token_b)).count();
    println!(
        "frozen holder: A (token {token_a}) froze after item {FREEZE_AFTER}; B (token {token_b}) wrote {written_by_b} items; \
         A's {} writes after the takeover were all refused; every item written once",
        late.len()
    );
    backend.cleanup(&[&t.items, &t.attempts, &t.lease]).await;
}
