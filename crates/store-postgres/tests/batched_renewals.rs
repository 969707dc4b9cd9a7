//! Renewals that come due together are one statement on Postgres
//! (`CasStore::renew_many`: an `UPDATE … FROM unnest(…)`), counted by the store calls
//! and by the statements sqlx sent; each lease is renewed, none lost: the shared SQL case
//! (`shared/batched.rs`).
#![allow(missing_docs)]

mod common;

common::shared::sql_tests!(batched, common::Pg);
