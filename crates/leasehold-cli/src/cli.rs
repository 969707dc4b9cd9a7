//! The command line, parsed by clap.

use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::error::report;
use crate::exit;

/// Leases and fencing tokens from the command line: run a command under a fenced lease on
/// SQLite, Postgres, MySQL/MariaDB, etcd, ZooKeeper, Redis, DynamoDB or S3; show, list or
/// release leases; run a command while leading an election, and watch who leads.
// The about is this doc comment, not the package's description: that one is written for
// crates.io, and the store list here must match the URLs below.
#[derive(Debug, Parser)]
#[command(name = "leasehold", version, after_help = STORE_HELP)]
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
    /// Whether `store` came from `LEASEHOLD_STORE` rather than `--store` (set by
    /// [`Cli::parse_args`]).
    #[arg(skip)]
    pub(crate) store_from_env: bool,

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

/// What a lease name may be, as [`leasehold::LeaseName::new`] checks it: one text for
/// every subcommand's help (a macro, as `concat!` takes only literals).
macro_rules! name_rule {
    () => {
        "1 to 200 bytes of ASCII letters, digits and - _ . : / @ = #, not starting or ending \
         with /, without an empty, . or .. segment between /s"
    };
}

/// How `run` and `elect` (`$sub`) take a name starting with `-` (the command after `--`
/// leaves no other way to end the options first): see [`dashed_name`].
macro_rules! hyphen_name {
    ($sub:literal) => {
        concat!(
            " A name starting with one - is given as is, as in '",
            $sub,
            " -x -- CMD', unless it is an option of ",
            $sub,
            "'s own (-h); one starting with -- is refused, as a mistyped option."
        )
    };
}

/// `leasehold run`.
#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// The lease name.
    // Hyphen values for a name such as `-x`: options of `run` itself (`--ttl`) are still
    // taken as options, before or after the name.
    #[arg(
        help = concat!("The lease name: ", name_rule!(), ".", hyphen_name!("run")),
        allow_hyphen_values = true,
        value_parser = dashed_name
    )]
    pub(crate) name: String,
    /// Wait as long as it takes for the lease (default: try once).
    #[arg(long, conflicts_with = "timeout")]
    pub(crate) wait: bool,
    /// Wait at most this long for the lease (default: try once).
    #[arg(long, value_parser = duration)]
    pub(crate) timeout: Option<Duration>,
    /// Keep the lease taken until at least this long after it was granted, even if the
    /// command exits sooner (ShedLock's lockAtLeastFor): the same cron job started a
    /// little later on another host finds it held and does not run again. Kept by a
    /// record nobody renews, after leasehold exits (on etcd and ZooKeeper, whose records
    /// live on its session, leasehold stays until then); not kept if the lease was lost
    /// or the command could not be started. At most 7 days.
    #[arg(long, value_parser = at_least)]
    pub(crate) at_least: Option<Duration>,
    /// The tenure and the command.
    #[command(flatten)]
    pub(crate) held: HeldArgs,
}

/// What `run` and `elect` share: the tenure's TTL, the grace on loss, the command.
#[derive(Debug, Args)]
pub(crate) struct HeldArgs {
    /// How long the lease lasts without renewal; it is renewed in the background. At
    /// least 1s (a renewal late by more than what is left of the lease loses it).
    #[arg(long, default_value = "30s", value_parser = duration)]
    pub(crate) ttl: Duration,
    /// After the lease is lost, how long the command has between SIGTERM and SIGKILL;
    /// as long for what it left running in its process group when it exited. At most
    /// 44.9% of the TTL: the lease counts as lost this much earlier, so that the command is
    /// stopped before the lease can expire on the store (default: 5s or a sixth of the
    /// TTL, whichever is shorter).
    #[arg(long, value_parser = duration)]
    pub(crate) grace: Option<Duration>,
    /// The command and its arguments (after `--`). It gets LEASEHOLD_TOKEN, LEASEHOLD_NAME
    /// and LEASEHOLD_HOLDER in its environment, and runs in a process group of its own,
    /// which gets the SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2 and SIGALRM sent
    /// to leasehold (a signal ends the tenure only by ending the command).
    #[arg(required = true, last = true, value_name = "CMD")]
    pub(crate) command: Vec<String>,
}

/// `leasehold show`.
#[derive(Debug, Args)]
pub(crate) struct ShowArgs {
    /// The lease name.
    #[arg(help = concat!("The lease name: ", name_rule!(), "."))]
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
    #[arg(help = concat!("The lease name: ", name_rule!(), "."))]
    pub(crate) name: String,
}

/// `leasehold elect`.
#[derive(Debug, Args)]
pub(crate) struct ElectArgs {
    /// The election name (a lease name).
    #[arg(
        help = concat!("The election name, a lease name: ", name_rule!(), ".", hyphen_name!("elect")),
        allow_hyphen_values = true,
        value_parser = dashed_name
    )]
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
    #[arg(help = concat!("The election name, a lease name: ", name_rule!(), "."))]
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

/// The name of `run` or `elect`, which takes values starting with `-`: one starting with
/// `--`, or one dash and the name of an option (`-wait`), is refused, since it is far
/// more likely a mistyped option in place of a missing name (`run --wiat -- job`) than a
/// name, and would otherwise run the job under it.
fn dashed_name(s: &str) -> Result<String, String> {
    const LONG_OPTIONS: [&str; 7] = ["wait", "timeout", "ttl", "grace", "store", "help", "version"];
    if s.starts_with("--") {
        return Err("an unknown option where the name is due (a name starting with -- is refused here)".into());
    }
    if let Some(option) = s.strip_prefix('-').filter(|o| LONG_OPTIONS.contains(o)) {
        return Err(format!(
            "an unknown option where the name is due (did you mean --{option}?)"
        ));
    }
    Ok(s.to_owned())
}

/// The command whose help answers a usage error: the words of its `Usage:` line before
/// the first placeholder or option (`leasehold stores`, `leasehold run`), `leasehold` if
/// there is none.
fn help_path(rendered: &str) -> String {
    let path: Vec<&str> = rendered
        .lines()
        .find_map(|l| l.trim().strip_prefix("Usage: "))
        .unwrap_or_default()
        .split_whitespace()
        .take_while(|w| !w.starts_with(['<', '[', '-']))
        .collect();
    if path.is_empty() {
        "leasehold".to_owned()
    } else {
        path.join(" ")
    }
}

impl Cli {
    /// Parses the command line (and `LEASEHOLD_STORE`), noting where the store came from.
    ///
    /// # Errors
    /// clap's, for [`clap_exit`].
    pub(crate) fn parse_args() -> Result<Self, clap::Error> {
        use clap::{CommandFactory as _, FromArgMatches as _};
        let matches = Self::command().try_get_matches()?;
        let mut cli = Self::from_arg_matches(&matches)?;
        cli.store_from_env = matches.value_source("store") == Some(clap::parser::ValueSource::EnvVariable);
        Ok(cli)
    }
}

/// A duration in humantime form: `300ms`, `30s`, `1m 30s`, `2h`.
fn duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s).map_err(|e| format!("{e} (for example 300ms, 30s, 1m)"))
}

/// `--at-least`: a duration a kept record can last ([`leasehold::Ttl::MAX`]).
fn at_least(s: &str) -> Result<Duration, String> {
    let d = duration(s)?;
    if d > leasehold::Ttl::MAX {
        return Err(format!(
            "{s} is longer than {}s (7 days), the longest a lease is kept",
            leasehold::Ttl::MAX.as_secs()
        ));
    }
    Ok(d)
}

const STORE_HELP: &str = "\
Store URLs (--store or LEASEHOLD_STORE):
  sqlite:PATH                              a SQLite file on this host (run and elect create it if missing; ~/ is $HOME)
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
            report(&format!("{first} (see {} --help)", help_path(&rendered)));
            ExitCode::from(exit::USAGE)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory as _;

    /// The name rule the help states is the one the library checks: its length limit, and
    /// exactly the ASCII characters it lists; a non-ASCII letter is refused.
    #[test]
    fn the_name_rule_in_the_help_is_the_librarys() {
        let rule = name_rule!();
        assert!(
            rule.starts_with(&format!("1 to {} bytes", leasehold::MAX_NAME_LEN)),
            "{rule}"
        );
        assert!(leasehold::LeaseName::new("a".repeat(leasehold::MAX_NAME_LEN)).is_ok());
        assert!(leasehold::LeaseName::new("a".repeat(leasehold::MAX_NAME_LEN + 1)).is_err());
        let listed = rule
            .split_once("digits and ")
            .and_then(|(_, rest)| rest.split_once(','))
            .map(|(chars, _)| chars)
            .expect("the characters listed");
        for c in (0x21..0x7f).map(char::from).filter(|c| !c.is_ascii_alphanumeric()) {
            let allowed = leasehold::LeaseName::new(format!("a{c}b")).is_ok();
            assert_eq!(allowed, listed.split(' ').any(|l| l == c.to_string()), "{c:?}: {rule}");
        }
        assert!(leasehold::LeaseName::new("ü").is_err());
    }

    /// `--grace`'s help says the share of the TTL the check allows: a grace of 44.9% of
    /// it passes, one a little longer does not.
    #[test]
    fn the_grace_help_says_the_limit_the_check_applies() {
        let cli = Cli::command();
        let run = cli.find_subcommand("run").expect("run");
        let grace = run.get_arguments().find(|a| a.get_id() == "grace").expect("--grace");
        let text = grace.get_help().map(ToString::to_string).unwrap_or_default();
        assert!(text.contains("At most 44.9% of the TTL"), "{text}");
        let held = |grace_ms| HeldArgs {
            ttl: Duration::from_secs(1000),
            grace: Some(Duration::from_millis(grace_ms)),
            command: vec!["true".into()],
        };
        assert!(crate::grace::grace_and_margin(&held(449_000)).is_ok());
        assert!(crate::grace::grace_and_margin(&held(449_001)).is_err());
    }
}
