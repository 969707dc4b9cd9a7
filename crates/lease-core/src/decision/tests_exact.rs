//! Exact outcomes of the pure lease decision, with made-up times.

use std::time::{Duration, Instant};

use crate::decision::{self, AcquireStep, ConflictVerdict, Known, Policy, SkewBound};
use crate::{
    FencingToken, HolderId, Ttl,
    store::{ClockSource, Current, LeaseRecord, Precondition, Stored, Version},
};

fn me() -> HolderId {
    HolderId::new("me#1").expect("valid test input")
}
fn other() -> HolderId {
    HolderId::new("other#1").expect("valid test input")
}
fn ttl_s(s: u64) -> Ttl {
    Ttl::new(Duration::from_secs(s)).expect("valid test input")
}
fn stored(holder: Option<HolderId>, token: u64, remaining: Option<Duration>) -> Stored {
    Stored {
        record: LeaseRecord {
            holder,
            token: FencingToken::new(token),
            ttl: ttl_s(10),
            wall_expires_at_ms: Some(1_000_000),
        },
        version: Version::new("v7"),
        remaining,
    }
}
const WALL: u64 = 5_000_000;

fn write(step: AcquireStep) -> (Precondition, LeaseRecord) {
    match step {
        AcquireStep::Write { expect, record } => (expect, record),
        other => panic!("expected a write, got {other:?}"),
    }
}

/// `me` asks for a 30 s lease at `now` (wall clock `wall`), knowing `known`.
fn ask(p: &Policy, now: Instant, wall: u64, known: Known<'_>) -> AcquireStep {
    decision::acquire(p, false, &me(), ttl_s(30), now, wall, known)
}

/// `me` asks for a 30 s lease at `now`, having seen `s` unchanged since `first_seen`.
fn ask_seen(p: &Policy, now: Instant, wall: u64, s: &Stored, first_seen: Instant) -> AcquireStep {
    ask(p, now, wall, Known::Present { stored: s, first_seen })
}

/// `me` asks for a 30 s lease now, having just seen `s` for the first time.
fn ask_now(p: &Policy, s: &Stored) -> AcquireStep {
    let now = Instant::now();
    ask_seen(p, now, WALL, s, now)
}

#[test]
fn store_clock_first_attempt_is_a_claimable_write_with_token_one() {
    let p = Policy::new(ClockSource::Store);
    let (expect, rec) = write(ask(&p, Instant::now(), WALL, Known::Nothing));
    assert_eq!(expect, Precondition::Claimable);
    assert_eq!(rec.holder, Some(me()));
    assert_eq!(rec.token, FencingToken::FIRST);
    assert_eq!(rec.ttl, ttl_s(30));
    assert_eq!(rec.wall_expires_at_ms, Some(WALL + 30_000));
}

#[test]
fn observation_first_attempt_is_a_create() {
    let p = Policy::new(ClockSource::Observation);
    let (expect, rec) = write(ask(&p, Instant::now(), WALL, Known::Absent));
    assert_eq!(expect, Precondition::Absent);
    assert_eq!(rec.token, FencingToken::FIRST);
}

#[test]
fn knowing_nothing_a_store_that_claims_vacant_records_is_sent_vacant() {
    let me = me();
    let ask_knowing_nothing = |clock, claims_vacant| {
        write(decision::acquire(
            &Policy::new(clock),
            claims_vacant,
            &me,
            ttl_s(30),
            Instant::now(),
            WALL,
            Known::Nothing,
        ))
    };
    let (expect, rec) = ask_knowing_nothing(ClockSource::Observation, true);
    assert_eq!((expect, rec.token), (Precondition::Vacant, FencingToken::FIRST));
    assert_eq!(rec.holder, Some(me.clone()));
    let (expect, _) = ask_knowing_nothing(ClockSource::Observation, false);
    assert_eq!(expect, Precondition::Absent, "a store without Vacant is sent Absent");
    let (expect, _) = ask_knowing_nothing(ClockSource::Store, true);
    assert_eq!(
        expect,
        Precondition::Claimable,
        "a store with a clock judges expiry too"
    );
    // Knowing the name absent, or its record, the client names what it knows.
    let p = Policy::new(ClockSource::Observation);
    let known_absent = decision::acquire(&p, true, &me, ttl_s(30), Instant::now(), WALL, Known::Absent);
    assert_eq!(write(known_absent).0, Precondition::Absent);
}

#[test]
fn store_clock_live_holder_means_wait_for_its_remaining_time() {
    let p = Policy::new(ClockSource::Store);
    let s = stored(Some(other()), 4, Some(Duration::from_millis(2_500)));
    let step = ask_now(&p, &s);
    assert_eq!(
        step,
        AcquireStep::Wait {
            holder: Some(other()),
            token: FencingToken::new(4),
            retry_after: Duration::from_millis(2_500)
        }
    );
}

#[test]
fn store_clock_expired_holder_is_claimed_with_the_next_token() {
    let p = Policy::new(ClockSource::Store);
    let s = stored(Some(other()), 4, Some(Duration::ZERO));
    let (expect, rec) = write(ask_now(&p, &s));
    assert_eq!(expect, Precondition::Claimable);
    assert_eq!(rec.token, FencingToken::new(5));
}

#[test]
fn store_clock_record_without_remaining_is_never_free() {
    let p = Policy::new(ClockSource::Store);
    let s = stored(Some(other()), 4, None);
    let step = ask_now(&p, &s);
    assert!(matches!(step, AcquireStep::Wait { retry_after, .. } if retry_after == Duration::from_secs(10)));
}

#[test]
fn vacant_record_is_taken_at_once_with_the_next_token() {
    let s = stored(None, 9, None);
    let p = Policy::new(ClockSource::Observation);
    let (expect, rec) = write(ask_now(&p, &s));
    assert_eq!(expect, Precondition::Version(Version::new("v7")));
    assert_eq!(rec.token, FencingToken::new(10));
    let p = Policy::new(ClockSource::Store);
    let (expect, _) = write(ask_now(&p, &s));
    assert_eq!(expect, Precondition::Claimable);
}

#[test]
fn observation_waits_the_full_window_from_first_sight() {
    let p = Policy::new(ClockSource::Observation);
    let s = stored(Some(other()), 4, None);
    let seen = Instant::now();
    let window = p.observation_window(ttl_s(10));
    assert_eq!(window, Duration::from_millis(10_500), "ttl 10 s + 5% margin");

    let step = ask_seen(&p, seen, WALL, &s, seen);
    assert!(matches!(step, AcquireStep::Wait { retry_after, .. } if retry_after == window));

    let almost = seen + window - Duration::from_millis(1);
    let step = ask_seen(&p, almost, WALL, &s, seen);
    assert!(matches!(step, AcquireStep::Wait { retry_after, .. } if retry_after == Duration::from_millis(1)));

    let (expect, rec) = write(ask_seen(&p, seen + window, WALL, &s, seen));
    assert_eq!(expect, Precondition::Version(Version::new("v7")));
    assert_eq!(rec.token, FencingToken::new(5));
}

#[test]
fn wall_clock_is_ignored_without_an_explicit_skew_bound() {
    // The holder's wall-clock expiry is an hour in the past by our clock: without a
    // skew bound that means nothing, and we wait the observation window.
    let p = Policy::new(ClockSource::Observation);
    let s = stored(Some(other()), 4, None);
    let now = Instant::now();
    let step = ask_seen(&p, now, 1_000_000 + 3_600_000, &s, now);
    assert!(matches!(step, AcquireStep::Wait { .. }));
}

#[test]
fn skew_bound_allows_takeover_only_past_expiry_plus_bound() {
    let mut p = Policy::new(ClockSource::Observation);
    p.skew = Some(SkewBound(Duration::from_secs(60)));
    let s = stored(Some(other()), 4, None); // wall expiry 1_000_000 ms
    let now = Instant::now();
    let at = |wall| ask_seen(&p, now, wall, &s, now);
    assert!(
        matches!(at(1_000_000 + 60_000), AcquireStep::Wait { .. }),
        "exactly at the bound: not yet"
    );
    let (expect, rec) = write(at(1_000_000 + 60_001));
    assert_eq!(expect, Precondition::Version(Version::new("v7")));
    assert_eq!(rec.token, FencingToken::new(5));
}

#[test]
fn our_own_record_is_confirmed_on_its_version_keeping_the_token() {
    let p = Policy::new(ClockSource::Store);
    let s = stored(Some(me()), 4, Some(Duration::from_secs(3)));
    let (expect, rec) = write(ask_now(&p, &s));
    assert_eq!(expect, Precondition::Version(Version::new("v7")));
    assert_eq!(rec.token, FencingToken::new(4));
}

#[test]
fn validity_counts_from_when_the_request_was_sent() {
    let p = Policy::new(ClockSource::Store);
    let sent = Instant::now();
    assert_eq!(p.valid_until(sent, ttl_s(30)), sent + Duration::from_millis(28_500));
    assert_eq!(p.renew_at(sent, ttl_s(30)), sent + Duration::from_secs(10));
    assert_eq!(
        p.margin(Ttl::from_millis(10).expect("valid test input")),
        Duration::from_millis(1),
        "margin is at least 1 ms"
    );
}

#[test]
fn a_store_that_keeps_its_record_less_than_the_ttl_shortens_the_trust() {
    let p = Policy::new(ClockSource::Store);
    let sent = Instant::now();
    let ttl = ttl_s(30);
    // No answer, or one at least the TTL: the TTL.
    assert_eq!(Policy::window(ttl, None), Duration::from_secs(30));
    assert_eq!(
        Policy::window(ttl, Some(Duration::from_secs(40))),
        Duration::from_secs(30)
    );
    // Less: that, with the TTL's margin, and renewed after a third of it.
    let window = Policy::window(ttl, Some(Duration::from_secs(21)));
    assert_eq!(window, Duration::from_secs(21));
    assert_eq!(p.valid_within(sent, ttl, window), sent + Duration::from_millis(19_500));
    assert_eq!(p.renew_within(sent, window), sent + Duration::from_secs(7));
    // Less than the margin: not valid at all.
    let none = Policy::window(ttl, Some(Duration::from_secs(1)));
    assert_eq!(p.valid_within(sent, ttl, none), sent);
}

#[test]
fn renewal_keeps_holder_and_token() {
    let held = LeaseRecord::held(me(), FencingToken::new(12), ttl_s(5));
    let r = decision::renewal(&held, ttl_s(7), WALL);
    assert_eq!(
        (r.holder, r.token, r.ttl, r.wall_expires_at_ms),
        (Some(me()), FencingToken::new(12), ttl_s(7), Some(WALL + 7_000))
    );
}

#[test]
fn conflicts_are_judged_by_holder_and_token() {
    let t = FencingToken::new(4);
    let mine = stored(Some(me()), 4, None);
    assert_eq!(
        decision::judge_conflict(&me(), t, &Current::Present(mine.clone())),
        ConflictVerdict::StillOurs(mine)
    );
    let theirs = stored(Some(other()), 5, None);
    assert_eq!(
        decision::judge_conflict(&me(), t, &Current::Present(theirs)),
        ConflictVerdict::TakenOver {
            holder: Some(other()),
            token: FencingToken::new(5)
        }
    );
    // Our holder id with another token is a different grant: not ours.
    let old_self = stored(Some(me()), 3, None);
    assert!(matches!(
        decision::judge_conflict(&me(), t, &Current::Present(old_self)),
        ConflictVerdict::TakenOver { .. }
    ));
    assert_eq!(
        decision::judge_conflict(&me(), t, &Current::Present(stored(None, 4, None))),
        ConflictVerdict::Vacated
    );
    assert_eq!(
        decision::judge_conflict(&me(), t, &Current::Absent),
        ConflictVerdict::Gone
    );
    assert_eq!(
        decision::judge_conflict(&me(), t, &Current::Unknown),
        ConflictVerdict::Unknown
    );
}

/// Every way a new holder is granted the lease (vacant; expired on the store's clock;
/// past the observation window; past the skew bound), on a record at `token`.
fn every_grant(token: u64) -> Vec<AcquireStep> {
    let store = Policy::new(ClockSource::Store);
    let seen = Policy::new(ClockSource::Observation);
    let mut skewed = Policy::new(ClockSource::Observation);
    skewed.skew = Some(SkewBound(Duration::from_secs(60)));
    let now = Instant::now();
    let window = seen.observation_window(ttl_s(10));
    let vacant = stored(None, token, Some(Duration::ZERO));
    let expired = stored(Some(other()), token, Some(Duration::ZERO));
    let held = stored(Some(other()), token, None);
    vec![
        ask_now(&store, &vacant),
        ask_now(&seen, &stored(None, token, None)),
        ask_now(&store, &expired),
        ask_seen(&seen, now + window, WALL, &held, now),
        ask_seen(&skewed, now, 1_000_000 + 60_001, &held, now),
    ]
}

#[test]
fn the_grant_after_max_minus_one_issues_max() {
    for step in every_grant(FencingToken::MAX.get() - 1) {
        let (_, rec) = write(step);
        assert_eq!(rec.token, FencingToken::MAX);
        assert_eq!(rec.holder, Some(me()));
    }
}

#[test]
fn a_record_at_max_is_never_granted_to_a_new_holder() {
    for step in every_grant(FencingToken::MAX.get()) {
        assert_eq!(
            step,
            AcquireStep::Exhausted {
                token: FencingToken::MAX
            }
        );
    }
}

#[test]
fn the_holder_of_max_keeps_it_and_others_wait_for_it() {
    let p = Policy::new(ClockSource::Store);
    let mine = stored(Some(me()), FencingToken::MAX.get(), Some(Duration::from_secs(3)));
    let (expect, rec) = write(ask_now(&p, &mine));
    assert_eq!(expect, Precondition::Version(Version::new("v7")));
    assert_eq!(rec.token, FencingToken::MAX, "a confirmation keeps the token");
    let theirs = stored(Some(other()), FencingToken::MAX.get(), Some(Duration::from_secs(3)));
    assert!(matches!(ask_now(&p, &theirs), AcquireStep::Wait { token, .. } if token == FencingToken::MAX));
    let renewed = decision::renewal(&mine.record, ttl_s(30), WALL);
    assert_eq!(renewed.token, FencingToken::MAX);
}

#[test]
fn tokens_end_at_max() {
    let below = FencingToken::new(FencingToken::MAX.get() - 1);
    assert_eq!(below.checked_next(), Some(FencingToken::MAX));
    assert_eq!(FencingToken::MAX.checked_next(), None);
    assert_eq!(FencingToken::new(u64::MAX).checked_next(), None);
    assert_eq!(FencingToken::MAX.next(), FencingToken::MAX);
    assert!(FencingToken::MAX.is_exhausted() && !below.is_exhausted());
    assert_eq!(FencingToken::MAX.to_i64().expect("fits"), i64::MAX - 1);
}
