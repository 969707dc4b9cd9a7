//! Test support both SQL stores share (feature `testing`): the multi-process
//! frozen-holder scenario, a concurrent-claims check, the conformance fence fixture, and
//! a log of the statements sqlx executes.

mod claims;
mod fence;
mod frozen;
mod statement_log;

pub use claims::concurrent_claims_issue_each_token_once;
pub use fence::RowFixture;
pub use frozen::{Backend, main};
pub use statement_log::StatementLog;
