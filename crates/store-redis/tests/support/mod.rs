//! Shared pieces of this crate's tests: the shared server from the environment, a
//! dedicated `redis-server` a test may kill and restart, a TCP proxy that drops
//! connections at chosen moments, the fenced hash resource ([`fence`]) and the store as
//! the shared suites drive it ([`fixture`]).
#![allow(dead_code, missing_docs, unreachable_pub)]

pub mod fence;
pub mod fixture;

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use leasehold_core::testing::process::poll_async;
use leasehold_core::{FencingToken, LeaseName};
use leasehold_redis::{RedisConfig, RedisStore};
use redis::aio::MultiplexedConnection;
use tokio::task::JoinHandle;

pub use leasehold_testkit::env;

/// The shared Redis (never flushed or restarted by these tests).
pub fn shared_url() -> String {
    leasehold_testkit::redis_url()
}

/// The port of the shared Redis (for a [`Proxy`] in front of it).
pub fn shared_port() -> u16 {
    let url = shared_url();
    url.trim_end_matches('/')
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {url}"))
}

/// A key prefix no other test or run uses.
pub fn unique_prefix(tag: &str) -> String {
    format!("lhtest:{tag}:{}:", leasehold_testkit::unique_suffix())
}

pub fn client(url: &str) -> redis::Client {
    redis::Client::open(url).unwrap_or_else(|e| panic!("redis url {url}: {e}"))
}

/// A plain connection for the test's own commands.
pub async fn admin(url: &str) -> MultiplexedConnection {
    client(url)
        .get_multiplexed_async_connection()
        .await
        .unwrap_or_else(|e| panic!("cannot reach Redis at {url}: {e}"))
}

/// A store on the shared server under a fresh prefix, with the pub/sub waiter.
pub async fn shared_store(tag: &str) -> RedisStore {
    store_under(&unique_prefix(tag)).await
}

/// A store on the shared server under `prefix` (the same keys in every process that
/// passes the same prefix), with the pub/sub waiter ([`RedisStore::connect`]).
pub async fn store_under(prefix: &str) -> RedisStore {
    let url = shared_url();
    RedisStore::connect(client(&url), RedisConfig::default().with_prefix(prefix))
        .await
        .unwrap_or_else(|e| panic!("cannot reach Redis at {url}: {e}"))
}

/// Seeds the fence counter of `name` in `store` with `mark` (it never lowers it); the
/// counter after.
pub async fn seed<C>(store: &RedisStore<C>, name: &LeaseName, mark: u64) -> u64
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static,
{
    store
        .seed_fence_counter(name, FencingToken::new(mark))
        .await
        .unwrap_or_else(|e| panic!("seed {name} with {mark}: {e}"))
        .get()
}

pub async fn hgetall(conn: &mut MultiplexedConnection, key: &str) -> HashMap<String, String> {
    redis::cmd("HGETALL")
        .arg(key)
        .query_async(conn)
        .await
        .unwrap_or_else(|e| panic!("HGETALL {key}: {e}"))
}

/// The commands clients send to a (dedicated) server, seen through `MONITOR`: one
/// line per request on the wire. Commands a script runs inside the server appear as
/// `[db lua]` lines and are not requests, so they are left out.
pub struct Wire {
    lines: Arc<Mutex<Vec<String>>>,
    admin: MultiplexedConnection,
    marks: u64,
    task: JoinHandle<()>,
}

impl Wire {
    pub async fn start(url: &str) -> Self {
        let monitor = client(url).get_async_monitor().await.expect("MONITOR");
        let lines: Arc<Mutex<Vec<String>>> = Arc::default();
        let sink = lines.clone();
        let task = tokio::spawn(async move {
            use futures::StreamExt;
            let mut stream = monitor.into_on_message::<String>();
            while let Some(line) = stream.next().await {
                sink.lock().expect("lines").push(line);
            }
        });
        Self {
            lines,
            admin: admin(url).await,
            marks: 0,
            task,
        }
    }

    /// The requests since the previous call, by command name (`evalsha`,
    /// `script|load`, ...), in order.
    pub async fn requests(&mut self) -> Vec<String> {
        self.requests_and_inside().await.0
    }

    /// The requests since the previous call, and the commands the scripts ran inside
    /// Redis (the `[db lua]` lines), each by command name in order.
    pub async fn requests_and_inside(&mut self) -> (Vec<String>, Vec<String>) {
        self.marks += 1;
        let marker = format!("leasehold-wire-mark-{}", self.marks);
        let _: String = redis::cmd("ECHO")
            .arg(&marker)
            .query_async(&mut self.admin)
            .await
            .expect("ECHO");
        let seen = poll_async(Duration::from_secs(5), || {
            let lines = self.lines.clone();
            let marker = marker.clone();
            async move { lines.lock().expect("lines").iter().any(|l| l.contains(&marker)) }
        })
        .await;
        assert!(seen, "MONITOR never showed the marker");
        let mut lines = self.lines.lock().expect("lines");
        let at = lines.iter().position(|l| l.contains(&marker)).expect("marker");
        let taken: Vec<String> = lines.drain(..=at).collect();
        drop(lines);
        let (inside, requests): (Vec<&String>, Vec<&String>) = taken[..taken.len() - 1]
            .iter()
            .filter(|l| !l.contains("leasehold-wire-mark-"))
            .partition(|l| l.contains(" lua]"));
        let names = |lines: Vec<&String>| lines.into_iter().map(|l| command_name(l)).collect();
        (names(requests), names(inside))
    }
}

impl Drop for Wire {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// `1700000000.1 [0 127.0.0.1:5] "SCRIPT" "LOAD" ...` -> `script|load`.
fn command_name(line: &str) -> String {
    let mut words = line.split('"').skip(1).step_by(2).map(str::to_ascii_lowercase);
    let first = words.next().unwrap_or_default();
    match first.as_str() {
        "script" | "config" | "client" => format!("{first}|{}", words.next().unwrap_or_default()),
        _ => first,
    }
}

/// How a dedicated server keeps its data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Persistence {
    /// `--save '' --appendonly no`: a restart loses everything.
    None,
    /// `--appendonly yes --appendfsync always`: every write is on disk before its reply.
    AofAlways,
}

/// A `redis-server` of this test alone, on a port of the range 56500-56509, with its
/// data under `$LEASEHOLD_STORES_DIR/store-redis/`. Killed when dropped.
pub struct OwnRedis {
    pub port: u16,
    dir: PathBuf,
    persistence: Persistence,
    child: Option<Child>,
}

impl OwnRedis {
    pub async fn start(port: u16, persistence: Persistence) -> Self {
        assert!(
            (56500..=56509).contains(&port),
            "port {port} is outside this crate's range"
        );
        let dir = PathBuf::from(env("LEASEHOLD_STORES_DIR"))
            .join("leasehold-redis")
            .join(format!("port-{port}"));
        // A fresh data dir: nothing from an earlier run may be loaded.
        stop_leftover(&dir);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
        let mut me = Self {
            port,
            dir,
            persistence,
            child: None,
        };
        me.spawn().await;
        me
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Starts the server and waits for PING. The port range lies inside the kernel's
    /// ephemeral range, so another program's outgoing connection can hold the port
    /// for a while: a start that fails with "Address already in use" is retried until
    /// the deadline.
    async fn spawn(&mut self) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        let log = self.dir.join("redis.log");
        loop {
            let log_len = std::fs::metadata(&log).map(|m| m.len()).unwrap_or(0);
            let mut child = self
                .command()
                .spawn()
                .unwrap_or_else(|e| panic!("redis-server: {e} (is it installed?)"));
            loop {
                if let Ok(Some(status)) = child.try_wait() {
                    let text = std::fs::read(&log).unwrap_or_default();
                    let new = String::from_utf8_lossy(text.get(usize::try_from(log_len).unwrap_or(0)..).unwrap_or(&[]))
                        .into_owned();
                    assert!(
                        new.contains("Address already in use") && tokio::time::Instant::now() < deadline,
                        "redis-server on port {} exited with {status}: {new}",
                        self.port
                    );
                    break;
                }
                if self.ping().await {
                    self.child = Some(child);
                    return;
                }
                if tokio::time::Instant::now() >= deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!("redis-server on port {} did not answer PING within 20 s", self.port);
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new("redis-server");
        cmd.args(["--bind", "127.0.0.1", "--port", &self.port.to_string()])
            .arg("--dir")
            .arg(&self.dir)
            .arg("--pidfile")
            .arg(self.dir.join("redis.pid"))
            .arg("--logfile")
            .arg(self.dir.join("redis.log"))
            .args(["--save", ""]);
        match self.persistence {
            Persistence::None => cmd.args(["--appendonly", "no"]),
            Persistence::AofAlways => cmd.args(["--appendonly", "yes", "--appendfsync", "always"]),
        };
        cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
        cmd
    }

    async fn ping(&self) -> bool {
        let Ok(mut c) = client(&self.url()).get_multiplexed_async_connection().await else {
            return false;
        };
        redis::cmd("PING").query_async::<String>(&mut c).await.is_ok()
    }

    /// SIGKILL: the server dies without a chance to save anything.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port and data dir.
    pub async fn restart_after_kill(&mut self) {
        assert!(self.child.is_none(), "kill the server first");
        self.spawn().await;
    }
}

impl Drop for OwnRedis {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Stops a server an earlier, aborted run of this test left on the same data dir.
fn stop_leftover(dir: &std::path::Path) {
    let Ok(pid) = std::fs::read_to_string(dir.join("redis.pid")) else {
        return;
    };
    let Ok(pid) = pid.trim().parse::<u32>() else { return };
    let cmdline = std::fs::read_to_string(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    if cmdline.contains("redis-server") {
        let _ = leasehold_core::testing::process::kill9(pid);
    }
}

#[allow(unused_imports)]
pub use leasehold_testkit::proxy::{Proxy, ProxyMode};

/// A proxy in front of the Redis server on `port`.
pub async fn proxy(port: u16) -> Proxy {
    Proxy::start(&format!("127.0.0.1:{port}")).await
}

/// The `redis://` URL of `proxy`.
pub fn url_of(proxy: &Proxy) -> String {
    format!("redis://127.0.0.1:{}/", proxy.port())
}
