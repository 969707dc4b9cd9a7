//! `leasehold release --force NAME`: makes a lease vacant whoever holds it
//! ([`Admin::force_release`]).
//!
//! The record's vacant form is written on the version just read, so its token stays:
//! the next grant's token is still higher, and a fence still refuses the old holder.

use std::time::Duration;

use leasehold::LeaseName;
use leasehold::admin::{Admin, FORCE_ATTEMPTS, ForcedRelease};

use crate::cli::ReleaseArgs;
use crate::error::{CliError, report};
use crate::{exit, holder, open, output};
use leasehold::url::StoreUrl;

/// The longest the release may take (its reads and writes together).
const RELEASE_TIMEOUT: Duration = Duration::from_secs(20);

/// Runs `leasehold release --force`.
///
/// # Errors
/// [`CliError::Usage`] for a bad name, [`CliError::Store`] when the store fails,
/// [`CliError::Held`] when the record kept changing under the release;
/// [`CliError::StdoutClosed`] or [`CliError::Output`] when stdout cannot be written.
pub(crate) async fn release(url: &StoreUrl, args: ReleaseArgs) -> Result<u8, CliError> {
    let name = LeaseName::new(&args.name).map_err(|e| CliError::from_lease("lease name", &e))?;
    debug_assert!(args.force, "clap requires --force");
    let client = open::open(url, &holder::label()).await?;
    let admin = Admin::shared(client.store().clone());
    let released = match tokio::time::timeout(RELEASE_TIMEOUT, admin.force_release(&name)).await {
        Ok(r) => r.map_err(|e| CliError::from_lease(&format!("releasing lease {name}"), &e))?,
        Err(_) => {
            return Err(CliError::Store(format!(
                "releasing lease {name}: no answer within {RELEASE_TIMEOUT:?}; it may or may not be released"
            )));
        }
    };
    match released {
        ForcedRelease::Released { holder, token } => {
            report(&format!(
                "warning: {holder} may still be running: it learns of the release at its next renewal, \
                 and only a fence that checks token {token} stops its writes"
            ));
            output::line(format_args!(
                "{name}: released (was held by {holder} with token {token})"
            ))?;
        }
        ForcedRelease::AlreadyVacant { token } => output::line(format_args!("{name}: already vacant (token {token})"))?,
        ForcedRelease::Absent => output::line(format_args!("{name}: no such lease; nothing to release"))?,
        ForcedRelease::KeptChanging => {
            return Err(CliError::Held(format!(
                "lease {name} changed {FORCE_ATTEMPTS} times while releasing it; try again"
            )));
        }
    }
    Ok(exit::OK)
}
