//! `leasehold observe NAME [--json] [--count N] [--interval 1s]`: each new leader, as it happens.
//!
//! One line per change: the leader at the first read, then one each time the holder or
//! the token changes, `no leader` while nobody leads, `unknown` (with the store's error)
//! when a read fails, then the leader again once a read succeeds. It waits on the store's change
//! notification where there is one, and reads every `--interval` elsewhere (a tenure
//! shorter than that may go unseen there). It runs until
//! SIGINT or SIGTERM (exit 0), `--count` lines naming who leads (`unknown` ones do not
//! count), its reader going away (a closed pipe,
//! found at the next line: exit 0), or a store error retrying cannot fix.

use futures::StreamExt as _;
use leasehold::LeaseName;
use leasehold::election::{Election, ElectionConfig, Leader, LeaderState};
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
    /// `leader`, `none` (nobody leads) or `unknown` (the store could not be read).
    state: &'static str,
    /// The leader's holder id; `null` while nobody leads.
    holder: Option<&'a str>,
    /// The leader's client label (its holder id up to `#`); `null` while nobody leads.
    identity: Option<&'a str>,
    /// The fencing token of the leader's tenure; `null` while nobody leads.
    token: Option<u64>,
    /// Why the state is unknown: the store's error (only with `unknown`).
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
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
    let changes = election.observe_states();
    futures::pin_mut!(changes);
    let mut printed = 0u64;
    loop {
        let change = tokio::select! {
            change = changes.next() => change,
            _ = signals.next() => return Ok(exit::OK),
        };
        match change {
            Some(Ok(LeaderState::Known(leader))) => print(&name, leader.as_ref(), args.json)?,
            // Not counted: `--count 1` still ends on who leads, once a read says so.
            Some(Ok(LeaderState::Unknown(e))) => {
                print_unknown(&name, &e, args.json)?;
                continue;
            }
            // A state added to the library later: nothing to print for it.
            Some(Ok(_)) => continue,
            Some(Err(e)) => return Err(CliError::from_lease(&format!("observing {name}"), &e)),
            None => return Ok(exit::OK),
        }
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
        state: if leader.is_some() { "leader" } else { "none" },
        holder: leader.map(|l| l.holder.as_str()),
        identity: leader.map(Leader::identity),
        token: leader.map(|l| l.token.get()),
        error: None,
    };
    output::print(json, &observed, |_| match leader {
        Some(l) => output::line(format_args!("{name}: leader {} token {}", l.holder, l.token)),
        None => output::line(format_args!("{name}: no leader")),
    })
}

/// One line saying who leads is unknown, and why (the store's error, passwords
/// removed as from every message).
fn print_unknown(name: &LeaseName, e: &leasehold::Error, json: bool) -> Result<(), CliError> {
    let why = crate::error::scrub(&e.to_string());
    let observed = Observed {
        name: name.as_str(),
        state: "unknown",
        holder: None,
        identity: None,
        token: None,
        error: Some(why.clone()),
    };
    output::print(json, &observed, |_| {
        output::line(format_args!("{name}: unknown: {why}"))
    })
}
