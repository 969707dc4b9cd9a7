//! Opening the store a [`StoreUrl`] names ([`StoreUrl::open`]), within a bound, with the
//! command's errors.

use std::time::Duration;

use leasehold::url::{OpenOptions, StoreUrl};
use leasehold::{ClientConfig, LeaseClient};

use crate::error::CliError;

/// The longest opening a store may take (connecting, checking its table or bucket).
pub(crate) const OPEN_TIMEOUT: Duration = Duration::from_secs(10);

/// Opens the store at `url` and a lease client on it, whose holder ids start with
/// `label`. Redis gives an efficiency-only client (by its grade).
///
/// # Errors
/// [`CliError::Usage`] for a URL the store's driver refuses, [`CliError::Store`] when
/// the store cannot be reached within [`OPEN_TIMEOUT`] or is not set up.
pub(crate) async fn open(url: &StoreUrl, label: &str) -> Result<LeaseClient, CliError> {
    let config = ClientConfig::builder()
        .label(label)
        .build()
        .map_err(|e| CliError::from_lease("holder label", &e))?;
    let opened = tokio::time::timeout(OPEN_TIMEOUT, url.open(&OpenOptions::with_client(config))).await;
    match opened {
        Ok(Ok(client)) => Ok(client),
        Ok(Err(leasehold::Error::InvalidInput {
            what: "store URL",
            reason,
        })) => Err(CliError::Usage(format!("bad store URL '{url}': {reason}"))),
        Ok(Err(e @ leasehold::Error::Unavailable { .. })) => Err(CliError::Store(e.to_string())),
        Ok(Err(e)) => Err(CliError::from_lease(&format!("{} store {url}", url.kind()), &e)),
        Err(_) => Err(CliError::Store(format!(
            "{} store {url}: no answer within {}",
            url.kind(),
            humantime::format_duration(OPEN_TIMEOUT)
        ))),
    }
}
