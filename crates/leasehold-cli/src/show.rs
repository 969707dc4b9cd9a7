//! `leasehold show NAME [--json]`: one lease's state, for a person or a script.

use std::time::Duration;

use leasehold::LeaseName;
use leasehold::store::{Capabilities, ClockSource, Grade, Stored};
use serde::Serialize;

use crate::cli::ShowArgs;
use crate::error::CliError;
use crate::{exit, holder, open};
use leasehold::url::StoreUrl;

/// The longest one read may take.
pub(crate) const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// What `show --json` prints: one object.
#[derive(Debug, Serialize)]
struct Shown {
    /// The lease name.
    name: String,
    /// `absent` (never written), `vacant` (released), `held`, or `expired` (held, but
    /// its time ran out on the store's clock).
    state: &'static str,
    /// The holder id, when held.
    holder: Option<String>,
    /// The token of the current or last grant (absent: none yet).
    token: Option<u64>,
    /// The TTL of the last grant or renewal, in milliseconds.
    ttl_ms: Option<u64>,
    /// The time left on the store's clock in milliseconds; `null` when the store has no
    /// clock (expiry judged by observation) or the lease is not held.
    remaining_ms: Option<u64>,
    /// `store` or `observation`: where expiry is judged.
    clock: &'static str,
    /// `linearizable` or `efficiency_only`.
    grade: &'static str,
    /// The store's version of the record.
    version: Option<String>,
    /// The store, without its password.
    store: String,
}

/// Runs `leasehold show`.
///
/// # Errors
/// [`CliError::Usage`] for a bad name, [`CliError::Store`] when the read fails.
pub(crate) async fn show(url: &StoreUrl, args: ShowArgs) -> Result<u8, CliError> {
    let name = LeaseName::new(&args.name).map_err(|e| CliError::from_lease("lease name", &e))?;
    let client = open::open(url, &holder::label()).await?;
    let stored = read(client.store().as_ref(), &name).await?;
    let shown = shown(url, &name, client.capabilities(), stored.as_ref());
    if args.json {
        let line = serde_json::to_string(&shown).map_err(|e| CliError::Store(format!("encoding JSON: {e}")))?;
        println!("{line}");
    } else {
        print_table(&shown);
    }
    Ok(exit::OK)
}

/// Reads the record of `name`, within [`READ_TIMEOUT`].
pub(crate) async fn read(store: &dyn leasehold::store::CasStore, name: &LeaseName) -> Result<Option<Stored>, CliError> {
    match tokio::time::timeout(READ_TIMEOUT, store.read(name)).await {
        Ok(r) => r.map_err(|e| CliError::from_lease(&format!("reading lease {name}"), &e)),
        Err(_) => Err(CliError::Store(format!(
            "reading lease {name}: no answer within {READ_TIMEOUT:?}"
        ))),
    }
}

fn shown(url: &StoreUrl, name: &LeaseName, caps: Capabilities, stored: Option<&Stored>) -> Shown {
    let clock = match caps.clock {
        ClockSource::Store => "store",
        _ => "observation",
    };
    let grade = match caps.grade {
        Grade::Linearizable => "linearizable",
        _ => "efficiency_only",
    };
    let mut out = Shown {
        name: name.to_string(),
        state: "absent",
        holder: None,
        token: None,
        ttl_ms: None,
        remaining_ms: None,
        clock,
        grade,
        version: None,
        store: url.to_string(),
    };
    if let Some(s) = stored {
        out.holder = s.record.holder.as_ref().map(ToString::to_string);
        out.token = Some(s.record.token.get());
        out.ttl_ms = Some(s.record.ttl.as_millis());
        out.version = Some(s.version.to_string());
        out.state = if s.record.is_vacant() {
            "vacant"
        } else if s.remaining.is_some_and(|r| r.is_zero()) {
            "expired"
        } else {
            "held"
        };
        if !s.record.is_vacant() {
            out.remaining_ms = s.remaining.map(|r| u64::try_from(r.as_millis()).unwrap_or(u64::MAX));
        }
    }
    out
}

fn print_table(s: &Shown) {
    let none = || "-".to_owned();
    let time_left = match (s.state, s.remaining_ms) {
        ("held" | "expired", Some(ms)) => {
            format!(
                "{} (on the store's clock)",
                humantime::format_duration(Duration::from_millis(ms))
            )
        }
        ("held", None) => "unknown: judged by observation".to_owned(),
        _ => none(),
    };
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
        println!("{k:<10} {v}");
    }
}
