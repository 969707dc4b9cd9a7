//! The semaphore checker: a semaphore run's histories and resources, judged slot by
//! slot with the lease [`checker`](crate::checker::check) (each slot is a lease with
//! its own token sequence and its own fenced resource), plus the one rule a semaphore
//! adds: **never more than N permit holders at once**.
//!
//! A holder counts from its grant's reply until it stopped trusting the grant (its last
//! known validity deadline, or its release: [`TrustSpan`]), across every slot; a grant
//! of a slot at or above N is a violation too. Grants of uncertain store epoch (across a
//! data-loss restart) are left out of the count, as the grant rules leave them out.

use std::collections::BTreeMap;

use crate::checker::{self, Report, ResourceRow, TrustSpan, trust_spans};
use crate::history::Event;

/// One slot of a semaphore run: its holders' histories and its resource's rows.
#[derive(Debug, Clone, Default)]
pub struct SlotRun {
    /// The events recorded for this slot's grants.
    pub events: Vec<Event>,
    /// Its resource's accepted writes.
    pub rows: Vec<ResourceRow>,
}

/// What the semaphore checker found.
#[derive(Debug, Clone, Default)]
pub struct PermitReport {
    /// The lease checker's reports, summed over the slots (violations and notes prefixed
    /// with their slot), with the semaphore's own violations added.
    pub report: Report,
    /// The most permit holders trusting their permits at once.
    pub most_holders: usize,
    /// Grants per slot.
    pub grants_per_slot: BTreeMap<u32, usize>,
}

/// Checks a semaphore run of `permits` permits: `shared` holds the controller's events
/// (faults, with the data-loss restarts every slot's epochs depend on), `slots` each
/// slot's histories and rows, by slot.
pub fn check(permits: u32, shared: &[Event], slots: &BTreeMap<u32, SlotRun>) -> PermitReport {
    let mut out = PermitReport::default();
    let faults: Vec<Event> = shared
        .iter()
        .filter(|e| matches!(e, Event::Fault { .. }))
        .cloned()
        .collect();
    out.report.acquires = shared.iter().filter(|e| matches!(e, Event::Acquiring { .. })).count();
    let mut spans: Vec<(u32, TrustSpan)> = Vec::new();
    for (&slot, run) in slots {
        let mut events = run.events.clone();
        events.extend(faults.iter().cloned());
        let r = checker::check(&events, &run.rows);
        if slot >= permits {
            out.report.violations.push(format!(
                "slot {slot} was granted ({} grants), beyond the {permits} permits",
                r.grants
            ));
        }
        out.grants_per_slot.insert(slot, r.grants);
        merge(&mut out.report, &r, slot);
        spans.extend(trust_spans(&events).into_iter().map(|s| (slot, s)));
    }
    out.report.epochs = 1 + faults
        .iter()
        .filter(|e| matches!(e, Event::Fault { data_loss: true, .. }))
        .count();
    let (most, at) = most_at_once(&spans);
    out.most_holders = most.len();
    if most.len() > permits as usize {
        let who: Vec<String> = most
            .iter()
            .map(|(slot, s)| format!("worker {} slot {slot} token {}", s.worker, s.token))
            .collect();
        out.report.violations.push(format!(
            "{} permit holders at once at {at} ms, with {permits} permits: {}",
            most.len(),
            who.join(", ")
        ));
    }
    out
}

/// Adds slot `slot`'s report into `total` (its acquires and epochs are counted once,
/// from the shared events, not per slot).
fn merge(total: &mut Report, r: &Report, slot: u32) {
    let once = (total.acquires, total.epochs);
    total.absorb(r, |v| format!("slot {slot}: {v}"));
    (total.acquires, total.epochs) = once;
}

/// The largest set of spans that overlap at one moment, and that moment. A span ends
/// before one starting in the same millisecond begins.
fn most_at_once(spans: &[(u32, TrustSpan)]) -> (Vec<(u32, TrustSpan)>, u64) {
    // (time, 0 = end / 1 = start, index)
    let mut edges: Vec<(u64, u8, usize)> = Vec::new();
    for (i, (_, s)) in spans.iter().enumerate() {
        if s.until_ms > s.from_ms {
            edges.push((s.from_ms, 1, i));
            edges.push((s.until_ms, 0, i));
        }
    }
    edges.sort_unstable();
    let mut open: Vec<usize> = Vec::new();
    let (mut best, mut at) = (Vec::new(), 0);
    for (t, kind, i) in edges {
        if kind == 0 {
            open.retain(|&j| j != i);
        } else {
            open.push(i);
            if open.len() > best.len() {
                best = open.clone();
                at = t;
            }
        }
    }
    (best.into_iter().map(|i| spans[i]).collect(), at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_events::{granted_slot, releasing};

    fn slots(runs: Vec<(u32, Vec<Event>)>) -> BTreeMap<u32, SlotRun> {
        runs.into_iter()
            .map(|(slot, events)| {
                (
                    slot,
                    SlotRun {
                        events,
                        rows: Vec::new(),
                    },
                )
            })
            .collect()
    }

    /// Two permits: two holders at once, each slot handed on after a release, is clean.
    #[test]
    fn two_holders_of_two_permits_are_clean() {
        let s = slots(vec![
            (
                0,
                vec![
                    granted_slot(0, 1, 1, 100, 600),
                    releasing(1, 1, 300),
                    granted_slot(0, 3, 2, 310, 900),
                ],
            ),
            (1, vec![granted_slot(1, 2, 1, 120, 700), releasing(2, 1, 650)]),
        ]);
        let r = check(2, &[], &s);
        assert!(r.report.is_clean(), "{:?}", r.report.violations);
        assert_eq!(r.most_holders, 2);
        assert_eq!(r.report.grants, 3);
    }

    /// A third holder while two permits are trusted is a violation, and so is a grant of
    /// a slot beyond the permits.
    #[test]
    fn a_third_holder_of_two_permits_is_a_violation() {
        let s = slots(vec![
            (0, vec![granted_slot(0, 1, 1, 100, 600)]),
            (1, vec![granted_slot(1, 2, 1, 120, 700)]),
            (2, vec![granted_slot(2, 3, 1, 200, 800)]),
        ]);
        let r = check(2, &[], &s);
        assert_eq!(r.most_holders, 3);
        assert!(
            r.report
                .violations
                .iter()
                .any(|v| v.starts_with("3 permit holders at once at 200 ms")),
            "{:?}",
            r.report.violations
        );
        assert!(
            r.report.violations.iter().any(|v| v.starts_with("slot 2 was granted")),
            "{:?}",
            r.report.violations
        );
    }

    /// The lease rules hold per slot: an early takeover of one slot is reported, named
    /// by its slot.
    #[test]
    fn an_early_takeover_of_a_slot_is_reported_with_its_slot() {
        let s = slots(vec![(
            1,
            vec![granted_slot(1, 1, 1, 100, 600), granted_slot(1, 2, 2, 300, 900)],
        )]);
        let r = check(2, &[], &s);
        assert!(
            r.report.violations.iter().any(|v| v.starts_with("slot 1: ")),
            "{:?}",
            r.report.violations
        );
    }
}
