//! `leasehold release --force NAME`: makes a lease vacant whoever holds it.
//!
//! The record's vacant form is written on the version just read, so its token stays:
//! the next grant's token is still higher, and a fence still refuses the old holder.

use std::time::Duration;

use leasehold::LeaseName;
use leasehold::store::{CasOutcome, Precondition};

use crate::cli::ReleaseArgs;
use crate::error::{CliError, report};
use crate::{exit, holder, open, show};
use leasehold::url::StoreUrl;

/// How many times the record may change between the read and the write.
const ATTEMPTS: u32 = 3;

/// The longest one write may take.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs `leasehold release --force`.
///
/// # Errors
/// [`CliError::Usage`] for a bad name, [`CliError::Store`] when the store fails,
/// [`CliError::Held`] when the record kept changing under the release.
pub(crate) async fn release(url: &StoreUrl, args: ReleaseArgs) -> Result<u8, CliError> {
    let name = LeaseName::new(&args.name).map_err(|e| CliError::from_lease("lease name", &e))?;
    debug_assert!(args.force, "clap requires --force");
    let client = open::open(url, &holder::label()).await?;
    let store = client.store().as_ref();
    for _ in 0..ATTEMPTS {
        let Some(stored) = show::read(store, &name).await? else {
            println!("{name}: no such lease; nothing to release");
            return Ok(exit::OK);
        };
        let Some(holder) = stored.record.holder.clone() else {
            println!("{name}: already vacant (token {})", stored.record.token);
            return Ok(exit::OK);
        };
        let expect = Precondition::Version(stored.version.clone());
        let vacant = stored.record.vacated();
        let write = store.write(&name, &expect, &vacant);
        let outcome = match tokio::time::timeout(WRITE_TIMEOUT, write).await {
            Ok(r) => r.map_err(|e| CliError::from_lease(&format!("releasing lease {name}"), &e))?,
            Err(_) => {
                return Err(CliError::Store(format!(
                    "releasing lease {name}: no answer within {WRITE_TIMEOUT:?}; it may or may not be released"
                )));
            }
        };
        match outcome {
            CasOutcome::Written(_) => {
                report(&format!(
                    "warning: {holder} may still be running: it learns of the release at its next renewal, \
                     and only a fence that checks token {} stops its writes",
                    stored.record.token
                ));
                println!(
                    "{name}: released (was held by {holder} with token {})",
                    stored.record.token
                );
                return Ok(exit::OK);
            }
            CasOutcome::Conflict(_) => {}
        }
    }
    Err(CliError::Held(format!(
        "lease {name} changed {ATTEMPTS} times while releasing it; try again"
    )))
}
