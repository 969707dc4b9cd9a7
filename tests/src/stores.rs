//! The stores under torture: a dedicated instance per run (never the shared stores other
//! tests use), its restarts and member kills, and the lease stores that workers and the
//! controller's observer build on it.
//!
//! | store | instance | restart fault | data after a restart |
//! |-------|----------|---------------|----------------------|
//! | Postgres | `$LEASEHOLD_STORES_SCRIPT start postgres` on its own port and dir | `pg_ctl -m immediate` stop, then start | kept (fsync on) |
//! | MariaDB | `… start mariadb` on its own port and dir | `kill -9` of mariadbd (a crash stop), then start (InnoDB crash recovery) | kept (`innodb_flush_log_at_trx_commit=1`) |
//! | Redis | `… start redis` (no persistence, as the script configures it) | `kill -9`, then start | **lost**: leases and token counters |
//! | etcd | `… start etcd-cluster`, three members | `kill -9` of one member (the leader about half the time), restarted after a while | kept (Raft quorum) |
//! | ZooKeeper | `… start zookeeper-ensemble`, three servers | `kill -9` of one server (the leader about half the time), restarted after a while | kept (quorum) |
//! | DynamoDB, S3 | moto behind one lock (`scripts/moto_serial.py`) | `kill -9`, then start | **lost**: moto keeps everything in memory |

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use leasehold_core::{
    Error, LeaseName,
    store::{Capabilities, CasOutcome, CasStore, DeleteOutcome, LeaseRecord, Precondition},
};
use leasehold_core::{
    Result as LeaseResult,
    store::{Current, Stored, Version, Wait},
};
use rand::Rng;
use rand::rngs::StdRng;

/// Which store a torture run puts under stress.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StoreKind {
    /// `leasehold-postgres`.
    Postgres,
    /// `leasehold-mysql` on MariaDB.
    MySql,
    /// `leasehold-redis` (efficiency-only).
    Redis,
    /// `leasehold-etcd` on a three-member cluster.
    Etcd,
    /// `leasehold-dynamodb` on moto.
    Dynamo,
    /// `leasehold-zookeeper` on a three-server ensemble.
    ZooKeeper,
    /// `leasehold-s3` on moto.
    S3,
}

impl StoreKind {
    /// Every store.
    pub const ALL: [StoreKind; 7] = [
        Self::Postgres,
        Self::MySql,
        Self::Redis,
        Self::Etcd,
        Self::Dynamo,
        Self::S3,
        Self::ZooKeeper,
    ];

    /// Its name on command lines.
    pub fn name(self) -> &'static str {
        match self {
            Self::Postgres => "postgres",
            Self::MySql => "mysql",
            Self::Redis => "redis",
            Self::Etcd => "etcd",
            Self::Dynamo => "dynamo",
            Self::S3 => "s3",
            Self::ZooKeeper => "zookeeper",
        }
    }

    /// Whether it runs as three members (etcd, ZooKeeper), each restarted on its own.
    pub fn is_ensemble(self) -> bool {
        matches!(self, Self::Etcd | Self::ZooKeeper)
    }

    /// The store named `name`.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name() == name)
    }

    /// Whether a restart of its dedicated instance loses the store's data.
    pub fn restart_loses_data(self) -> bool {
        matches!(self, Self::Redis | Self::Dynamo | Self::S3)
    }

    /// The smallest TTL the store's lease handling works with here (etcd sessions are
    /// whole seconds and at least 1.5 election timeouts; ZooKeeper session classes are
    /// whole seconds).
    pub fn min_ttl(self) -> Duration {
        match self {
            Self::Etcd => Duration::from_secs(2),
            Self::ZooKeeper => Duration::from_secs(1),
            _ => Duration::from_millis(300),
        }
    }
}

pub use leasehold_testkit::env;

/// A restart or member kill the controller injected.
#[derive(Debug, Clone)]
pub struct Restart {
    /// What was done (`postgres_immediate`, `mariadb_kill9`, `redis_kill9`,
    /// `etcd_kill9_leader`, `etcd_kill9_follower`, `zookeeper_kill9_leader`,
    /// `zookeeper_kill9_follower`, `moto_kill9`).
    pub kind: &'static str,
    /// Whether the store lost its data.
    pub data_loss: bool,
}

impl Restart {
    const fn new(kind: &'static str, data_loss: bool) -> Self {
        Self { kind, data_loss }
    }
}

/// A dedicated store instance for one run.
#[derive(Debug)]
pub struct Dedicated {
    kind: StoreKind,
    port: u16,
    dir: PathBuf,
    script: PathBuf,
    moto: Option<tokio::process::Child>,
    venv: PathBuf,
}

impl Dedicated {
    /// Starts a fresh instance of `kind` on `port` (etcd: clients `port..port+2`, peers
    /// `port+10..port+12`; ZooKeeper: clients `port..port+2`, quorum `port+10..port+12`,
    /// election `port+15..port+17`), with its data under
    /// `$LEASEHOLD_STORES_DIR/leasehold-tests/<kind>-<port>` (wiped first).
    ///
    /// # Panics
    /// If the store cannot be started, or the port is taken by something else.
    pub async fn start(kind: StoreKind, port: u16) -> Self {
        let root = PathBuf::from(env("LEASEHOLD_STORES_DIR")).join("leasehold-tests");
        let dir = root.join(format!("{}-{port}", kind.name()));
        let venv = std::env::var("LEASEHOLD_VENV")
            .map(PathBuf::from)
            .unwrap_or_else(|_| PathBuf::from(env("HOME")).join(".cache/leasehold-venv"));
        let mut d = Self {
            kind,
            port,
            dir,
            script: PathBuf::from(env("LEASEHOLD_STORES_SCRIPT")),
            moto: None,
            venv,
        };
        // A leftover of an interrupted run on the same port and dir: stop it first.
        d.stop().await;
        if d.dir.exists() {
            std::fs::remove_dir_all(&d.dir).unwrap_or_else(|e| panic!("wiping {}: {e}", d.dir.display()));
        }
        std::fs::create_dir_all(&d.dir).unwrap_or_else(|e| panic!("creating {}: {e}", d.dir.display()));
        for p in d.ports() {
            assert!(
                std::net::TcpListener::bind(("127.0.0.1", p)).is_ok(),
                "port {p} is in use by something this harness did not start; stop it (by its pid) or pick another base port"
            );
        }
        match kind {
            StoreKind::Postgres => d.script(&["start", "postgres"]).await,
            StoreKind::MySql => d.script(&["start", "mariadb"]).await,
            StoreKind::Redis => d.script(&["start", "redis"]).await,
            StoreKind::Etcd => d.script(&["start", "etcd-cluster"]).await,
            StoreKind::ZooKeeper => d.script(&["start", "zookeeper-ensemble"]).await,
            StoreKind::Dynamo | StoreKind::S3 => d.start_moto().await,
        }
        d
    }

    /// The store.
    pub fn kind(&self) -> StoreKind {
        self.kind
    }

    /// Where its data and logs are.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn ports(&self) -> Vec<u16> {
        match self.kind {
            StoreKind::Etcd => vec![
                self.port,
                self.port + 1,
                self.port + 2,
                self.port + 10,
                self.port + 11,
                self.port + 12,
            ],
            StoreKind::ZooKeeper => [0, 1, 2, 10, 11, 12, 15, 16, 17]
                .iter()
                .map(|o| self.port + o)
                .collect(),
            _ => vec![self.port],
        }
    }

    /// The addresses clients connect to (one per etcd member).
    pub fn upstreams(&self) -> Vec<SocketAddr> {
        let n = if self.kind.is_ensemble() { 3 } else { 1 };
        (0..n)
            .map(|i| SocketAddr::from(([127, 0, 0, 1], self.port + i)))
            .collect()
    }

    /// Endpoints for clients reaching the store at `addrs` (the upstreams themselves,
    /// or proxies in front of them).
    pub fn endpoints(kind: StoreKind, addrs: &[SocketAddr]) -> Vec<String> {
        addrs
            .iter()
            .map(|a| match kind {
                StoreKind::Postgres => format!("postgres://postgres@{a}/postgres"),
                StoreKind::MySql => format!("mysql://root@{a}/leasehold"),
                StoreKind::Redis => format!("redis://{a}/"),
                StoreKind::Etcd | StoreKind::Dynamo | StoreKind::S3 => format!("http://{a}"),
                StoreKind::ZooKeeper => a.to_string(),
            })
            .collect()
    }

    async fn script(&self, args: &[&str]) {
        let out = self.script_output(args).await;
        assert!(
            out.status.success(),
            "{} {args:?} failed: {}",
            self.script.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    async fn script_output(&self, args: &[&str]) -> std::process::Output {
        tokio::process::Command::new(&self.script)
            .args(args)
            .env("LEASEHOLD_STORES_DIR", &self.dir)
            .env("LEASEHOLD_PG_PORT", self.port.to_string())
            .env("LEASEHOLD_MYSQL_PORT", self.port.to_string())
            .env("LEASEHOLD_REDIS_PORT", self.port.to_string())
            .env("LEASEHOLD_ETCD_CLUSTER_BASE", self.port.to_string())
            .env("LEASEHOLD_MOTO_PORT", self.port.to_string())
            .env("LEASEHOLD_ZK_ENSEMBLE_BASE", self.port.to_string())
            // Unused by these runs, but kept off the shared stores' ports.
            .env("LEASEHOLD_ETCD_PORT", "21998")
            .stdin(std::process::Stdio::null())
            .output()
            .await
            .unwrap_or_else(|e| panic!("running {}: {e}", self.script.display()))
    }

    async fn start_moto(&mut self) {
        let python = self.venv.join("bin/python");
        let log = std::fs::File::create(self.dir.join("moto.log")).unwrap_or_else(|e| panic!("moto log: {e}"));
        let child = tokio::process::Command::new(&python)
            .arg(leasehold_testkit::moto_serial_script())
            .args(["127.0.0.1", &self.port.to_string(), "--exit-with-parent"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e} (run scripts/install-deps.sh)", python.display()));
        self.moto = Some(child);
        let port = self.port;
        let up = leasehold_core::testing::process::poll_async(Duration::from_secs(60), || async move {
            tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok()
        })
        .await;
        assert!(
            up,
            "moto on port {port} not listening after 60 s (see {})",
            self.dir.display()
        );
    }

    fn pid_in(&self, file: &str) -> Option<u32> {
        std::fs::read_to_string(self.dir.join(file)).ok()?.trim().parse().ok()
    }

    /// `kill -9` of the process in a pid file, and the file removed: a killed daemon
    /// whose parent does not reap it stays a zombie, which `kill -0` (the script's
    /// liveness check) still finds.
    async fn kill9_pidfile(&self, file: &str) {
        if let Some(pid) = self.pid_in(file) {
            let _ = leasehold_core::testing::process::kill9(pid);
            wait_gone(pid).await;
        }
        let _ = std::fs::remove_file(self.dir.join(file));
    }

    /// Restarts the store (or kills and restarts one etcd member or ZooKeeper server);
    /// returns when it serves again.
    ///
    /// # Panics
    /// If it does not come back.
    pub async fn restart(&mut self, rng: &mut StdRng, down_for: Duration) -> Restart {
        match self.kind {
            StoreKind::Postgres => {
                // stores.sh stops Postgres with `pg_ctl -m immediate` (a crash: no
                // shutdown checkpoint), then starts it and waits for pg_isready.
                self.script(&["stop", "postgres"]).await;
                self.start_after(down_for, "postgres").await;
                Restart::new("postgres_immediate", false)
            }
            StoreKind::MySql => {
                // stores.sh stops MariaDB with `kill -9` of mariadbd (a crash: InnoDB
                // recovers from its redo log), then starts it and waits until it answers.
                self.script(&["stop", "mariadb"]).await;
                self.start_after(down_for, "mariadb").await;
                Restart::new("mariadb_kill9", false)
            }
            StoreKind::Redis => {
                self.kill9_pidfile("redis/redis.pid").await;
                self.start_after(down_for, "redis").await;
                Restart::new("redis_kill9", true)
            }
            StoreKind::Etcd | StoreKind::ZooKeeper => self.restart_member(rng, down_for).await,
            StoreKind::Dynamo | StoreKind::S3 => {
                if let Some(mut child) = self.moto.take() {
                    if let Some(pid) = child.id() {
                        let _ = leasehold_core::testing::process::kill9(pid);
                    }
                    let _ = child.wait().await;
                }
                tokio::time::sleep(down_for).await;
                self.start_moto().await;
                Restart::new("moto_kill9", true)
            }
        }
    }

    /// Waits `down_for`, then starts `service` again with `stores.sh`.
    async fn start_after(&self, down_for: Duration, service: &str) {
        tokio::time::sleep(down_for).await;
        self.script(&["start", service]).await;
    }

    /// Kills one member of an etcd cluster or ZooKeeper ensemble with SIGKILL (the
    /// leader about half the time), starts it again after `down_for`, and waits until it
    /// serves.
    async fn restart_member(&self, rng: &mut StdRng, down_for: Duration) -> Restart {
        let leader = self.leader().await;
        let member = match leader {
            Some(l) if rng.random_bool(0.5) => l,
            _ => rng.random_range(0..3),
        };
        // ZooKeeper is started again up to three times: on a saturated machine (a long
        // run of ten ensembles, load average ~80) a JVM missed the first minute.
        let (what, pidfile, start, wait, starts) = match self.kind {
            StoreKind::Etcd => (
                "etcd member",
                format!("etcd-cluster/m{member}/etcd.pid"),
                "start-etcd-member",
                Duration::from_secs(30),
                1,
            ),
            _ => (
                "ZooKeeper server",
                format!("zookeeper-ensemble/s{member}/zookeeper.pid"),
                "start-zookeeper-member",
                Duration::from_secs(60),
                3,
            ),
        };
        self.kill9_pidfile(&pidfile).await;
        tokio::time::sleep(down_for).await;
        let mut serving = false;
        for _ in 0..starts {
            self.script(&[start, &member.to_string()]).await;
            serving = leasehold_core::testing::process::poll_async(wait, || async {
                self.member_leads(member).await.is_some()
            })
            .await;
            if serving {
                break;
            }
        }
        assert!(
            serving,
            "{what} {member} did not come back (see {})",
            self.dir.display()
        );
        let kind = match (self.kind, leader == Some(member)) {
            (StoreKind::Etcd, true) => "etcd_kill9_leader",
            (StoreKind::Etcd, false) => "etcd_kill9_follower",
            (_, true) => "zookeeper_kill9_leader",
            (_, false) => "zookeeper_kill9_follower",
        };
        Restart::new(kind, false)
    }

    /// The etcd member or ZooKeeper server that leads now, if one answers.
    async fn leader(&self) -> Option<u16> {
        for i in 0..3u16 {
            if self.member_leads(i).await == Some(true) {
                return Some(i);
            }
        }
        None
    }

    /// Whether etcd member or ZooKeeper server `i` leads; `None` if it does not serve.
    async fn member_leads(&self, i: u16) -> Option<bool> {
        let port = self.port + i;
        match self.kind {
            StoreKind::Etcd => {
                let (member, leader) = etcd_status(&format!("http://127.0.0.1:{port}")).await?;
                Some(member == leader)
            }
            _ => Some(zk_mode(&format!("127.0.0.1:{port}")).await? == "leader"),
        }
    }

    /// Stops the instance (and anything a previous run left in its dir).
    pub async fn stop(&mut self) {
        match self.kind {
            StoreKind::Postgres => {
                let _ = self.script_output(&["stop", "postgres"]).await;
            }
            StoreKind::MySql => {
                let _ = self.script_output(&["stop", "mariadb"]).await;
            }
            StoreKind::Redis => {
                let _ = self.script_output(&["stop", "redis"]).await;
            }
            StoreKind::Etcd => {
                let _ = self.script_output(&["stop", "etcd-cluster"]).await;
            }
            StoreKind::ZooKeeper => {
                let _ = self.script_output(&["stop", "zookeeper-ensemble"]).await;
            }
            StoreKind::Dynamo | StoreKind::S3 => {
                if let Some(mut child) = self.moto.take() {
                    let _ = child.kill().await;
                }
            }
        }
    }
}

async fn wait_gone(pid: u32) {
    leasehold_core::testing::process::poll(
        Duration::from_secs(10),
        || !matches!(leasehold_core::testing::process::process_state(pid), Some(s) if s != 'Z'),
    )
    .await;
}

/// The `Mode:` (`leader`, `follower`) the ZooKeeper server at `addr` reports to `srvr`,
/// if it serves.
async fn zk_mode(addr: &str) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let talk = async {
        let mut s = tokio::net::TcpStream::connect(addr).await.ok()?;
        s.write_all(b"srvr").await.ok()?;
        let mut out = String::new();
        s.read_to_string(&mut out).await.ok()?;
        out.lines().find_map(|l| l.strip_prefix("Mode: ")).map(str::to_owned)
    };
    tokio::time::timeout(Duration::from_secs(1), talk).await.ok().flatten()
}

/// `(member id, leader id)` of the etcd member at `endpoint`.
async fn etcd_status(endpoint: &str) -> Option<(u64, u64)> {
    let opts = etcd_client::ConnectOptions::new()
        .with_connect_timeout(Duration::from_millis(500))
        .with_timeout(Duration::from_secs(1));
    let mut c = etcd_client::Client::connect([endpoint], Some(opts)).await.ok()?;
    let s = tokio::time::timeout(Duration::from_secs(2), c.status())
        .await
        .ok()?
        .ok()?;
    let member = s.header()?.member_id();
    Some((member, s.leader()))
}

/// Whether `s` is `[a-z0-9_]+`: safe to splice into SQL and store object names.
pub(crate) fn is_sql_word(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// Names a run's store objects derive from its namespace (`[a-z0-9_]+`).
#[derive(Debug, Clone)]
pub struct Namespace(String);

impl Namespace {
    /// A namespace.
    ///
    /// # Panics
    /// If it holds anything but ASCII lowercase letters, digits and `_`.
    pub fn new(ns: &str) -> Self {
        assert!(is_sql_word(ns), "namespace {ns:?} must be [a-z0-9_]+");
        Self(ns.to_owned())
    }

    /// As given.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    fn sql_table(&self) -> String {
        format!("lht_{}_leases", self.0)
    }

    fn redis_prefix(&self) -> String {
        format!("lht:{}:", self.0)
    }

    fn etcd_prefix(&self) -> String {
        format!("lht/{}/", self.0)
    }

    fn zk_root(&self) -> String {
        format!("/lht_{}", self.0)
    }

    fn dynamo_table(&self) -> String {
        format!("lht-{}", self.0.replace('_', "-"))
    }

    fn s3_bucket(&self) -> String {
        let b = format!("lht-{}", self.0.replace('_', "-"));
        b.chars().take(63).collect::<String>().trim_end_matches('-').to_owned()
    }
}

/// The name of the one lease every run fights over.
pub const LEASE_NAME: &str = "torture";

/// A store built for a worker or the observer, with the Redis store itself when it is
/// Redis (for re-seeding its token counter).
#[derive(Debug, Clone)]
pub struct Built {
    /// The store, each call bounded by the call timeout.
    pub store: Arc<dyn CasStore>,
    /// The Redis store, for [`leasehold_redis::RedisStore::seed_fence_counter`].
    pub redis: Option<leasehold_redis::RedisStore>,
}

/// Creates what the store needs before leases can be taken (Postgres and MySQL lease tables,
/// DynamoDB table, S3 bucket); idempotent.
///
/// # Errors
/// Store errors.
pub async fn prepare(kind: StoreKind, endpoint: &str, ns: &Namespace) -> LeaseResult<()> {
    match kind {
        StoreKind::Postgres => {
            let pool = sqlx::postgres::PgPoolOptions::new()
                .max_connections(1)
                .acquire_timeout(Duration::from_secs(10))
                .connect(endpoint)
                .await
                .map_err(|e| Error::unavailable("connect to postgres", e))?;
            let config = leasehold_postgres::PostgresConfig::new().with_table(&ns.sql_table())?;
            leasehold_postgres::PostgresStore::provision(&pool, &config).await?;
            pool.close().await;
            Ok(())
        }
        StoreKind::MySql => {
            let pool = mysql_pool(endpoint, 1, Duration::from_secs(10)).await?;
            let config = leasehold_mysql::MySqlConfig::new().with_table(&ns.sql_table())?;
            let done = leasehold_mysql::MySqlStore::provision(&pool, &config).await;
            pool.close().await;
            done
        }
        StoreKind::Redis | StoreKind::Etcd => Ok(()),
        StoreKind::ZooKeeper => {
            let config = leasehold_zookeeper::ZooKeeperConfig::new(ns.zk_root())?;
            leasehold_zookeeper::ZooKeeperStore::provision(endpoint, &config).await
        }
        StoreKind::Dynamo => {
            let store = leasehold_dynamodb::DynamoStore::new(
                dynamo_client(endpoint, Duration::from_secs(5)),
                leasehold_dynamodb::DynamoConfig::new(ns.dynamo_table())?,
            );
            leasehold_dynamodb::DynamoStore::provision(store.client(), store.config()).await
        }
        StoreKind::S3 => {
            let client = leasehold_s3::local_client(endpoint);
            match client.create_bucket().bucket(ns.s3_bucket()).send().await {
                Ok(_) => Ok(()),
                Err(e) => {
                    let text = format!("{e:?}");
                    if text.contains("BucketAlreadyOwnedByYou") || text.contains("BucketAlreadyExists") {
                        Ok(())
                    } else {
                        Err(Error::unavailable("create bucket", text))
                    }
                }
            }
        }
    }
}

/// A pool of at most `max` connections on the MariaDB at `url`, waiting at most
/// `timeout` for a connection.
async fn mysql_pool(url: &str, max: u32, timeout: Duration) -> LeaseResult<sqlx::MySqlPool> {
    sqlx::mysql::MySqlPoolOptions::new()
        .max_connections(max)
        .acquire_timeout(timeout)
        .connect(url)
        .await
        .map_err(|e| Error::unavailable("connect to mariadb", e))
}

/// A DynamoDB client for a local endpoint (static credentials, one region), every
/// attempt bounded by `timeout`.
pub fn dynamo_client(endpoint: &str, timeout: Duration) -> aws_sdk_dynamodb::Client {
    use aws_sdk_dynamodb::config::timeout::TimeoutConfig;
    let timeouts = TimeoutConfig::builder()
        .connect_timeout(Duration::from_secs(1))
        .operation_attempt_timeout(timeout)
        .operation_timeout(timeout)
        .build();
    let config = leasehold_dynamodb::local_client(endpoint).config().to_builder();
    aws_sdk_dynamodb::Client::from_conf(config.timeout_config(timeouts).build())
}

/// Builds the lease store of `kind` on `endpoints` (one per etcd member or ZooKeeper
/// server), every call
/// bounded by `request_timeout` ([`Bounded`]).
///
/// # Errors
/// Store errors (the store is down, the table is missing).
pub async fn build(
    kind: StoreKind,
    endpoints: &[String],
    ns: &Namespace,
    request_timeout: Duration,
) -> LeaseResult<Built> {
    let first = endpoints
        .first()
        .ok_or_else(|| Error::invalid("endpoints", "none given"))?;
    let (store, redis): (Arc<dyn CasStore>, _) = match kind {
        StoreKind::Postgres => {
            let pool = sqlx::postgres::PgPoolOptions::new()
                .max_connections(4)
                .acquire_timeout(request_timeout)
                .connect(first)
                .await
                .map_err(|e| Error::unavailable("connect to postgres", e))?;
            let config = leasehold_postgres::PostgresConfig::new().with_table(&ns.sql_table())?;
            (
                Arc::new(leasehold_postgres::PostgresStore::new(pool, config).await?),
                None,
            )
        }
        StoreKind::MySql => {
            let pool = mysql_pool(first, 4, request_timeout).await?;
            let config = leasehold_mysql::MySqlConfig::new()
                .with_table(&ns.sql_table())?
                .with_request_timeout(request_timeout)?;
            (Arc::new(leasehold_mysql::MySqlStore::new(pool, config).await?), None)
        }
        StoreKind::Redis => {
            let client = redis::Client::open(first.as_str()).map_err(|e| Error::invalid("redis url", e.to_string()))?;
            let mut config = leasehold_redis::RedisConfig::default().with_prefix(ns.redis_prefix());
            config.request_timeout = Some(request_timeout);
            let s = leasehold_redis::RedisStore::connect(client, config).await?;
            (Arc::new(s.clone()), Some(s))
        }
        StoreKind::Etcd => {
            let opts = etcd_client::ConnectOptions::new()
                .with_connect_timeout(Duration::from_secs(1))
                .with_timeout(request_timeout);
            let client = etcd_client::Client::connect(endpoints, Some(opts))
                .await
                .map_err(|e| Error::unavailable("connect to etcd", e))?;
            let config = leasehold_etcd::EtcdConfig::new(ns.etcd_prefix())?.with_request_timeout(request_timeout)?;
            (Arc::new(leasehold_etcd::EtcdStore::new(client, config)), None)
        }
        StoreKind::ZooKeeper => {
            let mut config =
                leasehold_zookeeper::ZooKeeperConfig::new(ns.zk_root())?.with_request_timeout(request_timeout)?;
            if let Some(tick) = zk_tick() {
                config = config.with_tick_time(tick)?;
            }
            let s = leasehold_zookeeper::ZooKeeperStore::connect(&endpoints.join(","), config).await?;
            (Arc::new(s), None)
        }
        StoreKind::Dynamo => {
            let s = leasehold_dynamodb::DynamoStore::new(
                dynamo_client(first, request_timeout),
                leasehold_dynamodb::DynamoConfig::new(ns.dynamo_table())?,
            );
            s.verify().await?;
            (Arc::new(s), None)
        }
        StoreKind::S3 => {
            let config =
                leasehold_s3::S3Config::new(ns.s3_bucket(), "leases")?.with_request_timeout(request_timeout)?;
            let s = leasehold_s3::S3Store::new(leasehold_s3::local_client(first), config);
            (Arc::new(s), None)
        }
    };
    Ok(Built {
        store: Arc::new(Bounded {
            inner: store,
            timeout: request_timeout,
        }),
        redis,
    })
}

/// A store whose every call is bounded by a timeout: a call still unanswered then is
/// [`Error::Indeterminate`] (it was sent; it may have applied). Waiting
/// ([`CasStore::wait_for_change`]) keeps its own bound.
#[derive(Debug)]
pub struct Bounded {
    /// The store.
    pub inner: Arc<dyn CasStore>,
    /// The bound.
    pub timeout: Duration,
}

impl Bounded {
    async fn bound<T>(&self, what: &str, f: impl std::future::Future<Output = LeaseResult<T>>) -> LeaseResult<T> {
        match tokio::time::timeout(self.timeout, f).await {
            Ok(r) => r,
            Err(_) => Err(Error::indeterminate(
                format!("{what}: no answer within {:?}", self.timeout),
                "timed out",
            )),
        }
    }
}

#[async_trait]
impl CasStore for Bounded {
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    async fn read(&self, name: &LeaseName) -> LeaseResult<Option<Stored>> {
        self.bound("read", self.inner.read(name)).await
    }
    async fn write(&self, name: &LeaseName, expect: &Precondition, record: &LeaseRecord) -> LeaseResult<CasOutcome> {
        self.bound("write", self.inner.write(name, expect, record)).await
    }
    async fn delete(&self, name: &LeaseName, version: &Version) -> LeaseResult<DeleteOutcome> {
        self.bound("delete", self.inner.delete(name, version)).await
    }
    async fn renew(&self, name: &LeaseName, version: &Version, record: &LeaseRecord) -> LeaseResult<CasOutcome> {
        self.bound("renew", self.inner.renew(name, version, record)).await
    }
    async fn wait_for_change(&self, name: &LeaseName, seen: Option<&Version>, wait: Wait) -> LeaseResult<()> {
        match tokio::time::timeout(
            wait.after() + self.timeout,
            self.inner.wait_for_change(name, seen, wait),
        )
        .await
        {
            Ok(r) => r,
            Err(_) => Ok(()),
        }
    }
}

/// The release mutant: a release (a write of a vacant record on the holder's version)
/// that conflicts is re-sent on whatever version and token the record has now, so a
/// deposed holder's release vacates its successor's lease. (Re-sent with its own older
/// token, the stores refuse it: a version-guarded write never lowers a token.) The
/// checker must catch it.
#[derive(Debug)]
pub struct BlindRelease {
    /// The store.
    pub inner: Arc<dyn CasStore>,
}

#[async_trait]
impl CasStore for BlindRelease {
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    async fn read(&self, name: &LeaseName) -> LeaseResult<Option<Stored>> {
        self.inner.read(name).await
    }
    async fn write(&self, name: &LeaseName, expect: &Precondition, record: &LeaseRecord) -> LeaseResult<CasOutcome> {
        let outcome = self.inner.write(name, expect, record).await?;
        if !(record.is_vacant() && matches!(expect, Precondition::Version(_))) {
            return Ok(outcome);
        }
        let current = match outcome {
            CasOutcome::Conflict(Current::Present(s)) => Some(s),
            CasOutcome::Conflict(Current::Unknown) => self.inner.read(name).await?,
            other => return Ok(other),
        };
        match current {
            Some(s) if s.record.holder.is_some() => {
                let mut blind = record.clone();
                blind.token = s.record.token;
                self.inner.write(name, &Precondition::Version(s.version), &blind).await
            }
            Some(s) => Ok(CasOutcome::Conflict(Current::Present(s))),
            None => Ok(CasOutcome::Conflict(Current::Absent)),
        }
    }
    async fn delete(&self, name: &LeaseName, version: &Version) -> LeaseResult<DeleteOutcome> {
        self.inner.delete(name, version).await
    }
    async fn renew(&self, name: &LeaseName, version: &Version, record: &LeaseRecord) -> LeaseResult<CasOutcome> {
        self.inner.renew(name, version, record).await
    }
    async fn wait_for_change(&self, name: &LeaseName, seen: Option<&Version>, wait: Wait) -> LeaseResult<()> {
        self.inner.wait_for_change(name, seen, wait).await
    }
}

/// The worker number a holder id names (`w<n>#…`), if it is one of ours.
pub fn worker_of(holder: &str) -> Option<u32> {
    holder.strip_prefix('w')?.split('#').next()?.parse().ok()
}

/// A random duration between `lo` and `hi` times `base`.
pub fn between(rng: &mut StdRng, base: Duration, lo: f64, hi: f64) -> Duration {
    base.mul_f64(rng.random_range(lo..hi))
}

/// The `tickTime` of the ZooKeeper servers `scripts/stores.sh` starts
/// (`LEASEHOLD_ZK_TICK_MS`), if the environment says it.
fn zk_tick() -> Option<Duration> {
    std::env::var("LEASEHOLD_ZK_TICK_MS")
        .ok()
        .and_then(|ms| ms.parse().ok())
        .map(Duration::from_millis)
}
