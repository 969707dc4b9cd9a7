//! The leasehold-core conformance suite against a real SQLite file (WAL, shared pool).
#![allow(missing_docs)]

mod common;

common::shared::fixture::sql_conformance_tests!(Lite);
