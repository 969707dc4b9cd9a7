//! Records written by other programs (an operator with a SQL shell, a restore, a
//! script): the lease store never undoes them and never grants on an invalid record.
#![allow(missing_docs)]

mod common;

common::shared::foreign_writer_tests!(
    a_raised_token_is_never_written_back,
    a_corrupted_held_row_is_never_healed,
    an_impossible_expiry_is_corrupt,
    an_impossible_version_is_corrupt
);
