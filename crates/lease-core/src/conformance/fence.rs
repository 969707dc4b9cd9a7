//! The fence cases: every store's fenced write, on that store's own kind of resource,
//! keeps the contract of [`crate::fence`].
//!
//! A store crate's test implements [`FenceFixture`] (a fresh resource per case) and
//! [`FencedResource`] (one fenced write, one plain read, a round-trip count taken below
//! the library: statements, commands, HTTP requests), and generates one test per case
//! with [`fence_tests!`](crate::conformance::fence_tests).

use async_trait::async_trait;

use crate::fence::FenceMode;
use crate::{Error, FencingToken, Result};

/// A resource protected by a store's fence: one integer value and its high-water mark.
#[async_trait]
pub trait FencedResource: Send + Sync {
    /// One fenced write setting the value to `value`, carrying `token`, in `mode`, through
    /// the store crate's public fence API. `Ok(())` when it applied; a refused guard is
    /// [`Error::FenceRejected`].
    async fn write(&self, token: FencingToken, mode: FenceMode, value: i64) -> Result<()>;

    /// The resource as the store holds it now, read plainly (not through the fence):
    /// `(high-water mark, value)`, or `None` if it was never written.
    async fn read(&self) -> Option<(FencingToken, i64)>;

    /// The round trips to the store that writes to this resource have made so far,
    /// counted below the library (the driver's statements, the commands sent, the HTTP
    /// requests).
    fn round_trips(&self) -> u64;
}

/// What the fence cases need from a store crate's test.
#[async_trait]
pub trait FenceFixture: Send + Sync {
    /// A fresh resource that no other case uses, never written, on the server under test.
    async fn resource(&self, case: &str) -> Box<dyn FencedResource>;
}

/// Every fence case's name, in the order [`run_all`] runs them.
pub const CASES: &[&str] = &[
    "fence_refuses_a_stale_token",
    "fence_equal_token_passes_not_older_and_fails_strict",
    "fence_newer_token_raises_the_mark",
    "fence_guard_and_effect_are_one_round_trip",
];

/// Runs every fence case in turn.
pub async fn run_all(f: &dyn FenceFixture) {
    fence_refuses_a_stale_token(f).await;
    fence_equal_token_passes_not_older_and_fails_strict(f).await;
    fence_newer_token_raises_the_mark(f).await;
    fence_guard_and_effect_are_one_round_trip(f).await;
}

fn t(n: u64) -> FencingToken {
    FencingToken::new(n)
}

async fn applies(r: &dyn FencedResource, token: u64, mode: FenceMode, value: i64, what: &str) {
    if let Err(e) = r.write(t(token), mode, value).await {
        panic!("{what}: a write with token {token} ({mode:?}) must apply, got {e}");
    }
}

async fn refused(r: &dyn FencedResource, token: u64, mode: FenceMode, value: i64, what: &str) {
    match r.write(t(token), mode, value).await {
        Err(Error::FenceRejected { token: got, .. }) => {
            assert_eq!(got, t(token), "{what}: FenceRejected must carry the write's token");
        }
        Err(e) => panic!("{what}: a write with token {token} ({mode:?}) must be FenceRejected, got {e}"),
        Ok(()) => panic!("{what}: a write with token {token} ({mode:?}) was accepted; the fence must refuse it"),
    }
}

async fn holds(r: &dyn FencedResource, mark: u64, value: i64, what: &str) {
    assert_eq!(
        r.read().await,
        Some((t(mark), value)),
        "{what}: the resource must hold (mark, value)"
    );
}

/// A write carrying a token older than the mark is refused, in either mode, and changes
/// nothing.
pub async fn fence_refuses_a_stale_token(f: &dyn FenceFixture) {
    let r = f.resource("stale").await;
    let r = r.as_ref();
    assert_eq!(r.read().await, None, "a fresh resource must not exist yet");
    applies(r, 5, FenceMode::NotOlder, 50, "first write").await;
    holds(r, 5, 50, "after token 5").await;
    refused(r, 4, FenceMode::NotOlder, 40, "stale token, not-older mode").await;
    refused(r, 1, FenceMode::Newer, 10, "stale token, strict mode").await;
    holds(r, 5, 50, "a refused write changed the resource").await;
}

/// The same token again is accepted in `<=` mode (many writes per tenure) and refused
/// in strict mode.
pub async fn fence_equal_token_passes_not_older_and_fails_strict(f: &dyn FenceFixture) {
    let r = f.resource("equal").await;
    let r = r.as_ref();
    applies(r, 3, FenceMode::NotOlder, 1, "first write of the tenure").await;
    applies(r, 3, FenceMode::NotOlder, 2, "second write of the same tenure").await;
    holds(r, 3, 2, "after two writes with token 3").await;
    refused(r, 3, FenceMode::Newer, 9, "the same token, strict mode").await;
    holds(r, 3, 2, "a refused strict write changed the resource").await;
    applies(r, 4, FenceMode::Newer, 4, "a newer token, strict mode").await;
    holds(r, 4, 4, "after strict token 4").await;
}

/// A newer token is accepted and raises the mark, so the previous holder's token is
/// refused from then on.
pub async fn fence_newer_token_raises_the_mark(f: &dyn FenceFixture) {
    let r = f.resource("newer").await;
    let r = r.as_ref();
    applies(r, 2, FenceMode::NotOlder, 20, "token 2").await;
    applies(r, 7, FenceMode::NotOlder, 70, "token 7 (a later grant)").await;
    holds(r, 7, 70, "the mark must be raised to 7").await;
    refused(
        r,
        2,
        FenceMode::NotOlder,
        21,
        "the earlier holder's token after the raise",
    )
    .await;
    refused(r, 6, FenceMode::NotOlder, 60, "a token between the two").await;
    holds(r, 7, 70, "after the refusals").await;
}

/// Each fenced write that applies is exactly one round trip to the store: the guard
/// travels with the effect. A refused one is at most one (a store whose writer already
/// holds the resource's current mark, like an S3 manifest's base, may refuse without
/// sending anything).
pub async fn fence_guard_and_effect_are_one_round_trip(f: &dyn FenceFixture) {
    let r = f.resource("round-trips").await;
    let r = r.as_ref();
    let steps: [(u64, FenceMode, bool); 5] = [
        (1, FenceMode::NotOlder, true),  // first write: creates the mark
        (1, FenceMode::NotOlder, true),  // same tenure
        (2, FenceMode::Newer, true),     // newer, strict
        (1, FenceMode::NotOlder, false), // stale
        (2, FenceMode::Newer, false),    // equal, strict
    ];
    for (i, (token, mode, ok)) in steps.into_iter().enumerate() {
        let before = r.round_trips();
        let what = format!("step {i}");
        if ok {
            applies(r, token, mode, i64::try_from(i).unwrap_or(0), &what).await;
        } else {
            refused(r, token, mode, -1, &what).await;
        }
        let used = r.round_trips() - before;
        let allowed = if ok { 1..=1 } else { 0..=1 };
        assert!(
            allowed.contains(&used),
            "{what}: a fenced write with token {token} ({mode:?}, applied: {ok}) took {used} round trips; guard and effect must be one"
        );
    }
}

// Exported at the crate root by `macro_export` under a hidden name; users name it
// `conformance::fence_tests!`.
#[doc(hidden)]
#[macro_export]
macro_rules! __fence_tests {
    ($fixture:expr) => {
        $crate::__fence_tests!(@cases $fixture;
            fence_refuses_a_stale_token, fence_equal_token_passes_not_older_and_fails_strict,
            fence_newer_token_raises_the_mark, fence_guard_and_effect_are_one_round_trip);
    };
    (@cases $fixture:expr; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let fixture = $fixture;
                $crate::conformance::fence::$case(&fixture).await;
            }
        )*
    };
}
