//! Test support both SQL stores share (feature `testing`): the multi-process
//! frozen-holder scenario, a concurrent-claims check, and a log of the statements sqlx
//! executes.

mod claims;
mod frozen;
mod statement_log;

pub use claims::concurrent_claims_issue_each_token_once;
pub use frozen::{Backend, main};
pub use statement_log::StatementLog;
