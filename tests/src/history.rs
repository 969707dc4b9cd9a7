//! What torture workers and their controller record, one JSON object per line, flushed as it happens (so a
//! worker killed with SIGKILL leaves its history up to the last completed line).

use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// How a fenced write ended, as its sender saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WriteOutcome {
    /// The resource accepted it (acknowledged).
    Accepted,
    /// The fence refused it.
    Refused,
    /// No answer: it may or may not have applied.
    Unknown,
}

/// One event in a history. Times are Unix milliseconds on the (one) machine's system
/// clock, never a worker's injected (skewed) clock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "ev", rename_all = "snake_case")]
pub enum Event {
    /// The worker starts (or restarts) acquiring the lease: one `LeaseClient::acquire`
    /// call, which makes attempts until it is granted.
    Acquiring {
        /// Worker number.
        worker: u32,
        /// When.
        at_ms: u64,
    },
    /// The worker was granted the lease.
    Granted {
        /// Worker number (unique per worker process).
        worker: u32,
        /// Its token.
        token: u64,
        /// When (after the grant's reply arrived).
        at_ms: u64,
        /// Until when the worker trusts the grant (its validity deadline, read before
        /// `at_ms`'s clock reading, so never later than the truth).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        valid_until_ms: Option<u64>,
        /// No later than when the granting request was sent (its validity deadline less
        /// the TTL): with `at_ms`, it brackets when the store applied the grant.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sent_after_ms: Option<u64>,
        /// The semaphore slot granted (a permit's lease is that slot's), in semaphore
        /// runs; `None` for the one lease of a lease run.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        slot: Option<u32>,
    },
    /// The worker is about to send a fenced write (after its validity check).
    WriteSent {
        /// Worker number.
        worker: u32,
        /// The token it carries.
        token: u64,
        /// The worker's write sequence number (unique per worker process).
        seq: u64,
        /// When.
        at_ms: u64,
        /// The validity deadline the worker saw at its check before this write.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        valid_until_ms: Option<u64>,
    },
    /// The fenced write's outcome.
    WriteDone {
        /// Worker number.
        worker: u32,
        /// The token it carried.
        token: u64,
        /// Sequence number, as in `WriteSent`.
        seq: u64,
        /// Outcome.
        outcome: WriteOutcome,
        /// When.
        at_ms: u64,
    },
    /// The worker is about to release its grant (recorded before the release is sent).
    Releasing {
        /// Worker number.
        worker: u32,
        /// Its token.
        token: u64,
        /// When.
        at_ms: u64,
    },
    /// The lease ended for the worker (released or lost).
    Ended {
        /// Worker number.
        worker: u32,
        /// Its token.
        token: u64,
        /// Why (`released`, or a loss cause).
        cause: String,
        /// When.
        at_ms: u64,
    },
    /// The controller's observer read the lease record (recorded when it changed).
    Observed {
        /// The worker named as holder; `None` for a vacant (released) record.
        holder: Option<u32>,
        /// The record's token.
        token: u64,
        /// When the read was sent.
        at_ms: u64,
    },
    /// A fault the controller injected.
    Fault {
        /// What (`pause`, `pause_window`, `kill9`, `store_restart`, `proxy_blackhole`, ...).
        kind: String,
        /// The worker it hit, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        worker: Option<u32>,
        /// The token that worker held, if known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        token: Option<u64>,
        /// The semaphore slot that token is of (semaphore runs), if known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        slot: Option<u32>,
        /// When it began.
        at_ms: u64,
        /// When it ended.
        until_ms: u64,
        /// True if the store lost its data (a Redis or moto restart): grants before and
        /// after it are separate epochs, whose tokens the store may repeat.
        #[serde(default)]
        data_loss: bool,
    },
}

impl Event {
    /// When the event happened.
    pub fn at_ms(&self) -> u64 {
        match self {
            Self::Acquiring { at_ms, .. }
            | Self::Granted { at_ms, .. }
            | Self::WriteSent { at_ms, .. }
            | Self::WriteDone { at_ms, .. }
            | Self::Releasing { at_ms, .. }
            | Self::Ended { at_ms, .. }
            | Self::Observed { at_ms, .. }
            | Self::Fault { at_ms, .. } => *at_ms,
        }
    }
}

/// Appends events to a history file.
#[derive(Debug)]
pub struct HistoryWriter {
    file: std::fs::File,
}

impl HistoryWriter {
    /// Opens (appending) a history file.
    ///
    /// # Errors
    /// If the file cannot be opened.
    pub fn open(path: &Path) -> std::io::Result<Self> {
        let file = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
        Ok(Self { file })
    }

    /// Writes one event as one line, flushed.
    ///
    /// # Errors
    /// If the write fails.
    pub fn record(&mut self, event: &Event) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(event).map_err(std::io::Error::other)?;
        line.push(b'\n');
        self.file.write_all(&line)?;
        self.file.flush()
    }
}

/// Reads every history file in `dir`. A torn last line (a worker killed mid-write) is
/// skipped; any other unparsable line is an error.
///
/// # Errors
/// If a file cannot be read or holds a corrupt line that is not the last.
pub fn read_dir(dir: &Path) -> std::io::Result<Vec<Event>> {
    let mut events = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "jsonl") {
            let text = std::fs::read_to_string(&path)?;
            let lines: Vec<&str> = text.lines().collect();
            for (i, line) in lines.iter().enumerate() {
                match serde_json::from_str(line) {
                    Ok(e) => events.push(e),
                    Err(_) if i + 1 == lines.len() => {}
                    Err(e) => return Err(std::io::Error::other(format!("{}:{}: {e}", path.display(), i + 1))),
                }
            }
        }
    }
    Ok(events)
}

/// Unix milliseconds now.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}
