//! `leasehold observe NAME [--json] [--count N] [--interval 1s]`: each new leader, as it happens.
//!
//! One line per change: the leader at the first read, then one each time the holder or
//! the token changes, `no leader` while nobody leads. It waits on the store's change
//! notification where there is one, and reads every `--interval` elsewhere (a tenure
//! shorter than that may go unseen there). It runs until
//! SIGINT or SIGTERM (exit 0), `--count` lines, its reader going away (a closed pipe,
//! found at the next line: exit 0), or a store error retrying cannot fix.

use futures::StreamExt as _;
use leasehold::LeaseName;
use leasehold::election::{Election, ElectionConfig, Leader};
use serde::Serialize;

use crate::cli::ObserveArgs;
use crate::error::CliError;
use crate::supervise::Signals;
use crate::{exit, holder, open, output};
use leasehold::url::StoreUrl;

/// What `observe --json` prints per change: one object per line.
#[derive(Debug, Serialize)]
struct Observed<'a> {
    /// The election (lease) name.
    name: &'a str,
    /// The leader's holder id; `null` while nobody leads.
    holder: Option<&'a str>,
    /// The leader's client label (its holder id up to `#`); `null` while nobody leads.
    identity: Option<&'a str>,
    /// The fencing token of the leader's tenure; `null` while nobody leads.
    token: Option<u64>,
}

/// Runs `leasehold observe`; the exit code.
///
/// # Errors
/// [`CliError::Usage`] for a bad name, [`CliError::Store`] when the store fails in a
/// way retrying cannot fix;
/// [`CliError::StdoutClosed`] or [`CliError::Output`] when stdout cannot be written.
pub(crate) async fn observe(url: &StoreUrl, args: ObserveArgs) -> Result<u8, CliError> {
    let name = LeaseName::new(&args.name).map_err(|e| CliError::from_lease("election name", &e))?;
    if args.count == Some(0) {
        return Err(CliError::Usage("--count must be at least 1".into()));
    }
    // The TTL is a candidate's; an observer never campaigns.
    let mut config = ElectionConfig::new(std::time::Duration::from_secs(30));
    config.observe_interval = args.interval;
    config.validate().map_err(|e| CliError::from_lease("--interval", &e))?;
    let mut signals = Signals::new()?;
    let client = open::open(url, &holder::label()).await?;
    let election =
        Election::with_config(client, name.as_str(), config).map_err(|e| CliError::from_lease("--interval", &e))?;
    let changes = election.observe();
    futures::pin_mut!(changes);
    let mut printed = 0u64;
    loop {
        let change = tokio::select! {
            change = changes.next() => change,
            _ = signals.next() => return Ok(exit::OK),
        };
        let leader = match change {
            Some(Ok(leader)) => leader,
            Some(Err(e)) => return Err(CliError::from_lease(&format!("observing {name}"), &e)),
            None => return Ok(exit::OK),
        };
        print(&name, leader.as_ref(), args.json)?;
        printed += 1;
        if args.count.is_some_and(|n| printed >= n) {
            return Ok(exit::OK);
        }
    }
}

/// One line for one change.
fn print(name: &LeaseName, leader: Option<&Leader>, json: bool) -> Result<(), CliError> {
    let observed = Observed {
        name: name.as_str(),
        holder: leader.map(|l| l.holder.as_str()),
        identity: leader.map(Leader::identity),
        token: leader.map(|l| l.token.get()),
    };
    output::print(json, &observed, |_| match leader {
        Some(l) => output::line(format_args!("{name}: leader {} token {}", l.holder, l.token)),
        None => output::line(format_args!("{name}: no leader")),
    })
}
