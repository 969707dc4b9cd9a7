//! Printing a subcommand's answer: one line of JSON for a script (`--json`), or text
//! for a person.

use serde::Serialize;

use crate::error::CliError;

/// Prints `value` as one line of JSON when `json`; otherwise runs `text`, which prints
/// it for a person.
///
/// # Errors
/// [`CliError::Store`] if `value` cannot be encoded as JSON.
pub(crate) fn print<T: Serialize + ?Sized>(json: bool, value: &T, text: impl FnOnce(&T)) -> Result<(), CliError> {
    if json {
        let line = serde_json::to_string(value).map_err(|e| CliError::Store(format!("encoding JSON: {e}")))?;
        println!("{line}");
    } else {
        text(value);
    }
    Ok(())
}
