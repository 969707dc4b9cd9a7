//! The independent checker: reads the workers' and the controller's histories and the
//! protected resource itself, and reports every violation of what leases and fences
//! promise.
//!
//! What it verifies (each a separate rule; every finding names the events involved):
//!
//! | rule | always | within one store epoch |
//! |------|--------|------------------------|
//! | accepted writes carry non-decreasing tokens in the resource's commit order | ✓ | |
//! | the writer changes only with a newer token (no two holders' writes interleave) | | ✓ |
//! | every resource row was sent by a worker, with that token (no phantom writes) | ✓ | |
//! | every acknowledged write is in the resource (none lost) | ✓ | |
//! | a refused write is not in the resource, and was refused for a token older than a token already in the resource | ✓ | |
//! | each token is granted to one holder | | ✓ |
//! | no grant while another holder with an older token still trusted its lease (no early takeover) | | ✓ |
//! | the store's record never goes back to an older token, and names the holder that token was granted to | | ✓ |
//! | a record is made vacant only by its own holder's release, or after the holder's deadline (no release or renewal touched a newer holder's lease) | | ✓ |
//!
//! An *epoch* is the time between two restarts that lost the store's data (a Redis
//! restart without persistence, a moto restart): the controller records them as
//! [`Event::Fault`] with `data_loss`. A store that forgets its records can grant a lease
//! again at once and reissue tokens; that is what an efficiency-only store (Redis)
//! states, so grant anomalies *across* such a restart are counted in
//! [`Report::explained`], never hidden, and never excuse a resource violation: the
//! resource rules hold across epochs.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::history::{Event, WriteOutcome};

/// Slack for millisecond rounding between two readings of the one system clock.
const CLOCK_SLACK_MS: u64 = 2;

/// One accepted write as the resource recorded it, in the resource's commit order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ResourceRow {
    /// The resource's own order (a serial id, assigned under the high-water row's lock).
    pub id: i64,
    /// The token the write carried.
    pub token: u64,
    /// The worker that sent it.
    pub worker: u32,
    /// The worker's sequence number.
    pub seq: u64,
    /// When the resource applied it (its clock; the same machine's clock).
    pub at_ms: u64,
}

/// What the checker found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    /// Acquire calls recorded (each makes attempts until granted, or its worker dies).
    pub acquires: usize,
    /// Grants recorded.
    pub grants: usize,
    /// Store epochs (1 + restarts that lost the store's data).
    pub epochs: usize,
    /// Observations of the lease record by the controller (on change).
    pub observations: usize,
    /// Fenced writes sent.
    pub writes_sent: usize,
    /// Writes the resource holds.
    pub writes_accepted: usize,
    /// Writes whose sender saw them accepted.
    pub writes_acknowledged: usize,
    /// Writes the fence refused.
    pub writes_refused: usize,
    /// Writes whose outcome the sender never learned (no answer, or the sender died).
    pub writes_unknown: usize,
    /// Writes sent by a holder after a newer token had been granted (deposed holders
    /// that did not know yet): how each ended.
    pub stale: OutcomeCounts,
    /// Grants whose token was below the resource's high-water mark when granted (only
    /// possible after the store lost its token counter): how their writes ended.
    pub reissued: OutcomeCounts,
    /// Grants counted in `reissued`.
    pub reissued_grants: usize,
    /// Grant anomalies across a data-loss restart (allowed by the store's stated grade,
    /// listed so a reader sees them).
    pub explained: Vec<String>,
    /// Grants the store-rules (one holder per token, no early takeover, the record's
    /// history) could not judge: their request went out before a data-loss restart and
    /// their reply came after it, so which instance granted them is unknown.
    pub unjudged: Vec<String>,
    /// Every violation, described.
    pub violations: Vec<String>,
}

impl Report {
    /// Adds `r`'s counts and findings into this report, each finding through `tag`.
    pub fn absorb(&mut self, r: &Report, tag: impl Fn(&String) -> String) {
        self.acquires += r.acquires;
        self.grants += r.grants;
        self.epochs += r.epochs;
        self.observations += r.observations;
        self.writes_sent += r.writes_sent;
        self.writes_accepted += r.writes_accepted;
        self.writes_acknowledged += r.writes_acknowledged;
        self.writes_refused += r.writes_refused;
        self.writes_unknown += r.writes_unknown;
        self.stale.absorb(&r.stale);
        self.reissued.absorb(&r.reissued);
        self.reissued_grants += r.reissued_grants;
        self.explained.extend(r.explained.iter().map(&tag));
        self.unjudged.extend(r.unjudged.iter().map(&tag));
        self.violations.extend(r.violations.iter().map(&tag));
    }
}

/// How a set of writes ended.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct OutcomeCounts {
    /// Writes sent.
    pub sent: usize,
    /// In the resource.
    pub accepted: usize,
    /// Refused by the fence.
    pub refused: usize,
    /// Outcome unknown to the sender and not in the resource.
    pub unknown: usize,
}

impl OutcomeCounts {
    /// Adds `other`'s counts into these.
    pub fn absorb(&mut self, other: &OutcomeCounts) {
        self.sent += other.sent;
        self.accepted += other.accepted;
        self.refused += other.refused;
        self.unknown += other.unknown;
    }
}

impl Report {
    /// True when no violation was found.
    pub fn is_clean(&self) -> bool {
        self.violations.is_empty()
    }
}

/// One grant and what its holder recorded about it.
#[derive(Debug, Clone)]
struct Tenure {
    worker: u32,
    token: u64,
    granted_at: u64,
    epoch: usize,
    valid_until: u64,
    releasing_at: Option<u64>,
    /// False when the grant's request went out before a data-loss restart and its reply
    /// came after it: either instance may have granted it, so its epoch is unknown.
    certain: bool,
}

impl Tenure {
    /// When the holder stopped trusting the grant: its last known validity deadline, or
    /// when it began releasing it (it writes nothing after that), whichever came first.
    fn trusted_until(&self) -> u64 {
        self.releasing_at.map_or(self.valid_until, |r| r.min(self.valid_until))
    }
}

/// Data-loss restarts, for assigning epochs.
struct Epochs {
    /// (began, ended) of each data-loss restart, sorted.
    resets: Vec<(u64, u64)>,
}

impl Epochs {
    /// The data-loss restarts among `events`' faults.
    fn of(events: &[Event]) -> Self {
        let mut resets: Vec<(u64, u64)> = events
            .iter()
            .filter_map(|e| match e {
                Event::Fault {
                    at_ms,
                    until_ms,
                    data_loss: true,
                    ..
                } => Some((*at_ms, *until_ms)),
                _ => None,
            })
            .collect();
        resets.sort_unstable();
        Self { resets }
    }

    /// The epoch of a grant whose request was sent no earlier than `sent_after` and
    /// whose reply was recorded at `reply`, and whether that is certain. The controller
    /// closes the workers' proxies before a data-loss restart begins and opens them
    /// after it ends, so a reply recorded by the end came from the old instance, and a
    /// request sent after the beginning reached the new one. A request sent before and
    /// answered after could have been granted by either (the store client may retry).
    fn of_grant(&self, sent_after: Option<u64>, reply: u64) -> (usize, bool) {
        let mut epoch = 0;
        let mut certain = true;
        for &(began, until) in &self.resets {
            if reply < until {
                continue;
            }
            epoch += 1;
            if sent_after.is_some_and(|s| s < began) {
                certain = false;
            }
        }
        (epoch, certain)
    }

    /// The epoch of a read answered at `at`. The controller's observer keeps only reads
    /// that began and ended while no data-loss restart was under way (it reads the clock
    /// before it checks), so a kept read answered at `at` came after every restart that
    /// ended by `at` and before every other (one beginning in the same millisecond too).
    fn of_read(&self, at: u64) -> usize {
        self.resets.iter().filter(|(_, until)| *until <= at).count()
    }
}

/// Checks histories against the resource's rows.
pub fn check(events: &[Event], rows: &[ResourceRow]) -> Report {
    let mut r = Report::default();
    let mut rows = rows.to_vec();
    rows.sort_by_key(|row| row.id);
    r.writes_accepted = rows.len();

    let epochs = Epochs::of(events);
    r.epochs = epochs.resets.len() + 1;
    r.acquires = events.iter().filter(|e| matches!(e, Event::Acquiring { .. })).count();

    check_resource(events, &rows, &mut r);
    let (tenures, write_tenure) = tenures(events, &epochs);
    r.grants = tenures.len();
    for t in tenures.iter().filter(|t| !t.certain) {
        r.unjudged.push(format!(
            "token {} granted to worker {} at {}: requested before a data-loss restart, answered after it",
            t.token, t.worker, t.granted_at
        ));
    }
    let certain: Vec<Tenure> = tenures.iter().filter(|t| t.certain).cloned().collect();
    check_grants(&certain, &mut r);
    check_interleaving(&rows, &tenures, &mut r);
    check_observations(events, &certain, &epochs, &mut r);
    count_stale_and_reissued(events, &rows, &tenures, &write_tenure, &mut r);
    r
}

/// One grant's trust, as its holder's history shows it: from the grant's reply until it
/// stopped trusting it (its last known validity deadline, or its release).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrustSpan {
    /// The holder.
    pub worker: u32,
    /// The grant's token.
    pub token: u64,
    /// When the grant's reply arrived.
    pub from_ms: u64,
    /// When the holder stopped trusting it.
    pub until_ms: u64,
}

/// The trust span of every grant in `events` whose store epoch is certain (grants
/// requested before and answered after a data-loss restart are left out, as the grant
/// rules leave them out).
pub fn trust_spans(events: &[Event]) -> Vec<TrustSpan> {
    let (tenures, _) = tenures(events, &Epochs::of(events));
    tenures
        .iter()
        .filter(|t| t.certain)
        .map(|t| TrustSpan {
            worker: t.worker,
            token: t.token,
            from_ms: t.granted_at,
            until_ms: t.trusted_until(),
        })
        .collect()
}

/// The writes whose sender learned how they ended, by worker and sequence number: the
/// token each carried, its outcome, and when the sender learned it.
fn writes_done(events: &[Event]) -> HashMap<(u32, u64), (u64, WriteOutcome, u64)> {
    events
        .iter()
        .filter_map(|e| match *e {
            Event::WriteDone {
                worker,
                token,
                seq,
                outcome,
                at_ms,
            } => Some(((worker, seq), (token, outcome, at_ms))),
            _ => None,
        })
        .collect()
}

/// The resource rules, which hold whatever the store did.
fn check_resource(events: &[Event], rows: &[ResourceRow], r: &mut Report) {
    // Accepted writes carry non-decreasing tokens in the resource's commit order.
    for pair in rows.windows(2) {
        if pair[1].token < pair[0].token {
            r.violations.push(format!(
                "resource accepted token {} (worker {} seq {}) after token {} (worker {} seq {})",
                pair[1].token, pair[1].worker, pair[1].seq, pair[0].token, pair[0].worker, pair[0].seq
            ));
        }
    }

    let mut sent: HashMap<(u32, u64), u64> = HashMap::new();
    for e in events {
        if let Event::WriteSent { worker, token, seq, .. } = e {
            sent.insert((*worker, *seq), *token);
        }
    }
    let done = writes_done(events);
    r.writes_sent = sent.len();
    let in_resource: HashSet<(u32, u64)> = rows.iter().map(|row| (row.worker, row.seq)).collect();
    for row in rows {
        match sent.get(&(row.worker, row.seq)) {
            Some(t) if *t == row.token => {}
            Some(t) => r.violations.push(format!(
                "resource row worker {} seq {} has token {}, the worker sent {t}",
                row.worker, row.seq, row.token
            )),
            None => r.violations.push(format!(
                "resource row worker {} seq {} (token {}) was never sent",
                row.worker, row.seq, row.token
            )),
        }
    }

    // The highest token in the resource at each moment, for judging refusals.
    let mut by_time: Vec<(u64, u64)> = rows.iter().map(|row| (row.at_ms, row.token)).collect();
    by_time.sort_unstable();
    let mut prefix_max = Vec::with_capacity(by_time.len());
    let mut m = 0;
    for (_, t) in &by_time {
        m = m.max(*t);
        prefix_max.push(m);
    }
    let high_water_by = |at: u64| -> u64 {
        let n = by_time.partition_point(|(t, _)| *t <= at);
        if n == 0 { 0 } else { prefix_max[n - 1] }
    };

    let mut done_sorted: Vec<_> = done.iter().collect();
    done_sorted.sort_unstable_by_key(|(k, _)| **k);
    for ((worker, seq), (token, outcome, at)) in done_sorted {
        match outcome {
            WriteOutcome::Accepted => {
                r.writes_acknowledged += 1;
                if !in_resource.contains(&(*worker, *seq)) {
                    r.violations.push(format!(
                        "acknowledged write worker {worker} seq {seq} (token {token}) is lost"
                    ));
                }
            }
            WriteOutcome::Refused => {
                r.writes_refused += 1;
                if in_resource.contains(&(*worker, *seq)) {
                    r.violations
                        .push(format!("refused write worker {worker} seq {seq} is in the resource"));
                }
                // A refusal is only for a token older than the high-water mark, which
                // some write with a newer token raised before the refusal's answer.
                let hw = high_water_by(at + CLOCK_SLACK_MS);
                if hw <= *token {
                    r.violations.push(format!(
                        "write worker {worker} seq {seq} refused, but no newer token than {token} had reached \
                         the resource (high-water mark {hw})"
                    ));
                }
            }
            WriteOutcome::Unknown => {}
        }
    }
    r.writes_unknown = sent
        .keys()
        .filter(|k| !in_resource.contains(k) && !matches!(done.get(k), Some((_, WriteOutcome::Refused, _))))
        .filter(|k| !matches!(done.get(k), Some((_, WriteOutcome::Accepted, _))))
        .count();
}

/// Every grant with what its holder recorded about it, in grant order, and the tenure
/// each write `(worker, seq)` was sent in.
fn tenures(events: &[Event], epochs: &Epochs) -> (Vec<Tenure>, HashMap<(u32, u64), usize>) {
    let mut index: HashMap<(u32, u64), usize> = HashMap::new();
    let mut writes: HashMap<(u32, u64), usize> = HashMap::new();
    let mut out: Vec<Tenure> = Vec::new();
    let mut sorted: Vec<&Event> = events.iter().collect();
    sorted.sort_by_key(|e| e.at_ms());
    for e in sorted {
        match e {
            Event::Granted {
                worker,
                token,
                at_ms,
                valid_until_ms,
                sent_after_ms,
                ..
            } => {
                // A worker can be granted the same token again after a data loss: that
                // is a new tenure, and later events of the token belong to it.
                let (epoch, certain) = epochs.of_grant(*sent_after_ms, *at_ms);
                let i = match index.get(&(*worker, *token)) {
                    Some(&i) if out[i].epoch == epoch => i,
                    _ => {
                        out.push(Tenure {
                            worker: *worker,
                            token: *token,
                            granted_at: *at_ms,
                            epoch,
                            valid_until: 0,
                            releasing_at: None,
                            certain,
                        });
                        index.insert((*worker, *token), out.len() - 1);
                        out.len() - 1
                    }
                };
                out[i].valid_until = out[i].valid_until.max(valid_until_ms.unwrap_or(0));
            }
            Event::WriteSent {
                worker,
                token,
                seq,
                valid_until_ms,
                ..
            } => {
                if let Some(&i) = index.get(&(*worker, *token)) {
                    out[i].valid_until = out[i].valid_until.max(valid_until_ms.unwrap_or(0));
                    writes.insert((*worker, *seq), i);
                }
            }
            Event::Releasing { worker, token, at_ms } => {
                if let Some(&i) = index.get(&(*worker, *token)) {
                    out[i].releasing_at.get_or_insert(*at_ms);
                }
            }
            _ => {}
        }
    }
    (out, writes)
}

/// Two holders' accepted writes never interleave: in commit order, the writer changes
/// only with a newer token. A change of writer at the same token means two holders had
/// it; only a reissue after a data loss explains that.
fn check_interleaving(rows: &[ResourceRow], tenures: &[Tenure], r: &mut Report) {
    let mut epochs_of: HashMap<(u32, u64), Vec<usize>> = HashMap::new();
    let mut uncertain: HashSet<(u32, u64)> = HashSet::new();
    for t in tenures {
        epochs_of.entry((t.worker, t.token)).or_default().push(t.epoch);
        if !t.certain {
            uncertain.insert((t.worker, t.token));
        }
    }
    for pair in rows.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        if a.token != b.token || a.worker == b.worker {
            continue;
        }
        if uncertain.contains(&(a.worker, a.token)) || uncertain.contains(&(b.worker, b.token)) {
            r.unjudged.push(format!(
                "resource accepted token {} from worker {} (seq {}) and then from worker {} (seq {}): \
                 a grant of unknown epoch",
                a.token, a.worker, a.seq, b.worker, b.seq
            ));
            continue;
        }
        let ea = epochs_of.get(&(a.worker, a.token)).cloned().unwrap_or_default();
        let eb = epochs_of.get(&(b.worker, b.token)).cloned().unwrap_or_default();
        let reissued = ea.iter().any(|x| eb.iter().any(|y| x != y));
        let text = format!(
            "resource accepted token {} from worker {} (seq {}) and then from worker {} (seq {})",
            a.token, a.worker, a.seq, b.worker, b.seq
        );
        if reissued {
            r.explained
                .push(format!("{text}: the token was reissued after a data loss"));
        } else {
            r.violations.push(format!("{text}: two holders' writes interleave"));
        }
    }
}

/// One holder per token, and no grant while an older holder still trusted its lease.
fn check_grants(tenures: &[Tenure], r: &mut Report) {
    // Each token granted to one holder, within an epoch; across epochs, a reissue.
    let mut owner: BTreeMap<u64, Vec<&Tenure>> = BTreeMap::new();
    for t in tenures {
        owner.entry(t.token).or_default().push(t);
    }
    for (token, holders) in &owner {
        for pair in holders.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            if a.worker == b.worker {
                continue;
            }
            if a.epoch == b.epoch {
                r.violations.push(format!(
                    "token {token} granted to workers {} (at {}) and {} (at {})",
                    a.worker, a.granted_at, b.worker, b.granted_at
                ));
            } else {
                r.explained.push(format!(
                    "token {token} granted to worker {} in epoch {} and again to worker {} in epoch {} \
                     (the store lost its token counter)",
                    a.worker, a.epoch, b.worker, b.epoch
                ));
            }
        }
    }

    // No early takeover: a grant with token t_B comes after every older token's holder
    // stopped trusting its lease (t_A < t_B => trusted_until_A <= granted_B).
    let max_epoch = tenures.iter().map(|t| t.epoch).max().unwrap_or(0);
    let mut earlier_epochs_until = 0u64;
    for epoch in 0..=max_epoch {
        let mut these: Vec<&Tenure> = tenures.iter().filter(|t| t.epoch == epoch).collect();
        these.sort_by_key(|t| (t.token, t.granted_at));
        // Prefix maximum of valid_until over strictly smaller tokens, with its witness.
        let mut best: Option<&Tenure> = None;
        let mut i = 0;
        while i < these.len() {
            let token = these[i].token;
            let mut j = i;
            while j < these.len() && these[j].token == token {
                let b = these[j];
                if let Some(a) =
                    best.filter(|a| a.trusted_until() > b.granted_at + CLOCK_SLACK_MS && a.worker != b.worker)
                {
                    r.violations.push(format!(
                        "early takeover: worker {} was granted token {} at {} while worker {} trusted token {} \
                         until {} ({} ms later)",
                        b.worker,
                        b.token,
                        b.granted_at,
                        a.worker,
                        a.token,
                        a.trusted_until(),
                        a.trusted_until() - b.granted_at
                    ));
                }
                if epoch > 0 && earlier_epochs_until > b.granted_at + CLOCK_SLACK_MS {
                    r.explained.push(format!(
                        "worker {} was granted token {} at {} in epoch {epoch} while a holder from an earlier \
                         epoch trusted its lease until {earlier_epochs_until} (the store forgot that lease)",
                        b.worker, b.token, b.granted_at
                    ));
                }
                j += 1;
            }
            for t in &these[i..j] {
                if best.is_none_or(|b| t.trusted_until() > b.trusted_until()) {
                    best = Some(t);
                }
            }
            i = j;
        }
        earlier_epochs_until = earlier_epochs_until.max(these.iter().map(|t| t.trusted_until()).max().unwrap_or(0));
    }
}

/// The store's record as the controller saw it.
fn check_observations(events: &[Event], tenures: &[Tenure], epochs: &Epochs, r: &mut Report) {
    let mut obs: Vec<(u64, Option<u32>, u64)> = events
        .iter()
        .filter_map(|e| match e {
            Event::Observed { holder, token, at_ms } => Some((*at_ms, *holder, *token)),
            _ => None,
        })
        .collect();
    obs.sort_by_key(|o| o.0);
    r.observations = obs.len();
    let by_token: HashMap<(usize, u64), &Tenure> = tenures.iter().map(|t| ((t.epoch, t.token), t)).collect();
    let mut last: Option<(usize, u64, u64)> = None;
    for (at, holder, token) in obs {
        let epoch = epochs.of_read(at);
        if let Some((e, t, when)) = last {
            if e == epoch && token < t {
                r.violations.push(format!(
                    "the store's record went back from token {t} (seen at {when}) to token {token} (seen at {at})"
                ));
            }
        }
        last = Some((epoch, token, at));
        let Some(tenure) = by_token.get(&(epoch, token)) else {
            continue;
        };
        match holder {
            Some(w) if w != tenure.worker => r.violations.push(format!(
                "the store's record names worker {w} with token {token} (at {at}), which was granted to worker {}",
                tenure.worker
            )),
            Some(_) => {}
            None => {
                let released = tenure.releasing_at.is_some_and(|t| t <= at + CLOCK_SLACK_MS);
                if !released && tenure.valid_until > at + CLOCK_SLACK_MS {
                    r.violations.push(format!(
                        "the lease of worker {} (token {token}) was made vacant (seen at {at}) while its holder \
                         trusted it until {} and had not released it",
                        tenure.worker, tenure.valid_until
                    ));
                }
            }
        }
    }
}

/// Writes by deposed holders, and grants below the resource's high-water mark.
fn count_stale_and_reissued(
    events: &[Event],
    rows: &[ResourceRow],
    tenures: &[Tenure],
    write_tenure: &HashMap<(u32, u64), usize>,
    r: &mut Report,
) {
    let in_resource: HashSet<(u32, u64)> = rows.iter().map(|row| (row.worker, row.seq)).collect();
    let done = writes_done(events);
    let tally = |c: &mut OutcomeCounts, worker: u32, seq: u64| {
        c.sent += 1;
        if in_resource.contains(&(worker, seq)) {
            c.accepted += 1;
        } else if matches!(done.get(&(worker, seq)), Some((_, WriteOutcome::Refused, _))) {
            c.refused += 1;
        } else {
            c.unknown += 1;
        }
    };

    // Grants per epoch in time order, with the running maximum token.
    let mut grants: BTreeMap<usize, Vec<(u64, u64)>> = BTreeMap::new();
    for t in tenures {
        grants.entry(t.epoch).or_default().push((t.granted_at, t.token));
    }
    for g in grants.values_mut() {
        g.sort_unstable();
        let mut m = 0;
        for x in g.iter_mut() {
            m = m.max(x.1);
            x.1 = m;
        }
    }
    let newest_granted = |epoch: usize, at: u64| -> u64 {
        grants.get(&epoch).map_or(0, |g| {
            let n = g.partition_point(|(t, _)| *t < at);
            if n == 0 { 0 } else { g[n - 1].1 }
        })
    };

    // The resource's high-water mark over time.
    let mut by_time: Vec<(u64, u64)> = rows.iter().map(|row| (row.at_ms, row.token)).collect();
    by_time.sort_unstable();
    let mut m = 0;
    for x in &mut by_time {
        m = m.max(x.1);
        x.1 = m;
    }
    let high_water_before = |at: u64| -> u64 {
        let n = by_time.partition_point(|(t, _)| *t < at);
        if n == 0 { 0 } else { by_time[n - 1].1 }
    };
    let reissued: Vec<bool> = tenures
        .iter()
        .map(|t| t.token < high_water_before(t.granted_at))
        .collect();
    r.reissued_grants = reissued.iter().filter(|b| **b).count();

    for e in events {
        if let Event::WriteSent { worker, seq, at_ms, .. } = e {
            let Some(&i) = write_tenure.get(&(*worker, *seq)) else {
                continue;
            };
            let t = &tenures[i];
            if newest_granted(t.epoch, *at_ms) > t.token {
                tally(&mut r.stale, *worker, *seq);
            }
            if reissued[i] {
                tally(&mut r.reissued, *worker, *seq);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_events::{granted, releasing};

    fn sent(worker: u32, token: u64, seq: u64, at_ms: u64, until: u64) -> Event {
        Event::WriteSent {
            worker,
            token,
            seq,
            at_ms,
            valid_until_ms: Some(until),
        }
    }
    fn done(worker: u32, token: u64, seq: u64, outcome: WriteOutcome, at_ms: u64) -> Event {
        Event::WriteDone {
            worker,
            token,
            seq,
            outcome,
            at_ms,
        }
    }
    fn row(id: i64, token: u64, worker: u32, seq: u64, at_ms: u64) -> ResourceRow {
        ResourceRow {
            id,
            token,
            worker,
            seq,
            at_ms,
        }
    }
    fn observed(holder: Option<u32>, token: u64, at_ms: u64) -> Event {
        Event::Observed { holder, token, at_ms }
    }
    fn data_loss(at_ms: u64, until_ms: u64) -> Event {
        Event::Fault {
            kind: "store_restart".into(),
            worker: None,
            token: None,
            slot: None,
            at_ms,
            until_ms,
            data_loss: true,
        }
    }

    /// Worker 1 holds token 1 until 1000 and writes; worker 2 takes over at 1100 with
    /// token 2 and writes; worker 1 wakes and its write is refused.
    fn clean() -> (Vec<Event>, Vec<ResourceRow>) {
        let events = vec![
            granted(1, 1, 10, 1000),
            observed(Some(1), 1, 20),
            sent(1, 1, 1, 30, 1000),
            done(1, 1, 1, WriteOutcome::Accepted, 40),
            granted(2, 2, 1100, 2000),
            observed(Some(2), 2, 1150),
            sent(2, 2, 1, 1200, 2000),
            done(2, 2, 1, WriteOutcome::Accepted, 1210),
            sent(1, 1, 2, 1300, 1000),
            done(1, 1, 2, WriteOutcome::Refused, 1310),
            releasing(2, 2, 1400),
            observed(None, 2, 1420),
        ];
        (events, vec![row(1, 1, 1, 1, 35), row(2, 2, 2, 1, 1205)])
    }

    #[test]
    fn a_clean_history_passes() {
        let (events, rows) = clean();
        let r = check(&events, &rows);
        assert!(r.violations.is_empty(), "{r:?}");
        assert_eq!((r.grants, r.writes_accepted, r.writes_refused), (2, 2, 1));
        assert_eq!(r.stale.sent, 1);
        assert_eq!(r.stale.refused, 1);
        assert_eq!(r.observations, 3);
    }

    fn violations_of(events: &[Event], rows: &[ResourceRow]) -> String {
        check(events, rows).violations.join("\n")
    }

    /// The violations of [`clean`] after `edit` changed its events and rows.
    fn violations_edited(edit: impl FnOnce(&mut Vec<Event>, &mut Vec<ResourceRow>)) -> String {
        let (mut events, mut rows) = clean();
        edit(&mut events, &mut rows);
        violations_of(&events, &rows)
    }

    /// The violations of [`clean`] with `extra` events appended.
    fn violations_with(extra: impl IntoIterator<Item = Event>) -> String {
        violations_edited(|events, _| events.extend(extra))
    }

    /// The violations of [`clean`] with event `i` replaced by `e`.
    fn violations_replacing(i: usize, e: Event) -> String {
        violations_edited(|events, _| events[i] = e)
    }

    /// Asserts that the violations `text` say `what`.
    fn assert_reports(text: &str, what: &str) {
        assert!(text.contains(what), "{text}");
    }

    /// Drops worker 2's release and the vacancy it left: worker 2 holds to the end.
    fn without_release(events: &mut Vec<Event>) {
        events.retain(|e| !matches!(e, Event::Releasing { .. } | Event::Observed { holder: None, .. }));
    }

    #[test]
    fn an_accepted_regression_is_reported() {
        let text = violations_edited(|events, rows| {
            events[9] = done(1, 1, 2, WriteOutcome::Accepted, 1310);
            rows.push(row(3, 1, 1, 2, 1305));
        });
        assert_reports(&text, "accepted token 1 (worker 1 seq 2) after token 2");
    }

    #[test]
    fn interleaved_writes_of_one_token_are_reported() {
        // Worker 3 also writes with token 2, after worker 2, with no grant of its own.
        let text = violations_edited(|events, rows| {
            events.push(sent(3, 2, 1, 1250, 2000));
            events.push(done(3, 2, 1, WriteOutcome::Accepted, 1260));
            rows.push(row(3, 2, 3, 1, 1255));
        });
        assert_reports(
            &text,
            "token 2 from worker 2 (seq 1) and then from worker 3 (seq 1): two holders",
        );
    }

    #[test]
    fn a_lost_or_phantom_write_is_reported() {
        let (events, rows) = clean();
        let text = violations_of(&events, &rows[..1]);
        assert!(text.contains("worker 2 seq 1 (token 2) is lost"), "{text}");
        let mut more = rows.clone();
        more.push(row(3, 2, 2, 9, 1500));
        let text = violations_of(&events, &more);
        assert!(text.contains("seq 9 (token 2) was never sent"), "{text}");
    }

    #[test]
    fn a_refusal_without_a_newer_token_is_reported() {
        let (mut events, rows) = clean();
        // Worker 2's own write refused: nothing newer than 2 ever wrote.
        events[7] = done(2, 2, 1, WriteOutcome::Refused, 1210);
        let text = violations_of(&events, &rows[..1]);
        assert!(text.contains("no newer token than 2"), "{text}");
        // Worker 1's refusal answered before token 2 reached the resource.
        let text = violations_replacing(9, done(1, 1, 2, WriteOutcome::Refused, 1100));
        assert!(text.contains("worker 1 seq 2 refused"), "{text}");
    }

    #[test]
    fn a_double_grant_and_an_early_takeover_are_reported() {
        let text = violations_with([granted(3, 2, 1500, 2500)]);
        assert!(text.contains("token 2 granted to workers 2 (at 1100) and 3"), "{text}");
        // Worker 2 granted at 900, while worker 1 trusted token 1 until 1000.
        let text = violations_replacing(4, granted(2, 2, 900, 2000));
        assert!(
            text.contains("early takeover: worker 2 was granted token 2 at 900"),
            "{text}"
        );
    }

    #[test]
    fn a_grant_right_after_a_release_is_no_early_takeover() {
        let (mut events, rows) = clean();
        // Worker 2 released at 1400 (it trusted token 2 until 2000); worker 3 at 1410.
        events.push(granted(3, 3, 1410, 2400));
        assert!(check(&events, &rows).violations.is_empty());
        // Without the release it would be early.
        without_release(&mut events);
        let text = violations_of(&events, &rows);
        assert!(
            text.contains("early takeover: worker 3 was granted token 3 at 1410"),
            "{text}"
        );
    }

    #[test]
    fn the_record_going_back_or_vacated_under_its_holder_is_reported() {
        let text = violations_with([observed(Some(1), 1, 1430)]);
        assert!(text.contains("went back from token 2"), "{text}");
        // Vacated at 1250 while worker 2 trusted it until 2000 and never released.
        let text = violations_with([observed(None, 2, 1250)]);
        assert!(text.contains("made vacant (seen at 1250)"), "{text}");
        let text = violations_replacing(5, observed(Some(3), 2, 1150));
        assert!(text.contains("names worker 3 with token 2"), "{text}");
    }

    #[test]
    fn a_data_loss_separates_epochs_but_never_excuses_the_resource() {
        // Redis restarted at 1500-1600: the counter restarts; worker 3 gets token 1
        // again while worker 2 still trusts token 2. Its write is refused.
        let (mut events, rows) = clean();
        without_release(&mut events);
        events.push(data_loss(1500, 1600));
        events.push(granted(3, 1, 1700, 2700));
        events.push(sent(3, 1, 1, 1710, 2700));
        events.push(done(3, 1, 1, WriteOutcome::Refused, 1720));
        // Read in the millisecond the restart began: from before it.
        events.push(observed(Some(2), 2, 1500));
        events.push(observed(Some(3), 1, 1705));
        let r = check(&events, &rows);
        assert!(r.violations.is_empty(), "{r:?}");
        assert_eq!(r.epochs, 2);
        assert_eq!(r.reissued_grants, 1);
        assert_eq!(r.reissued.refused, 1);
        let text = r.explained.join("\n");
        assert!(
            text.contains("token 1 granted to worker 1 in epoch 0 and again to worker 3"),
            "{text}"
        );
        assert!(text.contains("earlier epoch trusted its lease until 2000"), "{text}");
        // The same reissued write accepted is a violation, restart or not.
        let mut bad = rows.clone();
        bad.push(row(3, 1, 3, 1, 1715));
        events.pop();
        events.pop();
        events.push(done(3, 1, 1, WriteOutcome::Accepted, 1720));
        let text = violations_of(&events, &bad);
        assert!(
            text.contains("accepted token 1 (worker 3 seq 1) after token 2"),
            "{text}"
        );
        // The same worker granted the same token again after a restart is a new tenure:
        // its validity does not reach back into the first one.
        let (mut events, rows) = clean();
        without_release(&mut events);
        events.push(granted(3, 3, 2100, 2250));
        events.push(data_loss(2300, 2400));
        events.push(granted(2, 2, 2500, 3500));
        events.push(sent(2, 2, 2, 2510, 3500));
        let r = check(&events, &rows);
        assert!(r.violations.is_empty(), "{r:?}");
        assert_eq!(r.grants, 4, "{r:?}");
        // Without the restart, the same grant is a double grant and an early takeover.
        let text = violations_with([granted(3, 1, 1700, 2700)]);
        assert!(text.contains("token 1 granted to workers 1"), "{text}");
    }

    #[test]
    fn a_grant_straddling_a_data_loss_restart_is_counted_not_judged() {
        let straddling = |at_ms, sent_after| Event::Granted {
            worker: 3,
            token: 1,
            at_ms,
            valid_until_ms: Some(2400),
            sent_after_ms: Some(sent_after),
            slot: None,
        };
        // Restart 1500-1600. Requested at 1450 (before the proxies closed), answered at
        // 1650 (after they opened): either instance may have granted token 1 again.
        let (mut events, rows) = clean();
        without_release(&mut events);
        events.push(data_loss(1500, 1600));
        events.push(straddling(1650, 1450));
        let r = check(&events, &rows);
        assert!(r.violations.is_empty(), "{r:?}");
        assert_eq!(r.unjudged.len(), 1, "{r:?}");
        // Answered at 1580, before the proxies opened: the old instance granted it, in
        // epoch 0, where token 1 was worker 1's: a double grant.
        let (mut events, rows) = clean();
        events.push(data_loss(1500, 1600));
        events.push(straddling(1580, 1450));
        let r = check(&events, &rows);
        assert!(r.unjudged.is_empty(), "{r:?}");
        let text = r.violations.join("\n");
        assert!(text.contains("token 1 granted to workers 1"), "{text}");
        // Requested at 1550, after the proxies closed: the new instance granted it.
        let (mut events, rows) = clean();
        without_release(&mut events);
        events.push(data_loss(1500, 1600));
        events.push(straddling(1650, 1550));
        let r = check(&events, &rows);
        assert!(r.violations.is_empty() && r.unjudged.is_empty(), "{r:?}");
        assert_eq!(r.reissued_grants, 1, "{r:?}");
    }
}
