//! Test support both SQL stores share (feature `testing`): a concurrent-claims check,
//! the conformance fence fixture (also the resource of the shared frozen-holder case),
//! and a log of the statements sqlx executes.

mod claims;
mod fence;
mod statement_log;

pub use claims::concurrent_claims_issue_each_token_once;
pub use fence::{FencedRow, RowFixture};
pub use statement_log::StatementLog;
