//! Fenced writes on real rows of a user's table: the shared SQL cases
//! (`shared/fenced.rs`) on real Postgres.
#![allow(missing_docs)]

mod common;

common::shared::sql_tests!(fenced, common::Pg);
