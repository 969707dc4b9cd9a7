//! `leasehold stores check [URL] [--create]`: is the store ready for leases?
//!
//! Three checks, each a line on stdout when it passes (`ok: …`); the first that fails
//! is one line on stderr saying what is wrong, and the exit code is [`exit::STORE`]:
//! 1. connect, and find the setup (the table, bucket or key layout; `--create` makes
//!    what is missing);
//! 2. write: acquire and release a probe lease (`leasehold-check/<host>-<pid>`), then
//!    delete its record;
//! 3. list the leases under the probe's prefix.

use std::time::Duration;

use leasehold::admin::Admin;
use leasehold::store::DeleteOutcome;
use leasehold::url::{OpenOptions, StoreUrl};
use leasehold::{AcquireOutcome, ClientConfig, LeaseClient, LeaseName, NamePrefix};

use crate::cli::CheckArgs;
use crate::error::CliError;
use crate::open::OPEN_TIMEOUT;
use crate::{exit, holder, open, output};

/// The longest each of the write and list checks may take.
const STEP_TIMEOUT: Duration = Duration::from_secs(15);

/// The probe lease's TTL.
const PROBE_TTL: Duration = Duration::from_secs(10);

/// Runs `leasehold stores check`.
///
/// # Errors
/// [`CliError::Usage`] for a bad URL, [`CliError::Store`] naming the first check that
/// failed;
/// [`CliError::StdoutClosed`] or [`CliError::Output`] when stdout cannot be written.
pub(crate) async fn check(url: &StoreUrl, args: &CheckArgs) -> Result<u8, CliError> {
    let label = holder::label();
    let config = ClientConfig::builder()
        .label(&label)
        .build()
        .map_err(|e| CliError::from_lease("holder label", &e))?;
    let mut options = OpenOptions::with_client(config);
    options.provision = args.create;
    // Without --create, a missing SQLite file is missing setup, as a missing table is.
    options.create_sqlite_file = false;
    let setup = if args.create {
        "set up (created if missing)"
    } else {
        "set up"
    };
    let client = match tokio::time::timeout(OPEN_TIMEOUT, url.open(&options)).await {
        Ok(Ok(client)) => client,
        Ok(Err(leasehold::Error::InvalidInput {
            what: "store URL",
            reason,
        })) => {
            return Err(CliError::Usage(format!("bad store URL '{url}': {reason}")));
        }
        Ok(Err(e)) => {
            let hint = if open::setup_missing(&e) && !args.create {
                " (--create makes what is missing)"
            } else {
                ""
            };
            return Err(CliError::Store(format!("connect and setup: {e}{hint}")));
        }
        Err(_) => {
            return Err(CliError::Store(format!(
                "connect and setup: {} store {url}: no answer within {}",
                url.kind(),
                humantime::format_duration(OPEN_TIMEOUT)
            )));
        }
    };
    output::line(format_args!(
        "ok: connected to the {} store {url}; its lease storage is {setup}",
        url.kind()
    ))?;

    let probe = probe_name(&label)?;
    bounded("write", write_probe(&client, &probe)).await?;
    output::line(format_args!("ok: wrote, released and deleted the probe lease {probe}"))?;

    let admin = Admin::shared(client.store().clone());
    let prefix = NamePrefix::new(probe.as_str()).map_err(|e| CliError::from_lease("probe prefix", &e))?;
    bounded("list", async {
        admin.list(&prefix).await.map_err(|e| e.to_string())?;
        Ok(())
    })
    .await?;
    output::line(format_args!("ok: listed the leases under {prefix}"))?;
    Ok(exit::OK)
}

/// The probe lease of this process: `leasehold-check/<label>` with the label's
/// characters a name allows.
fn probe_name(label: &str) -> Result<LeaseName, CliError> {
    let safe: String = label
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '-'
            }
        })
        .collect();
    LeaseName::new(format!("leasehold-check/{safe}")).map_err(|e| CliError::from_lease("probe name", &e))
}

/// Runs the check `what` within [`STEP_TIMEOUT`]: its problem as a store error.
async fn bounded(what: &str, step: impl Future<Output = Result<(), String>>) -> Result<(), CliError> {
    match tokio::time::timeout(STEP_TIMEOUT, step).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(problem)) => Err(CliError::Store(format!("{what}: {problem}"))),
        Err(_) => Err(CliError::Store(format!(
            "{what}: no answer within {}",
            humantime::format_duration(STEP_TIMEOUT)
        ))),
    }
}

/// Acquires and releases the probe lease, then deletes its record.
async fn write_probe(client: &LeaseClient, probe: &LeaseName) -> Result<(), String> {
    let lease = match client
        .try_acquire(probe.as_str(), PROBE_TTL)
        .await
        .map_err(|e| e.to_string())?
    {
        AcquireOutcome::Granted(lease) => lease,
        AcquireOutcome::Held { holder, .. } => {
            let by = holder.map_or_else(|| "someone else".to_owned(), |h| h.to_string());
            return Err(format!("the probe lease {probe} is held by {by}"));
        }
    };
    lease.release().await.map_err(|e| e.to_string())?;
    let store = client.store();
    if let Some(stored) = store.read(probe).await.map_err(|e| e.to_string())? {
        match store.delete(probe, &stored.version).await.map_err(|e| e.to_string())? {
            DeleteOutcome::Deleted => {}
            DeleteOutcome::Conflict(_) => return Err(format!("the probe lease {probe} changed before its delete")),
        }
    }
    Ok(())
}
