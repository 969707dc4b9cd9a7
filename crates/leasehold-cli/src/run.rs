//! `leasehold run NAME -- CMD…`: a command under a lease.
//!
//! Takes the lease (once, `--wait` as long as it takes, or `--timeout`), then runs the
//! command under it as [`crate::supervise`] says: renewed in the background, signals
//! forwarded, the command stopped when the lease is lost, the lease released when the
//! command exits, or with `--at-least` kept taken until that long after the grant
//! ([`leasehold::jobs::keep_taken`]).

use std::time::Duration;

use leasehold::jobs::Marker;
use leasehold::{AcquireOutcome, Lease, LeaseClient, LeaseName};
use tokio::time::Instant;

use crate::cli::RunArgs;
use crate::error::CliError;
use crate::supervise::{Tenure, settle, supervise};
use crate::{open, show};
use leasehold::url::StoreUrl;

/// Runs `leasehold run`; the exit code.
///
/// # Errors
/// [`CliError`] for bad input, a store failure, a lease held by someone else, or a
/// command that cannot be started.
pub(crate) async fn run(url: &StoreUrl, args: RunArgs) -> Result<u8, CliError> {
    let name = LeaseName::new(&args.name).map_err(|e| CliError::from_lease("lease name", &e))?;
    let open::Held {
        client,
        grace,
        mut signals,
    } = open::open_held(url, &args.held, &format!("lease {name}")).await?;
    let lease = tokio::select! {
        lease = acquire(&client, &name, &args) => lease?,
        sig = signals.next() => {
            settle(&client, &name, &mut signals).await;
            return Err(sig.ended(&format!("lease {name}")));
        }
    };
    match args.at_least {
        // Measured from the grant's answer, which came after the store applied it: kept
        // until then on this clock, the name is taken at least that long after the
        // store's own grant.
        Some(at_least) => {
            let until = Instant::now() + at_least;
            let kept = KeptLease { lease, client, until };
            supervise(kept, &args.held.command, grace, &mut signals).await
        }
        None => supervise(lease, &args.held.command, grace, &mut signals).await,
    }
}

/// A lease that, once its command has exited, stays taken until `until`.
struct KeptLease {
    lease: Lease,
    client: LeaseClient,
    until: Instant,
}

impl Tenure for KeptLease {
    fn what(&self) -> String {
        self.lease.what()
    }
    fn lease(&self) -> &Lease {
        &self.lease
    }
    /// Released if `until` has passed; else kept for the rest by a record nobody
    /// renews (nothing is written if the lease was lost).
    async fn end(self) -> leasehold::Result<()> {
        let rest = self.until.saturating_duration_since(Instant::now());
        if rest < Duration::from_millis(1) {
            return self.lease.release().await;
        }
        leasehold::jobs::keep_taken(&self.client, self.lease, rest)
            .await
            .map(drop)
    }
}

/// Takes the lease as the options say.
async fn acquire(client: &LeaseClient, name: &LeaseName, args: &RunArgs) -> Result<Lease, CliError> {
    let what = format!("lease {name}");
    if args.wait {
        return client
            .acquire(name, args.held.ttl)
            .await
            .map_err(|e| CliError::from_lease(&what, &e));
    }
    if let Some(timeout) = args.timeout {
        return match client.acquire_timeout(name, args.held.ttl, timeout).await {
            Ok(lease) => Ok(lease),
            // The store failed to the end: an outage, not contention.
            Err(leasehold::Error::Timeout {
                last_error: Some(e), ..
            }) => Err(CliError::Store(format!(
                "lease {name}: gave up after {}: {e}",
                humantime::format_duration(timeout)
            ))),
            Err(leasehold::Error::Timeout { last_error: None, .. }) => Err(CliError::Held(format!(
                "lease {name} is held by {}; gave up after {}",
                show::held_by(client, name)
                    .await
                    .unwrap_or_else(|| "someone else".to_owned()),
                humantime::format_duration(timeout)
            ))),
            Err(e) => Err(CliError::from_lease(&what, &e)),
        };
    }
    match client
        .try_acquire(name, args.held.ttl)
        .await
        .map_err(|e| CliError::from_lease(&what, &e))?
    {
        AcquireOutcome::Granted(lease) => Ok(lease),
        AcquireOutcome::Held { holder, token, .. } => Err(CliError::Held(format!(
            "lease {name} is held by {} (token {token}); use --wait or --timeout to wait for it",
            holder.as_ref().map_or_else(|| "someone else".to_owned(), holder_words)
        ))),
    }
}

/// A holder as `run` names it: a run kept taken by `--at-least` (its record held by the
/// [`Marker::Held`] holder) is said so.
fn holder_words(holder: &leasehold::HolderId) -> String {
    match Marker::of(holder) {
        Some(Marker::Held) => {
            let run = holder.as_str().strip_prefix(Marker::Held.prefix()).unwrap_or_default();
            format!("{run}, kept after its run for --at-least")
        }
        _ => holder.to_string(),
    }
}
