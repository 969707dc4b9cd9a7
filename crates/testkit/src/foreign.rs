//! Foreign writers: the stores' own command-line clients (`etcdctl`, `redis-cli`,
//! `psql`, `sqlite3`) run the way an operator would, and a holder watched while one of
//! them changes its record.

use std::future::Future;
use std::process::Command;
use std::time::Duration;

use leasehold_core::testing::process::poll;
use leasehold_core::{Lease, LeaseClient, LossCause};
use tokio::time::Instant;

/// Runs `program` with `args` and returns its standard output.
///
/// # Panics
/// If it cannot start (`scripts/install-deps.sh` installs every client the tests use)
/// or exits with an error, with its standard error.
pub fn cli(program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program} {args:?} did not run (scripts/install-deps.sh installs it): {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Takes `name` for `ttl` through `client`, waits for one renewal to land, runs `change`
/// (a foreign writer changing the record), and waits for the holder to notice: its loss
/// cause and how long after the change it fired, with the lease.
///
/// # Panics
/// If the grant fails, no renewal lands within 5 s, or the holder did not notice within
/// one renewal interval (a third of the TTL, plus 500 ms).
pub async fn hold_then(
    client: &LeaseClient,
    name: &str,
    ttl: Duration,
    change: impl Future<Output = ()>,
) -> (LossCause, Duration, Lease) {
    let lease = client.acquire(name, ttl).await.expect("acquire");
    let before = lease.valid_until();
    assert!(
        poll(Duration::from_secs(5), || lease.valid_until() > before).await,
        "no renewal of {name} landed"
    );
    change.await;
    let changed = Instant::now();
    let cause = tokio::time::timeout(ttl.max(Duration::from_secs(3)), lease.lost())
        .await
        .unwrap_or_else(|_| panic!("the holder still believes it holds {name} long after the change"));
    let after = changed.elapsed();
    // Renewals come every third of the TTL: the next one must notice.
    assert!(
        after <= ttl / 3 + Duration::from_millis(500),
        "{name}: noticed only {after:?} after the change ({cause:?})"
    );
    (cause, after, lease)
}
