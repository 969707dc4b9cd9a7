//! A holder process SIGSTOPped past its TTL, a takeover, the holder resumed: its writes
//! are refused by the fence, every item is written exactly once (real processes, real
//! Postgres). See `leasehold_sql::testing`.
#![allow(missing_docs)]

mod common;

fn main() {
    leasehold_sql::testing::main::<common::Pg>();
}
