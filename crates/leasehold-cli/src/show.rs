//! `leasehold show NAME [--json]`: one lease's state, for a person or a script.

use std::time::Duration;

use leasehold::admin::{Admin, LeaseState, Status};
use leasehold::store::{ClockSource, Grade};
use leasehold::{LeaseClient, LeaseName};
use serde::Serialize;

use crate::cli::ShowArgs;
use crate::error::{CliError, within};
use crate::{exit, holder, open, output};
use leasehold::url::StoreUrl;

/// The longest one read may take.
pub(crate) const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Who holds `name` now, in words (`HOLDER (token N)`), for a message saying why a
/// `--timeout` ran out; `None` when it is not held now or cannot be read within a second
/// (the message then says "someone else").
pub(crate) async fn held_by(client: &LeaseClient, name: &LeaseName) -> Option<String> {
    let admin = Admin::shared(client.store().clone());
    let state = tokio::time::timeout(HELD_BY_TIMEOUT, admin.inspect(name))
        .await
        .ok()?
        .ok()?;
    match (state.status, state.holder, state.token) {
        (Status::Held, Some(holder), Some(token)) => {
            Some(format!("{} (token {token})", crate::run::holder_words(&holder)))
        }
        _ => None,
    }
}

/// How long [`held_by`] waits for its read: the store has just answered, so a longer
/// wait would only delay the message of a command that already gave up.
const HELD_BY_TIMEOUT: Duration = Duration::from_secs(1);

/// What `show --json` prints: one object.
#[derive(Debug, Serialize)]
pub(crate) struct Shown {
    /// The lease name.
    pub(crate) name: String,
    /// `absent` (never written), `vacant` (released), `held`, or `expired` (held, but
    /// its time ran out on the store's clock).
    pub(crate) state: &'static str,
    /// The holder id, when held.
    pub(crate) holder: Option<String>,
    /// The token of the current or last grant (absent: none yet).
    pub(crate) token: Option<u64>,
    /// The TTL of the last grant or renewal, in milliseconds.
    pub(crate) ttl_ms: Option<u64>,
    /// The time left on the store's clock in milliseconds; `null` when the store has no
    /// clock (expiry judged by observation) or the lease is not held.
    pub(crate) remaining_ms: Option<u64>,
    /// `store` or `observation`: where expiry is judged.
    pub(crate) clock: &'static str,
    /// `linearizable` or `efficiency_only`.
    pub(crate) grade: &'static str,
    /// The store's version of the record.
    pub(crate) version: Option<String>,
    /// The store, without its password.
    pub(crate) store: String,
}

/// Runs `leasehold show`.
///
/// # Errors
/// [`CliError::Usage`] for a bad name, [`CliError::Store`] when the read fails;
/// [`CliError::StdoutClosed`] or [`CliError::Output`] when stdout cannot be written.
pub(crate) async fn show(url: &StoreUrl, args: ShowArgs) -> Result<u8, CliError> {
    let name = LeaseName::new(&args.name).map_err(|e| CliError::from_lease("lease name", &e))?;
    let client = open::open(url, &holder::label()).await?;
    let admin = Admin::shared(client.store().clone());
    let shown = shown(url, &inspect(&admin, &name).await?);
    output::print(args.json, &shown, print_table)?;
    Ok(exit::OK)
}

/// The state of `name`, read within [`READ_TIMEOUT`].
pub(crate) async fn inspect(admin: &Admin, name: &LeaseName) -> Result<LeaseState, CliError> {
    within(READ_TIMEOUT, &format!("reading lease {name}"), admin.inspect(name)).await
}

/// What `show --json` prints for `state`, on the store at `url`.
pub(crate) fn shown(url: &StoreUrl, state: &LeaseState) -> Shown {
    let millis = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    Shown {
        name: state.name.to_string(),
        state: state.status.as_str(),
        holder: state.holder.as_ref().map(ToString::to_string),
        token: state.token.map(leasehold::FencingToken::get),
        ttl_ms: state.ttl.map(millis),
        remaining_ms: state.remaining.map(millis),
        clock: match state.clock {
            ClockSource::Store => "store",
            _ => "observation",
        },
        grade: match state.grade {
            Grade::Linearizable => "linearizable",
            _ => "efficiency_only",
        },
        version: state.version.as_ref().map(ToString::to_string),
        store: url.to_string(),
    }
}

/// The time left of a held (or expired) lease, for a person: on the store's clock, or
/// unknown where expiry is judged by observation; `-` otherwise.
pub(crate) fn time_left(s: &Shown) -> String {
    match (s.state, s.remaining_ms) {
        ("held" | "expired", Some(ms)) => {
            format!(
                "{} (on the store's clock)",
                humantime::format_duration(Duration::from_millis(ms))
            )
        }
        ("held", None) => "unknown: judged by observation".to_owned(),
        _ => "-".to_owned(),
    }
}

/// One `key value` line per field, for a person.
fn print_table(s: &Shown) -> Result<(), CliError> {
    let none = || "-".to_owned();
    let time_left = time_left(s);
    let rows = [
        ("name", s.name.clone()),
        ("state", s.state.to_owned()),
        ("holder", s.holder.clone().unwrap_or_else(none)),
        ("token", s.token.map_or_else(none, |t| t.to_string())),
        (
            "ttl",
            s.ttl_ms.map_or_else(none, |t| {
                humantime::format_duration(Duration::from_millis(t)).to_string()
            }),
        ),
        ("time left", time_left),
        ("version", s.version.clone().unwrap_or_else(none)),
        ("grade", s.grade.to_owned()),
        ("store", s.store.clone()),
    ];
    for (k, v) in rows {
        output::line(format_args!("{k:<10} {v}"))?;
    }
    Ok(())
}
