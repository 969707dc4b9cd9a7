//! `leasehold list [PREFIX] [--json]`: the leases under a name prefix, one row each.

use std::time::Duration;

use leasehold::NamePrefix;
use leasehold::admin::Admin;

use crate::cli::ListArgs;
use crate::error::{CliError, within};
use crate::show::{Shown, inspect, shown, time_left};
use crate::{exit, holder, open, output};
use leasehold::url::StoreUrl;

/// The longest the listing itself may take (it pages through the store's listing).
const LIST_TIMEOUT: Duration = Duration::from_secs(60);

/// Runs `leasehold list`: the names under the prefix (one listing of the store), then
/// each lease's state (one read each).
///
/// # Errors
/// [`CliError::Usage`] for a bad prefix, [`CliError::Store`] when the listing or a read
/// fails, or the store cannot list;
/// [`CliError::StdoutClosed`] or [`CliError::Output`] when stdout cannot be written.
pub(crate) async fn list(url: &StoreUrl, args: ListArgs) -> Result<u8, CliError> {
    let prefix =
        NamePrefix::new(args.prefix.as_deref().unwrap_or_default()).map_err(|e| CliError::from_lease("prefix", &e))?;
    let client = open::open(url, &holder::label()).await?;
    let admin = Admin::shared(client.store().clone());
    let what = format!("listing leases under {prefix:?}");
    let names = within(LIST_TIMEOUT, &what, admin.list(&prefix)).await?;
    let mut rows = Vec::with_capacity(names.len());
    for name in &names {
        rows.push(shown(url, &inspect(&admin, name).await?));
    }
    output::print(args.json, rows.as_slice(), print_table)?;
    Ok(exit::OK)
}

/// One line per lease under a header, columns padded to their widest value.
fn print_table(rows: &[Shown]) -> Result<(), CliError> {
    let none = || "-".to_owned();
    let cells: Vec<[String; 5]> = rows
        .iter()
        .map(|s| {
            [
                s.name.clone(),
                s.state.to_owned(),
                s.holder.clone().unwrap_or_else(none),
                s.token.map_or_else(none, |t| t.to_string()),
                time_left(s),
            ]
        })
        .collect();
    let header = ["NAME", "STATE", "HOLDER", "TOKEN", "TIME LEFT"].map(str::to_owned);
    let mut widths = header.clone().map(|h| h.len());
    for row in &cells {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.len());
        }
    }
    for row in std::iter::once(&header).chain(&cells) {
        let line: Vec<String> = row.iter().zip(widths).map(|(c, w)| format!("{c:<w$}")).collect();
        output::line(line.join("  ").trim_end())?;
    }
    Ok(())
}
