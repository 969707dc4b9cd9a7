//! The payout demo: a frozen lease holder cannot pay anything twice.
//!
//! ```text
//! cargo run -p leasehold-examples --bin payout-demo                       # embedded SQLite, no setup
//! cargo run -p leasehold-examples --bin payout-demo -- --store postgres://postgres@127.0.0.1:55432/postgres
//! ```
//!
//! Two worker processes (this binary, re-executed with `worker`) pay out a batch of 20
//! payouts under one lease, each payout a fenced write carrying the lease's token. The
//! demo freezes the first worker with SIGSTOP in the middle of a (slow) bank call, after
//! it checked its lease and before its write; its lease runs out on the database's clock;
//! the second worker takes over with the next token, raises the batch's fence and pays
//! the rest; then the demo resumes the first worker, whose write now carries a stale
//! token and is refused by the database. The last line is computed from the database's
//! rows (payouts and the log of attempts), not from anything the workers counted:
//!
//! ```text
//! summary: payouts_applied=20 stale_writes_refused=1 duplicate_payouts=0 lost_payouts=0
//! ```
//!
//! The exit code is non-zero unless nothing was lost or paid twice and the stale write
//! was refused. Options: `--store postgres://…|PATH` (default: a SQLite file in a fresh
//! temporary directory, removed afterwards), `--unfenced` (drop the token guard from the
//! payout writes, to see the duplicate payout the fence prevents), `--keep` (keep the
//! tables or file).

#[path = "../payout.rs"]
mod payout;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use leasehold_core::testing::process;
use payout::{BoxResult, Db, FREEZE_AT, PAYOUTS, Summary, TTL, Tables};
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

/// The payout demo: a frozen lease holder cannot pay anything twice (see the doc comment
/// of examples/src/bin/payout-demo.rs).
#[derive(Debug, clap::Parser)]
#[command(name = "payout-demo")]
struct Options {
    /// The store: postgres://… or a SQLite file's path (default: a SQLite file in a fresh
    /// temporary directory, removed afterwards).
    #[arg(long, value_name = "URL|PATH")]
    store: Option<String>,
    /// Drop the token guard from the payout writes, to see the duplicate payout the fence
    /// prevents.
    #[arg(long)]
    unfenced: bool,
    /// Keep the tables or file.
    #[arg(long)]
    keep: bool,
    /// (internal) one worker process, run by the demo.
    #[command(subcommand)]
    worker: Option<Internal>,
}

/// The demo re-executes itself as each worker.
#[derive(Debug, clap::Subcommand)]
enum Internal {
    /// One worker: pays out the batch under the lease.
    #[command(hide = true)]
    Worker {
        /// The store.
        store: String,
        /// The tables' suffix.
        suffix: String,
        /// The worker's name.
        name: String,
        /// Without the token guard.
        #[arg(long)]
        unfenced: bool,
    },
}

fn main() -> ExitCode {
    let mut options: Options = clap::Parser::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("payout-demo: {e}");
            return ExitCode::from(2);
        }
    };
    if let Some(Internal::Worker {
        store,
        suffix,
        name,
        unfenced,
    }) = options.worker.take()
    {
        let result = runtime.block_on(async {
            let db = Db::connect(&store).await?;
            payout::work(&db, &Tables::new(&suffix), &suffix, &name, unfenced).await
        });
        return match result {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                println!("error {e}");
                ExitCode::from(2)
            }
        };
    }
    match runtime.block_on(demo(options)) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("payout-demo: {e}");
            ExitCode::from(2)
        }
    }
}

/// A worker process and its output lines.
struct Worker {
    name: &'static str,
    child: Child,
    lines: UnboundedReceiver<String>,
}

impl Worker {
    fn spawn(name: &'static str, store: &str, suffix: &str, unfenced: bool) -> BoxResult<Self> {
        let mut cmd = Command::new(std::env::current_exe()?);
        cmd.args(["worker", store, suffix, name]).stdout(Stdio::piped());
        if unfenced {
            cmd.arg("--unfenced");
        }
        let mut child = cmd.spawn()?;
        let stdout = child.stdout.take().ok_or("worker stdout")?;
        let (tx, lines) = unbounded_channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Self { name, child, lines })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Narrates the worker's lines until `until` matches one (or the output ends).
    async fn narrate(&mut self, until: impl Fn(&str) -> bool) -> BoxResult<Option<String>> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let line = match tokio::time::timeout_at(deadline, self.lines.recv()).await {
                Ok(Some(line)) => line,
                Ok(None) => return Ok(None),
                Err(_) => return Err(format!("{} stopped talking", self.name).into()),
            };
            tell(self.name, &line);
            if until(&line) {
                return Ok(Some(line));
            }
        }
    }

    async fn finish(mut self) -> BoxResult<()> {
        self.narrate(|_| false).await?;
        let status = self.child.wait()?;
        if !status.success() {
            return Err(format!("{} failed: {status}", self.name).into());
        }
        Ok(())
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = process::resume(self.child.id());
            let _ = process::kill9(self.child.id());
            let _ = self.child.wait();
        }
    }
}

fn dollars(cents: &str) -> String {
    let c: i64 = cents.parse().unwrap_or(0);
    format!("${}.{:02}", c / 100, c % 100)
}

/// Prints a worker's line as narrative.
fn tell(who: &str, line: &str) {
    let words: Vec<&str> = line.split(' ').collect();
    let text = match words.as_slice() {
        ["lease", token, waited] => {
            format!(
                "holds the batch's lease with token {token} (waited {waited} ms) and raised the batch's fence to it"
            )
        }
        ["bank-call", id, cents] if who == "alpha" && id.parse() == Ok(FREEZE_AT) => {
            format!(
                "lease valid; calling the bank for payout #{id} ({}) ...",
                dollars(cents)
            )
        }
        ["bank-call", ..] => return,
        ["paid", id, cents] => format!("paid #{id} ({})", dollars(cents)),
        ["refused", id, token] => {
            format!("payout #{id} REFUSED by the database: token {token} is older than the batch's fence; stopping")
        }
        ["lost-lease", id] => format!("lease lost before payout #{id}; stopping"),
        ["released"] => "released the lease".to_owned(),
        ["done"] => return,
        _ => line.to_owned(),
    };
    println!("  [{who}] {text}");
}

async fn demo(o: Options) -> BoxResult<bool> {
    let started = Instant::now();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .subsec_nanos();
    let suffix = format!("{}_{nanos:x}", std::process::id());
    let (store, temp_dir) = match o.store {
        Some(s) => (s, None),
        None => {
            let dir = std::env::temp_dir().join(format!("leasehold-payout-demo-{suffix}"));
            std::fs::create_dir_all(&dir)?;
            (dir.join("payouts.db").display().to_string(), Some(dir))
        }
    };
    let db = Db::connect(&store).await?;
    let t = Tables::new(&suffix);
    db.create_batch(&t).await?;
    let where_ = match &db {
        Db::Pg(_) => "Postgres".to_owned(),
        Db::Lite(_, p) => format!("SQLite file {}", p.display()),
    };
    println!(
        "payout-demo: {PAYOUTS} payouts in one batch, leases and payouts in {where_}; lease TTL {} ms{}",
        TTL.as_millis(),
        if o.unfenced { "; payout writes UNFENCED" } else { "" }
    );

    let result = run(&db, &store, &suffix, o.unfenced).await;
    let summary = match result {
        Ok(()) => Summary::read(&db, &t).await,
        Err(e) => Err(e),
    };
    if !o.keep {
        db.drop_tables(&t).await;
        if let Some(dir) = &temp_dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
    let summary = summary?;
    println!(
        "demo: the database shows {} payout writes applied, {} duplicated, {} lost, {} stale writes refused ({:.1} s)",
        summary.payouts_applied,
        summary.duplicate_payouts,
        summary.lost_payouts,
        summary.stale_writes_refused,
        started.elapsed().as_secs_f64()
    );
    println!("{}", summary.line());
    Ok(summary.ok())
}

async fn run(db: &Db, store: &str, suffix: &str, unfenced: bool) -> BoxResult<()> {
    let mut alpha = Worker::spawn("alpha", store, suffix, unfenced)?;
    let freeze_line = format!("bank-call {FREEZE_AT} ");
    alpha
        .narrate(|l| l.starts_with(&freeze_line))
        .await?
        .ok_or("alpha ended before its bank call")?;
    // Freeze alpha mid bank call, at a moment it holds no database lock.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        process::freeze(alpha.pid()).await?;
        if db.quiescent().await {
            break;
        }
        process::resume(alpha.pid())?;
        if Instant::now() > deadline {
            return Err("alpha never paused outside a write".into());
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let frozen_at = Instant::now();
    println!(
        "demo: SIGSTOP alpha (pid {}) in the middle of payout #{FREEZE_AT}'s bank call; it stops renewing, its lease runs out",
        alpha.pid()
    );
    let bravo = Worker::spawn("bravo", store, suffix, unfenced)?;
    bravo.finish().await?;
    println!(
        "demo: SIGCONT alpha after {} ms frozen; its bank call returns and it sends the payout it started",
        frozen_at.elapsed().as_millis()
    );
    process::resume(alpha.pid())?;
    alpha.finish().await?;
    Ok(())
}
