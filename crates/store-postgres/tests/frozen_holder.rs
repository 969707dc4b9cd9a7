//! A holder process SIGSTOPped past its TTL, a takeover, the holder resumed: its writes
//! are refused by the fence, every item is written exactly once (real processes, real
//! Postgres). See `sql_lease::testing`.
#![allow(missing_docs)]

mod common;

fn main() {
    sql_lease::testing::main::<common::Pg>();
}
