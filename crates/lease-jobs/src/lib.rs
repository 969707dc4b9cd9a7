//! # leasehold-jobs
//!
//! Singleton scheduled jobs on [`leasehold_core`] leases, on any store that implements
//! [`leasehold_core::store::CasStore`]: what ShedLock does for Spring's `@Scheduled`, fenced, and
//! exactly once per schedule slot.
//!
//! - [`LockingExecutor::run`] runs a job on one instance at a time, with ShedLock's
//!   `lock_at_most_for` (by default the lease TTL, renewed while the job runs; with
//!   [`LockAtMost::Absolute`] ShedLock's own meaning, never longer than that even
//!   while the job is alive) and `lock_at_least_for` (the lease stays taken at least
//!   this long after the start).
//!   The job receives a [`JobContext`]: the fencing token for its writes and a
//!   cancellation that fires when the lease is lost.
//! - [`Scheduler::run`] fires a job on a [`Schedule`] (cron expressions via the
//!   `croner` crate, on the UTC wall clock or a named time zone's with
//!   [`Schedule::cron_in`], or fixed intervals aligned on the Unix epoch), each
//!   [`Slot`] on one instance, once.
//! - Feature `shedlock-postgres`: `shedlock::ShedlockStore`, a `CasStore` over ShedLock's
//!   own `shedlock` table, so Rust instances and Java ShedLock instances exclude each
//!   other.
//! - Feature `shedlock-mysql`: `shedlock::ShedlockMySqlStore`, the same over ShedLock's
//!   table in MySQL or MariaDB.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().unwrap().block_on(async {
//! use std::time::Duration;
//! use leasehold_core::{LeaseClient, MemoryStore};
//! use leasehold_jobs::{JobSpec, Schedule, Scheduler, TokioWallClock};
//! use tokio_util::sync::CancellationToken;
//!
//! let spec = JobSpec::new("nightly-payout", Schedule::cron("0 2 * * *")?, Duration::from_secs(60));
//! let scheduler = Scheduler::new(LeaseClient::new(MemoryStore::new()))
//!     .with_wall_clock(TokioWallClock::starting_at(1_796_003_990_000)); // (a test clock)
//! let shutdown = CancellationToken::new();
//! # let stop = shutdown.clone();
//! scheduler.run(spec, move |ctx| {
//! #   let stop = stop.clone();
//!     async move {
//!         // In ONE transaction: the effect, fenced by ctx.token(), and the slot's row
//!         // (`INSERT INTO payout_runs(slot) VALUES (ctx.slot())`, unique): see below.
//!         println!("payout for {} with token {}", ctx.slot().unwrap(), ctx.token());
//! #       stop.cancel();
//!         Ok::<(), std::io::Error>(())
//!     }
//! }, shutdown).await?;
//! # Ok::<(), leasehold_core::Error>(()) }).unwrap();
//! ```
//!
//! ## Exactly once per slot, and where the truth lives
//! Every slot has its own lease, `<job>/<slot>` (the slot is the fire time, RFC 3339
//! UTC with milliseconds), so instances whose clocks or start times differ still name
//! the same run the same way; which instance's clock says the slot is due only decides
//! who tries first. Three records together make each slot run once:
//!
//! 1. **The slot lease** lets one instance at a time run the slot and gives the run a
//!    fencing token. A runner that dies stops renewing; the lease expires on the
//!    store's clock `lock_at_most_for` after its last renewal, and an instance that saw
//!    the slot taken (they all keep it pending) takes it over and completes it.
//! 2. **The done record**: a completed run rewrites its slot lease, in one conditional
//!    write on its current version, into a record held by the marker `=done=<holder>`
//!    (same token) with TTL [`JobSpec::keep_done_for`], never renewed and never
//!    released. An instance that tries the slot later, whatever its clock, finds it
//!    done and skips it. Instances look back only [`JobSpec::catch_up`], which must be
//!    shorter than `keep_done_for` (checked), so nobody looks at a slot whose done
//!    record is gone (plus clock skew: keep the difference above the worst skew).
//! 3. **The job's own row** in the protected data: a lease record cannot say "done"
//!    atomically with the job's effect. A runner can commit its effect and die before
//!    writing the done record; its successor then runs the job again. So the job
//!    writes its effect and a row keyed by the slot in **one transaction**, with the
//!    token as fence (`INSERT INTO job_runs(job, slot, token) ... ON CONFLICT (job,
//!    slot) DO UPDATE SET token = EXCLUDED.token WHERE job_runs.token <= EXCLUDED.token
//!    AND NOT job_runs.done`): a second run of the slot finds the row done and
//!    commits nothing; a stale runner's token is refused. That row is the truth; the
//!    lease and the done record make the second run rare and cheap.
//!
//! The process test `slots_run_exactly_once_under_kill9` checks this with three
//! instances killed and restarted at random, from the protected table's rows; the test
//! `restart` checks on every store that an instance started after another one stopped
//! finds that one's slots done and runs none of them again.
//!
//! ## Events say what happened
//! Only the job knows whether its transaction committed the slot or found it done, so
//! it says so: `Ok(`[`SlotOutcome::Committed`]`)` (or `Ok(())`) or
//! `Ok(`[`SlotOutcome::AlreadyDone`]`)`. [`SlotEvent::Ran`] comes from the instance
//! whose run committed, and only from it, even if its lease was lost after the commit;
//! an instance whose run found the slot done, or that finds the slot's done record,
//! reports [`SlotEvent::DoneElsewhere`]; [`SlotEvent::Abandoned`] is reported only
//! for a slot of which the store holds no record (one read says so before), never for
//! one another instance ran. The test `slot_events` checks this on every store: two
//! instances, the first run losing its lease after its commit, the other taking the
//! slot over. See [`SlotOutcome`] for an example.
//!
//! ## lock_at_most_for: a renewed TTL, or a hard cap
//! By default ([`LockAtMost::Renewed`]) `lock_at_most_for` is the slot lease's TTL,
//! renewed while the run goes on: it bounds how long a dead or frozen runner blocks a
//! slot, and a live run keeps its slot however long it takes, stuck or not. With
//! [`JobSpec::at_most`]`(`[`LockAtMost::Absolute`]`)` it is ShedLock's "never longer
//! than this, even while alive": the run's lease is not renewed, its context is
//! cancelled when the hold ends ([`leasehold_core::LossCause::MaxHoldReached`]), and
//! the store frees the slot `lock_at_most_for` after the run started, so another
//! instance takes the slot over and completes it; the stuck run's late writes carry
//! the old token, which the fence refuses. [`LockAtMost`] says why the default is the
//! renewed TTL.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().unwrap().block_on(async {
//! use std::time::Duration;
//! use leasehold_core::{LeaseClient, LossCause, MemoryStore};
//! use leasehold_jobs::{LockAtMost, LockConfig, LockingExecutor};
//!
//! let executor = LockingExecutor::new(LeaseClient::new(MemoryStore::new()));
//! let lock = LockConfig::new("reports/daily", Duration::from_secs(60)).at_most(LockAtMost::Absolute);
//! let ran = executor
//!     .run(&lock, |ctx| async move {
//!         ctx.cancelled().await; // a job that would run forever is told to stop at the cap
//!     })
//!     .await?
//!     .ran()
//!     .expect("the lock was free");
//! assert_eq!(ran.lost, Some(LossCause::MaxHoldReached));
//! # Ok::<(), leasehold_core::Error>(()) }).unwrap();
//! ```
//!
//! ## lock_at_least_for
//! When a run ends before `lock_at_least_for` has passed since its start, the lease is
//! not released: the run rewrites it (one conditional write on its version) into a
//! record held by the marker `=held=<holder>` whose TTL is the rest of
//! `lock_at_least_for`. The store then keeps the name taken on its own clock (stores
//! without a clock: challengers watch the record that long), and the process can exit
//! at once; nothing renews it. The rest is measured from when the grant's answer
//! arrived, which is after the store applied it, so the name stays taken at least
//! `lock_at_least_for` after the store's own start of the run. A done slot's record
//! (`keep_done_for`) covers it too. A failed slot is kept by `=failed=<holder>` for
//! the longer of the rest and [`JobSpec::retry_failed_after`] (`keep_done_for` when
//! the run gives the slot up: below).
//!
//! ## Failed slots
//! A job that returns `Err` or panics has failed its slot ([`SlotEvent::Failed`]; a
//! panic is caught, it never ends the scheduler). The slot is tried again after
//! [`JobSpec::retry_failed_after`], but not forever: an instance gives it up
//! ([`SlotEvent::GivenUp`]) after [`JobSpec::max_tries`] failed runs of its own, or
//! when its next try would come after the slot leaves the catch-up window. The run
//! that gives it up keeps its `=failed=` record for `keep_done_for`, so no instance
//! runs the slot again, and the record is then purged like a done one.
//!
//! When the store keeps failing (three calls in a row), the scheduler logs a warning
//! and reports [`SlotEvent::StoreUnavailable`], once per outage; it keeps retrying.
//!
//! ## Missed slots
//! See [`MissedSlots`]: by default every slot nobody started is run late, once, as far
//! back as `catch_up`; `RunLatestOnly` runs only the latest; `Skip` skips them. A slot
//! that was started and whose runner died is always completed.
//!
//! ## A new job
//! Slots from before a job existed are not missed ones: a job deployed for the first
//! time runs from its first start on, not the catch-up window before it. The job keeps
//! a *start record*, `<job>/@<time>`: written by the first instance to start it, and
//! written again by every running instance each quarter of `keep_done_for` (during a
//! long run too) to last five quarters more, so it stays while any instance of the job
//! ran within `keep_done_for`, however far apart the job's slots are and however long
//! its runs. No instance runs a slot from
//! before its time (less [`JobSpec::clock_skew`] where slots are due on the wall
//! clock), nor from before its own start if the record's time is later. A scheduler
//! that finds at start-up neither a start record that has not run out nor any slot
//! record takes the job for new and reports [`SlotEvent::NewJob`]: a job deployed for
//! the first time, or, on the stores whose records go by themselves (Redis, etcd), one
//! no instance of which ran for `keep_done_for` plus the skew (up to a quarter more, as
//! the last write fell). With slot records and no start record
//! that has not run out (a job run before this crate kept one, or, elsewhere, after
//! such an outage), it looks back the whole window once and writes one. This is the
//! per-slot naming's; where the store cannot list its records, or a call fails at
//! start-up, the whole window is looked back.
//!
//! ## Which clock says a slot is due
//! Where the store has a clock to read ([`CasStore::store_now_ms`]: Postgres and
//! MySQL answer their server's `now()`, Redis `TIME`, SQLite the host's real-time
//! clock, which no process's fake clock moves), slots are due on it, as ShedLock's
//! `usingDbTime()` does: each scheduler reads it at most once per pass and at most once
//! a second, and carries the reading forward on its monotonic clock in between. A
//! reading is taken while the call is under way, so it is never ahead of the store:
//! no instance starts a slot before its time on the store's clock, whatever its own
//! wall clock says. On etcd, ZooKeeper, DynamoDB and S3, which offer no clock to read,
//! slots are due on each instance's wall clock ([`Scheduler::with_wall_clock`]): an
//! instance whose clock is ahead by `d` starts slots up to `d` early; keep
//! [`JobSpec::clock_skew`] at the worst such `d`. Expiry is never judged on a wall
//! clock. The test `store_clock` runs an instance 2 s fast next to a true one on
//! Postgres, MySQL, Redis and SQLite and checks from the effect rows' commit times
//! that no slot started before its time.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! use std::time::Duration;
//! use leasehold::url::{OpenOptions, StoreUrl};
//! use leasehold_jobs::{JobSpec, Schedule, Scheduler, TokioWallClock};
//! use tokio_util::sync::CancellationToken;
//!
//! let dir = std::env::temp_dir().join(format!("lease-jobs-doc-clock-{}", std::process::id()));
//! std::fs::create_dir_all(&dir)?;
//! let url = StoreUrl::parse(&format!("sqlite:{}", dir.join("leases.db").display()))?;
//! let client = url.open(&OpenOptions::default()).await?;
//! let probe = client.clone();
//! assert!(probe.store().store_now_ms().await?.is_some(), "SQLite has a clock to read");
//! // This instance's wall clock runs 30 s fast; its slots still start on the store's time.
//! let scheduler = Scheduler::new(client).with_wall_clock(TokioWallClock::system_shifted(30_000));
//! let spec = JobSpec::new("report", Schedule::every(Duration::from_millis(200))?, Duration::from_secs(5));
//! let shutdown = CancellationToken::new();
//! let stop = shutdown.clone();
//! scheduler.run(spec, move |ctx| {
//!     let (probe, stop) = (probe.clone(), stop.clone());
//!     async move {
//!         let now = probe.store().store_now_ms().await?.unwrap_or(0);
//!         assert!(ctx.slot().expect("a slot").unix_ms() <= now, "started before its time");
//!         stop.cancel();
//!         Ok::<(), leasehold_core::Error>(())
//!     }
//! }, shutdown).await?;
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok::<(), Box<dyn std::error::Error>>(()) }).unwrap();
//! ```
//!
//! [`CasStore::store_now_ms`]: leasehold_core::store::CasStore::store_now_ms
//!
//! ## Guarantee, clock, cost
//! The guarantee grade and clock source are the store's (linearizable stores for
//! correctness; Redis for efficiency only). Per slot, on the instance that runs it: one round trip to take the slot, one per
//! renewal while the job runs (every third of `lock_at_most_for`), two to write the
//! done record (and one or two more to give it the store's own expiry, on Redis, etcd
//! and DynamoDB, or to keep it past the instance's session on ZooKeeper: below); on every other instance one round trip to find it taken or done; and
//! on every instance at most one read and one purge per aged slot (below), at most
//! 32 a pass.
//!
//! ## The store stays bounded
//! A slot's record is needed while an instance may still look at the slot:
//! [`JobSpec::keep_done_for`], plus the worst clock skew where slots are due on the
//! wall clock ([`JobSpec::clock_skew`]; none on the store's clock). Past that, each
//! scheduler purges its job's done (and failed) slot records, at most 32 a pass (one
//! read each, and a purge conditional on the version read, [`CasStore::purge`]): the
//! schedule's own slots as they age, and once per start the older records one listing
//! of the job's prefix finds. The sweep looks at a slot up to half of `keep_done_for`
//! (at most a minute) before its keep time ends, to learn the done record's version,
//! and comes back when it runs out. A done record is purged only once it has run out
//! (on the store's clock; on DynamoDB and S3, past its writer's wall-clock expiry plus
//! the skew), and so is a failed slot's record; a slot whose run goes on, or whose
//! runner died, keeps its record. So a job keeps about `keep_done_for / interval`
//! records, not one per slot forever. Per store:
//!
//! Where the store has an expiry of its own, the run that writes a done record (or gives
//! a failed slot up) also asks the store to remove it, with what it keeps for the name's
//! tokens, once `keep_done_for` plus the skew has passed ([`CasStore::expire`], one more
//! request per completed slot): the store then stays bounded even when every scheduler
//! stopped or fell behind, and the sweep finds less to do. Per store:
//!
//! | Store | What removes an aged slot record |
//! |---|---|
//! | Postgres, MySQL, SQLite | the purge: a `DELETE` of the row (a plain delete would leave a tombstone row) |
//! | Redis | the store itself: every record is written with `PX`, and the done record's counter hash (`:meta`) gets a `PEXPIRE` of `keep_done_for` plus the skew; the purge, if it comes first, removes both |
//! | etcd | the store itself: the done record and its fence counter key are attached to an etcd lease of `keep_done_for` plus the skew (whole seconds); the purge, if it comes first, removes both in one transaction |
//! | DynamoDB | the purge (a conditional delete), backed by DynamoDB's Time to Live: the done item gets `expires_at` (Unix seconds), which [`DynamoStore::provision`](https://docs.rs/leasehold-dynamodb) turns Time to Live on for; DynamoDB deletes such items within days, so the purge usually comes first |
//! | S3 | the purge (a conditional delete), and a lifecycle rule if you add one (below) |
//! | ZooKeeper | the purge: one `multi` deleting the record znode and its fence counter; the done record is made PERSISTENT first (`expire`), since a held record is an EPHEMERAL znode that would end with the session of the instance that ran the slot |
//!
//! On S3, a lifecycle rule on the job's prefix backs the purge up. Objects expire some
//! whole days after their last change, and a done record is never changed after it is
//! written, so one day is enough for any `keep_done_for` plus skew under a day. With
//! the store's key prefix `leases` and a job named `nightly-report` (slots named
//! per slot, the default [`LockNaming::PerSlot`]):
//!
//! ```text
//! aws s3api put-bucket-lifecycle-configuration --bucket BUCKET --lifecycle-configuration \
//!   '{"Rules":[{"ID":"leasehold-nightly-report-slots","Status":"Enabled",
//!     "Filter":{"Prefix":"leases/nightly-report/"},"Expiration":{"Days":1}}]}'
//! ```
//!
//! Only for per-slot names: a name taken again and again (a job lock,
//! [`LockNaming::JobName`], or any lease) must keep its record, or its tokens start
//! again from 1; a lease idle past the rule's days would lose it. The test `bounded_store` runs two instances over 1,000
//! slots of a 10 ms schedule with a 1.5 s `keep_done_for` on Postgres, SQLite, MySQL
//! and Redis (600 slots of 25 ms on etcd, where every write is a Raft commit: at 10 ms
//! its sweep fell behind on a loaded 2-core machine, 902 keys for 1,003 slots; 60 slots
//! of 250 ms on DynamoDB and S3), the seven stores at once, and counts what the store
//! keeps for the job (SQL rows with tombstones; Redis's and etcd's keys, two a name). In
//! the run of 2026-12-05 (at 9b49b8a): at most 158 rows on Postgres, 154 on SQLite, 155
//! on MySQL, 306 keys on Redis, 204 on etcd, 18 records on DynamoDB and S3; no slot's job
//! ran twice (`cargo test -p leasehold-jobs --all-features --test bounded_store --
//! --nocapture` prints them).
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! use std::time::Duration;
//! use leasehold::url::{OpenOptions, StoreUrl};
//! use leasehold_core::NamePrefix;
//! use leasehold_jobs::{JobSpec, Schedule, Scheduler};
//! use tokio_util::sync::CancellationToken;
//!
//! let dir = std::env::temp_dir().join(format!("lease-jobs-doc-bounded-{}", std::process::id()));
//! std::fs::create_dir_all(&dir)?;
//! let url = StoreUrl::parse(&format!("sqlite:{}", dir.join("leases.db").display()))?;
//! let client = url.open(&OpenOptions::default()).await?;
//! let store = client.store().clone();
//! // Every 10 ms, done records kept 1 s: about 100 records, however long it runs.
//! let spec = JobSpec::new("tick", Schedule::every(Duration::from_millis(10))?, Duration::from_millis(200))
//!     .catch_up(Duration::from_millis(100))
//!     .keep_done_for(Duration::from_secs(1));
//! let shutdown = CancellationToken::new();
//! let stop = shutdown.clone();
//! tokio::spawn(async move {
//!     tokio::time::sleep(Duration::from_secs(3)).await;
//!     stop.cancel();
//! });
//! Scheduler::new(client).run(spec, |_ctx| async { Ok::<(), std::io::Error>(()) }, shutdown).await?;
//! let records = store.list(&NamePrefix::new("tick/")?).await?.len();
//! assert!(records < 200, "{records} records after about 300 slots");
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok::<(), Box<dyn std::error::Error>>(()) }).unwrap();
//! ```
//!
//! [`CasStore::purge`]: leasehold_core::store::CasStore::purge
//! [`CasStore::expire`]: leasehold_core::store::CasStore::expire
#![cfg_attr(docsrs, feature(doc_cfg))]

/// Builder setters: each `name: Type;` becomes `#[must_use] pub fn name(self, value:
/// Type) -> Self` that sets the field of the same name, with the docs given.
macro_rules! setters {
    ($($(#[$doc:meta])* $name:ident: $ty:ty;)*) => {
        $(
            $(#[$doc])*
            #[must_use]
            pub fn $name(mut self, value: $ty) -> Self {
                self.$name = value;
                self
            }
        )*
    };
}
pub(crate) use setters;

mod clock;
mod config;
mod due;
mod executor;
mod first_start;
mod marker;
mod outcome;
mod schedule;
mod scheduler;
mod sweep;

#[cfg(any(feature = "shedlock-postgres", feature = "shedlock-mysql"))]
#[cfg_attr(docsrs, doc(cfg(any(feature = "shedlock-postgres", feature = "shedlock-mysql"))))]
pub mod shedlock;

pub use clock::TokioWallClock;
pub use config::{JobSpec, LockAtMost, LockNaming, MissedSlots};
pub use executor::{JobContext, LockConfig, LockingExecutor, Ran, RunOutcome, keep_taken};
pub use marker::Marker;
pub use outcome::SlotOutcome;
pub use schedule::{Schedule, Slot};
pub use scheduler::{Scheduler, SlotEvent};
