//! The torture controller: real worker processes fight over one lease on a dedicated
//! store instance, through fault proxies, while a seeded controller pauses, kills and
//! restarts things; then the independent [`checker`](crate::checker::check) reads every
//! history and the protected resource.
//!
//! ```text
//!  torture-worker × N ──FaultProxy──▶ dedicated store (Postgres | MariaDB | Redis | etcd ×3 | moto)
//!        │                                   ▲
//!        └──FaultProxy──▶ shared Postgres    └── observer (direct): Observed events
//!                         (the resource: hw row + writes table)
//! ```
//!
//! The seed fixes the controller's schedule: which fault comes next, its duration, which
//! proxy mode, which etcd member, the gaps between faults, and each worker's seed. The
//! interleavings of real processes are not reproducible; a seed reproduces the same
//! *sequence* of faults, and the histories of a run are kept for its checker report.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use leasehold_core::LeaseName;
use leasehold_core::testing::process::{freeze, kill9, resume};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin};
use tokio::sync::{Notify, oneshot};
use tokio::time::Instant;

use crate::checker::{self, Report};
use crate::history::{Event, HistoryWriter, now_ms, read_dir};
use crate::permits;
use crate::proxy::{FaultProxy, ProxyMode};
use crate::resource::Resource;
use crate::stores::{self, Dedicated, LEASE_NAME, Namespace, StoreKind, between, worker_of};

/// Which bug a run plants on purpose, for the checker to find.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mutant {
    /// None: the real thing.
    None,
    /// The resource's write drops its guard (`AND last_token <= $1`).
    NoFence,
    /// A deposed holder's release vacates whatever record is there now
    /// ([`stores::BlindRelease`]).
    BlindRelease,
}

impl Mutant {
    fn flag(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::NoFence => "no-fence",
            Self::BlindRelease => "blind-release",
        }
    }

    /// The mutant named on a command line.
    pub fn parse(s: &str) -> Option<Self> {
        [Self::None, Self::NoFence, Self::BlindRelease]
            .into_iter()
            .find(|m| m.flag() == s)
    }
}

/// Relative weights of the faults the controller picks from (0 disables one).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FaultMix {
    /// SIGSTOP the holder for 1-3 TTLs, then SIGCONT.
    pub pause: f64,
    /// The same, landing between the holder's validity check and its write.
    pub pause_window: f64,
    /// `kill -9` the holder; a new worker replaces it.
    pub kill9: f64,
    /// Restart the store (an etcd member: kill -9 and restart).
    pub store_restart: f64,
    /// Delay, blackhole, drop or drop-replies between workers and the store.
    pub proxy: f64,
    /// Drop-replies or blackhole between workers and the resource (unknown outcomes).
    pub resource_proxy: f64,
}

impl FaultMix {
    /// Everything, in the proportions the long run uses.
    pub const ALL: FaultMix = FaultMix {
        pause: 8.0,
        pause_window: 6.0,
        kill9: 3.0,
        store_restart: 1.2,
        proxy: 2.0,
        resource_proxy: 0.3,
    };

    /// Pauses and kills only: the faults that make takeovers (the clock-skew runs: an
    /// early takeover or a double grant would show there; no restart may excuse one).
    pub const TAKEOVERS: FaultMix = FaultMix {
        pause: 1.0,
        pause_window: 1.0,
        kill9: 1.0,
        store_restart: 0.0,
        proxy: 0.0,
        resource_proxy: 0.0,
    };

    /// Pauses only, mostly in the window (mutant runs: the shortest way to a stale write).
    pub const PAUSES: FaultMix = FaultMix {
        pause: 1.0,
        pause_window: 3.0,
        kill9: 0.0,
        store_restart: 0.0,
        proxy: 0.0,
        resource_proxy: 0.0,
    };
}

/// When a run stops: at `max_time` (or, if stalls delayed some fault kind's first
/// turn, once every kind has had one, within twice `max_time`), or once every target
/// is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// The longest the fault phase runs.
    pub max_time: Duration,
    /// Pause/kill takeover cycles to reach.
    pub cycles: u64,
    /// Store restarts to reach.
    pub restarts: u64,
    /// Proxy faults to reach.
    pub proxy_faults: u64,
}

impl Budget {
    /// Just a time limit.
    pub fn time(max_time: Duration) -> Self {
        Self {
            max_time,
            cycles: u64::MAX,
            restarts: u64::MAX,
            proxy_faults: u64::MAX,
        }
    }
}

/// One torture run.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// The store under test.
    pub kind: StoreKind,
    /// The controller's seed.
    pub seed: u64,
    /// The dedicated store's port (etcd: base of 3 client and 3 peer ports), in
    /// 21000-21999 (the bounded tests) or 22000-22999 (the long runs, which may then run
    /// beside them).
    pub port: u16,
    /// Worker processes alive at once.
    pub workers: usize,
    /// The lease TTL.
    pub ttl: Duration,
    /// When to stop.
    pub budget: Budget,
    /// The faults.
    pub faults: FaultMix,
    /// A planted bug, if any.
    pub mutant: Mutant,
    /// Skewed and jumping worker clocks: worker n is off by +10 TTL, -10 TTL, or jumps
    /// within ±10 TTL, by n mod 3.
    pub skew: bool,
    /// Redis only: after a refused write, raise the token counter above the resource's
    /// high-water mark (the leasehold-redis remedy for a lost counter).
    pub reseed: bool,
    /// `Some(n)`: the workers take permits of a semaphore of `n` permits (one resource
    /// per slot, judged by [`permits::check`]) instead of the one lease.
    pub permits: Option<u32>,
    /// The `torture-worker` executable.
    pub worker_exe: PathBuf,
    /// Where histories and logs go (created; wiped first).
    pub out_dir: PathBuf,
}

impl RunConfig {
    /// The defaults for `kind`: TTL, workers, every fault, time-bounded.
    pub fn new(kind: StoreKind, seed: u64, port: u16, worker_exe: PathBuf, max_time: Duration) -> Self {
        let ttl = match kind {
            StoreKind::Postgres | StoreKind::MySql | StoreKind::Redis => Duration::from_millis(500),
            StoreKind::Dynamo | StoreKind::S3 => Duration::from_millis(800),
            StoreKind::Etcd => Duration::from_secs(2),
            StoreKind::ZooKeeper => Duration::from_secs(1),
        };
        let out_dir = PathBuf::from(stores::env("LEASEHOLD_STORES_DIR"))
            .join("leasehold-tests")
            .join(format!("run-{}-{port}", kind.name()));
        Self {
            kind,
            seed,
            port,
            workers: 3,
            ttl,
            budget: Budget::time(max_time),
            faults: FaultMix::ALL,
            mutant: Mutant::None,
            skew: false,
            reseed: kind == StoreKind::Redis,
            permits: None,
            worker_exe,
            out_dir,
        }
    }
}

/// What a run did and what the checker found.
#[derive(Debug, Clone)]
pub struct RunReport {
    /// The store.
    pub kind: StoreKind,
    /// The seed.
    pub seed: u64,
    /// The TTL.
    pub ttl: Duration,
    /// How long the fault phase ran.
    pub elapsed: Duration,
    /// Worker processes started (including replacements of killed ones).
    pub workers_spawned: u32,
    /// Faults injected, by kind.
    pub faults: BTreeMap<String, u64>,
    /// Pauses (either kind) during which another worker was granted the lease.
    pub pause_takeovers: u64,
    /// Kills after which another worker was granted the lease.
    pub kill_takeovers: u64,
    /// Time from `kill -9` of the holder to the next grant, in ms, sorted.
    pub takeover_after_kill_ms: Vec<u64>,
    /// Clock jumps the workers made.
    pub clock_jumps: u64,
    /// Fault steps that found no holder to hit (skipped).
    pub no_holder: u64,
    /// Fault steps after which no holder appeared within 10 TTLs + 5 s: the fault's
    /// kind and when it began (seconds into the fault phase), in order.
    pub stalls: Vec<(String, f64)>,
    /// Window pauses whose holder made no further validity check in time (skipped).
    pub missed_windows: u64,
    /// The checker's report (in a semaphore run, every slot's, added up, with the
    /// semaphore's own rule).
    pub check: Report,
    /// A semaphore run's permits, and the most permit holders at once.
    pub permits: Option<(u32, usize)>,
    /// Where the histories are.
    pub out_dir: PathBuf,
}

impl RunReport {
    /// Pause and kill cycles that ended in a takeover.
    pub fn cycles(&self) -> u64 {
        self.pause_takeovers + self.kill_takeovers
    }

    /// Faults of kinds starting with `prefix`.
    pub fn faults_of(&self, prefix: &str) -> u64 {
        sum_with_prefix(&self.faults, prefix)
    }

    /// The `q` quantile (0-1) of the takeover times after kill -9.
    pub fn takeover_quantile(&self, q: f64) -> Option<u64> {
        quantile(&self.takeover_after_kill_ms, q)
    }
}

/// The sum of the counts of kinds starting with `prefix`.
pub(crate) fn sum_with_prefix(counts: &BTreeMap<String, u64>, prefix: &str) -> u64 {
    counts
        .iter()
        .filter(|(k, _)| k.starts_with(prefix))
        .map(|(_, v)| v)
        .sum()
}

/// The `q` quantile (0-1, nearest rank) of `sorted`.
pub(crate) fn quantile(sorted: &[u64], q: f64) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let last = sorted.len() - 1;
    // Nearest rank: ceil(q * n) - 1, within 0..=last.
    let rank = (0..=last)
        .find(|&i| (i + 1) as f64 >= q * sorted.len() as f64)
        .unwrap_or(last);
    sorted.get(rank).copied()
}

impl fmt::Display for RunReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = &self.check;
        writeln!(
            f,
            "torture {} seed {} ttl {} ms: {:.1} s, {} workers spawned",
            self.kind.name(),
            self.seed,
            self.ttl.as_millis(),
            self.elapsed.as_secs_f64(),
            self.workers_spawned
        )?;
        writeln!(
            f,
            "  cycles {} (pause takeovers {}, kill -9 takeovers {}); acquire calls {}, grants {}; epochs {}; \
             clock jumps {}; skipped steps: no holder {}, window missed {}; settle timeouts {}",
            self.cycles(),
            self.pause_takeovers,
            self.kill_takeovers,
            c.acquires,
            c.grants,
            c.epochs,
            self.clock_jumps,
            self.no_holder,
            self.missed_windows,
            self.stalls.len()
        )?;
        if !self.stalls.is_empty() {
            let after: Vec<String> = self.stalls.iter().map(|(k, t)| format!("{k} at {t:.1} s")).collect();
            writeln!(f, "  no holder within 10 TTL + 5 s after: {}", after.join(", "))?;
        }
        let faults: Vec<String> = self.faults.iter().map(|(k, v)| format!("{k} {v}")).collect();
        writeln!(f, "  faults: {}", faults.join(", "))?;
        if let Some((n, most)) = self.permits {
            writeln!(f, "  semaphore of {n} permits: at most {most} permit holders at once")?;
        }
        writeln!(
            f,
            "  writes: sent {}, accepted {} (acknowledged {}), refused {}, unknown {}",
            c.writes_sent, c.writes_accepted, c.writes_acknowledged, c.writes_refused, c.writes_unknown
        )?;
        writeln!(
            f,
            "  stale writes (sent after a newer grant): {} -> accepted {} / refused {} / unknown {}",
            c.stale.sent, c.stale.accepted, c.stale.refused, c.stale.unknown
        )?;
        writeln!(
            f,
            "  grants below the resource's high-water mark: {} (their writes: accepted {} / refused {} / unknown {})",
            c.reissued_grants, c.reissued.accepted, c.reissued.refused, c.reissued.unknown
        )?;
        let ttl = self.ttl.as_millis();
        match (self.takeover_quantile(0.5), self.takeover_quantile(0.99)) {
            (Some(p50), Some(p99)) => writeln!(
                f,
                "  takeover after kill -9 ({} samples): p50 {p50} ms ({:.2} TTL), p99 {p99} ms ({:.2} TTL)",
                self.takeover_after_kill_ms.len(),
                p50 as f64 / ttl as f64,
                p99 as f64 / ttl as f64
            )?,
            _ => writeln!(f, "  takeover after kill -9: no samples")?,
        }
        writeln!(
            f,
            "  observations {}; explained by data loss {}; not judged (granted across a data-loss restart) {}; \
             violations {}",
            c.observations,
            c.explained.len(),
            c.unjudged.len(),
            c.violations.len()
        )?;
        for v in c.violations.iter().take(20) {
            writeln!(f, "  VIOLATION {v}")?;
        }
        for e in c.explained.iter().take(5) {
            writeln!(f, "  explained: {e}")?;
        }
        write!(f, "  histories: {}", self.out_dir.display())
    }
}

/// What the reader tasks learn from the workers' stdout.
#[derive(Default)]
struct Live {
    /// Worker id -> the token it announced holding.
    holding: Mutex<HashMap<u32, u64>>,
    /// Worker id -> who waits for its next `window` line.
    window: Mutex<HashMap<u32, oneshot::Sender<()>>>,
    /// The last grant: (worker, token).
    last_grant: Mutex<Option<(u32, u64)>>,
    /// Worker id -> the semaphore slot of its last grant (semaphore runs).
    slots: Mutex<HashMap<u32, u32>>,
    /// Grants announced so far.
    grant_count: AtomicU64,
    grants: Notify,
    clock_jumps: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Live {
    /// The worker holding the newest token, as announced.
    fn holder(&self) -> Option<(u32, u64)> {
        lock(&self.holding)
            .iter()
            .max_by_key(|(_, t)| **t)
            .map(|(w, t)| (*w, *t))
    }
}

struct Worker {
    id: u32,
    pid: u32,
    child: Child,
    stdin: ChildStdin,
}

struct Controller {
    cfg: RunConfig,
    rng: StdRng,
    live: Arc<Live>,
    workers: Vec<Worker>,
    next_id: u32,
    faults: HistoryWriter,
    counts: BTreeMap<String, u64>,
    store: Dedicated,
    store_proxies: Vec<FaultProxy>,
    resource_proxy: FaultProxy,
    ns: Namespace,
    run: String,
    resource_url: String,
    no_holder: u64,
    stalls: Vec<(String, f64)>,
    missed_windows: u64,
    live_cycles: u64,
    /// Data-loss restarts begun plus ended: odd while one is under way. The observer
    /// keeps a read only if this did not change across it, so every observation it
    /// records falls wholly inside one store epoch.
    restart_gen: Arc<AtomicU64>,
}

static RUN_SEQ: AtomicU64 = AtomicU64::new(0);

/// Runs one torture run and checks it.
///
/// # Panics
/// If the environment is missing (`LEASEHOLD_PG_URL`, `LEASEHOLD_STORES_DIR`,
/// `LEASEHOLD_STORES_SCRIPT`), a store cannot be started, or a worker cannot be spawned.
pub async fn run(cfg: RunConfig) -> RunReport {
    let pg_url = stores::env("LEASEHOLD_PG_URL");
    if cfg.out_dir.exists() {
        std::fs::remove_dir_all(&cfg.out_dir).unwrap_or_else(|e| panic!("wiping {}: {e}", cfg.out_dir.display()));
    }
    std::fs::create_dir_all(&cfg.out_dir).unwrap_or_else(|e| panic!("creating {}: {e}", cfg.out_dir.display()));
    let run = format!(
        "{}_{}_{}_{}",
        cfg.kind.name(),
        cfg.seed,
        std::process::id(),
        RUN_SEQ.fetch_add(1, Ordering::Relaxed)
    );
    // A semaphore run has one resource per slot (`<run>_s<slot>`), as its workers write.
    let resource_runs: Vec<String> = match cfg.permits {
        Some(n) => (0..n).map(|i| format!("{run}_s{i}")).collect(),
        None => vec![run.clone()],
    };
    let mut resources = Vec::new();
    for r in &resource_runs {
        resources.push(
            Resource::create(&pg_url, r)
                .await
                .unwrap_or_else(|e| panic!("cannot create the resource tables on {pg_url}: {e}")),
        );
    }

    let store = Dedicated::start(cfg.kind, cfg.port).await;
    let ns = Namespace::new(&run);
    let direct = Dedicated::endpoints(cfg.kind, &store.upstreams());
    prepare_within(cfg.kind, &direct[0], &ns, Duration::from_secs(60)).await;
    let mut store_proxies = Vec::new();
    for up in store.upstreams() {
        store_proxies.push(FaultProxy::start(up).await.expect("store proxy"));
    }
    let (pg_addr, resource_url) = proxied_url(&pg_url);
    let resource_proxy = FaultProxy::start(pg_addr).await.expect("resource proxy");
    let resource_url = resource_url.replace("{}", &resource_proxy.addr().to_string());

    let faults = HistoryWriter::open(&cfg.out_dir.join("controller.jsonl")).expect("controller history");
    let mut c = Controller {
        rng: StdRng::seed_from_u64(cfg.seed),
        cfg,
        live: Arc::new(Live::default()),
        workers: Vec::new(),
        next_id: 1,
        faults,
        counts: BTreeMap::new(),
        store,
        store_proxies,
        resource_proxy,
        ns,
        run,
        resource_url,
        no_holder: 0,
        stalls: Vec::new(),
        missed_windows: 0,
        live_cycles: 0,
        restart_gen: Arc::new(AtomicU64::new(0)),
    };
    let observer = c.start_observer(&direct).await;
    for _ in 0..c.cfg.workers {
        c.spawn_worker().await;
    }
    // Let the first holder settle before the first fault.
    c.wait_for_holder(c.cfg.ttl * 20 + Duration::from_secs(10)).await;

    let started = Instant::now();
    c.fault_loop(started).await;
    let elapsed = started.elapsed();

    // Wind down: heal everything, let the last holder write, stop every worker.
    for p in &c.store_proxies {
        p.set(ProxyMode::Pass);
    }
    c.resource_proxy.set(ProxyMode::Pass);
    for w in &c.workers {
        let _ = resume(w.pid);
    }
    tokio::time::sleep(c.cfg.ttl).await;
    for w in &mut c.workers {
        let _ = kill9(w.pid);
        let _ = w.child.wait().await;
    }
    observer.abort();
    let _ = observer.await;
    c.store.stop().await;

    let mut events = read_dir(&c.cfg.out_dir).expect("reading histories");
    let (check, permits) = match c.cfg.permits {
        None => {
            let rows = resources[0].rows().await.expect("reading the resource");
            save_rows(&c.cfg.out_dir, &rows);
            (checker::check(&events, &rows), None)
        }
        Some(n) => {
            std::fs::write(c.cfg.out_dir.join(PERMITS_FILE), n.to_string()).expect("saving the permits");
            let mut slots = BTreeMap::new();
            for (i, resource) in (0..n).zip(&resources) {
                let dir = c.cfg.out_dir.join(format!("slot-{i}"));
                std::fs::create_dir_all(&dir).expect("slot directory");
                let rows = resource.rows().await.expect("reading a slot's resource");
                save_rows(&dir, &rows);
                let slot_events = read_dir(&dir).expect("reading a slot's histories");
                slots.insert(
                    i,
                    permits::SlotRun {
                        events: slot_events,
                        rows,
                    },
                );
            }
            let p = permits::check(n, &events, &slots);
            for run in slots.into_values() {
                events.extend(run.events);
            }
            (p.report, Some((n, p.most_holders)))
        }
    };
    // The rows are saved with the histories (for `recheck`); the tables can go, and so
    // can the store's data after a clean run.
    for resource in &resources {
        let _ = resource.drop_tables().await;
    }
    if check.is_clean() {
        let _ = std::fs::remove_dir_all(c.store.dir());
    }
    let mut report = c.report(&events, check, elapsed);
    report.permits = permits;
    report
}

/// The file in a run's directory that keeps the resource's rows (the tables are dropped
/// after a clean run), so that [`recheck`] can judge the run again later.
pub const ROWS_FILE: &str = "resource.rows";

fn save_rows(dir: &Path, rows: &[checker::ResourceRow]) {
    let mut text = String::new();
    for r in rows {
        text.push_str(&serde_json::to_string(r).expect("row to json"));
        text.push('\n');
    }
    std::fs::write(dir.join(ROWS_FILE), text).expect("saving the resource's rows");
}

/// The file in a semaphore run's directory that keeps its number of permits (each slot's
/// histories and rows are in `slot-<i>/` beside it).
pub const PERMITS_FILE: &str = "permits";

fn read_rows(dir: &Path) -> std::io::Result<Vec<checker::ResourceRow>> {
    std::fs::read_to_string(dir.join(ROWS_FILE))?
        .lines()
        .map(|l| serde_json::from_str(l).map_err(std::io::Error::other))
        .collect()
}

/// Runs the checker again over a finished run's directory (histories and saved rows):
/// its report, and for a semaphore run its permits and the most permit holders at once
/// (each slot judged as a lease, and the permit holders counted, as the run did).
///
/// # Errors
/// If a file cannot be read or parsed.
pub fn recheck(dir: &Path) -> std::io::Result<(Report, Option<(u32, usize)>)> {
    let events = read_dir(dir)?;
    let permits = match std::fs::read_to_string(dir.join(PERMITS_FILE)) {
        Ok(text) => text.trim().parse::<u32>().map_err(std::io::Error::other)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok((checker::check(&events, &read_rows(dir)?), None));
        }
        Err(e) => return Err(e),
    };
    let mut slots = BTreeMap::new();
    for i in 0..permits {
        let slot = dir.join(format!("slot-{i}"));
        slots.insert(
            i,
            permits::SlotRun {
                events: read_dir(&slot)?,
                rows: read_rows(&slot)?,
            },
        );
    }
    let p = permits::check(permits, &events, &slots);
    Ok((p.report, Some((permits, p.most_holders))))
}

/// Creates the run's table, bucket or prefix, retrying until `limit` (a just-started
/// moto on a loaded machine can refuse the first requests).
async fn prepare_within(kind: StoreKind, endpoint: &str, ns: &Namespace, limit: Duration) {
    let deadline = Instant::now() + limit;
    while let Err(e) = stores::prepare(kind, endpoint, ns).await {
        assert!(
            Instant::now() < deadline,
            "preparing {} at {endpoint} within {limit:?}: {e}",
            kind.name()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The shared Postgres address and its URL with `{}` where the proxy address goes.
fn proxied_url(url: &str) -> (SocketAddr, String) {
    let (scheme, rest) = url
        .split_once("://")
        .unwrap_or_else(|| panic!("LEASEHOLD_PG_URL {url:?} is not a URL"));
    let (userinfo, hostpart) = match rest.rsplit_once('@') {
        Some((u, h)) => (format!("{u}@"), h),
        None => (String::new(), rest),
    };
    let (authority, path) = match hostpart.find(['/', '?']) {
        Some(i) => hostpart.split_at(i),
        None => (hostpart, ""),
    };
    let with_port = if authority.contains(':') {
        authority.to_owned()
    } else {
        format!("{authority}:5432")
    };
    let addr = with_port
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .unwrap_or_else(|| panic!("cannot resolve {with_port} from LEASEHOLD_PG_URL"));
    (addr, format!("{scheme}://{userinfo}{{}}{path}"))
}

impl Controller {
    fn ttl(&self) -> Duration {
        self.cfg.ttl
    }

    /// A random duration of `lo` to `hi` TTLs.
    fn span(&mut self, lo: f64, hi: f64) -> Duration {
        let ttl = self.cfg.ttl;
        between(&mut self.rng, ttl, lo, hi)
    }

    fn count(&mut self, kind: &str) {
        *self.counts.entry(kind.to_owned()).or_default() += 1;
    }

    fn record_fault(&mut self, kind: &str, worker: Option<(u32, u64)>, at_ms: u64, data_loss: bool) {
        self.count(kind);
        let slot = worker.and_then(|(w, _)| lock(&self.live.slots).get(&w).copied());
        let e = Event::Fault {
            kind: kind.to_owned(),
            worker: worker.map(|w| w.0),
            token: worker.map(|w| w.1),
            slot,
            at_ms,
            until_ms: now_ms(),
            data_loss,
        };
        self.faults.record(&e).expect("controller history");
    }

    async fn spawn_worker(&mut self) {
        let id = self.next_id;
        self.next_id += 1;
        let cfg = &self.cfg;
        let proxied: Vec<SocketAddr> = self.store_proxies.iter().map(FaultProxy::addr).collect();
        let endpoints = Dedicated::endpoints(cfg.kind, &proxied).join(",");
        let ttl_ms = cfg.ttl.as_millis();
        let ttl_i = i64::try_from(ttl_ms).unwrap_or(i64::MAX);
        let (offset, jump) = if cfg.skew {
            match id % 3 {
                0 => (10 * ttl_i, 0),
                1 => (-10 * ttl_i, 0),
                _ => (0, 10 * ttl_i),
            }
        } else {
            (0, 0)
        };
        let stderr = std::fs::File::create(cfg.out_dir.join(format!("worker-{id}.log"))).expect("worker log");
        let write_interval = (cfg.ttl / 8).max(Duration::from_millis(20));
        let call_timeout = cfg.ttl.max(Duration::from_millis(800));
        let mut cmd = tokio::process::Command::new(&cfg.worker_exe);
        cmd.args(["--id", &id.to_string()])
            .args(["--store", cfg.kind.name()])
            .args(["--endpoints", &endpoints])
            .args(["--ns", self.ns.as_str()])
            .args(["--ttl-ms", &ttl_ms.to_string()])
            .args(["--resource-url", &self.resource_url])
            .args(["--run", &self.run])
            .arg("--history")
            .arg(cfg.out_dir.join(format!("worker-{id}.jsonl")))
            .args([
                "--seed",
                &(cfg.seed.wrapping_mul(1000).wrapping_add(u64::from(id))).to_string(),
            ])
            .args(["--write-interval-ms", &write_interval.as_millis().to_string()])
            .args(["--tenure-writes", "12"])
            .args(["--mutant", cfg.mutant.flag()])
            .args(["--clock-offset-ms", &offset.to_string()])
            .args(["--clock-jump-ms", &jump.to_string()])
            .args(["--call-timeout-ms", &call_timeout.as_millis().to_string()])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(stderr)
            .kill_on_drop(true);
        if cfg.reseed {
            cmd.arg("--reseed");
        }
        if let Some(n) = cfg.permits {
            cmd.args(["--permits", &n.to_string()]);
        }
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawning {}: {e}", cfg.worker_exe.display()));
        let pid = child.id().expect("worker pid");
        let stdin = child.stdin.take().expect("worker stdin");
        let stdout = child.stdout.take().expect("worker stdout");
        let live = self.live.clone();
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let mut parts = line.split_whitespace();
                let word = parts.next().unwrap_or("");
                let n: Option<u64> = parts.next().and_then(|v| v.parse().ok());
                match (word, n) {
                    ("granted", Some(t)) => {
                        if let Some(slot) = parts.next().and_then(|v| v.parse().ok()) {
                            lock(&live.slots).insert(id, slot);
                        }
                        lock(&live.holding).insert(id, t);
                        *lock(&live.last_grant) = Some((id, t));
                        live.grant_count.fetch_add(1, Ordering::SeqCst);
                        live.grants.notify_waiters();
                    }
                    ("ended", Some(t)) => {
                        let mut h = lock(&live.holding);
                        if h.get(&id) == Some(&t) {
                            h.remove(&id);
                        }
                    }
                    ("window", _) => {
                        if let Some(tx) = lock(&live.window).remove(&id) {
                            let _ = tx.send(());
                        }
                    }
                    ("clock_jump", _) => {
                        live.clock_jumps.fetch_add(1, Ordering::Relaxed);
                    }
                    _ => {}
                }
            }
            lock(&live.holding).remove(&id);
        });
        self.workers.push(Worker { id, pid, child, stdin });
    }

    async fn start_observer(&self, direct: &[String]) -> tokio::task::JoinHandle<()> {
        // Retried for a while: ten just-started ensembles on a loaded machine can miss
        // the first session handshake.
        let deadline = Instant::now() + Duration::from_secs(60);
        let built = loop {
            match stores::build(self.cfg.kind, direct, &self.ns, self.ttl().max(Duration::from_secs(1))).await {
                Ok(built) => break built,
                Err(e) if Instant::now() < deadline => {
                    eprintln!("observer store: {e}; trying again");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                Err(e) => panic!("observer store: {e}"),
            }
        };
        // The lease's record; in a semaphore run, each slot's, into the slot's directory.
        let mut watched: Vec<(LeaseName, HistoryWriter, Option<Seen>)> = Vec::new();
        let names: Vec<(String, PathBuf)> = match self.cfg.permits {
            None => vec![(LEASE_NAME.to_owned(), self.cfg.out_dir.clone())],
            Some(n) => (0..n)
                .map(|i| {
                    let dir = self.cfg.out_dir.join(format!("slot-{i}"));
                    std::fs::create_dir_all(&dir).expect("slot directory");
                    (format!("{LEASE_NAME}/permit/{i}"), dir)
                })
                .collect(),
        };
        for (name, dir) in names {
            let out = HistoryWriter::open(&dir.join("observer.jsonl")).expect("observer history");
            watched.push((LeaseName::new(name).expect("lease name"), out, None));
        }
        let period = (self.ttl() / 5).max(Duration::from_millis(20));
        let restart_gen = Arc::clone(&self.restart_gen);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(period).await;
                for (name, out, last) in &mut watched {
                    if !observe(&built.store, name, out, last, &restart_gen).await {
                        return;
                    }
                }
            }
        })
    }
}

/// What the observer last saw of a record: its holder (a worker) and token.
type Seen = (Option<u32>, u64);

/// One read of `name`'s record by the observer, recorded in `out` if it changed since
/// `last`. False when the history can no longer be written.
async fn observe(
    store: &Arc<dyn leasehold_core::store::CasStore>,
    name: &LeaseName,
    out: &mut HistoryWriter,
    last: &mut Option<Seen>,
    restart_gen: &AtomicU64,
) -> bool {
    let gen_before = restart_gen.load(Ordering::SeqCst);
    if gen_before % 2 == 1 {
        return true; // a data-loss restart is under way
    }
    let read = store.read(name).await;
    let at_ms = now_ms();
    if restart_gen.load(Ordering::SeqCst) != gen_before {
        return true; // which instance answered is not known
    }
    match read {
        Ok(Some(s)) => {
            let holder = s
                .record
                .holder
                .as_ref()
                .map(|h| worker_of(h.as_str()).unwrap_or(u32::MAX));
            let seen = (holder, s.record.token.get());
            if *last != Some(seen) {
                *last = Some(seen);
                let e = Event::Observed {
                    holder,
                    token: seen.1,
                    at_ms,
                };
                if out.record(&e).is_err() {
                    return false;
                }
            }
        }
        Ok(None) => *last = None,
        Err(_) => {}
    }
    true
}

impl Controller {
    /// Waits until some worker announces holding the lease.
    async fn wait_for_holder(&self, timeout: Duration) -> Option<(u32, u64)> {
        let deadline = Instant::now() + timeout;
        loop {
            let notified = self.live.grants.notified();
            if let Some(h) = self.live.holder() {
                return Some(h);
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return self.live.holder();
            }
        }
    }

    fn pid_of(&self, id: u32) -> Option<u32> {
        self.workers.iter().find(|w| w.id == id).map(|w| w.pid)
    }

    fn targets_reached(&self) -> bool {
        let b = &self.cfg.budget;
        self.live_cycles >= b.cycles
            && self.counts_of("store_restart") >= b.restarts
            && self.counts_of("proxy_") >= b.proxy_faults
    }

    fn counts_of(&self, prefix: &str) -> u64 {
        sum_with_prefix(&self.counts, prefix)
    }

    async fn fault_loop(&mut self, started: Instant) {
        let m = self.cfg.faults;
        let choices = [
            ("pause", m.pause),
            ("pause_window", m.pause_window),
            ("kill9", m.kill9),
            ("store_restart", m.store_restart),
            ("proxy_delay", m.proxy / 4.0),
            ("proxy_blackhole", m.proxy / 4.0),
            ("proxy_drop", m.proxy / 4.0),
            ("proxy_drop_replies", m.proxy / 4.0),
            ("resource_drop_replies", m.resource_proxy / 2.0),
            ("resource_blackhole", m.resource_proxy / 2.0),
        ];
        let total: f64 = choices.iter().map(|c| c.1).sum();
        assert!(total > 0.0, "no fault enabled");
        // Every enabled kind once first (in a seeded order), so that even a short run
        // covers them all; then weighted draws.
        let mut first: Vec<&str> = choices.iter().filter(|c| c.1 > 0.0).map(|c| c.0).collect();
        for i in (1..first.len()).rev() {
            let j = self.rng.random_range(0..=i);
            first.swap(i, j);
        }
        let mut last_progress = Instant::now();
        // Every kind gets its turn even if stalls ate the time (up to twice the limit).
        let max = self.cfg.budget.max_time;
        while (started.elapsed() < max || (!first.is_empty() && started.elapsed() < max * 2)) && !self.targets_reached()
        {
            let gap = self.span(0.3, 1.0);
            tokio::time::sleep(gap).await;
            let kind = match first.pop() {
                Some(k) => k,
                None => {
                    let mut pick = self.rng.random_range(0.0..total);
                    let mut kind = choices[0].0;
                    for (k, w) in choices {
                        if pick < w {
                            kind = k;
                            break;
                        }
                        pick -= w;
                    }
                    kind
                }
            };
            let began = started.elapsed().as_secs_f64();
            match kind {
                "pause" => self.pause(false).await,
                "pause_window" => self.pause(true).await,
                "kill9" => self.kill().await,
                "store_restart" => self.restart_store().await,
                "proxy_delay" => {
                    let d = self.span(0.1, 0.6);
                    self.proxy_fault(ProxyMode::Delay(d), kind).await;
                }
                "proxy_blackhole" => self.proxy_fault(ProxyMode::Blackhole, kind).await,
                "proxy_drop" => self.proxy_fault(ProxyMode::Drop, kind).await,
                "proxy_drop_replies" => self.proxy_fault(ProxyMode::DropReplies, kind).await,
                "resource_drop_replies" => self.resource_fault(ProxyMode::DropReplies, kind).await,
                _ => self.resource_fault(ProxyMode::Blackhole, kind).await,
            }
            // Settle: somebody holds the lease again before the next fault.
            let settle = self.ttl() * 10 + Duration::from_secs(5);
            if self.wait_for_holder(settle).await.is_none() {
                self.stalls.push((kind.to_owned(), began));
            }
            if last_progress.elapsed() > Duration::from_secs(60) {
                last_progress = Instant::now();
                eprintln!(
                    "torture {}: {:.0} s, cycles {}, restarts {}, proxy faults {}",
                    self.cfg.kind.name(),
                    started.elapsed().as_secs_f64(),
                    self.live_cycles,
                    self.counts_of("store_restart"),
                    self.counts_of("proxy_")
                );
            }
        }
    }

    /// SIGSTOP the holder for 1-3 TTLs (in the window between its validity check and
    /// its write when `window`), then SIGCONT.
    async fn pause(&mut self, window: bool) {
        let Some((id, token)) = self.wait_for_holder(self.ttl() * 2).await else {
            self.no_holder += 1;
            return;
        };
        let Some(pid) = self.pid_of(id) else { return };
        if window {
            let (tx, rx) = oneshot::channel();
            lock(&self.live.window).insert(id, tx);
            let Some(w) = self.workers.iter_mut().find(|w| w.id == id) else {
                return;
            };
            if w.stdin.write_all(b"arm\n").await.is_err() {
                return;
            }
            let wait = self.cfg.ttl * 2 + Duration::from_secs(1);
            if tokio::time::timeout(wait, rx).await.is_err() {
                lock(&self.live.window).remove(&id);
                self.missed_windows += 1;
                return;
            }
        }
        let at = now_ms();
        if freeze(pid).await.is_err() {
            return;
        }
        let d = self.span(1.0, 3.0);
        let took_over = self.took_over_within(id, d).await;
        let _ = resume(pid);
        if took_over {
            self.live_cycles += 1;
        }
        self.record_fault(
            if window { "pause_window" } else { "pause" },
            Some((id, token)),
            at,
            false,
        );
    }

    /// Waits `d`; true if a worker other than `id` announced a grant meanwhile.
    async fn took_over_within(&self, id: u32, d: Duration) -> bool {
        let deadline = Instant::now() + d;
        let before = self.live.grant_count.load(Ordering::SeqCst);
        let mut seen = false;
        loop {
            let notified = self.live.grants.notified();
            if self.live.grant_count.load(Ordering::SeqCst) > before
                && lock(&self.live.last_grant).is_some_and(|(w, _)| w != id)
            {
                seen = true;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return seen;
            }
        }
    }

    async fn kill(&mut self) {
        let Some((id, token)) = self.wait_for_holder(self.ttl() * 2).await else {
            self.no_holder += 1;
            return;
        };
        let Some(i) = self.workers.iter().position(|w| w.id == id) else {
            return;
        };
        let at = now_ms();
        let mut w = self.workers.swap_remove(i);
        let _ = kill9(w.pid);
        let _ = w.child.wait().await;
        lock(&self.live.holding).remove(&id);
        self.record_fault("kill9", Some((id, token)), at, false);
        self.spawn_worker().await;
        if self
            .wait_for_holder(self.ttl() * 10 + Duration::from_secs(5))
            .await
            .is_some()
        {
            self.live_cycles += 1;
        }
    }

    /// Restarts the store. A restart that loses the store's data also closes the
    /// workers' proxies from before the kill until the new instance is prepared and the
    /// restart recorded: a request then reaches the old instance or the new one, and
    /// the checker can tell which from the request's send time and its reply's time.
    async fn restart_store(&mut self) {
        let data_loss = self.cfg.kind.restart_loses_data();
        if data_loss {
            self.restart_gen.fetch_add(1, Ordering::SeqCst);
            for p in &self.store_proxies {
                p.set(ProxyMode::Drop);
            }
        }
        let at = now_ms();
        let down = self.span(0.5, 2.0);
        let r = self.store.restart(&mut self.rng, down).await;
        if r.data_loss {
            // moto lost the table and the bucket with everything else.
            let direct = Dedicated::endpoints(self.cfg.kind, &self.store.upstreams());
            prepare_within(self.cfg.kind, &direct[0], &self.ns, Duration::from_secs(60)).await;
        }
        self.record_fault(&format!("store_restart_{}", r.kind), None, at, r.data_loss);
        if data_loss {
            for p in &self.store_proxies {
                p.set(ProxyMode::Pass);
            }
            self.restart_gen.fetch_add(1, Ordering::SeqCst);
        }
    }

    async fn proxy_fault(&mut self, mode: ProxyMode, name: &str) {
        let n = self.store_proxies.len();
        // etcd: one member's proxy, or all of them.
        let targets: Vec<usize> = if n > 1 && self.rng.random_bool(0.5) {
            vec![self.rng.random_range(0..n)]
        } else {
            (0..n).collect()
        };
        let at = now_ms();
        for &i in &targets {
            self.store_proxies[i].set(mode);
        }
        tokio::time::sleep(self.span(0.3, 2.0)).await;
        if mode == ProxyMode::Blackhole && self.rng.random_bool(0.5) {
            // The partition breaks the connections instead of healing.
            for &i in &targets {
                self.store_proxies[i].set(ProxyMode::Drop);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        for &i in &targets {
            self.store_proxies[i].set(ProxyMode::Pass);
        }
        self.record_fault(name, None, at, false);
    }

    async fn resource_fault(&mut self, mode: ProxyMode, name: &str) {
        let at = now_ms();
        self.resource_proxy.set(mode);
        tokio::time::sleep(self.span(0.2, 1.0)).await;
        if mode == ProxyMode::Blackhole {
            self.resource_proxy.set(ProxyMode::Drop);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.resource_proxy.set(ProxyMode::Pass);
        self.record_fault(name, None, at, false);
    }

    fn report(&self, events: &[Event], check: Report, elapsed: Duration) -> RunReport {
        let mut grants: Vec<(u64, u32, Option<u32>)> = events
            .iter()
            .filter_map(|e| match e {
                Event::Granted {
                    worker, at_ms, slot, ..
                } => Some((*at_ms, *worker, *slot)),
                _ => None,
            })
            .collect();
        grants.sort_unstable();
        // The next grant to another worker (of the same semaphore slot, in a semaphore
        // run: another slot's grant takes nothing over).
        let first_grant_after = |at: u64, not: Option<u32>, slot: Option<u32>| -> Option<u64> {
            let i = grants.partition_point(|(t, _, _)| *t < at);
            grants[i..]
                .iter()
                .find(|(_, w, s)| Some(*w) != not && (slot.is_none() || *s == slot))
                .map(|(t, _, _)| *t)
        };
        let mut takeover = Vec::new();
        let (mut pause_takeovers, mut kill_takeovers) = (0, 0);
        for e in events {
            if let Event::Fault {
                kind,
                worker,
                slot,
                at_ms,
                until_ms,
                ..
            } = e
            {
                match kind.as_str() {
                    "kill9" => {
                        if let Some(g) = first_grant_after(*at_ms, *worker, *slot) {
                            takeover.push(g - at_ms);
                            kill_takeovers += 1;
                        }
                    }
                    "pause" | "pause_window"
                        if first_grant_after(*at_ms, *worker, *slot).is_some_and(|g| g <= *until_ms) =>
                    {
                        pause_takeovers += 1;
                    }
                    _ => {}
                }
            }
        }
        takeover.sort_unstable();
        RunReport {
            kind: self.cfg.kind,
            seed: self.cfg.seed,
            ttl: self.cfg.ttl,
            elapsed,
            workers_spawned: self.next_id - 1,
            faults: self.counts.clone(),
            pause_takeovers,
            kill_takeovers,
            takeover_after_kill_ms: takeover,
            clock_jumps: self.live.clock_jumps.load(Ordering::Relaxed),
            no_holder: self.no_holder,
            stalls: self.stalls.clone(),
            missed_windows: self.missed_windows,
            check,
            permits: None,
            out_dir: self.cfg.out_dir.clone(),
        }
    }
}

/// The `torture-worker` next to the running executable (for the `torture` binary).
///
/// # Panics
/// If the current executable's path is unknown.
pub fn sibling_worker_exe() -> PathBuf {
    let me = std::env::current_exe().expect("current exe");
    me.parent().unwrap_or(Path::new(".")).join("torture-worker")
}
