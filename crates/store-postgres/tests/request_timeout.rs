//! A server that answers slowly, then not at all: the shared SQL case
//! (`shared/request_timeout.rs`) on real Postgres behind a proxy.
#![allow(missing_docs)]

mod common;

common::shared::sql_tests!(request_timeout, common::Pg);
