//! The shared suites (`leasehold_testkit::suite_tests!`: conformance and fence; S3 pushes
//! no changes to waiters, so no wake-up cases) against a real S3-compatible server:
//! moto, path-style, dummy credentials, one bucket per test ([`common::fixture::S3`]).
//!
//! They run on this binary's own moto (port [`common::fixture::SUITE_MOTO_PORT`]) whose
//! requests are serialized (see `common::serialized_moto`): the shared threaded moto
//! checks `If-Match` and stores the object in two steps without a lock, so two racing
//! compare-and-swaps on one ETag can both win there (6 of 40 runs of
//! `concurrent_cas_increments_are_exact` lost an increment on it). S3 applies conditional
//! writes atomically; the emulator must too for the suite to test the store rather than
//! the emulator.
//!
//! `mod fence` runs the fence cases on [`leasehold_s3::ManifestFence`]: each resource a
//! fresh manifest in the case's bucket (`common::fenced::ManifestResource`, which
//! `tests/frozen_holder.rs` uses too), its value the manifest's data (the decimal digits
//! of the value), its high-water mark the manifest's token, one writer per manifest (a
//! conflicting commit fails the case), counting real HTTP requests.
#![allow(missing_docs)]

mod common;

leasehold_testkit::suite_tests!(common::fixture::S3; conformance, fence);
