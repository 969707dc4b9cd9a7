//! Opening the store a [`StoreUrl`] names ([`StoreUrl::open`]), within a bound, with the
//! command's errors.

use std::time::Duration;

use leasehold::url::{OpenOptions, StoreUrl};
use leasehold::{ClientConfig, ClientConfigBuilder, LeaseClient, Ttl};

use crate::cli::HeldArgs;
use crate::error::CliError;
use crate::supervise::Signals;
use crate::{grace, holder};

/// The longest opening a store may take (connecting, checking its table or bucket).
pub(crate) const OPEN_TIMEOUT: Duration = Duration::from_secs(10);

/// The shortest TTL of a command's tenure (`run`, `elect`). The library takes leases
/// down to 10 ms, but a lease is lost, and its command stopped, as soon as a renewal is
/// late by more than what is left of it: on a loaded host, a SQLite file's fsync or a
/// network store's round trip, a process swapped out, make that likely at tens of
/// milliseconds (a `sleep 3` under `--ttl 10ms` lost its lease in 5 runs of 5, under
/// `30ms` in 2 of 5, on a 2-core host beside a torture run), and a command started from
/// a shell gains nothing from a shorter lease.
pub(crate) const MIN_TTL: Duration = Duration::from_secs(1);

/// Opens the store at `url`, as it is, and a lease client on it whose holder ids start
/// with `label`: what the commands that only read or release leases open. Nothing is
/// created, a SQLite file no more than a server's table: a mistyped path is an error,
/// not a new, empty database where no lease is held. Redis gives an efficiency-only
/// client (by its grade).
///
/// # Errors
/// [`CliError::Usage`] for a URL the store's driver refuses, [`CliError::Store`] when
/// the store cannot be reached within [`OPEN_TIMEOUT`] or is not set up (a missing
/// table, bucket, root znode or SQLite file: the message says to run
/// `stores check --create`).
pub(crate) async fn open(url: &StoreUrl, label: &str) -> Result<LeaseClient, CliError> {
    open_with(url, ClientConfig::builder().label(label), false).await
}

/// Opens the store at `url` and a lease client of `config` on it, as [`open`] does,
/// but creating a SQLite file and its table that are missing when `create_sqlite_file`
/// (what `run` and `elect` do: SQLite is the zero-setup store).
///
/// # Errors
/// As [`open`], and [`CliError::Usage`] for a configuration the client refuses.
async fn open_with(
    url: &StoreUrl,
    config: ClientConfigBuilder,
    create_sqlite_file: bool,
) -> Result<LeaseClient, CliError> {
    let config = config
        .build()
        .map_err(|e| CliError::from_lease("client configuration", &e))?;
    let mut options = OpenOptions::with_client(config);
    options.create_sqlite_file = create_sqlite_file;
    let opened = tokio::time::timeout(OPEN_TIMEOUT, url.open(&options)).await;
    match opened {
        Ok(Ok(client)) => Ok(client),
        Ok(Err(leasehold::Error::InvalidInput {
            what: "store URL",
            reason,
        })) => Err(CliError::Usage(format!("bad store URL '{url}': {reason}"))),
        Ok(Err(e @ leasehold::Error::Unavailable { .. })) => Err(CliError::Store(e.to_string())),
        Ok(Err(e)) if setup_missing(&e) => Err(CliError::Store(format!(
            "{} store {url}: {e}; run 'leasehold stores check --create{}' to create it",
            url.kind(),
            create_target(url)
        ))),
        Ok(Err(e)) => Err(CliError::from_lease(&format!("{} store {url}", url.kind()), &e)),
        Err(_) => Err(CliError::Store(format!(
            "{} store {url}: no answer within {}",
            url.kind(),
            humantime::format_duration(OPEN_TIMEOUT)
        ))),
    }
}

/// What `run` and `elect` hold a tenure with: a lease client whose safety margin holds
/// the grace ([`crate::grace`]), the grace, and the signals handled from now on.
pub(crate) struct Held {
    /// The client.
    pub(crate) client: LeaseClient,
    /// The command's grace between SIGTERM and SIGKILL.
    pub(crate) grace: Duration,
    /// SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGALRM (and SIGTSTP),
    /// handled.
    pub(crate) signals: Signals,
}

/// Checks `held`'s TTL and grace, handles the signals a command's tenure forwards, and
/// opens the store at `url` with a client for the tenure; a signal during the opening
/// ends it at once (nothing was sent that would need settling), as the wait for `what`.
///
/// # Errors
/// [`CliError::Usage`] for a bad TTL or a grace the TTL cannot hold; as [`open`]; and
/// [`CliError::Signalled`] for a signal meanwhile.
pub(crate) async fn open_held(url: &StoreUrl, held: &HeldArgs, what: &str) -> Result<Held, CliError> {
    if held.ttl < MIN_TTL {
        return Err(CliError::Usage(format!(
            "--ttl {} is too short for a command's lease: at least {} (a renewal late by more \
             than what is left of the lease loses it, and stops the command)",
            humantime::format_duration(held.ttl),
            humantime::format_duration(MIN_TTL)
        )));
    }
    Ttl::new(held.ttl).map_err(|e| CliError::from_lease("--ttl", &e))?;
    let (grace, margin) = grace::grace_and_margin(held)?;
    let mut signals = Signals::for_command()?;
    let config = ClientConfig::builder().label(holder::label()).margin_permille(margin);
    let client = tokio::select! {
        client = open_with(url, config, true) => client?,
        sig = signals.next() => return Err(sig.ended(what)),
    };
    Ok(Held { client, grace, signals })
}

/// True when opening a store failed because what it needs is missing (a SQL or
/// DynamoDB table, an S3 bucket, a ZooKeeper root znode, a column an earlier table
/// lacks): what `stores check --create` makes. The stores say so with their own kind,
/// [`leasehold::Error::NotProvisioned`], never with a [`leasehold::Error::Misconfigured`]
/// (refused credentials, no region, a wrong table engine), which creating cannot fix.
pub(crate) fn setup_missing(e: &leasehold::Error) -> bool {
    matches!(e, leasehold::Error::NotProvisioned { .. })
}

/// What follows `stores check --create` to make `url`'s setup: nothing for the default
/// store (which that command makes, directory and all, as `run` does: its directory may
/// not exist yet), else the URL as one shell word.
fn create_target(url: &StoreUrl) -> String {
    match url {
        StoreUrl::Sqlite { path } if leasehold::url::default_sqlite_path().as_ref() == Some(path) => String::new(),
        _ => format!(" {}", shell_word(&url.to_string())),
    }
}

/// `word` as one word of a POSIX shell command: as it is when it has nothing the shell
/// reads specially, in double quotes otherwise (a URL's `&` and `?`, a redacted
/// password's `***`).
fn shell_word(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "@%+=:,./_-".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        return word.to_owned();
    }
    let mut quoted = String::with_capacity(word.len() + 2);
    quoted.push('"');
    for c in word.chars() {
        if matches!(c, '"' | '\\' | '$' | '`') {
            quoted.push('\\');
        }
        quoted.push(c);
    }
    quoted.push('"');
    quoted
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_setup_is_told_from_other_misconfiguration() {
        let not_provisioned = leasehold::Error::NotProvisioned {
            message: "lease table t: does not exist".into(),
            source: None,
        };
        assert!(setup_missing(&not_provisioned));
        // The old wording alone no longer counts: the kind says it.
        let misconfigured = leasehold::Error::Misconfigured {
            message: "lease table t: does not exist (create it with provision())".into(),
            source: None,
        };
        assert!(!setup_missing(&misconfigured));
    }

    #[test]
    fn shell_words_are_quoted_only_when_needed() {
        assert_eq!(shell_word("postgres://app@db:5432/ops"), "postgres://app@db:5432/ops");
        assert_eq!(
            shell_word("s3://b/l?region=r&endpoint=http://h:1"),
            "\"s3://b/l?region=r&endpoint=http://h:1\""
        );
        assert_eq!(shell_word("postgres://app:***@db/ops"), "\"postgres://app:***@db/ops\"");
        assert_eq!(shell_word("sqlite:/a b/$x\"y"), "\"sqlite:/a b/\\$x\\\"y\"");
    }
}
