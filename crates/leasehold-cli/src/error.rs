//! The one error type of the command, each variant with its exit code.

use std::sync::OnceLock;

use crate::exit;

/// Why a subcommand stopped before its normal end; [`CliError::exit_code`] maps each to
/// a documented exit code.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CliError {
    /// Bad input, refused before anything was sent.
    #[error("{0}")]
    Usage(String),
    /// The store failed.
    #[error("{0}")]
    Store(String),
    /// The lease is held by someone else.
    #[error("{0}")]
    Held(String),
    /// The command could not be started.
    #[error("{message}")]
    Spawn {
        /// What happened.
        message: String,
        /// True when the command was not found.
        not_found: bool,
    },
    /// Ended by a signal while waiting for the lease.
    #[error("{message}")]
    Signalled {
        /// What happened.
        message: String,
        /// The signal's number.
        signal: u8,
    },
    /// Stdout's reader went away (a closed pipe, as in `leasehold list | head -1`):
    /// the command ends quietly, with [`exit::OK`] and no message.
    #[error("stdout closed")]
    StdoutClosed,
    /// Stdout could not be written for another reason (a full disk, an I/O error).
    #[error("{0}")]
    Output(String),
}

impl CliError {
    /// The exit code documented for this error (see [`crate::exit`]).
    pub(crate) fn exit_code(&self) -> u8 {
        match self {
            Self::Usage(_) => exit::USAGE,
            Self::Store(_) => exit::STORE,
            Self::Held(_) => exit::HELD,
            Self::Spawn { not_found: true, .. } => exit::NOT_FOUND,
            Self::Spawn { not_found: false, .. } => exit::CANNOT_EXECUTE,
            Self::Signalled { signal, .. } => exit::SIGNAL_BASE.saturating_add(*signal),
            Self::StdoutClosed => exit::OK,
            Self::Output(_) => exit::OUTPUT,
        }
    }

    /// False when the error ends the command without a message ([`CliError::StdoutClosed`]:
    /// the reader went away, and nobody is there to tell).
    pub(crate) fn is_reported(&self) -> bool {
        !matches!(self, Self::StdoutClosed)
    }

    /// A library error met while doing `what`, by its kind: invalid input is usage,
    /// a timeout that ended a wait for a holder (or a lease this process already holds)
    /// is "held", everything else (a timeout that ended a run of store failures too) is
    /// the store's failure.
    pub(crate) fn from_lease(what: &str, e: &leasehold::Error) -> Self {
        // The library's messages already carry what their sources said.
        let message = format!("{what}: {e}");
        match e {
            // The command's name for what was wrong (a flag such as `--interval`, or
            // the library's own word) says it once, not the library's field name after it.
            leasehold::Error::InvalidInput { what: field, reason } if what.starts_with("--") || what == *field => {
                Self::Usage(format!("{what}: {reason}"))
            }
            leasehold::Error::InvalidInput { .. } => Self::Usage(message),
            leasehold::Error::Timeout { last_error: None, .. } => Self::Held(message),
            // One process per lease: `leasehold` never asks twice for a name it holds.
            // Were it to, the lease is held (by itself) and trying later may succeed.
            leasehold::Error::AlreadyHeld { .. } => Self::Held(message),
            _ => Self::Store(message),
        }
    }
}

/// Runs `op` within `limit`: its value, its error as `what: …`, or `what: no answer
/// within …` (a store error).
pub(crate) async fn within<T>(
    limit: std::time::Duration,
    what: &str,
    op: impl Future<Output = leasehold::Result<T>>,
) -> Result<T, CliError> {
    match tokio::time::timeout(limit, op).await {
        Ok(r) => r.map_err(|e| CliError::from_lease(what, &e)),
        Err(_) => Err(CliError::Store(format!(
            "{what}: no answer within {}",
            humantime::format_duration(limit)
        ))),
    }
}

static SECRETS: OnceLock<Vec<String>> = OnceLock::new();

/// Records the secrets (passwords) of the store URL, which [`scrub`] removes from every
/// message printed.
pub(crate) fn set_secrets(secrets: Vec<String>) {
    let _ = SECRETS.set(secrets.into_iter().filter(|s| !s.is_empty()).collect());
}

/// `message` with every recorded secret replaced by `***`.
pub(crate) fn scrub(message: &str) -> String {
    let mut out = message.to_owned();
    for s in SECRETS.get().map(Vec::as_slice).unwrap_or_default() {
        out = out.replace(s.as_str(), "***");
    }
    out
}

/// Prints `leasehold: <message>` on stderr, secrets removed, on one line. A stderr that
/// cannot be written (closed) is left alone: there is nobody to tell.
pub(crate) fn report(message: &str) {
    use std::io::Write as _;
    let line = format!("leasehold: {}\n", scrub(message).replace(['\n', '\r'], " "));
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}
