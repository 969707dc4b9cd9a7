//! The renewal driver: one task per client renews every lease the client holds.
//!
//! Leases sit in one ordered schedule keyed by their next wake-up (renewal due, or
//! validity deadline while a renewal is in flight). The driver sleeps until the
//! earliest, renews what is due with bounded concurrency, and ends leases whose
//! deadline passed with no successful renewal. Holding 10,000 leases costs 10,000
//! schedule entries, not 10,000 tasks or timers.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::{FuturesUnordered, StreamExt};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::decision::{self, ConflictVerdict, Policy};
use crate::lease::{HeldState, LeaseShared};
use crate::mailbox::{Board, Command};
use crate::{
    Error, FencingToken, HolderId, LeaseName, LossCause, Result,
    clock::WallClock,
    store::{CasOutcome, CasStore, Current, LeaseRecord, Renewal, Stored, Version},
};

/// What the driver needs from its client.
pub(crate) struct DriverCtx {
    pub(crate) store: Arc<dyn CasStore>,
    pub(crate) policy: Policy,
    pub(crate) wall: Arc<dyn WallClock>,
    pub(crate) seen: Arc<crate::seen::SeenCache>,
    pub(crate) jitter: Arc<crate::backoff::Jitter>,
    pub(crate) max_in_flight: usize,
}

struct Entry {
    shared: Arc<LeaseShared>,
    renew_at: Instant,
    wake: Instant,
    in_flight: bool,
    attempt: u32,
    last_error: Option<LossCause>,
}

/// What the driver owns that must not vanish silently: its leases, its board and its
/// channel. Dropped before the driver finished (the runtime it ran on shut down while
/// leases were held), it ends every lease it was renewing and every grant left on its
/// board with [`LossCause::DriverStopped`], and every lease whose guard was dropped with
/// [`LossCause::Released`]: nobody renews them any more, and their holders (and the
/// work given their [`crate::Lease::cancellation`]) must hear it now, not never.
struct EndOnDrop {
    rx: mpsc::UnboundedReceiver<Command>,
    board: Arc<Board>,
    leases: HashMap<u64, Entry>,
}

impl Drop for EndOnDrop {
    fn drop(&mut self) {
        // Closed before the board is taken: a grant pushed after the take finds the
        // channel closed ([`crate::mailbox::Mailbox::register`] looks after its push)
        // and is given back by its caller; one pushed before is taken here.
        self.rx.close();
        while let Ok(cmd) = self.rx.try_recv() {
            if let Command::Release(lease) = cmd {
                lease.end(LossCause::Released);
            }
        }
        let queued = self.board.take();
        for lease in queued.forget {
            lease.end(LossCause::Released);
        }
        for shared in queued.register.iter().chain(self.leases.values().map(|e| &e.shared)) {
            shared.end(LossCause::DriverStopped);
        }
    }
}

enum Done {
    /// One renewal request's answers: each lease with when its renewal was sent.
    Renewals(Vec<(Arc<LeaseShared>, Instant, RenewResult)>),
    Release,
}

enum RenewResult {
    Renewed(Stored),
    Lost(LossCause),
    Failed(Error),
}

/// When the driver first looks at a new grant: its renewal, or its deadline or cap if
/// either comes first.
pub(crate) fn first_wake(shared: &LeaseShared) -> Instant {
    let HeldState {
        valid_until, renew_at, ..
    } = shared.state();
    capped(shared, renew_at.min(valid_until))
}

/// Runs until every handle on it (client and guards) is gone and no work is in flight.
/// Grants to renew and leases released by their guards arrive on `board`
/// ([`crate::mailbox`]); the channel wakes it for them when they cannot wait.
pub(crate) fn run(
    ctx: Arc<DriverCtx>,
    rx: mpsc::UnboundedReceiver<Command>,
    board: Arc<Board>,
) -> impl Future<Output = ()> + Send + 'static {
    // Owned by the future from the start: one dropped before its first poll ends what
    // was left on the board too.
    drive(
        ctx,
        EndOnDrop {
            rx,
            board,
            leases: HashMap::new(),
        },
    )
}

async fn drive(ctx: Arc<DriverCtx>, mut owned: EndOnDrop) {
    let board = owned.board.clone();
    let EndOnDrop { rx, leases, .. } = &mut owned;
    let mut schedule: BTreeSet<(Instant, u64)> = BTreeSet::new();
    let mut work: FuturesUnordered<BoxFuture<'static, Done>> = FuturesUnordered::new();
    let mut renewals_in_flight = 0usize;
    let mut open = true;
    // The longest TTL registered so far: bounds how far ahead `coalesce` looks.
    let mut longest_ttl = Duration::ZERO;
    // With nothing left to renew, the driver still sleeps until the latest wake-up it
    // had planned for a lease released meanwhile, rather than until a message: a
    // caller wakes it only for a grant due before its deadline ([`crate::mailbox`]),
    // so a client that acquires and releases faster than the driver turns would
    // otherwise wake it on every acquire (the released grant never scheduled, every
    // next grant found the driver asleep with no deadline).
    let mut idle_until: Option<Instant> = None;

    loop {
        let queued = board.take();
        for shared in queued.register {
            if shared.lost.is_cancelled() {
                // Released (or lost) before the driver saw it; its first renewal still
                // keeps the driver's deadline (`idle_until`).
                idle_until = idle_until.max(Some(first_wake(&shared)));
                continue;
            }
            let renew_at = shared.state().renew_at;
            longest_ttl = longest_ttl.max(shared.ttl.get());
            let wake = first_wake(&shared);
            schedule.insert((wake, shared.id));
            leases.insert(
                shared.id,
                Entry {
                    shared,
                    renew_at,
                    wake,
                    in_flight: false,
                    attempt: 0,
                    last_error: None,
                },
            );
        }
        for lease in queued.forget {
            idle_until = idle_until.max(scheduled(leases, &lease));
            forget(leases, &mut schedule, &lease);
        }
        if !open && leases.is_empty() && work.is_empty() {
            break;
        }
        idle_until = idle_until.filter(|t| *t > Instant::now());
        let next_wake = schedule.first().map(|(t, _)| *t).or(idle_until);
        if board.sleep_until(next_wake) {
            // Left on the board while this turn ran: take it before sleeping.
            continue;
        }
        tokio::select! {
            // Biased: a fixed polling order keeps seeded simulations exactly replayable.
            biased;
            cmd = rx.recv(), if open => match cmd {
                None => open = false,
                Some(Command::Release(lease)) => {
                    idle_until = idle_until.max(scheduled(leases, &lease));
                    if let Some(st) = forget(leases, &mut schedule, &lease) {
                        work.push(Box::pin(release(ctx.clone(), lease, st.version, st.record)));
                    }
                }
                Some(Command::Wake) => {}
            },
            Some(done) = work.next(), if !work.is_empty() => match done {
                Done::Release => {}
                Done::Renewals(answers) => {
                    renewals_in_flight -= 1;
                    for (shared, sent_at, result) in answers {
                        on_renewal(&ctx, leases, &mut schedule, &mut work, shared, sent_at, result);
                    }
                }
            },
            () = sleep_until_opt(next_wake), if next_wake.is_some() => {
                let now = Instant::now();
                let batch = ctx.store.renewal_batch().max(1);
                // The leases whose renewal is sent now, `batch` to a request.
                let mut due: Vec<Arc<LeaseShared>> = Vec::new();
                while let Some(&(t, id)) = schedule.first() {
                    if t > now { break; }
                    schedule.remove(&(t, id));
                    let Some(e) = leases.get_mut(&id) else { continue };
                    let valid_until = e.shared.valid_until();
                    if e.shared.lost.is_cancelled() {
                        leases.remove(&id);
                        continue;
                    }
                    // Renewing stops once the store keeps the grant until the cap anyway.
                    let at_cap = reaches_cap(&ctx.policy, &e.shared, valid_until);
                    if e.shared.hold_until.is_some_and(|h| now >= h) || (at_cap && !e.in_flight && now >= valid_until) {
                        e.shared.end(LossCause::MaxHoldReached);
                        leases.remove(&id);
                        continue;
                    }
                    if now >= valid_until {
                        // A renewal still unanswered at the deadline may or may not have applied.
                        let cause = if e.in_flight { LossCause::OutcomeUnknown } else { e.last_error.clone().unwrap_or(LossCause::Expired) };
                        e.shared.end(cause);
                        leases.remove(&id);
                        continue;
                    }
                    if at_cap && !e.in_flight {
                        e.wake = capped(&e.shared, valid_until);
                    } else if !e.in_flight && now >= e.renew_at {
                        if renewals_in_flight + (due.len() + 1).div_ceil(batch) <= ctx.max_in_flight {
                            e.in_flight = true;
                            due.push(e.shared.clone());
                            e.wake = valid_until;
                        } else {
                            e.wake = (now + Duration::from_millis(1)).min(valid_until);
                        }
                    } else {
                        e.wake = if e.in_flight { valid_until } else { e.renew_at.min(valid_until) };
                    }
                    e.wake = capped(&e.shared, e.wake);
                    schedule.insert((e.wake, id));
                }
                if batch > 1 && !due.is_empty() {
                    coalesce(leases, &mut schedule, &mut due, batch, now, longest_ttl);
                }
                for chunk in due.chunks(batch) {
                    renewals_in_flight += 1;
                    work.push(Box::pin(renew(ctx.clone(), chunk.to_vec())));
                }
            }
        }
    }
}

/// How far ahead the driver looks for renewals to send along with those due now, at most.
const COALESCE_HORIZON: Duration = Duration::from_secs(30);

/// Fills the room left in the last request of `due` with the leases whose renewal comes
/// due soon: within a tenth of their TTL (renewed that much early, each still valid
/// from when its own renewal is sent). No request is added; later ones are saved.
///
/// A lease waiting for its renewal is scheduled no later than its renewal is due, so
/// nothing past a tenth of `longest_ttl` can be picked, and the scan stops there
/// rather than at [`COALESCE_HORIZON`], which held every lease of a 15 s TTL.
fn coalesce(
    leases: &mut HashMap<u64, Entry>,
    schedule: &mut BTreeSet<(Instant, u64)>,
    due: &mut Vec<Arc<LeaseShared>>,
    batch: usize,
    now: Instant,
    longest_ttl: Duration,
) {
    let room = due.len().div_ceil(batch) * batch - due.len();
    if room == 0 {
        return;
    }
    let horizon = now + COALESCE_HORIZON.min(longest_ttl / 10);
    let mut picked = Vec::with_capacity(room);
    for &(t, id) in schedule.range(..=(horizon, u64::MAX)) {
        if picked.len() == room {
            break;
        }
        let Some(e) = leases.get(&id) else { continue };
        // Leases with a cap keep their own schedule (renewing stops short of the cap).
        let soon = e.renew_at <= now + e.shared.ttl.get() / 10;
        if !e.in_flight && soon && e.shared.hold_until.is_none() && !e.shared.lost.is_cancelled() {
            picked.push((t, id));
        }
    }
    for (t, id) in picked {
        schedule.remove(&(t, id));
        let Some(e) = leases.get_mut(&id) else { continue };
        e.in_flight = true;
        e.wake = e.shared.valid_until();
        schedule.insert((e.wake, id));
        due.push(e.shared.clone());
    }
}

/// Stops renewing `lease` and ends it as released: the state to release it from, unless
/// it was taken over (nothing of ours is left to release).
fn forget(
    leases: &mut HashMap<u64, Entry>,
    schedule: &mut BTreeSet<(Instant, u64)>,
    lease: &Arc<LeaseShared>,
) -> Option<HeldState> {
    if let Some(e) = leases.remove(&lease.id) {
        schedule.remove(&(e.wake, e.shared.id));
    }
    let taken = matches!(lease.cause.get(), Some(LossCause::TakenOver { .. }));
    lease.end(LossCause::Released);
    (!taken).then(|| lease.state())
}

/// When the driver planned to look at `lease` next, if it schedules it.
fn scheduled(leases: &HashMap<u64, Entry>, lease: &LeaseShared) -> Option<Instant> {
    leases.get(&lease.id).map(|e| e.wake)
}

async fn sleep_until_opt(t: Option<Instant>) {
    if let Some(t) = t {
        tokio::time::sleep_until(t).await;
    }
}

/// `valid_until - (ttl - margin)`. When the store vouched for the whole TTL
/// (`valid_until = sent + ttl - margin`), that is when the grant or renewal behind
/// `valid_until` was sent. When it vouched for less ([`Stored::remaining`]: a window
/// shorter than the TTL, as ZooKeeper answers; `valid_until = sent + window - margin`),
/// it is `sent + window - ttl`, earlier than the send: adding the TTL back gives
/// `sent + window` either way (for a window no shorter than the margin), the least time
/// the store keeps the record, which is what [`reaches_cap`] asks of it.
fn sent_at(policy: &Policy, shared: &LeaseShared, valid_until: Instant) -> Instant {
    valid_until - shared.ttl.get().saturating_sub(policy.margin(shared.ttl))
}

/// True when the lease has a cap and the store keeps its last write at least until
/// then (for the window it vouched for, which runs from after the send): no renewal is
/// needed, nor made.
fn reaches_cap(policy: &Policy, shared: &LeaseShared, valid_until: Instant) -> bool {
    shared
        .hold_until
        .is_some_and(|h| h <= sent_at(policy, shared, valid_until) + shared.ttl.get())
}

/// `t`, or the lease's cap if that comes first.
fn capped(shared: &LeaseShared, t: Instant) -> Instant {
    shared.hold_until.map_or(t, |h| t.min(h))
}

fn on_renewal(
    ctx: &Arc<DriverCtx>,
    leases: &mut HashMap<u64, Entry>,
    schedule: &mut BTreeSet<(Instant, u64)>,
    work: &mut FuturesUnordered<BoxFuture<'static, Done>>,
    shared: Arc<LeaseShared>,
    sent_at: Instant,
    result: RenewResult,
) {
    let id = shared.id;
    let Some(e) = leases.get_mut(&id) else {
        // The lease ended (deadline passed, or released) while this renewal was in
        // flight. If it landed, the store still names us: give it back, unless the
        // hold was capped (the driver leaves a capped lease to expire; only its guard's
        // release or drop frees it early, on the version it last saw or a newer one).
        let capped_end = matches!(shared.cause.get(), Some(LossCause::MaxHoldReached));
        if let (RenewResult::Renewed(s), false) = (result, capped_end) {
            work.push(Box::pin(release(ctx.clone(), shared, s.version, s.record)));
        }
        return;
    };
    schedule.remove(&(e.wake, id));
    e.in_flight = false;
    let now = Instant::now();
    match result {
        RenewResult::Renewed(s) => {
            let old_valid_until = e.shared.valid_until();
            let window = Policy::window(e.shared.ttl, s.remaining);
            let valid_until = Instant::from_std(ctx.policy.valid_within(sent_at.into_std(), e.shared.ttl, window));
            let renew_at = Instant::from_std(ctx.policy.renew_within(sent_at.into_std(), window));
            metrics::counter!(crate::observe::RENEWALS).increment(1);
            metrics::histogram!(crate::observe::RENEWAL_SLACK)
                .record(old_valid_until.saturating_duration_since(now).as_secs_f64());
            e.shared.set_state(HeldState {
                version: s.version,
                record: s.record,
                valid_until,
                renew_at,
            });
            e.renew_at = renew_at;
            e.attempt = 0;
            e.last_error = None;
        }
        RenewResult::Lost(cause) => {
            e.shared.end(cause);
            leases.remove(&id);
            return;
        }
        RenewResult::Failed(err) => {
            let cause = if err.is_retryable() {
                LossCause::StoreUnreachable
            } else if err.is_indeterminate() {
                LossCause::OutcomeUnknown
            } else {
                e.shared.end(LossCause::StoreError(err.to_string()));
                leases.remove(&id);
                return;
            };
            tracing::debug!(lease = %e.shared.name, error = %err, "renewal failed; retrying");
            e.last_error = Some(cause);
            e.attempt += 1;
            let pause = ctx
                .jitter
                .exponential(e.attempt, e.shared.ttl.get() / 20, e.shared.ttl.get() / 6);
            e.renew_at = now + pause;
        }
    }
    e.wake = capped(&e.shared, e.renew_at.min(e.shared.valid_until()));
    schedule.insert((e.wake, id));
}

/// Sends the renewals of `leases`: one [`CasStore::renew`] for a single lease, one
/// [`CasStore::renew_many`] for several; a conflict is then settled lease by lease.
async fn renew(ctx: Arc<DriverCtx>, leases: Vec<Arc<LeaseShared>>) -> Done {
    if let [shared] = leases.as_slice() {
        let (sent_at, result) = renew_one(&ctx, shared, shared.state(), None).await;
        return Done::Renewals(vec![(shared.clone(), sent_at, result)]);
    }
    let states: Vec<_> = leases.iter().map(|l| l.state()).collect();
    let wall_now = ctx.wall.now_ms();
    let batch: Vec<Renewal> = leases
        .iter()
        .zip(&states)
        .map(|(l, st)| Renewal {
            name: l.name.clone(),
            version: st.version.clone(),
            record: decision::renewal(&st.record, l.ttl, wall_now),
        })
        .collect();
    let sent_at = Instant::now();
    let mut outcomes = ctx.store.renew_many(&batch).await.into_iter();
    let mut answers = Vec::with_capacity(leases.len());
    for (shared, st) in leases.into_iter().zip(states) {
        // A store that answers fewer outcomes than it was asked: those renewals may or
        // may not have applied.
        let outcome = outcomes.next().unwrap_or_else(|| {
            Err(Error::Indeterminate {
                message: "the store answered fewer renewals than the batch held".into(),
                source: None,
            })
        });
        let (at, result) = renew_one(&ctx, &shared, st, Some((sent_at, outcome))).await;
        answers.push((shared, at, result));
    }
    Done::Renewals(answers)
}

/// One lease's renewal, from `first` (the answer of a batched request, sent at its
/// instant) or from a request of its own; a conflict that shows the lease still ours
/// under a newer version (an earlier renewal whose outcome was unknown applied) is
/// retried on that version. Returns when the renewal that decided was sent.
async fn renew_one(
    ctx: &DriverCtx,
    shared: &LeaseShared,
    mut st: HeldState,
    mut first: Option<(Instant, Result<CasOutcome>)>,
) -> (Instant, RenewResult) {
    let mut sent_at = Instant::now();
    // If every try finds a newer version of our own record, report an unknown outcome:
    // the driver retries with backoff until the deadline.
    let mut result = RenewResult::Failed(Error::Indeterminate {
        message: "renewal kept finding newer versions of our own record".into(),
        source: None,
    });
    for _ in 0..3 {
        let outcome = match first.take() {
            Some((at, outcome)) => {
                sent_at = at;
                outcome
            }
            None => {
                let record = decision::renewal(&st.record, shared.ttl, ctx.wall.now_ms());
                sent_at = Instant::now();
                ctx.store.renew(&shared.name, &st.version, &record).await
            }
        };
        result = match outcome {
            Ok(CasOutcome::Written(s)) => RenewResult::Renewed(s),
            Ok(CasOutcome::Conflict(current)) => {
                match judge(ctx, &shared.name, &shared.holder, shared.token, current).await {
                    Ok(ConflictVerdict::StillOurs(s)) => {
                        st.version = s.version;
                        st.record = s.record;
                        continue;
                    }
                    Ok(ConflictVerdict::TakenOver { holder, token }) => {
                        RenewResult::Lost(LossCause::TakenOver { holder, token })
                    }
                    Ok(ConflictVerdict::Gone | ConflictVerdict::Unknown) => RenewResult::Lost(LossCause::Expired),
                    // Only a release writes a vacant record with our token, and ours
                    // would have ended the lease first: someone else released it.
                    Ok(ConflictVerdict::Vacated) => RenewResult::Lost(LossCause::ReleasedByOther),
                    Err(e) => RenewResult::Failed(e),
                }
            }
            Err(e) => RenewResult::Failed(e),
        };
        break;
    }
    (sent_at, result)
}

/// Reads the current record when a conflict did not carry it, then judges it for the
/// holder `me` of `token`.
async fn judge(
    ctx: &DriverCtx,
    name: &LeaseName,
    me: &HolderId,
    token: FencingToken,
    current: Current,
) -> Result<ConflictVerdict> {
    let current = match current {
        Current::Unknown => match ctx.store.read(name).await? {
            Some(s) => Current::Present(s),
            None => Current::Absent,
        },
        c => c,
    };
    Ok(decision::judge_conflict(me, token, &current))
}

async fn release(ctx: Arc<DriverCtx>, shared: Arc<LeaseShared>, version: Version, record: LeaseRecord) -> Done {
    if let Err(e) = release_shared(&ctx, &shared, version, record).await {
        tracing::warn!(lease = %shared.name, error = %e, "release failed; the lease will expire on its own");
    }
    Done::Release
}

/// Releases the lease `shared`, last seen as `record` at `version` ([`release_write`]).
pub(crate) async fn release_shared(
    ctx: &DriverCtx,
    shared: &LeaseShared,
    version: Version,
    record: LeaseRecord,
) -> Result<()> {
    release_write(ctx, &shared.name, &shared.holder, shared.token, version, record).await
}

/// Writes the vacant record of `name` over the grant of `holder` with `token`, last
/// seen as `record` at `version`: at most four release writes (and a read after each
/// conflict that did not show the record). `Ok` once the record is vacant or no longer
/// this grant's (nothing of ours is left to release).
///
/// # Errors
/// The store's error if the last write failed, and [`Error::Indeterminate`] if every
/// write met a newer version of the record still naming this grant (it then stays
/// held until its TTL runs out, unrenewed).
pub(crate) async fn release_write(
    ctx: &DriverCtx,
    name: &LeaseName,
    holder: &HolderId,
    token: FencingToken,
    mut version: Version,
    mut record: LeaseRecord,
) -> Result<()> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        // Guarded on our holder and token too: a release never vacates a record an
        // operator gave to someone else, nor writes our token back over a raised one.
        let outcome = ctx.store.release(name, &version, &record).await;
        match outcome {
            Ok(CasOutcome::Written(vacant)) => {
                // The next acquire of this name by this client can then write directly.
                ctx.seen.remember(name, Some(&vacant), Instant::now());
                return Ok(());
            }
            Ok(CasOutcome::Conflict(current)) => match judge(ctx, name, holder, token, current).await? {
                // Still ours under a newer version (a renewal in flight, or an earlier
                // release whose outcome was unknown, met it): release on that one.
                ConflictVerdict::StillOurs(s) if attempt < 4 => {
                    version = s.version;
                    record = s.record;
                }
                // Still ours after the last write: the lease stays held, and nobody
                // renews it any more. Not a success.
                ConflictVerdict::StillOurs(_) => {
                    return Err(Error::Indeterminate {
                        message: format!(
                            "release of {name} kept finding newer versions of our own record; \
                             it stays held until its TTL runs out"
                        ),
                        source: None,
                    });
                }
                // Vacant or gone (released already: an earlier write of this release
                // whose outcome was unknown applied), or someone else's now (taken over,
                // or an operator changed its holder or token): nothing of ours is left
                // to release, and the record stays as it is.
                ConflictVerdict::Gone
                | ConflictVerdict::Vacated
                | ConflictVerdict::TakenOver { .. }
                | ConflictVerdict::Unknown => {
                    return Ok(());
                }
            },
            // Retrying the same conditional write is safe: if the first applied, the
            // retry conflicts with a vacant record carrying our token.
            Err(e) if (e.is_retryable() || e.is_indeterminate()) && attempt < 4 => {
                tokio::time::sleep(ctx.jitter.exponential(
                    attempt,
                    Duration::from_millis(20),
                    Duration::from_millis(500),
                ))
                .await;
            }
            Err(e) => return Err(e),
        }
    }
}
