//! The shared frozen-holder case (`leasehold_testkit::frozen`) on the real MariaDB: a
//! holder process SIGSTOPped past its TTL, a takeover, the holder resumed; its writes to
//! rows of a user's table, made with `RowFence` (`INSERT … ON DUPLICATE KEY UPDATE`,
//! backquoted), are refused.
#![allow(missing_docs)]

mod common;

fn main() -> std::process::ExitCode {
    common::shared::frozen::main::<common::My>()
}
