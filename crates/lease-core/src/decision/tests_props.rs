//! Property tests of the lease decision against a model store, with message latency and
//! clock-rate drift: tokens strictly increase on a change of holder, renewal keeps the
//! token, a challenger on an observation store never takes over before its window, and
//! no two holders ever both believe they hold the lease at the same true time.

use std::time::{Duration, Instant};

use crate::decision::{self, AcquireStep, ConflictVerdict, Known, Policy};
use crate::{
    FencingToken, HolderId, Ttl,
    store::{ClockSource, Current, LeaseRecord, Precondition, Stored, Version},
};
use proptest::prelude::*;

const TTL_MS: u64 = 1_000;

/// The store: one record, applied at true time; its clock (for `Store`) is true time.
struct ModelStore {
    clock: ClockSource,
    rec: Option<(LeaseRecord, u64, u64)>, // record, version, applied_at (true ms)
    next_version: u64,
    issued: u64,
}

impl ModelStore {
    fn stored(&self, at: u64) -> Option<Stored> {
        self.rec.as_ref().map(|(r, v, applied)| Stored {
            record: r.clone(),
            version: Version::from(*v),
            remaining: match self.clock {
                ClockSource::Store => Some(Duration::from_millis((applied + r.ttl.as_millis()).saturating_sub(at))),
                _ => None,
            },
        })
    }

    fn write(&mut self, expect: &Precondition, record: &LeaseRecord, at: u64) -> Result<Stored, Option<Stored>> {
        let mut record = record.clone();
        let ok = match (expect, &self.rec) {
            (Precondition::Absent, None) => true,
            (Precondition::Absent, Some(_)) => false,
            (Precondition::Version(v), Some((_, cur, _))) => v == &Version::from(*cur),
            (Precondition::Version(_), None) => false,
            (Precondition::Claimable, cur) => {
                assert_eq!(self.clock, ClockSource::Store, "Claimable sent to an observation store");
                let free = match cur {
                    None => true,
                    Some((r, _, applied)) => r.holder.is_none() || at >= applied + r.ttl.as_millis(),
                };
                if free {
                    let prev = cur.as_ref().map_or(0, |(r, _, _)| r.token.get());
                    record.token = FencingToken::new(self.issued.max(prev) + 1);
                }
                free
            }
            (Precondition::Vacant, cur) => {
                let vacant = cur.as_ref().is_none_or(|(r, _, _)| r.holder.is_none());
                record.token = match cur.as_ref().filter(|_| vacant) {
                    Some((r, _, _)) => r.token.checked_next().expect("the model never exhausts tokens"),
                    None => FencingToken::FIRST,
                };
                vacant
            }
        };
        if !ok {
            return Err(self.stored(at));
        }
        self.next_version += 1;
        self.issued = self.issued.max(record.token.get());
        self.rec = Some((record, self.next_version, at));
        Ok(self.stored(at).expect("just written"))
    }
}

struct Held {
    holder: HolderId,
    token: FencingToken,
    version: Version,
    record: LeaseRecord,
    valid_until_local: u64,
    interval: usize,
}

struct Client {
    ppm: i64, // clock rate error, parts per million
    grants: u64,
    held: Option<Held>,
    seen: Option<(Stored, u64)>, // stored, first seen (local ms)
}

impl Client {
    fn local(&self, t: u64) -> u64 {
        let t = i128::from(t);
        u64::try_from(t + t * i128::from(self.ppm) / 1_000_000).expect("time")
    }
    /// The true time at which this client's clock reads `local`.
    fn true_at(&self, local: u64) -> u64 {
        let l = i128::from(local);
        u64::try_from(l * 1_000_000 / (1_000_000 + i128::from(self.ppm))).expect("time")
    }
}

#[derive(Debug, Clone)]
struct Op {
    client: usize,
    kind: u8,
    gap: u64,
    lat_out: u64,
    lat_back: u64,
}

fn op() -> impl Strategy<Value = Op> {
    (0..3usize, 0..4u8, 0..2 * TTL_MS, 0..TTL_MS / 4, 0..TTL_MS / 4).prop_map(
        |(client, kind, gap, lat_out, lat_back)| Op {
            client,
            kind,
            gap,
            lat_out,
            lat_back,
        },
    )
}

/// A belief interval: a holder believed it held `token` over [start, end] (true ms).
#[derive(Debug, Clone, Copy)]
struct Interval {
    token: u64,
    start: u64,
    end: u64,
}

fn run(clock: ClockSource, ppms: [i64; 3], ops: Vec<Op>) -> Result<(), TestCaseError> {
    let base = Instant::now();
    let at = |ms: u64| base + Duration::from_millis(ms);
    let policy = Policy::new(clock);
    let ttl = Ttl::from_millis(TTL_MS).expect("ttl");
    let mut store = ModelStore {
        clock,
        rec: None,
        next_version: 0,
        issued: 0,
    };
    let mut clients: Vec<Client> = ppms
        .iter()
        .map(|&ppm| Client {
            ppm,
            grants: 0,
            held: None,
            seen: None,
        })
        .collect();
    let mut intervals: Vec<Interval> = Vec::new();
    let mut last_token_granted = 0u64;
    let mut last_holder: Option<HolderId> = None;
    let mut t = 0u64; // true time

    for op in ops {
        t += op.gap;
        // The renewal driver ends a lease at its deadline.
        for c in &mut clients {
            if let Some(h) = &c.held {
                if c.local(t) >= h.valid_until_local {
                    intervals[h.interval].end = c.true_at(h.valid_until_local);
                    c.held = None;
                }
            }
        }
        let c = &mut clients[op.client];
        match (op.kind, c.held.is_some()) {
            // Acquire attempt: up to four store calls, as LeaseClient::try_acquire.
            (0 | 1, false) => {
                c.grants += 1;
                let me = HolderId::new(format!("c{}#{}", op.client, c.grants)).expect("holder");
                let mut fresh = false;
                for _ in 0..4 {
                    let now_local = c.local(t);
                    let known = match (&c.seen, clock, fresh) {
                        (_, ClockSource::Store, false) | (None, _, _) => Known::Nothing,
                        (Some((s, first)), _, _) => Known::Present {
                            stored: s,
                            first_seen: at(*first),
                        },
                    };
                    // The stores of clients 0 and 2 take `Vacant` (where the clock is not the store's).
                    let claims_vacant = op.client % 2 == 0;
                    let step = decision::acquire(&policy, claims_vacant, &me, ttl, at(now_local), 0, known);
                    let (expect, record) = match step {
                        AcquireStep::Wait { .. } if !fresh => {
                            let applied = t + op.lat_out;
                            let s = store.stored(applied);
                            t = applied + op.lat_back;
                            remember(c, s, t);
                            fresh = true;
                            continue;
                        }
                        AcquireStep::Wait { .. } => break,
                        // Tokens here start at 1 and grow by one per grant: never near MAX.
                        AcquireStep::Exhausted { token } => {
                            prop_assert!(false, "counter exhausted at {token}");
                            break;
                        }
                        AcquireStep::Write { expect, record } => (expect, record),
                    };
                    // Observation takeover: never before the window, from first sight.
                    if let (Precondition::Version(_), Some((s, first))) = (&expect, &c.seen) {
                        if s.record.holder.as_ref().is_some_and(|h| h != &me) {
                            prop_assert!(
                                now_local
                                    >= first
                                        + u64::try_from(policy.observation_window(s.record.ttl).as_millis())
                                            .expect("ms")
                            );
                        }
                    }
                    let sent_local = c.local(t);
                    let applied = t + op.lat_out;
                    let result = store.write(&expect, &record, applied);
                    t = applied + op.lat_back;
                    fresh = true;
                    match result {
                        Ok(s) => {
                            let token = s.record.token;
                            if last_holder.as_ref() != Some(&me) {
                                prop_assert!(
                                    token.get() > last_token_granted,
                                    "token {token} not above {last_token_granted}"
                                );
                            }
                            last_token_granted = last_token_granted.max(token.get());
                            last_holder = Some(me.clone());
                            let valid_until_local =
                                u64::try_from(policy.valid_until(at(sent_local), ttl).duration_since(base).as_millis())
                                    .expect("ms");
                            intervals.push(Interval {
                                token: token.get(),
                                start: t,
                                end: u64::MAX,
                            });
                            c.held = Some(Held {
                                holder: me.clone(),
                                token,
                                version: s.version.clone(),
                                record: s.record.clone(),
                                valid_until_local,
                                interval: intervals.len() - 1,
                            });
                            remember(c, Some(s), t);
                            break;
                        }
                        Err(cur) => remember(c, cur, t),
                    }
                }
            }
            // Renewal.
            (2, true) => {
                let mut h = c.held.take().expect("held");
                let sent_local = c.local(t);
                let record = decision::renewal(&h.record, ttl, 0);
                let applied = t + op.lat_out;
                let result = store.write(&Precondition::Version(h.version.clone()), &record, applied);
                t = applied + op.lat_back;
                match result {
                    Ok(s) => {
                        prop_assert_eq!(s.record.token, h.token, "renewal changed the token");
                        h.version = s.version;
                        h.record = s.record;
                        let reply_local = c.local(t);
                        h.valid_until_local =
                            u64::try_from(policy.valid_until(at(sent_local), ttl).duration_since(base).as_millis())
                                .expect("ms");
                        if reply_local >= h.valid_until_local {
                            intervals[h.interval].end = c.true_at(h.valid_until_local);
                        } else {
                            c.held = Some(h);
                        }
                    }
                    Err(cur) => {
                        let cur = cur.map_or(Current::Absent, Current::Present);
                        let verdict = decision::judge_conflict(&h.holder, h.token, &cur);
                        prop_assert!(
                            !matches!(verdict, ConflictVerdict::StillOurs(_)),
                            "no unknown outcomes in this model"
                        );
                        // Lost: the holder stops believing when the reply arrives.
                        let end = t.min(c.true_at(h.valid_until_local));
                        intervals[h.interval].end = end;
                    }
                }
            }
            // Release.
            (3, true) => {
                let h = c.held.take().expect("held");
                intervals[h.interval].end = t;
                let applied = t + op.lat_out;
                let _ = store.write(&Precondition::Version(h.version), &h.record.vacated(), applied);
                t = applied + op.lat_back;
            }
            _ => {}
        }
    }
    for c in &clients {
        if let Some(h) = &c.held {
            intervals[h.interval].end = c.true_at(h.valid_until_local);
        }
    }
    for (i, a) in intervals.iter().enumerate() {
        for b in &intervals[i + 1..] {
            if a.token != b.token {
                prop_assert!(
                    a.end <= b.start || b.end <= a.start,
                    "two holders at once: {a:?} and {b:?}"
                );
            }
        }
    }
    Ok(())
}

fn remember(c: &mut Client, s: Option<Stored>, t_true: u64) {
    let now = c.local(t_true);
    c.seen = match (s, c.seen.take()) {
        (None, _) => None,
        (Some(s), Some((old, first))) if old.version == s.version => Some((s, first)),
        (Some(s), _) => Some((s, now)),
    };
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn store_clock_never_two_holders(ppms in prop::array::uniform3(-10_000i64..=10_000), ops in prop::collection::vec(op(), 1..80)) {
        run(ClockSource::Store, ppms, ops)?;
    }

    #[test]
    fn observation_never_two_holders(ppms in prop::array::uniform3(-10_000i64..=10_000), ops in prop::collection::vec(op(), 1..80)) {
        run(ClockSource::Observation, ppms, ops)?;
    }
}

/// The model can fail: a holder whose clock runs 30% slow and a challenger whose clock
/// runs 30% fast (far beyond what the 5% margin covers) are caught holding at once.
#[test]
fn the_model_detects_overlap_when_drift_exceeds_the_margin() {
    let op = |client, kind, gap| Op {
        client,
        kind,
        gap,
        lat_out: 0,
        lat_back: 0,
    };
    // c0 acquires; c1 is refused (and starts watching); 820 true ms later c1's fast clock
    // says the 1050 ms window has passed, while c0's slow clock still trusts its lease.
    let ops = vec![op(0, 0, 0), op(1, 0, 10), op(1, 0, 820)];
    assert!(
        run(ClockSource::Observation, [-300_000, 300_000, 0], ops.clone()).is_err(),
        "overlap not detected"
    );
    // The same schedule with clocks within the margin is safe.
    assert!(run(ClockSource::Observation, [-10_000, 10_000, 0], ops).is_ok());
}
