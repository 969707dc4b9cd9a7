//! Bad input and a bad table fail loudly with a typed error, grant nothing and change
//! nothing: the shared SQL cases (`shared/bad_input.rs`) on real Postgres.
#![allow(missing_docs)]

mod common;

common::shared::sql_tests!(bad_input, common::Pg);
