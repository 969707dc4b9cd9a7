//! `leasehold run NAME -- CMD…`: a command under a lease.
//!
//! Takes the lease (once, `--wait` as long as it takes, or `--timeout`), then runs the
//! command under it as [`crate::supervise`] says: renewed in the background, signals
//! forwarded, the command stopped when the lease is lost, the lease released when the
//! command exits, or with `--at-least` kept taken until that long after the grant
//! ([`leasehold::jobs::keep_taken`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use leasehold::jobs::Marker;
use leasehold::{AcquireOutcome, Lease, LeaseClient, LeaseName};
use tokio::time::Instant;

use crate::cli::RunArgs;
use crate::error::{CliError, report};
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
    let Some(at_least) = args.at_least else {
        return supervise(lease, &args.held.command, grace, &mut signals).await;
    };
    // Measured from the grant's answer, which came after the store applied it: kept
    // until then on this clock, the name is taken at least that long after the store's
    // own grant.
    let until = Instant::now() + at_least;
    let marker = Marker::Held.holder_for(lease.holder());
    let kept = Arc::new(AtomicBool::new(false));
    let tenure = KeptLease {
        lease,
        client: client.clone(),
        until,
        started: false,
        kept: kept.clone(),
    };
    let code = supervise(tenure, &args.held.command, grace, &mut signals).await?;
    // Where the kept record lives on this process's session (etcd, ZooKeeper), it stays
    // until then only if the process does, and its client with it (dropping the last
    // clone of a ZooKeeper store closes its sessions).
    if kept.load(Ordering::Relaxed) && !client.capabilities().held_outlives_writer {
        tokio::select! {
            () = tokio::time::sleep_until(until) => let_go(&client, &name, &marker).await,
            sig = signals.next() => {
                return Err(CliError::Signalled {
                    message: format!(
                        "{} while keeping lease {name} for --at-least: it is free once this process's session ends",
                        sig.name()
                    ),
                    signal: sig.number(),
                });
            }
        }
    }
    drop(client);
    Ok(code)
}

/// Deletes the kept record of `name` (held by `marker`), if it is still there, now that
/// its time has passed: its session would keep it a little longer (etcd: up to the
/// session's TTL). The token counter stays.
async fn let_go(client: &LeaseClient, name: &LeaseName, marker: &leasehold::HolderId) {
    let store = client.store();
    let gone = async {
        if let Some(stored) = store.read(name).await? {
            if stored.record.holder.as_ref() == Some(marker) {
                store.delete(name, &stored.version).await?;
            }
        }
        Ok::<_, leasehold::Error>(())
    };
    let why = match tokio::time::timeout(Duration::from_secs(10), gone).await {
        Ok(Ok(())) => return,
        Ok(Err(e)) => e.to_string(),
        Err(_) => "no answer within 10s".to_owned(),
    };
    report(&format!(
        "lease {name}: its kept record stays until its session ends: {why}"
    ));
}

/// A lease that, once its command has exited, stays taken until `until`.
struct KeptLease {
    lease: Lease,
    client: LeaseClient,
    until: Instant,
    /// The command started: a lease whose command never ran is released.
    started: bool,
    /// Set once the lease is kept.
    kept: Arc<AtomicBool>,
}

impl Tenure for KeptLease {
    fn what(&self) -> String {
        self.lease.what()
    }
    fn lease(&self) -> &Lease {
        &self.lease
    }
    fn started(&mut self) {
        self.started = true;
    }
    /// Released if `until` has passed, the command never started or the lease was
    /// lost; else kept for the rest by a record nobody renews. A keep that failed is
    /// said on stderr.
    async fn end(self) -> leasehold::Result<()> {
        let rest = self.until.saturating_duration_since(Instant::now());
        if rest < Duration::from_millis(1) || !self.started {
            return self.lease.release().await;
        }
        let what = self.lease.what();
        // A lease lost, or past its validity with its loss not noticed yet (a process
        // frozen while its command exited), is released as any other: the store may
        // still name this run, but it is never kept past the tenure.
        if !self.lease.is_valid() {
            let why = if self.lease.loss_cause().is_some() {
                "it was lost"
            } else {
                "its validity ran out before the command's exit was handled (was this process stopped?)"
            };
            report(&format!("{what} was not kept for --at-least: {why}"));
            return self.lease.release().await;
        }
        match leasehold::jobs::keep_taken(&self.client, self.lease, rest).await {
            Ok(true) => self.kept.store(true, Ordering::Relaxed),
            Ok(false) => report(&format!(
                "{what} was not kept for --at-least: its record changed under this run"
            )),
            Err(e) => report(&format!(
                "{what} was not kept for --at-least: {e}; it is free once its record expires"
            )),
        }
        Ok(())
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

/// A holder as `run` names it: a run kept taken by `--at-least` (or a library's
/// `lock_at_least_for`: its record held by the [`Marker::Held`] holder) is said so.
pub(crate) fn holder_words(holder: &leasehold::HolderId) -> String {
    match Marker::of(holder) {
        Some(Marker::Held) => {
            let run = holder.as_str().strip_prefix(Marker::Held.prefix()).unwrap_or_default();
            format!("{run}, kept after its run for its at-least time")
        }
        _ => holder.to_string(),
    }
}
