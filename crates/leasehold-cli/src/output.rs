//! Printing a subcommand's answer: one line of JSON for a script (`--json`), or text
//! for a person. Every line on stdout goes through [`line()`], so a reader that goes away
//! (`leasehold list | head -1`) ends the command quietly, and no failure to write panics.

use std::io::Write as _;

use serde::Serialize;

use crate::error::CliError;

/// Prints `value` as one line of JSON when `json`; otherwise runs `text`, which prints
/// it for a person (with [`line()`]).
///
/// # Errors
/// [`CliError::Store`] if `value` cannot be encoded as JSON; what [`line()`] or `text`
/// answers when stdout cannot be written.
pub(crate) fn print<T: Serialize + ?Sized>(
    json: bool,
    value: &T,
    text: impl FnOnce(&T) -> Result<(), CliError>,
) -> Result<(), CliError> {
    if json {
        let encoded = serde_json::to_string(value).map_err(|e| CliError::Store(format!("encoding JSON: {e}")))?;
        line(encoded)
    } else {
        text(value)
    }
}

/// Writes `text` and a newline to stdout, flushed at once.
///
/// # Errors
/// [`CliError::StdoutClosed`] when stdout's reader has gone (a closed pipe): the command
/// ends with 0 and no message, as the reader asked for no more. [`CliError::Output`]
/// for any other failure to write (a full disk).
pub(crate) fn line(text: impl std::fmt::Display) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{text}")
        .and_then(|()| out.flush())
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::BrokenPipe => CliError::StdoutClosed,
            _ => CliError::Output(format!("writing to stdout: {e}")),
        })
}
