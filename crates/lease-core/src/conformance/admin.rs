//! The administration case: [`crate::admin::Admin`] on a real store.

use std::time::Duration;

use super::{Fixture, client, granted, unique_name};
use crate::admin::{Admin, ForcedRelease, Status};

/// `inspect` reports a held lease's holder, token, TTL and version (and the time left
/// where the store keeps a clock); `force_release` makes it vacant with its token kept,
/// the holder learns it lost the lease within its TTL, and the next grant's token is
/// higher; a second forced release finds it vacant, and on a name never written both
/// report it absent, writing nothing.
pub async fn admin_inspects_and_releases_by_force(f: &dyn Fixture) {
    let store = f.store().await;
    let name = unique_name("admin");
    let admin = Admin::shared(store.clone());
    let holder = client(store.clone());
    let ttl = Duration::from_secs(3);
    let lease = granted(
        holder.try_acquire(name.as_str(), ttl).await.expect("acquire"),
        "acquire",
    );

    let state = admin.inspect(&name).await.expect("inspect");
    assert_eq!(state.status, Status::Held, "{state}");
    assert_eq!(state.holder.as_ref(), Some(lease.holder()), "{state}");
    assert_eq!(state.token, Some(lease.token()), "{state}");
    assert_eq!(state.ttl, Some(ttl), "{state}");
    assert!(state.version.is_some(), "{state}");
    assert_eq!(state.clock, store.capabilities().clock);
    if state.clock == crate::store::ClockSource::Store {
        assert!(
            state.remaining.is_some_and(|r| r > Duration::ZERO && r <= ttl),
            "{state:?}"
        );
    } else {
        assert_eq!(state.remaining, None, "judged by observation: {state:?}");
    }
    assert!(state.to_string().contains(lease.holder().as_str()), "{state}");

    match admin.force_release(&name).await.expect("force release") {
        ForcedRelease::Released { holder, token } => {
            assert_eq!(&holder, lease.holder());
            assert_eq!(token, lease.token());
        }
        other => panic!("a held lease was not released by force: {other:?}"),
    }
    let state = admin.inspect(&name).await.expect("inspect");
    assert_eq!(state.status, Status::Vacant, "{state}");
    assert_eq!(state.token, Some(lease.token()), "the token is kept: {state}");
    assert_eq!(state.holder, None);
    let cause = tokio::time::timeout(ttl + Duration::from_secs(2), lease.lost())
        .await
        .unwrap_or_else(|_| panic!("the holder never noticed the forced release"));
    assert!(!lease.is_valid(), "lost: {cause}");
    assert_eq!(
        admin.force_release(&name).await.expect("again"),
        ForcedRelease::AlreadyVacant { token: lease.token() }
    );

    let next = granted(
        client(store.clone())
            .try_acquire(name.as_str(), ttl)
            .await
            .expect("acquire again"),
        "acquire again",
    );
    assert!(next.token() > lease.token(), "{} after {}", next.token(), lease.token());
    next.release().await.expect("release");

    let never = unique_name("admin-absent");
    assert_eq!(admin.inspect(&never).await.expect("inspect").status, Status::Absent);
    assert_eq!(admin.force_release(&never).await.expect("force"), ForcedRelease::Absent);
    assert!(store.read(&never).await.expect("read").is_none(), "nothing was written");
}
