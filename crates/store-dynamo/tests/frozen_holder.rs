//! The frozen-holder test with real processes (rule 4 of docs/DESIGN.md): the shared
//! case every store runs ([`leasehold_testkit::frozen`]), on a lease table of its own
//! and items of the resource table beside it written through
//! [`ItemFence`](leasehold_dynamodb::ItemFence) ([`common::item::FencedItem`]).
//!
//! Both processes build the same world from the run's name and the environment: the
//! tables are named after the run and made idempotently by whichever process comes
//! first. The store expires by observation, so the takeover comes a TTL plus the margin
//! after the holder froze, well within the case's acquire deadline.
#![allow(missing_docs)]

mod common;

use std::process::ExitCode;

use common::fixture::Dynamo;
use leasehold_testkit::suite::{Backend, Suite};

fn main() -> ExitCode {
    leasehold_testkit::frozen::main(|run| {
        let table = format!("leasehold-dynamo-frozen-{run}");
        async move { Suite::<Dynamo>(<Dynamo as Backend>::open(&table).await) }
    })
}
