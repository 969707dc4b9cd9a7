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
//! - `--store sqlite:PATH | postgres:URL | etcd:HOST:PORT[,HOST:PORT] | memory` where the
//!   lease lives (default: an SQLite file in the temp directory, shared by all copies).
//! - `--data sqlite:PATH | postgres:URL` where the protected table lives (default: the
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

use cli::{BoxResult, Data, lease_client, retry, say};
use leasehold_core::FencingToken;
use leasehold_election::{Callbacks, Election, ElectionConfig};
use sqlx::{AssertSqlSafe, Row};
use tokio_util::sync::CancellationToken;

struct Args {
    store: String,
    data: Option<String>,
    prefix: String,
    election: String,
    ttl: Duration,
    write_every: Duration,
    instance: String,
    run_for: Option<Duration>,
}

fn parse_args() -> BoxResult<Args> {
    let default_db = std::env::temp_dir().join("leasehold-examples.db");
    let mut a = Args {
        store: format!("sqlite:{}", default_db.display()),
        data: None,
        prefix: "demo".into(),
        election: "leader".into(),
        ttl: Duration::from_secs(2),
        write_every: Duration::from_millis(50),
        instance: format!("pid-{}", std::process::id()),
        run_for: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        let ms = |v: String| -> BoxResult<Duration> { Ok(Duration::from_millis(v.parse()?)) };
        match flag.as_str() {
            "--store" => a.store = value()?,
            "--data" => a.data = Some(value()?),
            "--prefix" => a.prefix = value()?,
            "--election" => a.election = value()?,
            "--ttl-ms" => a.ttl = ms(value()?)?,
            "--write-every-ms" => a.write_every = ms(value()?)?,
            "--instance" => a.instance = value()?,
            "--run-for-ms" => a.run_for = Some(ms(value()?)?),
            "-h" | "--help" => {
                println!("see the doc comment of examples/src/bin/leader-election.rs");
                std::process::exit(0);
            }
            other => return Err(format!("unknown option {other}").into()),
        }
    }
    if !a.prefix.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err("--prefix: letters, digits and _ only".into());
    }
    Ok(a)
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
        match self {
            Self::Pg(pool) => {
                let mut tx = pool.begin().await?;
                let n = sqlx::query(AssertSqlSafe(format!(
                    "UPDATE {p}_leader_fence SET last_token = $1 WHERE election = $2 AND last_token <= $1"
                )))
                .bind(t)
                .bind(election)
                .execute(&mut *tx)
                .await?
                .rows_affected();
                if n == 0 {
                    return Ok(false);
                }
                sqlx::query(AssertSqlSafe(format!(
                    "INSERT INTO {p}_leader_writes (election, instance, token) VALUES ($1, $2, $3)"
                )))
                .bind(election)
                .bind(instance)
                .bind(t)
                .execute(&mut *tx)
                .await?;
                tx.commit().await?;
            }
            Self::Lite(pool) => {
                let mut tx = pool.begin().await?;
                let n = sqlx::query(AssertSqlSafe(format!(
                    "UPDATE {p}_leader_fence SET last_token = ?1 WHERE election = ?2 AND last_token <= ?1"
                )))
                .bind(t)
                .bind(election)
                .execute(&mut *tx)
                .await?
                .rows_affected();
                if n == 0 {
                    return Ok(false);
                }
                sqlx::query(AssertSqlSafe(format!(
                    "INSERT INTO {p}_leader_writes (election, instance, token) VALUES (?1, ?2, ?3)"
                )))
                .bind(election)
                .bind(instance)
                .bind(t)
                .execute(&mut *tx)
                .await?;
                tx.commit().await?;
            }
        }
        Ok(true)
    }

    async fn count_writes(&self, p: &str, election: &str) -> BoxResult<i64> {
        let sql = match self {
            Self::Pg(_) => format!("SELECT count(*) FROM {p}_leader_writes WHERE election = $1"),
            Self::Lite(_) => format!("SELECT count(*) FROM {p}_leader_writes WHERE election = ?1"),
        };
        Ok(match self {
            Self::Pg(pool) => sqlx::query(AssertSqlSafe(sql))
                .bind(election)
                .fetch_one(pool)
                .await?
                .try_get(0)?,
            Self::Lite(pool) => sqlx::query(AssertSqlSafe(sql))
                .bind(election)
                .fetch_one(pool)
                .await?
                .try_get(0)?,
        })
    }
}

#[tokio::main]
async fn main() -> BoxResult<()> {
    let args = parse_args()?;
    let client = retry("open the lease store", || {
        lease_client(&args.store, &args.prefix, &args.instance)
    })
    .await?;
    let data = std::sync::Arc::new(retry("open the data", || Data::open(&args.store, args.data.as_deref())).await?);
    retry("create the tables", || data.setup(&args.prefix, &args.election)).await?;
    let election = Election::with_config(
        client,
        &args.election,
        ElectionConfig {
            observe_interval: (args.ttl / 10).max(Duration::from_millis(20)),
            ..ElectionConfig::new(args.ttl)
        },
    )?;
    let shutdown = CancellationToken::new();
    if let Some(d) = args.run_for {
        let s = shutdown.clone();
        tokio::spawn(async move {
            tokio::time::sleep(d).await;
            s.cancel();
        });
    }
    say(&format!("ready instance={} pid={}", args.instance, std::process::id()));

    let (prefix, name, instance, every) = (
        args.prefix.clone(),
        args.election.clone(),
        args.instance.clone(),
        args.write_every,
    );
    let callbacks = Callbacks::new(move |ctx| {
        let (data, prefix, name, instance) = (data.clone(), prefix.clone(), name.clone(), instance.clone());
        async move {
            say(&format!("leading token={}", ctx.token()));
            while ctx.is_leading() {
                match data.fenced_write(&prefix, &name, &instance, ctx.token()).await {
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
    let data = Data::open(&args.store, args.data.as_deref()).await?;
    say(&format!(
        "exit instance={} writes-in-table={}",
        args.instance,
        data.count_writes(&args.prefix, &args.election).await.unwrap_or(-1)
    ));
    Ok(())
}
