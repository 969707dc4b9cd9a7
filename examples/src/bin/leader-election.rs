//! Leader election with fenced writes, as a real program.
//!
//! Run several copies; one leads at a time. The leader appends a row to a table every
//! `--write-every-ms`, through a fenced write: the row is written only if no newer
//! leader's token has written before it. Kill the leader (`kill -9`) or freeze it
//! (`kill -STOP`) and another copy takes over within the TTL; a frozen leader that
//! resumes has its writes refused.
//!
//! ```text
//! cargo run -p leasehold-examples --bin leader-election -- --instance a &
//! cargo run -p leasehold-examples --bin leader-election -- --instance b
//! ```
//!
//! Options (all optional):
//! - `--store sqlite:PATH | postgres://… | etcd://HOST:PORT[,HOST:PORT] | memory` (a store URL, as the `leasehold` command takes it) where the
//!   lease lives (default: an SQLite file in the temp directory, shared by all copies).
//! - `--data sqlite:PATH | postgres://…` where the protected table lives (default: the
//!   store's database; required with etcd; an in-memory SQLite with `memory`).
//! - `--prefix NAME` prefix of the tables (and etcd keys) this program uses (`demo`).
//! - `--election NAME` (`leader`), `--ttl-ms N` (2000), `--write-every-ms N` (50),
//!   `--instance ID` (`pid-<pid>`), `--run-for-ms N` (default: until killed).
//!
//! It prints one line per event: `ready`, `new-leader`, `leading`, `write`,
//! `rejected`, `stopped`.

use std::time::Duration;

#[path = "../cli.rs"]
mod cli;

use cli::{BoxResult, Common, Data, ms, retry, say};
use leasehold_core::FencingToken;
use leasehold_election::{Callbacks, Election, ElectionConfig};
use sqlx::{AssertSqlSafe, Row};

/// Leader election with fenced writes: run several copies; one leads at a time (see
/// the doc comment of examples/src/bin/leader-election.rs).
#[derive(Debug, clap::Parser)]
#[command(name = "leader-election")]
struct Cli {
    #[command(flatten)]
    common: Common,
    #[command(flatten)]
    args: Args,
}

/// The options of this program; [`Common`] has the rest.
#[derive(Debug, clap::Args)]
struct Args {
    /// The election's lease name.
    #[arg(long, default_value = "leader")]
    election: String,
    /// The lease TTL, in milliseconds.
    #[arg(long = "ttl-ms", value_name = "MS", default_value = "2000", value_parser = ms)]
    ttl: Duration,
    /// How often the leader writes, in milliseconds.
    #[arg(long = "write-every-ms", value_name = "MS", default_value = "50", value_parser = ms)]
    write_every: Duration,
}

fn parse_args() -> (Common, Args) {
    let Cli { common, args } = clap::Parser::parse();
    (common, args)
}

impl Data {
    async fn setup(&self, p: &str, election: &str) -> BoxResult<()> {
        match self {
            Self::Pg(pool) => {
                let fence = format!(
                    "CREATE TABLE IF NOT EXISTS {p}_leader_fence (election TEXT PRIMARY KEY, last_token BIGINT NOT NULL)"
                );
                let writes = format!(
                    "CREATE TABLE IF NOT EXISTS {p}_leader_writes (id BIGSERIAL PRIMARY KEY, election TEXT NOT NULL, \
                     instance TEXT NOT NULL, token BIGINT NOT NULL, at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp())"
                );
                // Several copies start at once: serialized, their CREATEs cannot collide.
                leasehold_postgres::run_ddl_serialized(pool, &[&fence, &writes]).await?;
                sqlx::query(AssertSqlSafe(format!(
                    "INSERT INTO {p}_leader_fence (election, last_token) VALUES ($1, 0) ON CONFLICT DO NOTHING"
                )))
                .bind(election)
                .execute(pool)
                .await?;
            }
            Self::Lite(pool) => {
                for ddl in [
                    format!(
                        "CREATE TABLE IF NOT EXISTS {p}_leader_fence (election TEXT PRIMARY KEY, last_token INTEGER NOT NULL)"
                    ),
                    format!(
                        "CREATE TABLE IF NOT EXISTS {p}_leader_writes (id INTEGER PRIMARY KEY AUTOINCREMENT, election TEXT NOT NULL, \
                         instance TEXT NOT NULL, token INTEGER NOT NULL, at REAL NOT NULL DEFAULT (julianday('now')))"
                    ),
                    format!("INSERT OR IGNORE INTO {p}_leader_fence (election, last_token) VALUES (?1, 0)"),
                ] {
                    sqlx::query(AssertSqlSafe(ddl)).bind(election).execute(pool).await?;
                }
            }
        }
        Ok(())
    }

    /// One fenced write: in one transaction, raise the election's high-water mark to
    /// `token` unless a newer token has written (`last_token <= token`), then append
    /// the row. `false`: refused by the fence, nothing written.
    async fn fenced_write(&self, p: &str, election: &str, instance: &str, token: FencingToken) -> BoxResult<bool> {
        let t = token.to_i64()?;
        let fence = self.sql(format!(
            "UPDATE {p}_leader_fence SET last_token = $1 WHERE election = $2 AND last_token <= $1"
        ));
        let write = self.sql(format!(
            "INSERT INTO {p}_leader_writes (election, instance, token) VALUES ($1, $2, $3)"
        ));
        cli::on_pool!(self, pool => {
            let mut tx = pool.begin().await?;
            let n = sqlx::query(AssertSqlSafe(fence))
                .bind(t)
                .bind(election)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            if n == 0 {
                return Ok(false);
            }
            sqlx::query(AssertSqlSafe(write))
                .bind(election)
                .bind(instance)
                .bind(t)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
        });
        Ok(true)
    }

    async fn count_writes(&self, p: &str, election: &str) -> BoxResult<i64> {
        let sql = self.sql(format!("SELECT count(*) FROM {p}_leader_writes WHERE election = $1"));
        Ok(cli::on_pool!(self, pool => sqlx::query(AssertSqlSafe(sql))
            .bind(election)
            .fetch_one(pool)
            .await?
            .try_get(0)?))
    }
}

#[tokio::main]
async fn main() -> BoxResult<()> {
    let (common, args) = parse_args();
    let (client, work) = common.open_work(&args.election).await?;
    retry("create the tables", || work.data.setup(&work.prefix, &work.name)).await?;
    let election = Election::with_config(
        client,
        &args.election,
        ElectionConfig {
            observe_interval: (args.ttl / 10).max(Duration::from_millis(20)),
            ..ElectionConfig::new(args.ttl)
        },
    )?;
    let shutdown = common.shutdown();
    common.ready();

    let every = args.write_every;
    let callbacks = Callbacks::new(move |ctx| {
        let work = work.clone();
        async move {
            say(&format!("leading token={}", ctx.token()));
            while ctx.is_leading() {
                match work
                    .data
                    .fenced_write(&work.prefix, &work.name, &work.instance, ctx.token())
                    .await
                {
                    Ok(true) => say(&format!("write token={} ok", ctx.token())),
                    Ok(false) => {
                        // A newer leader has written: this one is deposed, whatever its
                        // lease handle still believes.
                        say(&format!("rejected token={}", ctx.token()));
                        return;
                    }
                    Err(e) => say(&format!("write-error token={} error={e}", ctx.token())),
                }
                tokio::select! {
                    () = ctx.cancelled() => {}
                    () = tokio::time::sleep(every) => {}
                }
            }
        }
    })
    .on_stopped_leading(|cause| say(&format!("stopped cause={}", cause.label())))
    .on_new_leader(|leader| match leader {
        Some(l) => say(&format!(
            "new-leader instance={} holder={} token={}",
            l.identity(),
            l.holder,
            l.token
        )),
        None => say("new-leader none"),
    });
    election.run(callbacks, shutdown).await?;
    let data = Data::open(&common.store, common.data.as_deref()).await?;
    say(&format!(
        "exit instance={} writes-in-table={}",
        common.instance,
        data.count_writes(&common.prefix, &args.election).await.unwrap_or(-1)
    ));
    Ok(())
}
