//! What the tests of the `leasehold` binary share: the stores they run on, starting the
//! real binary as a process, waiting for it with a deadline, and cleaning up.
#![allow(dead_code, unreachable_pub)]

pub mod scenarios;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use leasehold::LeaseName;
use leasehold::store::{CasStore, Stored};
use leasehold::testing::process::poll;

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_leasehold");

/// The documented exit codes (src/exit.rs).
pub const USAGE: i32 = 64;
/// The store failed.
pub const STORE: i32 = 69;
/// Held by someone else.
pub const HELD: i32 = 75;
/// Lost while running.
pub const LOST: i32 = 76;

/// The static credentials the tests give moto.
const AWS_KEY: &str = "leasehold-test";

/// Store URLs nothing listens on (port 1), some with a password no message may show.
pub const UNREACHABLE: [&str; 4] = [
    "postgres://app:hunter2@127.0.0.1:1/x",
    "etcd://127.0.0.1:1",
    "redis://:hunter2@127.0.0.1:1/0",
    "redis://127.0.0.1:1/0",
];

/// A store the binary runs on, and a directory of the test's own for its files.
pub struct Store {
    /// The store URL, given to the binary as `LEASEHOLD_STORE`.
    pub url: String,
    /// The test's directory.
    pub dir: PathBuf,
    lib: Box<dyn CasStore>,
    /// Whether the binary needs AWS credentials (static ones for moto).
    aws: bool,
    pids: std::sync::Mutex<Vec<u32>>,
}

fn test_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("leasehold-cli-test-{}", leasehold_testkit::unique_suffix()));
    std::fs::create_dir_all(&dir).expect("test dir");
    dir
}

impl Store {
    /// A fresh SQLite file.
    pub async fn sqlite() -> Self {
        use leasehold::sqlite::{SqliteConfig, SqliteStore};
        let dir = test_dir();
        let path = dir.join("leases.db");
        let lib = SqliteStore::open_file(&path, SqliteConfig::new())
            .await
            .expect("open sqlite");
        Self::new(format!("sqlite:{}", path.display()), dir, Box::new(lib))
    }

    /// The tests' Postgres (`LEASEHOLD_PG_URL`), its lease table created: panics (the
    /// test fails) when it is not set or cannot be reached.
    pub async fn postgres() -> Self {
        use leasehold::postgres::{PostgresConfig, PostgresStore};
        let url = leasehold_testkit::pg_url();
        let pool = pg_pool(2).await;
        PostgresStore::provision(&pool, &PostgresConfig::new())
            .await
            .expect("provision");
        let lib = PostgresStore::new(pool, PostgresConfig::new())
            .await
            .expect("postgres store");
        Self::new(url, test_dir(), Box::new(lib))
    }

    /// The tests' MariaDB (`LEASEHOLD_MYSQL_URL`), its lease table created: panics when
    /// it is not set or cannot be reached.
    pub async fn mysql() -> Self {
        use leasehold::mysql::sqlx::mysql::MySqlPool;
        use leasehold::mysql::{MySqlConfig, MySqlStore};
        let url = leasehold_testkit::env("LEASEHOLD_MYSQL_URL");
        let pool = MySqlPool::connect(&url)
            .await
            .unwrap_or_else(|e| panic!("MariaDB at LEASEHOLD_MYSQL_URL: {e}"));
        MySqlStore::provision(&pool, &MySqlConfig::new())
            .await
            .expect("provision");
        let lib = MySqlStore::new(pool, MySqlConfig::new()).await.expect("mysql store");
        Self::new(url, test_dir(), Box::new(lib))
    }

    /// The tests' etcd (`LEASEHOLD_ETCD_ENDPOINTS`): panics when it is not set or cannot
    /// be reached.
    pub async fn etcd() -> Self {
        use leasehold::etcd::etcd_client::Client;
        use leasehold::etcd::{EtcdConfig, EtcdStore};
        let endpoints = leasehold_testkit::etcd_endpoints();
        let client = Client::connect(endpoints.clone(), None).await.expect("etcd");
        let lib = EtcdStore::new(client, EtcdConfig::new(EtcdConfig::DEFAULT_PREFIX).expect("prefix"));
        lib.verify().await.expect("etcd answers");
        let hosts: Vec<&str> = endpoints.iter().map(|e| e.trim_start_matches("http://")).collect();
        Self::new(format!("etcd://{}", hosts.join(",")), test_dir(), Box::new(lib))
    }

    /// The tests' single ZooKeeper server (`LEASEHOLD_ZK_ADDR`), the default root znode
    /// created: panics when it is not set or cannot be reached.
    pub async fn zookeeper() -> Self {
        use leasehold::zookeeper::{ZooKeeperConfig, ZooKeeperStore};
        let addr = leasehold_testkit::zk_addr();
        let config = ZooKeeperConfig::default();
        ZooKeeperStore::provision(&addr, &config)
            .await
            .unwrap_or_else(|e| panic!("ZooKeeper at LEASEHOLD_ZK_ADDR: {e}"));
        let lib = ZooKeeperStore::connect(&addr, config).await.expect("zookeeper store");
        Self::new(format!("zookeeper://{addr}"), test_dir(), Box::new(lib))
    }

    /// The tests' Redis (`LEASEHOLD_REDIS_URL`): panics when it is not set or cannot be
    /// reached.
    pub async fn redis() -> Self {
        use leasehold::redis::{RedisConfig, RedisStore};
        let url = leasehold_testkit::redis_url();
        let client = leasehold::redis::redis::Client::open(url.as_str()).expect("redis url");
        let lib = RedisStore::connect(client, RedisConfig::default())
            .await
            .expect("redis");
        Self::new(url, test_dir(), Box::new(lib))
    }

    /// A table of its own on the tests' moto (`LEASEHOLD_MOTO_ENDPOINT`), created.
    pub async fn dynamodb() -> Self {
        use leasehold::dynamodb::aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region};
        use leasehold::dynamodb::aws_sdk_dynamodb::{Client, Config};
        use leasehold::dynamodb::{DynamoConfig, DynamoStore};
        let moto = leasehold_testkit::moto_endpoint();
        let table = format!("cli_{}", leasehold_testkit::unique_suffix().replace('-', "_"));
        let conf = Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new("us-east-1"))
            .credentials_provider(Credentials::new(AWS_KEY, AWS_KEY, None, None, "static"))
            .endpoint_url(&moto)
            .build();
        let client = Client::from_conf(conf);
        let config = DynamoConfig::new(table.as_str()).expect("table");
        DynamoStore::provision(&client, &config)
            .await
            .expect("create the table");
        let lib = DynamoStore::new(client, config);
        Self::on_moto(format!("dynamodb://{table}?region=us-east-1&endpoint={moto}"), lib)
    }

    /// A bucket of its own on the tests' moto (`LEASEHOLD_MOTO_ENDPOINT`), created.
    pub async fn s3() -> Self {
        use leasehold::s3::{S3Config, S3Store, local_client};
        let moto = leasehold_testkit::moto_endpoint();
        let bucket = format!("cli-{}", leasehold_testkit::unique_suffix());
        let client = local_client(&moto);
        let config = S3Config::new(bucket.as_str(), "leases").expect("bucket");
        S3Store::provision(&client, &config).await.expect("create the bucket");
        let lib = S3Store::new(client, config);
        Self::on_moto(format!("s3://{bucket}/leases?region=us-east-1&endpoint={moto}"), lib)
    }

    /// A store on the tests' moto, at `url`: the binary gets moto's static credentials.
    fn on_moto(url: String, lib: impl CasStore + 'static) -> Self {
        let mut store = Self::new(url, test_dir(), Box::new(lib));
        store.aws = true;
        store
    }

    fn new(url: String, dir: PathBuf, lib: Box<dyn CasStore>) -> Self {
        Self {
            url,
            dir,
            lib,
            aws: false,
            pids: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// A lease name no other test or run uses.
    pub fn name(&self, what: &str) -> String {
        format!("cli-test/{what}-{}", leasehold_testkit::unique_suffix())
    }

    /// A file in the test's directory.
    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// The binary with `args`, on this store (through `LEASEHOLD_STORE`), in the test's
    /// directory, its stdout and stderr captured.
    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(BIN);
        c.args(args)
            .env("LEASEHOLD_STORE", &self.url)
            .env("LEASEHOLD_BIN", BIN)
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if self.aws {
            with_moto_credentials(&mut c);
        }
        c
    }

    /// [`Store::cmd`] with the static credentials the tests give moto, whatever store
    /// this is (for a `--store` URL on moto).
    pub fn moto_cmd(&self, args: &[&str]) -> Command {
        let mut c = self.cmd(args);
        with_moto_credentials(&mut c);
        c
    }

    /// Starts the binary with `args`; it is killed when the store is dropped.
    pub fn spawn(&self, args: &[&str]) -> Child {
        let child = self.cmd(args).spawn().expect("start leasehold");
        self.track(child.id());
        child
    }

    /// Kills `pid` (with SIGKILL) when the store is dropped, if it is still there.
    pub fn track(&self, pid: u32) {
        self.pids.lock().expect("pids").push(pid);
    }

    /// Runs the binary with `args` to its end, within `limit`.
    pub async fn output(&self, args: &[&str], limit: Duration) -> Output {
        let child = self.spawn(args);
        finish(child, limit).await
    }

    /// The lease's record, read through the library.
    pub async fn read(&self, name: &str) -> Option<Stored> {
        self.lib.read(&LeaseName::new(name).expect("name")).await.expect("read")
    }

    /// `show NAME --json`, parsed.
    pub async fn show(&self, name: &str) -> serde_json::Value {
        let out = self.output(&["show", name, "--json"], Duration::from_secs(20)).await;
        assert!(out.status.success(), "show: {out:?}");
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("show --json: {e}: {out:?}"))
    }

    /// Waits until the file `name` holds a process id (written by a command the binary
    /// runs), kills that process when the store is dropped ([`Store::track`]), and
    /// returns it.
    pub async fn wait_pid(&self, name: &str, limit: Duration) -> u32 {
        let pid = self.wait_line(name, limit).await;
        let pid = pid
            .parse()
            .unwrap_or_else(|e| panic!("{name}: not a pid: {pid:?}: {e}"));
        self.track(pid);
        pid
    }

    /// Waits until the file `name` holds a line, and returns it.
    pub async fn wait_line(&self, name: &str, limit: Duration) -> String {
        let path = self.file(name);
        let ok = poll(limit, || read_line(&path).is_some()).await;
        assert!(ok, "{} not written within {limit:?}", path.display());
        read_line(&path).unwrap_or_default()
    }
}

/// Gives `c` the static credentials the tests give moto.
fn with_moto_credentials(c: &mut Command) {
    c.env("AWS_ACCESS_KEY_ID", AWS_KEY)
        .env("AWS_SECRET_ACCESS_KEY", AWS_KEY)
        .env("AWS_EC2_METADATA_DISABLED", "true");
}

impl Drop for Store {
    fn drop(&mut self) {
        for pid in self.pids.lock().map(|p| p.clone()).unwrap_or_default() {
            if let Some(p) = i32::try_from(pid).ok().and_then(rustix::process::Pid::from_raw) {
                let _ = rustix::process::kill_process(p, rustix::process::Signal::CONT);
                let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The first line of `path`, once it ends with a newline.
pub fn read_line(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let (line, _) = text.split_once('\n')?;
    Some(line.trim().to_owned())
}

/// Waits for `child` to exit within `limit` (killing it and failing if it does not).
pub async fn wait_exit(child: &mut Child, limit: Duration) -> ExitStatus {
    let mut status = None;
    let done = poll(limit, || {
        status = child.try_wait().expect("try_wait");
        status.is_some()
    })
    .await;
    if !done {
        let _ = child.kill();
        let _ = child.wait();
        panic!("leasehold (pid {}) still running after {limit:?}", child.id());
    }
    status.expect("exited")
}

/// Waits for `child` to exit within `limit`, with its output.
pub async fn finish(mut child: Child, limit: Duration) -> Output {
    wait_exit(&mut child, limit).await;
    child.wait_with_output().expect("output")
}

/// The exit code, failing if a signal ended the process.
pub fn code(out: &Output) -> i32 {
    out.status
        .code()
        .unwrap_or_else(|| panic!("ended by a signal: {out:?}"))
}

/// Asserts how `leasehold` ended after signal `number` ended its command or its wait:
/// by that same signal for SIGHUP, SIGINT and SIGTERM (what a calling shell acts on),
/// with the exit code 128 + N for the others.
pub fn assert_ended_by_signal(status: &ExitStatus, number: i32) {
    use std::os::unix::process::ExitStatusExt as _;
    if [1, 2, 15].contains(&number) {
        assert_eq!(
            status.signal(),
            Some(number),
            "not ended by signal {number}: {status:?}"
        );
    } else {
        assert_eq!(status.code(), Some(128 + number), "signal {number}: {status:?}");
    }
}

/// Stderr as text.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Asserts that `out` exited with `expected`, having printed exactly one line on stderr,
/// starting with `leasehold:`, and no panic.
pub fn assert_one_line(out: &Output, expected: i32) -> String {
    let err = stderr(out);
    assert_eq!(code(out), expected, "exit code; stderr: {err}");
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(err.lines().count(), 1, "one line on stderr: {err:?}");
    assert!(err.starts_with("leasehold: "), "{err}");
    err
}

/// The lines a running process prints on stdout, collected as they come by a thread.
pub struct Lines {
    lines: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    /// Set once the stream has ended (the process closed it, or exited).
    ended: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Lines {
    /// Collects `child`'s stdout (which must be piped), taking it from the child.
    pub fn of(child: &mut Child) -> Self {
        Self::read(child.stdout.take().expect("stdout is piped"))
    }

    /// Collects `child`'s stderr (which must be piped), taking it from the child.
    pub fn of_stderr(child: &mut Child) -> Self {
        Self::read(child.stderr.take().expect("stderr is piped"))
    }

    /// Collects the lines of `from` as they come, on a thread of their own.
    fn read(from: impl std::io::Read + Send + 'static) -> Self {
        use std::io::BufRead as _;
        let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let ended = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (sink, end) = (lines.clone(), ended.clone());
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(from).lines() {
                let Ok(line) = line else { break };
                sink.lock().expect("lines").push(line);
            }
            end.store(true, std::sync::atomic::Ordering::SeqCst);
        });
        Self { lines, ended }
    }

    /// Waits until the stream has ended, within `limit`; all its lines.
    pub async fn wait_end(&self, limit: Duration) -> Vec<String> {
        let ok = poll(limit, || self.ended.load(std::sync::atomic::Ordering::SeqCst)).await;
        assert!(ok, "the stream did not end within {limit:?}; printed: {:?}", self.now());
        self.now()
    }

    /// The lines so far.
    pub fn now(&self) -> Vec<String> {
        self.lines.lock().expect("lines").clone()
    }

    /// Waits until the lines so far satisfy `cond`, within `limit`; the lines.
    pub async fn wait_for(&self, limit: Duration, what: &str, mut cond: impl FnMut(&[String]) -> bool) -> Vec<String> {
        let ok = poll(limit, || cond(&self.now())).await;
        assert!(ok, "{what} not printed within {limit:?}; printed: {:?}", self.now());
        self.now()
    }
}

/// Whether the process `pid` is gone (or a zombie nobody has reaped yet).
pub fn gone(pid: u32) -> bool {
    matches!(leasehold::testing::process::process_state(pid), None | Some('Z'))
}

/// Whether the process `pid` has a handler of its own for signal number `sig` (its
/// `SigCgt` mask in `/proc`): a signal sent once this is true is handled, not fatal.
pub fn catches(pid: u32, sig: i32) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .is_some_and(|mask| sig >= 1 && mask & (1 << (sig - 1)) != 0)
}

/// Sends `sig` to the process `pid`.
pub fn signal(pid: u32, sig: rustix::process::Signal) {
    let p = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
        .expect("pid");
    rustix::process::kill_process(p, sig).expect("kill");
}

/// How long since `t`.
pub fn since(t: Instant) -> Duration {
    t.elapsed()
}

/// A pool of at most `max` connections on the tests' Postgres (`LEASEHOLD_PG_URL`):
/// panics (the test fails) when it is not set or cannot be reached.
pub async fn pg_pool(max: u32) -> leasehold::postgres::sqlx::PgPool {
    leasehold::postgres::sqlx::postgres::PgPoolOptions::new()
        .max_connections(max)
        .acquire_timeout(Duration::from_secs(10))
        .connect(&leasehold_testkit::pg_url())
        .await
        .unwrap_or_else(|e| panic!("Postgres at LEASEHOLD_PG_URL: {e}"))
}
