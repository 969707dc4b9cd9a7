//! `leasehold elect NAME -- CMD…`: a command run while this process leads.
//!
//! Campaigns (as long as it takes, or `--timeout`), then runs the command while it
//! leads, as [`crate::supervise`] says: it is stopped when leadership is lost, and this
//! process resigns when it exits, so the next candidate leads at once.

use leasehold::election::Election;
use leasehold::{ClientConfig, LeaseName, Ttl};

use crate::cli::ElectArgs;
use crate::error::CliError;
use crate::supervise::{Signals, settle, supervise};
use crate::{grace, holder, open};
use leasehold::url::StoreUrl;

/// Runs `leasehold elect`; the exit code.
///
/// # Errors
/// [`CliError`] for bad input, a store failure, a `--timeout` that ran out, or a
/// command that cannot be started.
pub(crate) async fn elect(url: &StoreUrl, args: ElectArgs) -> Result<u8, CliError> {
    let name = LeaseName::new(&args.name).map_err(|e| CliError::from_lease("election name", &e))?;
    Ttl::new(args.held.ttl).map_err(|e| CliError::from_lease("--ttl", &e))?;
    let (grace, margin) = grace::grace_and_margin(&args.held)?;
    let mut signals = Signals::for_command()?;
    let config = ClientConfig::builder().label(holder::label()).margin_permille(margin);
    // A signal ends the opening too (it may take up to `open::OPEN_TIMEOUT`); nothing
    // was sent that would need settling.
    let client = tokio::select! {
        client = open::open_with(url, config) => client?,
        sig = signals.next() => return Err(sig.ended(&format!("leadership of {name}"))),
    };
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
                return Err(CliError::Held(format!(
                    "{name} has another leader; gave up after {}",
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
