//! # leasehold
//!
//! The `leasehold` command: run a command under a fenced lease, on any store leasehold
//! supports, show, list or force-release leases, run a command while leading an election, and
//! watch who leads.
//!
//! ```text
//! leasehold [--store URL] run NAME [--ttl 30s] [--wait | --timeout 1m] [--grace 5s] -- CMD ARGS…
//! leasehold [--store URL] show NAME [--json]
//! leasehold [--store URL] list [PREFIX] [--json]
//! leasehold [--store URL] release --force NAME
//! leasehold [--store URL] elect NAME [--ttl 30s] [--timeout 1m] [--grace 5s] -- CMD ARGS…
//! leasehold stores check [URL] [--create]
//! leasehold [--store URL] observe NAME [--json] [--count N] [--interval 1s]
//! ```
//!
//! The store is one URL (`--store` or `LEASEHOLD_STORE`, see [`leasehold::url`]); the
//! exit codes are in [`exit`].
#![warn(missing_docs)]

mod check;
mod cli;
mod elect;
mod error;
mod exit;
mod grace;
mod holder;
mod list;
mod observe;
mod open;
mod output;
mod release;
mod run;
mod show;
mod supervise;

use std::io::Write as _;
use std::process::ExitCode;

use crate::cli::{Cli, Command, StoresCommand};
use crate::error::{CliError, report};
use leasehold::url::StoreUrl;

fn main() -> ExitCode {
    let cli = match Cli::parse_args() {
        Ok(cli) => cli,
        Err(e) => return cli::clap_exit(&e),
    };
    let code = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => {
            let ended = rt.block_on(dispatch(cli));
            // Not waited for: a blocking task (a DNS lookup a store client started) would
            // hold the exit up, after a signal too.
            rt.shutdown_background();
            match ended {
                Ok(code) => code,
                Err(e) => {
                    if e.is_reported() {
                        report(&e.to_string());
                    }
                    if let CliError::Signalled { signal, .. } = &e {
                        exit::ended_by(*signal);
                    }
                    e.exit_code()
                }
            }
        }
        Err(e) => {
            report(&format!("cannot start the runtime: {e}"));
            exit::STORE
        }
    };
    let _ = std::io::stdout().flush();
    // Ended by a signal, end by it too: a calling shell acts on that.
    exit::reraise(code);
    // Exit now: background tasks of the store drivers must not hold the process.
    std::process::exit(i32::from(code))
}

/// Runs the subcommand; its exit code, or the error that ended it.
async fn dispatch(cli: Cli) -> Result<u8, CliError> {
    // An empty LEASEHOLD_STORE is unset, as shells' `${X:-}` leaves it.
    let store = cli.store.as_deref().filter(|s| !(s.is_empty() && cli.store_from_env));
    if let Command::Stores(StoresCommand::Check(args)) = &cli.command {
        // The argument names the store checked, over LEASEHOLD_STORE; with a different
        // --store as well, which one was meant is not known.
        let url = match (args.url.as_deref(), store) {
            (Some(a), Some(b)) if a.trim() != b.trim() && !cli.store_from_env => {
                return Err(CliError::Usage(format!(
                    "two stores named: '{}' and --store '{}'; give one",
                    leasehold::url::redact(a),
                    leasehold::url::redact(b)
                )));
            }
            (given, store) => resolve_store(given.or(store), args.create)?,
        };
        return check::check(&url, args).await;
    }
    // Only the commands that hold a lease create the default store's file (and its
    // directory); the others find it or say it is missing.
    let creates = matches!(cli.command, Command::Run(_) | Command::Elect(_));
    let url = resolve_store(store, creates)?;
    match cli.command {
        Command::Run(args) => run::run(&url, args).await,
        Command::Show(args) => show::show(&url, args).await,
        Command::List(args) => list::list(&url, args).await,
        Command::Release(args) => release::release(&url, args).await,
        Command::Elect(args) => elect::elect(&url, args).await,
        Command::Observe(args) => observe::observe(&url, args).await,
        Command::Stores(StoresCommand::Check(args)) => check::check(&url, &args).await,
    }
}

/// The store URL given, or the default SQLite file (its directory created if `create`).
fn resolve_store(given: Option<&str>, create: bool) -> Result<StoreUrl, CliError> {
    let url = match given {
        Some(raw) => StoreUrl::parse(raw).map_err(|e| CliError::Usage(e.to_string()))?,
        None => {
            let path = leasehold::url::default_sqlite_path().ok_or_else(|| {
                CliError::Usage(
                    "no --store given, and neither XDG_DATA_HOME nor HOME is set to an absolute path".into(),
                )
            })?;
            if let (true, Some(dir)) = (create, path.parent()) {
                std::fs::create_dir_all(dir)
                    .map_err(|e| CliError::Store(format!("cannot create {}: {e}", dir.display())))?;
            }
            StoreUrl::Sqlite { path }
        }
    };
    error::set_secrets(url.secrets());
    Ok(url)
}
