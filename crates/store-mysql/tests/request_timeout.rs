//! A server that answers slowly, then not at all: the shared SQL case
//! (`shared/request_timeout.rs`) on the real MariaDB behind a proxy.
#![allow(missing_docs)]

mod common;

common::shared::sql_tests!(request_timeout, common::My);
