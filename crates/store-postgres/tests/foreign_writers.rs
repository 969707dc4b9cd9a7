//! Records written by other programs (an operator with a SQL shell, a restore, a
//! script): the lease store never undoes them and never grants on an invalid record.
#![allow(missing_docs)]

mod common;

common::shared::foreign_writer_tests!();
