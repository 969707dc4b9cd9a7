//! # leasehold-testkit
//!
//! What every store's tests need, once: the settings of the stores that
//! `scripts/stores.sh` started (read from the environment, failing with a clear message
//! without them: a test that needs a store never skips), names no other test or run
//! uses, the serialized moto a test binary starts for itself, a lease that must be
//! granted ([`granted`]), the frozen-holder scenario every store runs ([`frozen`]), the
//! foreign-writer cases every store runs through an operator's command-line client
//! ([`edits`]), one store as the shared suites drive it ([`suite`]), names and records a
//! test writes by hand ([`records`]), leases held by the dozen ([`leases`]), waiters a
//! test watches ([`waiters`]), what native expiry must answer ([`expiry`]), and the
//! leader-kill scenario of the replicated stores ([`leader_kill`], on a [`cluster`]). Not
//! published; the store crates take it as a path-only dev-dependency.

pub mod child;
pub mod cluster;
pub mod edits;
pub mod endpoints;
pub mod expiry;
pub mod foreign;
pub mod frozen;
pub mod leader_kill;
pub mod leases;
pub mod polling;
pub mod proxy;
pub mod records;
pub mod suite;
pub mod waiters;

use std::future::Future;
use std::path::PathBuf;
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use leasehold_core::store::{CasOutcome, CasStore, LeaseRecord, Precondition, Stored};
use leasehold_core::{AcquireOutcome, Lease, LeaseClient, LeaseName};

/// A variable the test cannot run without.
///
/// # Panics
/// If it is not set, saying how to set it.
pub fn env(var: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| {
        panic!(
            "{var} is not set: start the stores with `scripts/stores.sh start` and `eval \"$(scripts/stores.sh env)\"`"
        )
    })
}

/// The Postgres the tests share (`LEASEHOLD_PG_URL`).
pub fn pg_url() -> String {
    env("LEASEHOLD_PG_URL")
}

/// The Redis the tests share (`LEASEHOLD_REDIS_URL`).
pub fn redis_url() -> String {
    env("LEASEHOLD_REDIS_URL")
}

/// The single-member etcd the tests share (`LEASEHOLD_ETCD_ENDPOINTS`).
pub fn etcd_endpoints() -> Vec<String> {
    env("LEASEHOLD_ETCD_ENDPOINTS").split(',').map(str::to_owned).collect()
}

/// The single ZooKeeper server the tests share (`LEASEHOLD_ZK_ADDR`, `host:port`).
pub fn zk_addr() -> String {
    env("LEASEHOLD_ZK_ADDR")
}

/// The three-server ZooKeeper ensemble the tests share (`LEASEHOLD_ZK_ENSEMBLE`, a
/// connect string `host:port,host:port,host:port`).
pub fn zk_ensemble() -> String {
    env("LEASEHOLD_ZK_ENSEMBLE")
}

/// The `tickTime` of the ZooKeeper servers the script starts (`LEASEHOLD_ZK_TICK_MS`).
///
/// # Panics
/// If it is not set or not a number of milliseconds.
pub fn zk_tick() -> std::time::Duration {
    let ms = env("LEASEHOLD_ZK_TICK_MS");
    std::time::Duration::from_millis(
        ms.parse()
            .unwrap_or_else(|_| panic!("LEASEHOLD_ZK_TICK_MS is not a number of milliseconds: {ms:?}")),
    )
}

/// The moto (S3 and DynamoDB) the tests share (`LEASEHOLD_MOTO_ENDPOINT`).
pub fn moto_endpoint() -> String {
    env("LEASEHOLD_MOTO_ENDPOINT")
}

/// A suffix no other name of this or any other run has: the process id, the time and
/// a counter, in lowercase hex digits and `-` (valid in every store's names once the
/// caller swaps `-` where a store does not take it).
pub fn unique_suffix() -> String {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let n = SEQ.fetch_add(1, Ordering::Relaxed);
    format!("{:x}-{:x}-{n}", std::process::id(), nanos & 0xffff_ffff_ffff)
}

/// Where the stores keep their data (`LEASEHOLD_STORES_DIR`), and `sub` in it, created.
///
/// # Panics
/// If the directory cannot be created.
pub fn stores_dir(sub: &str) -> PathBuf {
    let root = std::env::var("LEASEHOLD_STORES_DIR").unwrap_or_else(|_| "/tmp/leasehold-stores".into());
    let dir = PathBuf::from(root).join(sub);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
    dir
}

/// The venv that holds moto (`scripts/install-deps.sh`).
pub fn venv() -> PathBuf {
    std::env::var("LEASEHOLD_VENV").map_or_else(
        |_| PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cache/leasehold-venv"),
        PathBuf::from,
    )
}

/// The one serialized moto launcher, `scripts/moto_serial.py` (also what
/// `scripts/stores.sh` runs).
pub fn moto_serial_script() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/moto_serial.py"))
}

/// Starts a serialized moto of the caller's own on `port` (see `scripts/moto_serial.py`),
/// logging to `log`; it ends by itself when this process does. Waits until it listens.
///
/// # Panics
/// If the port is taken, moto cannot start, or it does not listen within 60 s.
pub fn start_serialized_moto(port: u16, log: &std::path::Path) -> Child {
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        "port {port} is already in use; a server left from an earlier run? (stop it by its pid)"
    );
    let python = venv().join("bin/python");
    let log_file = std::fs::File::create(log).unwrap_or_else(|e| panic!("log {}: {e}", log.display()));
    let mut child = Command::new(&python)
        .arg(moto_serial_script())
        .args(["127.0.0.1", &port.to_string(), "--exit-with-parent"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log_file)
        .spawn()
        .unwrap_or_else(|e| panic!("starting {}: {e} (run scripts/install-deps.sh)", python.display()));
    wait_listening(port, &mut child, "serialized moto", Duration::from_secs(60));
    child
}

/// Waits until something accepts connections on `port` (std only: works from any
/// runtime), failing early if `child` exits.
///
/// # Panics
/// If `child` exits or nothing listens within `limit`.
pub fn wait_listening(port: u16, child: &mut Child, what: &str, limit: Duration) {
    let deadline = std::time::Instant::now() + limit;
    loop {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("{what} on port {port} exited at start: {status}");
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{what} on port {port} not listening after {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The `main` of a test binary (`harness = false`) that runs one test, `name`, and is
/// also its own worker process: run with `--worker ARGS…` it calls `worker(ARGS)` and
/// exits with its code; otherwise it runs `test` on a two-thread runtime and prints the
/// lines of Rust's test runner (a panic fails the binary, as in any test).
///
/// # Panics
/// If the runtime cannot be built, or the test panics.
pub fn one_test_main<F>(name: &str, worker: impl FnOnce(&[String]) -> ExitCode, test: impl FnOnce() -> F) -> ExitCode
where
    F: Future<Output = ()>,
{
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--worker") {
        return worker(&args[1..]);
    }
    if args.iter().any(|a| a == "--list") {
        println!("{name}: test");
        return ExitCode::SUCCESS;
    }
    let rt = runtime();
    println!("running 1 test");
    rt.block_on(test());
    println!("test {name} ... ok");
    println!("\ntest result: ok. 1 passed; 0 failed");
    ExitCode::SUCCESS
}

/// The runtime of a test binary's own `main` (a worker, a one-test harness): two worker
/// threads, I/O and time enabled.
///
/// # Panics
/// If the runtime cannot be built.
#[must_use]
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("runtime: {e}"))
}

/// `client` asks for `name` once; the lease, which it must be granted (`who` names the
/// asker in the panic messages).
///
/// # Panics
/// If the acquire fails or the lease is held.
pub async fn granted(client: &LeaseClient, name: impl AsRef<str>, ttl: Duration, who: &str) -> Lease {
    let name = name.as_ref();
    match client
        .try_acquire(name, ttl)
        .await
        .unwrap_or_else(|e| panic!("{who}: acquire {name}: {e}"))
    {
        AcquireOutcome::Granted(l) => l,
        AcquireOutcome::Held { holder, token, .. } => panic!("{who}: {name} held by {holder:?} with {token}"),
    }
}

/// What `outcome` wrote.
///
/// # Panics
/// If the write was refused (`what` names it in the message).
pub fn written(outcome: CasOutcome, what: &str) -> Stored {
    match outcome {
        CasOutcome::Written(s) => s,
        CasOutcome::Conflict(c) => panic!("{what}: refused, the record is {c:?}"),
    }
}

/// Writes `record` as `name` in `store` if `expect` holds; what was written.
///
/// # Panics
/// If the write fails or is refused.
pub async fn write_ok<S>(store: &S, name: &LeaseName, expect: &Precondition, record: &LeaseRecord) -> Stored
where
    S: CasStore + ?Sized,
{
    let what = format!("write {name} ({expect:?})");
    written(
        store
            .write(name, expect, record)
            .await
            .unwrap_or_else(|e| panic!("{what}: {e}")),
        &what,
    )
}

/// What the spawned `task` returned, waiting `limit` at the most.
///
/// # Panics
/// With `what` if the task has not ended within `limit`, or if it panicked.
pub async fn joined<T>(limit: Duration, task: tokio::task::JoinHandle<T>, what: &str) -> T {
    tokio::time::timeout(limit, task)
        .await
        .unwrap_or_else(|_| panic!("{what} (within {limit:?})"))
        .unwrap_or_else(|e| panic!("{what}: the task failed: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_suffixes_differ_and_fit_every_store() {
        let (a, b) = (unique_suffix(), unique_suffix());
        assert_ne!(a, b);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit() || c == '-'), "{a}");
        assert!(moto_serial_script().is_file(), "{}", moto_serial_script().display());
    }
}
