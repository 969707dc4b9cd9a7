//! One worker process of a torture run (spawned by `leasehold_tests::torture`).
//!
//! It takes the lease `torture` on the store under test, again and again; while it holds
//! it, it checks its validity, then sends a fenced write to the protected resource on
//! the shared Postgres (`leasehold_tests::resource`), a few times per tenure, and
//! releases. Every step is recorded in its history file (one JSON line each, flushed),
//! and announced on stdout for the controller:
//!
//! - `ready`, `granted <token>`, `ended <token>`;
//! - `window <seq>`: after the controller wrote `arm` on stdin, the worker announces its
//!   next validity check, then waits `--window-gap-ms` before the write: the controller
//!   freezes it in that window, between the check and the write;
//! - `clock_jump`: its wall clock jumped (`--clock-jump-ms`).
//!
//! With `--permits N` it takes a permit of the semaphore `torture` of N permits instead
//! (`leasehold_core::Semaphore`): each slot has its own resource tables (`<run>_s<slot>`)
//! and its own histories (`slot-<slot>/worker-<id>.jsonl` beside `--history`, which
//! keeps the `Acquiring` events), and it announces `granted <token> <slot>`.
//!
//! It exits when stdin closes (the controller is gone). Flags: see `Args::parse`.
//! Its stderr (the run directory's `worker-<id>.log`) has its errors and the library's
//! logs: `leasehold_core` and the store crates at debug (failed attempts, keep-alives,
//! watches), the rest at info; `LEASEHOLD_WORKER_LOG` (a `tracing` filter) overrides.

use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use std::collections::HashMap;

use leasehold_core::{ClientConfig, FencingToken, LeaseClient, Semaphore, store::Grade, testing::SkewedWallClock};
use leasehold_tests::history::{Event, HistoryWriter, WriteOutcome, now_ms};
use leasehold_tests::resource::{ResourceTables, fenced_write_sql, high_water_sql};
use leasehold_tests::stores::{self, BlindRelease, LEASE_NAME, Namespace, StoreKind};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sqlx::{AssertSqlSafe, Row};
use tokio::io::AsyncBufReadExt;
use tokio::time::Instant;

struct Args {
    id: u32,
    store: StoreKind,
    endpoints: Vec<String>,
    ns: String,
    ttl: Duration,
    resource_url: String,
    run: String,
    history: PathBuf,
    seed: u64,
    write_interval: Duration,
    tenure_writes: u32,
    gap: Duration,
    window_gap: Duration,
    mutant: String,
    clock_offset_ms: i64,
    clock_jump_ms: i64,
    reseed: bool,
    call_timeout: Duration,
    /// 0: the lease `torture`; N: a permit of the semaphore `torture` of N permits.
    permits: u32,
}

fn fail(what: &str) -> ! {
    eprintln!("torture-worker: {what}");
    std::process::exit(2)
}

impl Args {
    fn parse() -> Self {
        let argv: Vec<String> = std::env::args().skip(1).collect();
        let get = |flag: &str| -> Option<String> {
            argv.iter()
                .position(|a| a == flag)
                .and_then(|i| argv.get(i + 1).cloned())
        };
        let req = |flag: &str| get(flag).unwrap_or_else(|| fail(&format!("missing {flag}")));
        let num = |flag: &str, default: u64| -> u64 {
            get(flag).map_or(default, |v| v.parse().unwrap_or_else(|e| fail(&format!("{flag}: {e}"))))
        };
        let int = |flag: &str| -> i64 {
            get(flag).map_or(0, |v| v.parse().unwrap_or_else(|e| fail(&format!("{flag}: {e}"))))
        };
        let ms = |flag: &str, default: u64| Duration::from_millis(num(flag, default));
        Self {
            id: u32::try_from(num("--id", 0)).unwrap_or_else(|_| fail("--id too large")),
            store: StoreKind::parse(&req("--store")).unwrap_or_else(|| fail("unknown --store")),
            endpoints: req("--endpoints").split(',').map(str::to_owned).collect(),
            ns: req("--ns"),
            ttl: ms("--ttl-ms", 500),
            resource_url: req("--resource-url"),
            run: req("--run"),
            history: PathBuf::from(req("--history")),
            seed: num("--seed", 0),
            write_interval: ms("--write-interval-ms", 50),
            tenure_writes: u32::try_from(num("--tenure-writes", 10)).unwrap_or(10),
            gap: ms("--gap-ms", 5),
            window_gap: ms("--window-gap-ms", 200),
            mutant: get("--mutant").unwrap_or_else(|| "none".into()),
            clock_offset_ms: int("--clock-offset-ms"),
            clock_jump_ms: int("--clock-jump-ms"),
            reseed: argv.iter().any(|a| a == "--reseed"),
            call_timeout: ms("--call-timeout-ms", 1000),
            permits: u32::try_from(num("--permits", 0)).unwrap_or_else(|_| fail("--permits too large")),
        }
    }
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    // A closed pipe means the controller is gone; stdin's end stops the process.
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// The wall-clock time (system clock) of a monotonic deadline. The wall clock is read
/// first, so a pause between the two readings can only make the result earlier.
fn wall_of(deadline: Instant) -> u64 {
    let wall = now_ms();
    let mono = Instant::now();
    let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    if deadline >= mono {
        wall.saturating_add(ms(deadline - mono))
    } else {
        wall.saturating_sub(ms(mono - deadline) + 1)
    }
}

struct Recorder {
    w: HistoryWriter,
}

/// The recorders of a semaphore worker's slots (`slot-<slot>/<file name of --history>`),
/// opened on first use.
struct SlotRecorders {
    history: PathBuf,
    open: HashMap<u32, Recorder>,
}

impl SlotRecorders {
    fn get(&mut self, slot: u32) -> &mut Recorder {
        let history = &self.history;
        self.open.entry(slot).or_insert_with(|| {
            let dir = history
                .parent()
                .unwrap_or_else(|| fail("--history has no directory"))
                .join(format!("slot-{slot}"));
            std::fs::create_dir_all(&dir).unwrap_or_else(|e| fail(&format!("{}: {e}", dir.display())));
            let path = dir.join(
                history
                    .file_name()
                    .unwrap_or_else(|| fail("--history has no file name")),
            );
            Recorder {
                w: HistoryWriter::open(&path).unwrap_or_else(|e| fail(&format!("history {}: {e}", path.display()))),
            }
        })
    }
}

impl Recorder {
    fn rec(&mut self, e: &Event) {
        if let Err(err) = self.w.record(e) {
            fail(&format!("history: {err}"));
        }
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let a = Args::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_env("LEASEHOLD_WORKER_LOG").unwrap_or_else(|_| {
        "info,leasehold_core=debug,leasehold_etcd=debug,leasehold_zookeeper=debug,leasehold_redis=debug,leasehold_postgres=debug,leasehold_dynamodb=debug,leasehold_s3=debug"
            .into()
    });
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
    let mut h = Recorder {
        w: HistoryWriter::open(&a.history).unwrap_or_else(|e| fail(&format!("history {}: {e}", a.history.display()))),
    };
    let mut rng = StdRng::seed_from_u64(a.seed);

    // The controller arms window pauses through stdin; its end ends this process.
    let armed = Arc::new(AtomicBool::new(false));
    let arm = armed.clone();
    tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if line.trim() == "arm" {
                arm.store(true, Ordering::SeqCst);
            }
        }
        std::process::exit(0);
    });

    let ns = Namespace::new(&a.ns);
    // The store may be restarting when a worker is (re)spawned: retry for a while.
    let deadline = Instant::now() + Duration::from_secs(60);
    let built = loop {
        match stores::build(a.store, &a.endpoints, &ns, a.call_timeout).await {
            Ok(b) => break b,
            Err(e) if Instant::now() < deadline => {
                eprintln!("torture-worker {}: store not ready: {e}", a.id);
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => fail(&format!("store: {e}")),
        }
    };
    let store: Arc<dyn leasehold_core::store::CasStore> = match a.mutant.as_str() {
        "blind-release" => Arc::new(BlindRelease { inner: built.store }),
        "none" | "no-fence" => built.store,
        other => fail(&format!("unknown --mutant {other}")),
    };
    let clock = Arc::new(SkewedWallClock::new(a.clock_offset_ms));
    if a.clock_jump_ms > 0 {
        let (c, jump, ttl, seed) = (clock.clone(), a.clock_jump_ms, a.ttl, a.seed);
        tokio::spawn(async move {
            let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed);
            loop {
                tokio::time::sleep(ttl.mul_f64(rng.random_range(0.25..1.0))).await;
                c.set_offset_ms(rng.random_range(-jump..=jump));
                say("clock_jump");
            }
        });
    }
    let config = ClientConfig::builder()
        .label(format!("w{}", a.id))
        .wall_clock(clock)
        .rng_seed(a.seed)
        .build()
        .expect("client config");
    let client = if store.capabilities().grade == Grade::EfficiencyOnly {
        LeaseClient::efficiency_only(store, config)
    } else {
        LeaseClient::from_dyn(store, config)
    }
    .unwrap_or_else(|e| fail(&format!("client: {e}")));

    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(2)
        .acquire_timeout(a.call_timeout)
        .connect_lazy(&a.resource_url)
        .unwrap_or_else(|e| fail(&format!("resource url: {e}")));
    // One resource per slot in a semaphore run (`<run>_s<slot>`), else one.
    let resources: Vec<ResourceTables> = if a.permits == 0 {
        vec![ResourceTables::for_run(&a.run)]
    } else {
        (0..a.permits)
            .map(|i| ResourceTables::for_run(&format!("{}_s{i}", a.run)))
            .collect()
    };
    let write_sqls: Vec<String> = resources
        .iter()
        .map(|t| fenced_write_sql(t, a.mutant == "no-fence"))
        .collect();
    let semaphore = (a.permits > 0).then(|| {
        Semaphore::new(client.clone(), LEASE_NAME, a.permits).unwrap_or_else(|e| fail(&format!("semaphore: {e}")))
    });
    let mut slot_recorders = SlotRecorders {
        history: a.history.clone(),
        open: HashMap::new(),
    };
    let id = i32::try_from(a.id).unwrap_or_else(|_| fail("--id too large"));
    say("ready");

    let mut seq = 0u64;
    loop {
        h.rec(&Event::Acquiring {
            worker: a.id,
            at_ms: now_ms(),
        });
        let acquired = match &semaphore {
            Some(sem) => sem.acquire(a.ttl).await.map(|p| (Some(p.slot()), p.into_lease())),
            None => client.acquire(LEASE_NAME, a.ttl).await.map(|l| (None, l)),
        };
        let (slot, lease) = match acquired {
            Ok(l) => l,
            Err(e) => {
                // Not retryable inside acquire (a moto restart lost the table, ...).
                eprintln!("torture-worker {}: acquire: {e}", a.id);
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let token = lease.token().get();
        let index = slot.map_or(0, |s| usize::try_from(s).unwrap_or(usize::MAX));
        let (tables, write_sql) = match (resources.get(index), write_sqls.get(index)) {
            (Some(t), Some(w)) => (t, w),
            _ => fail(&format!("slot {index} beyond the {} permits", a.permits)),
        };
        let name = lease.name().clone();
        let h = match slot {
            Some(s) => slot_recorders.get(s),
            None => &mut h,
        };
        h.rec(&Event::Granted {
            worker: a.id,
            token,
            at_ms: now_ms(),
            valid_until_ms: Some(wall_of(lease.valid_until())),
            // valid_until = sent + ttl - margin, so this is at most the send time.
            sent_after_ms: lease.valid_until().checked_sub(lease.ttl()).map(wall_of),
            slot,
        });
        match slot {
            Some(s) => say(&format!("granted {token} {s}")),
            None => say(&format!("granted {token}")),
        }
        let writes = rng.random_range(a.tenure_writes / 2..=a.tenure_writes * 3 / 2).max(1);
        let mut cause: Option<String> = None;
        for _ in 0..writes {
            // The validity check, then the write: a holder frozen in between wakes up
            // and writes with a token that may no longer be the newest.
            if !lease.is_valid() {
                cause = Some(
                    lease
                        .loss_cause()
                        .map_or_else(|| "expired".to_owned(), |c| c.label().to_owned()),
                );
                break;
            }
            let until = wall_of(lease.valid_until());
            if armed.swap(false, Ordering::SeqCst) {
                say(&format!("window {}", seq + 1));
                tokio::time::sleep(a.window_gap).await;
            } else if !a.gap.is_zero() {
                tokio::time::sleep(a.gap.mul_f64(rng.random_range(0.0..1.0))).await;
            }
            seq += 1;
            h.rec(&Event::WriteSent {
                worker: a.id,
                token,
                seq,
                at_ms: now_ms(),
                valid_until_ms: Some(until),
            });
            let tok = i64::try_from(token).unwrap_or_else(|_| fail("token beyond i64"));
            let seq_i = i64::try_from(seq).unwrap_or_else(|_| fail("seq beyond i64"));
            let q = sqlx::query(AssertSqlSafe(write_sql.clone()))
                .bind(tok)
                .bind(id)
                .bind(seq_i);
            let outcome = match tokio::time::timeout(a.call_timeout, q.fetch_optional(&pool)).await {
                Ok(Ok(Some(_))) => WriteOutcome::Accepted,
                Ok(Ok(None)) => WriteOutcome::Refused,
                Ok(Err(_)) | Err(_) => WriteOutcome::Unknown,
            };
            h.rec(&Event::WriteDone {
                worker: a.id,
                token,
                seq,
                outcome,
                at_ms: now_ms(),
            });
            if outcome == WriteOutcome::Refused {
                cause = Some("fence_refused".into());
                break;
            }
            tokio::select! {
                () = tokio::time::sleep(a.write_interval) => {}
                _ = lease.lost() => {}
            }
        }
        h.rec(&Event::Releasing {
            worker: a.id,
            token,
            at_ms: now_ms(),
        });
        let released = lease.release().await;
        if let Err(e) = released {
            eprintln!("torture-worker {}: release: {e}", a.id);
        }
        h.rec(&Event::Ended {
            worker: a.id,
            token,
            cause: cause.clone().unwrap_or_else(|| "released".into()),
            at_ms: now_ms(),
        });
        say(&format!("ended {token}"));
        if a.reseed && cause.as_deref() == Some("fence_refused") {
            // The Redis way out of a lost token counter (leasehold-redis docs): raise the
            // counter above the resource's high-water mark.
            let read = sqlx::query(AssertSqlSafe(high_water_sql(tables))).fetch_one(&pool);
            let hw = match tokio::time::timeout(a.call_timeout, read).await {
                Ok(Ok(row)) => row.try_get::<i64, _>(0).ok(),
                _ => None,
            };
            if let (Some(hw), Some(redis)) = (hw, &built.redis) {
                if let Ok(hw) = FencingToken::from_i64(hw) {
                    if let Err(e) = redis.seed_fence_counter(&name, hw).await {
                        eprintln!("torture-worker {}: seed: {e}", a.id);
                    }
                }
            }
        }
        tokio::time::sleep(a.ttl.mul_f64(rng.random_range(0.0..0.3))).await;
    }
}
