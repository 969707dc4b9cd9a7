//! Checks the suite's cases make that a store crate's own tests make too: a rival
//! refused while a lease is held, a holder that lost touch with its store, a takeover
//! that waits out the old holder.

use std::time::Duration;

use tokio::time::Instant;

use crate::{AcquireOutcome, Lease, LeaseClient, LossCause};

/// Asserts that `outcome`, a rival's attempt while `lease` is held, is a refusal naming
/// the holder and its token, with a wait of at most `max_wait`.
///
/// # Panics
/// If it was granted, or the refusal names another holder or token, or no wait or a
/// longer one.
pub fn assert_held_by(outcome: AcquireOutcome, lease: &Lease, max_wait: Duration) {
    match outcome {
        AcquireOutcome::Granted(_) => panic!("two holders at once"),
        AcquireOutcome::Held {
            holder,
            token,
            retry_after,
        } => {
            assert_eq!(holder.as_ref(), Some(lease.holder()));
            assert_eq!(token, lease.token());
            assert!(
                retry_after > Duration::ZERO && retry_after <= max_wait,
                "retry_after {retry_after:?}"
            );
        }
    }
}

/// Waits up to `within` for `lease`'s loss signal and asserts that the holder lost touch
/// with its store: the lease expired, the store was unreachable, or a write's outcome is
/// unknown. The cause.
///
/// # Panics
/// If the signal does not fire in time, for another cause, or the lease still says it
/// is valid.
pub async fn assert_lost_touch(lease: &Lease, within: Duration) -> LossCause {
    let cause = tokio::time::timeout(within, lease.lost())
        .await
        .expect("the holder's loss signal never fired");
    assert!(
        matches!(
            cause,
            LossCause::Expired | LossCause::StoreUnreachable | LossCause::OutcomeUnknown
        ),
        "{cause:?}"
    );
    assert!(!lease.is_valid());
    cause
}

/// `challenger` takes `name` over from `holder` (which no longer renews), waiting up to
/// `within`, and is granted it for `ttl` no earlier than the end of `holder`'s validity.
/// The new lease.
///
/// # Panics
/// If there is no grant in time, or it came while `holder` was still valid (`what`
/// names the case in the message).
pub async fn take_over_after_expiry(
    challenger: &LeaseClient,
    name: impl AsRef<str>,
    ttl: Duration,
    within: Duration,
    holder: &Lease,
    what: &str,
) -> Lease {
    let holder_valid_until = holder.valid_until();
    let taken = challenger
        .acquire_timeout(name, ttl, within)
        .await
        .unwrap_or_else(|e| panic!("{what}: no takeover: {e}"));
    let granted_at = Instant::now();
    assert!(
        granted_at >= holder_valid_until,
        "{what}: takeover {:?} before the holder's validity ended",
        holder_valid_until - granted_at
    );
    taken
}
