//! A singleton scheduled job, exactly once per slot, as a real program.
//!
//! Run several copies with the same options: each slot of the schedule runs on one of
//! them, once, even if copies are killed and restarted or their clocks disagree. The
//! job's effect (a row in `<prefix>_job_effects`) and its slot's "done" row are
//! written in one transaction fenced by the run's token, so a slot is never done twice
//! (see the `leasehold-jobs` crate docs for why the truth lives there).
//!
//! ```text
//! cargo run -p leasehold-examples --bin scheduled-job -- --every-ms 1000 --instance a &
//! cargo run -p leasehold-examples --bin scheduled-job -- --every-ms 1000 --instance b
//! ```
//!
//! Options (all optional):
//! - `--store sqlite:PATH | postgres://… | etcd://HOST:PORT[,...] | memory` (a store URL, as the `leasehold` command takes it) where the
//!   leases live (default: an SQLite file in the temp directory).
//! - `--data sqlite:PATH | postgres://…` where the job's tables live (default: the
//!   store's database; required with etcd).
//! - `--prefix NAME` (`demo`), `--job NAME` (`report`), `--instance ID`.
//! - `--every-ms N` (1000) or `--cron EXPR` (UTC; six fields for seconds).
//! - `--lock-ms N` lock_at_most_for (2000), `--at-least-ms N` lock_at_least_for (0),
//!   `--catch-up-ms N` (60000), `--keep-done-ms N` (3600000), `--work-ms N` (20),
//!   `--missed run-late|latest|skip` (run-late), `--run-for-ms N` (default: until killed).
//!
//! It prints `ready`, then one line per job run (`ran`, `already-done`) and per slot
//! event (`event ...`).

use std::time::Duration;

#[path = "../cli.rs"]
mod cli;

use cli::{BoxResult, Common, Data, Work, ms, retry, say};
use leasehold_core::FencingToken;
use leasehold_jobs::{JobContext, JobSpec, MissedSlots, Schedule, Scheduler, Slot, SlotOutcome};
use sqlx::{AssertSqlSafe, Row};

/// A singleton scheduled job, exactly once per slot: run several copies with the same
/// options (see the doc comment of examples/src/bin/scheduled-job.rs).
#[derive(Debug, clap::Parser)]
#[command(name = "scheduled-job")]
struct Cli {
    #[command(flatten)]
    common: Common,
    #[command(flatten)]
    options: Options,
}

/// The options of this program as given; [`Common`] has the rest.
#[derive(Debug, clap::Args)]
struct Options {
    /// The job's name.
    #[arg(long, default_value = "report")]
    job: String,
    /// Run every this many milliseconds [default: 1000].
    #[arg(long = "every-ms", value_name = "MS", value_parser = ms, conflicts_with = "cron")]
    every: Option<Duration>,
    /// Run on this cron schedule instead (UTC; six fields for seconds).
    #[arg(long, value_name = "EXPR")]
    cron: Option<String>,
    /// lock_at_most_for, in milliseconds.
    #[arg(long = "lock-ms", value_name = "MS", default_value = "2000", value_parser = ms)]
    lock: Duration,
    /// lock_at_least_for, in milliseconds.
    #[arg(long = "at-least-ms", value_name = "MS", default_value = "0", value_parser = ms)]
    at_least: Duration,
    /// How far back missed slots are caught up, in milliseconds.
    #[arg(long = "catch-up-ms", value_name = "MS", default_value = "60000", value_parser = ms)]
    catch_up: Duration,
    /// How long done slots are kept, in milliseconds.
    #[arg(long = "keep-done-ms", value_name = "MS", default_value = "3600000", value_parser = ms)]
    keep_done: Duration,
    /// How long the job works, in milliseconds.
    #[arg(long = "work-ms", value_name = "MS", default_value = "20", value_parser = ms)]
    work: Duration,
    /// What to do with missed slots.
    #[arg(long, value_enum, default_value = "run-late")]
    missed: Missed,
}

/// `--missed`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Missed {
    /// Run each missed slot once, late.
    RunLate,
    /// Run only the latest missed slot.
    Latest,
    /// Skip missed slots.
    Skip,
}

/// The options of this program; [`Common`] has the rest.
struct Args {
    job: String,
    schedule: Schedule,
    lock: Duration,
    at_least: Duration,
    catch_up: Duration,
    keep_done: Duration,
    work: Duration,
    missed: MissedSlots,
}

fn parse_args() -> BoxResult<(Common, Args)> {
    let Cli { common, options: o } = clap::Parser::parse();
    let schedule = match (&o.cron, o.every) {
        (Some(expr), _) => Schedule::cron(expr)?,
        (None, every) => Schedule::every(every.unwrap_or(Duration::from_secs(1)))?,
    };
    let args = Args {
        job: o.job,
        schedule,
        lock: o.lock,
        at_least: o.at_least,
        catch_up: o.catch_up,
        keep_done: o.keep_done,
        work: o.work,
        missed: match o.missed {
            Missed::RunLate => MissedSlots::RunLateOnce,
            Missed::Latest => MissedSlots::RunLatestOnly,
            Missed::Skip => MissedSlots::Skip,
        },
    };
    Ok((common, args))
}

/// What one run of the job found.
enum Outcome {
    Ran,
    AlreadyDone,
}

impl Data {
    async fn setup(&self, p: &str) -> BoxResult<()> {
        let (serial, big) = match self {
            Self::Pg(_) => ("BIGSERIAL PRIMARY KEY", "BIGINT"),
            Self::Lite(_) => ("INTEGER PRIMARY KEY AUTOINCREMENT", "INTEGER"),
        };
        let ddls = [
            format!(
                "CREATE TABLE IF NOT EXISTS {p}_job_slots (job TEXT NOT NULL, slot {big} NOT NULL, \
                 token {big} NOT NULL, done BOOLEAN NOT NULL, PRIMARY KEY (job, slot))"
            ),
            format!(
                "CREATE TABLE IF NOT EXISTS {p}_job_effects (id {serial}, job TEXT NOT NULL, slot {big} NOT NULL, \
                 token {big} NOT NULL, instance TEXT NOT NULL)"
            ),
            format!(
                "CREATE TABLE IF NOT EXISTS {p}_job_attempts (id {serial}, job TEXT NOT NULL, slot {big} NOT NULL, \
                 token {big} NOT NULL, instance TEXT NOT NULL)"
            ),
        ];
        match self {
            // Several copies start at once: serialized, their CREATEs cannot collide.
            Self::Pg(pool) => {
                leasehold_postgres::run_ddl_serialized(pool, &ddls.each_ref().map(String::as_str)).await?
            }
            Self::Lite(pool) => {
                for ddl in ddls {
                    sqlx::query(AssertSqlSafe(ddl)).execute(pool).await?;
                }
            }
        }
        Ok(())
    }

    /// The job: in one transaction, take the slot's row with the run's token (refused
    /// if the slot is done, or a newer token has it), write the effect, mark the slot
    /// done. A stale runner's token is refused; a second run finds the slot done.
    async fn run_slot(
        &self,
        p: &str,
        job: &str,
        slot: Slot,
        token: FencingToken,
        instance: &str,
        work: Duration,
    ) -> BoxResult<Outcome> {
        let (slot_v, t) = (i64::try_from(slot.unix_ms())?, token.to_i64()?);
        // Placeholders: $n for Postgres, ?n for SQLite.
        let attempt = self.sql(format!(
            "INSERT INTO {p}_job_attempts (job, slot, token, instance) VALUES ($1, $2, $3, $4)"
        ));
        let claim = self.sql(format!(
            "INSERT INTO {p}_job_slots (job, slot, token, done) VALUES ($1, $2, $3, false) \
             ON CONFLICT (job, slot) DO UPDATE SET token = excluded.token \
             WHERE {p}_job_slots.token <= excluded.token AND NOT {p}_job_slots.done"
        ));
        let effect = self.sql(format!(
            "INSERT INTO {p}_job_effects (job, slot, token, instance) VALUES ($1, $2, $3, $4)"
        ));
        let done = self.sql(format!(
            "UPDATE {p}_job_slots SET done = true WHERE job = $1 AND slot = $2 AND token = $3"
        ));
        let is_done = self.sql(format!("SELECT done FROM {p}_job_slots WHERE job = $1 AND slot = $2"));
        cli::on_pool!(self, pool => {
            sqlx::query(AssertSqlSafe(attempt))
                .bind(job)
                .bind(slot_v)
                .bind(t)
                .bind(instance)
                .execute(pool)
                .await?;
            let mut tx = pool.begin().await?;
            let n = sqlx::query(AssertSqlSafe(claim))
                .bind(job)
                .bind(slot_v)
                .bind(t)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            if n == 0 {
                drop(tx);
                let done: bool = sqlx::query(AssertSqlSafe(is_done))
                    .bind(job)
                    .bind(slot_v)
                    .fetch_one(pool)
                    .await?
                    .try_get(0)?;
                return if done {
                    Ok(Outcome::AlreadyDone)
                } else {
                    Err(format!("fenced: token {token} is stale").into())
                };
            }
            sqlx::query(AssertSqlSafe(effect))
                .bind(job)
                .bind(slot_v)
                .bind(t)
                .bind(instance)
                .execute(&mut *tx)
                .await?;
            tokio::time::sleep(work).await;
            sqlx::query(AssertSqlSafe(done))
                .bind(job)
                .bind(slot_v)
                .bind(t)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok(Outcome::Ran)
        })
    }
}

#[tokio::main]
async fn main() -> BoxResult<()> {
    let (common, args) = parse_args()?;
    let (client, work) = common.open_work(&args.job).await?;
    retry("create the tables", || work.data.setup(&work.prefix)).await?;
    let spec = JobSpec::new(&args.job, args.schedule.clone(), args.lock)
        .lock_at_least_for(args.at_least)
        .catch_up(args.catch_up)
        .keep_done_for(args.keep_done)
        .missed(args.missed);
    let scheduler = Scheduler::new(client).on_event(|e| say(&format!("event {e:?}")));
    let shutdown = common.shutdown();
    common.ready();
    let pause = args.work;
    scheduler
        .run(
            spec,
            move |ctx: JobContext| {
                let work = work.clone();
                async move {
                    let slot = ctx.slot().ok_or("no slot")?;
                    let Work {
                        data,
                        prefix,
                        name,
                        instance,
                    } = &*work;
                    // What the job found is what the scheduler reports: `Ran` from the
                    // run that committed, `DoneElsewhere` from one that found it done.
                    BoxResult::Ok(
                        match data.run_slot(prefix, name, slot, ctx.token(), instance, pause).await? {
                            Outcome::Ran => {
                                say(&format!("ran slot={slot} token={}", ctx.token()));
                                SlotOutcome::Committed
                            }
                            Outcome::AlreadyDone => {
                                say(&format!("already-done slot={slot} token={}", ctx.token()));
                                SlotOutcome::AlreadyDone
                            }
                        },
                    )
                }
            },
            shutdown,
        )
        .await?;
    say(&format!("exit instance={}", common.instance));
    Ok(())
}
