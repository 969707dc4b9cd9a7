//! Rows edited by hand with `sqlite3`: the shared cases of `leasehold_testkit::edits`.
#![allow(missing_docs)]

mod common;

leasehold_testkit::sql_editor_cases!();
