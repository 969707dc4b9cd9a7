//! The command line, parsed by clap.

use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::error::report;
use crate::exit;

/// Leases and fencing tokens from the command line, on any leasehold store.
#[derive(Debug, Parser)]
#[command(name = "leasehold", version, about, after_help = STORE_HELP)]
pub(crate) struct Cli {
    /// The store, as one URL: sqlite:PATH, postgres://…, mysql://…, etcd://HOST:PORT,…, zookeeper://HOST:PORT,…[/ROOT], redis://…,
    /// dynamodb://TABLE?region=…&endpoint=…, s3://BUCKET/PREFIX?region=…&endpoint=…
    /// (default: an SQLite file in the user's data directory)
    #[arg(
        long,
        global = true,
        env = "LEASEHOLD_STORE",
        value_name = "URL",
        hide_env_values = true
    )]
    pub(crate) store: Option<String>,

    /// What to do.
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run a command while holding a lease; the command gets LEASEHOLD_TOKEN,
    /// LEASEHOLD_NAME and LEASEHOLD_HOLDER in its environment.
    #[command(after_help = exit::TABLE)]
    Run(RunArgs),
    /// Show a lease: holder, fencing token, time left, version.
    #[command(after_help = exit::TABLE)]
    Show(ShowArgs),
    /// List the leases whose names start with a prefix: name, state, holder, token,
    /// time left.
    #[command(after_help = exit::TABLE)]
    List(ListArgs),
    /// The store itself: check that it is ready for leases.
    #[command(subcommand)]
    Stores(StoresCommand),
    /// Make a lease vacant whoever holds it (the holder may still be running).
    #[command(after_help = exit::TABLE)]
    Release(ReleaseArgs),
    /// Run a command while this process leads an election: it waits to lead, and the
    /// command is stopped when leadership is lost.
    #[command(after_help = exit::TABLE)]
    Elect(ElectArgs),
    /// Print each new leader of an election (and its token) as it happens, one line
    /// per change.
    #[command(after_help = exit::TABLE)]
    Observe(ObserveArgs),
}

/// `leasehold run`.
#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// The lease name (letters, digits and - _ . : / @ = #).
    pub(crate) name: String,
    /// Wait as long as it takes for the lease (default: try once).
    #[arg(long, conflicts_with = "timeout")]
    pub(crate) wait: bool,
    /// Wait at most this long for the lease (default: try once).
    #[arg(long, value_parser = duration)]
    pub(crate) timeout: Option<Duration>,
    /// The tenure and the command.
    #[command(flatten)]
    pub(crate) held: HeldArgs,
}

/// What `run` and `elect` share: the tenure's TTL, the grace on loss, the command.
#[derive(Debug, Args)]
pub(crate) struct HeldArgs {
    /// How long the lease lasts without renewal; it is renewed in the background.
    #[arg(long, default_value = "30s", value_parser = duration)]
    pub(crate) ttl: Duration,
    /// After the lease is lost, how long the command has between SIGTERM and SIGKILL;
    /// as long for what it left running in its process group when it exited. Under 45%
    /// of the TTL: the lease counts as lost this much earlier, so that the command is
    /// stopped before the lease can expire on the store (default: 5s or a sixth of the
    /// TTL, whichever is shorter).
    #[arg(long, value_parser = duration)]
    pub(crate) grace: Option<Duration>,
    /// The command and its arguments (after `--`).
    #[arg(required = true, last = true, value_name = "CMD")]
    pub(crate) command: Vec<String>,
}

/// `leasehold show`.
#[derive(Debug, Args)]
pub(crate) struct ShowArgs {
    /// The lease name.
    pub(crate) name: String,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
}

/// `leasehold stores …`.
#[derive(Debug, Subcommand)]
pub(crate) enum StoresCommand {
    /// Check that a store is ready for leases: connect and find its table, bucket or
    /// key layout (`--create` makes what is missing), write and delete a probe lease,
    /// list. One line per check passed; the first problem is one line on stderr.
    #[command(after_help = exit::TABLE)]
    Check(CheckArgs),
}

/// `leasehold stores check`.
#[derive(Debug, Args)]
pub(crate) struct CheckArgs {
    /// The store URL (default: --store, LEASEHOLD_STORE, or the default SQLite file).
    #[arg(value_name = "URL")]
    pub(crate) url: Option<String>,
    /// Create the table (SQL, DynamoDB), bucket (S3) or root znode (ZooKeeper) when it is
    /// missing.
    #[arg(long)]
    pub(crate) create: bool,
}

/// `leasehold list`.
#[derive(Debug, Args)]
pub(crate) struct ListArgs {
    /// The start of the names to list (default: every lease); plain text, so `jobs`
    /// lists `jobs/nightly` and `jobsx` alike, and `jobs/` only the first.
    pub(crate) prefix: Option<String>,
    /// Print one JSON array of the objects `show --json` prints, instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
}

/// `leasehold release`.
#[derive(Debug, Args)]
pub(crate) struct ReleaseArgs {
    /// Release whoever holds it (required: the holder is not asked).
    #[arg(long, required = true)]
    pub(crate) force: bool,
    /// The lease name.
    pub(crate) name: String,
}

/// `leasehold elect`.
#[derive(Debug, Args)]
pub(crate) struct ElectArgs {
    /// The election name (a lease name).
    pub(crate) name: String,
    /// Campaign at most this long (default: as long as it takes).
    #[arg(long, value_parser = duration)]
    pub(crate) timeout: Option<Duration>,
    /// Leadership's lease and the command.
    #[command(flatten)]
    pub(crate) held: HeldArgs,
}

/// `leasehold observe`.
#[derive(Debug, Args)]
pub(crate) struct ObserveArgs {
    /// The election name (a lease name).
    pub(crate) name: String,
    /// Print one JSON object per line instead of text.
    #[arg(long)]
    pub(crate) json: bool,
    /// Exit after this many lines naming who leads (the first is the leader now); an
    /// `unknown` line, printed while the store cannot be read, does not count.
    #[arg(long, value_name = "N")]
    pub(crate) count: Option<u64>,
    /// How often to read where the store does not push changes (MySQL, DynamoDB, S3),
    /// and how soon a new leader shows on Postgres and Redis, which push releases and
    /// deletes only; a tenure shorter than this may go unseen on all five.
    #[arg(long, default_value = "1s", value_parser = duration)]
    pub(crate) interval: Duration,
}

/// A duration in humantime form: `300ms`, `30s`, `1m 30s`, `2h`.
fn duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s).map_err(|e| format!("{e} (for example 300ms, 30s, 1m)"))
}

const STORE_HELP: &str = "\
Store URLs (--store or LEASEHOLD_STORE):
  sqlite:PATH                              a SQLite file on this host (created if missing)
  postgres://USER@HOST:PORT/DB             Postgres (password from the URL, PGPASSWORD or ~/.pgpass)
  mysql://USER@HOST:PORT/DB                MySQL or MariaDB (mariadb:// too; the lease table in DB)
  etcd://HOST:PORT[,HOST:PORT]             etcd
  zookeeper://HOST:PORT[,HOST:PORT][/ROOT] ZooKeeper (lease znodes under ROOT, default /leasehold)
  redis://HOST:PORT[/DB]                   Redis (efficiency-only leases)
  dynamodb://TABLE?region=R&endpoint=URL   DynamoDB (credentials: the AWS default chain)
  s3://BUCKET/PREFIX?region=R&endpoint=URL S3 (credentials: the AWS default chain)
Default: $XDG_DATA_HOME/leasehold/leases.db, or ~/.local/share/leasehold/leases.db.
Passwords are never printed.

Run 'leasehold help run' for the exit codes.";

/// Handles a clap error: help and version go to stdout with 0; anything else is one
/// line on stderr and [`exit::USAGE`].
pub(crate) fn clap_exit(e: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = e.print();
            ExitCode::from(exit::OK)
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            // `leasehold` (or `leasehold stores`) alone: one line, as for any usage
            // error, not the whole help on stderr.
            let rendered = e.render().to_string();
            let usage = rendered
                .lines()
                .find_map(|l| l.trim().strip_prefix("Usage: "))
                .unwrap_or("leasehold <COMMAND>");
            report(&format!("a subcommand is needed: {usage} (see --help)"));
            ExitCode::from(exit::USAGE)
        }
        _ => {
            let rendered = e.render().to_string();
            // The first paragraph (the error, and the arguments it names), on one line.
            let first: Vec<&str> = rendered
                .lines()
                .map(str::trim)
                .skip_while(|l| l.is_empty())
                .take_while(|l| !l.is_empty())
                .collect();
            let first = first.join(" ");
            let first = first.strip_prefix("error: ").unwrap_or(&first);
            report(&format!("{first} (see leasehold --help)"));
            ExitCode::from(exit::USAGE)
        }
    }
}
