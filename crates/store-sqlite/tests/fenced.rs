//! Fenced writes on real rows of a user's table in SQLite: the shared SQL cases
//! (`shared/fenced.rs`), including marks that are not numbers (SQLite keeps whatever a
//! writer stores in the column).
#![allow(missing_docs)]

mod common;

common::shared::sql_tests!(fenced, common::Lite);
