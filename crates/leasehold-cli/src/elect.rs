//! `leasehold elect NAME -- CMD…`: a command run while this process leads.
//!
//! Campaigns (as long as it takes, or `--timeout`), then runs the command while it
//! leads, as [`crate::supervise`] says: it is stopped when leadership is lost, and this
//! process resigns when it exits, so the next candidate leads at once.

use leasehold::LeaseName;
use leasehold::election::Election;

use crate::cli::ElectArgs;
use crate::error::CliError;
use crate::supervise::{settle, supervise};
use crate::{open, show};
use leasehold::url::StoreUrl;

/// Runs `leasehold elect`; the exit code.
///
/// # Errors
/// [`CliError`] for bad input, a store failure, a `--timeout` that ran out, or a
/// command that cannot be started.
pub(crate) async fn elect(url: &StoreUrl, args: ElectArgs) -> Result<u8, CliError> {
    let name = LeaseName::new(&args.name).map_err(|e| CliError::from_lease("election name", &e))?;
    let open::Held {
        client,
        grace,
        mut signals,
    } = open::open_held(url, &args.held, &format!("leadership of {name}")).await?;
    let election =
        Election::new(client, name.as_str(), args.held.ttl).map_err(|e| CliError::from_lease("election", &e))?;
    let what = format!("leadership of {name}");
    let won = async {
        match args.timeout {
            None => election.campaign().await,
            Some(timeout) => election.campaign_timeout(timeout).await,
        }
    };
    let leadership = tokio::select! {
        won = won => match won {
            Ok(leadership) => leadership,
            Err(leasehold::Error::Timeout {
                last_error: Some(e), ..
            }) => {
                return Err(CliError::Store(format!(
                    "{what}: gave up after {}: {e}",
                    humantime::format_duration(args.timeout.unwrap_or_default())
                )));
            }
            Err(leasehold::Error::Timeout { last_error: None, .. }) => {
                let leader = show::held_by(election.client(), &name)
                    .await
                    .map_or_else(String::new, |by| format!(", {by}"));
                return Err(CliError::Held(format!(
                    "{name} has another leader{leader}; gave up after {}",
                    humantime::format_duration(args.timeout.unwrap_or_default())
                )));
            }
            Err(e) => return Err(CliError::from_lease(&what, &e)),
        },
        sig = signals.next() => {
            settle(election.client(), &name, &mut signals).await;
            return Err(sig.ended(&what));
        }
    };
    supervise(leadership, &args.held.command, grace, &mut signals).await
}
