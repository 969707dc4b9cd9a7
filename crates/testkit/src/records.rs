//! Names, records and leases a test writes or takes by hand: a lease name or prefix that
//! must be valid, names as a listing gave them, a held record, the JSON an operator
//! would type for one, a lease that must be granted, and the renewals a test waits for.

use std::time::Duration;

use leasehold_core::store::{LeaseRecord, Linearizable, record_codec};
use leasehold_core::testing::renewed;
use leasehold_core::{FencingToken, HolderId, Lease, LeaseClient, LeaseName, NamePrefix, Ttl};

/// How long one renewal may take to land in [`renewals`].
const RENEWAL_WITHIN: Duration = Duration::from_secs(5);

/// The lease name `s`.
///
/// # Panics
/// If `s` is not a valid lease name.
pub fn lease_name(s: &str) -> LeaseName {
    LeaseName::new(s).unwrap_or_else(|e| panic!("{e}"))
}

/// The name prefix `s`.
///
/// # Panics
/// If `s` is not a valid name prefix.
pub fn name_prefix(s: &str) -> NamePrefix {
    NamePrefix::new(s).unwrap_or_else(|e| panic!("{e}"))
}

/// `names` as strings, in their order (what a listing gave, to compare).
pub fn listed(names: Vec<LeaseName>) -> Vec<String> {
    names.into_iter().map(|n| n.as_str().to_owned()).collect()
}

/// A record held by `holder` with the token `token` and a TTL of `ttl_ms` milliseconds.
///
/// # Panics
/// If `holder` is not a valid holder id or the TTL is out of range.
pub fn held_record(holder: &str, token: u64, ttl_ms: u64) -> LeaseRecord {
    LeaseRecord::held(
        HolderId::new(holder).unwrap_or_else(|e| panic!("{e}")),
        FencingToken::new(token),
        Ttl::from_millis(ttl_ms).unwrap_or_else(|e| panic!("{e}")),
    )
}

/// `record` as the stores that keep records as JSON write it (`record_codec`), as text:
/// what an operator types to plant or overwrite one with a store's own client.
///
/// # Panics
/// If the encoding is not UTF-8 (it always is).
pub fn record_json(record: &LeaseRecord) -> String {
    String::from_utf8(record_codec::encode(record)).unwrap_or_else(|e| panic!("the record's JSON: {e}"))
}

/// `name`, acquired (waiting while it is held) for `ttl` through a client of its own on
/// `store`.
///
/// # Panics
/// If the acquire fails.
pub async fn acquired<S>(store: &S, name: &str, ttl: Duration) -> Lease
where
    S: Linearizable + Clone,
{
    LeaseClient::new(store.clone())
        .acquire(name, ttl)
        .await
        .unwrap_or_else(|e| panic!("acquire {name}: {e}"))
}

/// Waits for `n` renewals of `lease` to land, one after the other: each moves its
/// validity past where it stood when the last one landed.
///
/// # Panics
/// If a renewal does not land within 5 s of the one before.
pub async fn renewals(lease: &Lease, n: usize) {
    for i in 0..n {
        assert!(
            renewed(std::slice::from_ref(lease), 1, RENEWAL_WITHIN).await,
            "renewal {i} of {} never landed",
            lease.name()
        );
    }
}
