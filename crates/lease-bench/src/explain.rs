//! The sentences under the tables: why a figure is what it is. Each is chosen from
//! what the run measured; the reasons come from what each side sends (see the
//! "library sends / floor sends" tables) and were checked against the store crates.

use crate::StoreKind;
use crate::contention::ContentionResult;
use crate::handoff::HandoffResult;
use crate::overhead::{Op, OpResult, OverheadResult};
use crate::peers::PeerResult;
use crate::scale::ScaleResult;
use crate::stats::{fmt_dur, fmt_ratio};

/// How a store's waiters learn of a release.
pub(crate) fn wake_mechanism(kind: StoreKind, notifies: bool) -> &'static str {
    match (kind, notifies) {
        (StoreKind::Memory, true) => "in-process notify",
        (StoreKind::Postgres, true) => "`LISTEN` / `pg_notify`",
        (StoreKind::Etcd, true) => "etcd watch",
        (StoreKind::Redis, true) => "Redis pub/sub",
        (_, true) => "store notification",
        (_, false) => "polling with backoff",
    }
}

/// Where the library's p50 goes, from the three interleaved sides (library, store call
/// alone, floor) of acquire and release.
pub(crate) fn breakdown(r: &OverheadResult) -> String {
    let parts: Vec<String> = r
        .ops
        .iter()
        .filter_map(|x| {
            let d = x.direct.as_ref()?;
            let client = x.library.p50.as_secs_f64() - d.p50.as_secs_f64();
            let op = d.p50.as_secs_f64() - x.floor.p50.as_secs_f64();
            Some(format!(
                "{}: the lease client {} µs (library − the store crate's `CasStore::write` alone, {}), the store \
                 operation {} µs (that call − floor)",
                x.op.label(),
                signed_us(client),
                fmt_dur(d.p50),
                signed_us(op)
            ))
        })
        .collect();
    format!("Where the library's p50 goes — {}.", parts.join("; "))
}

fn signed_us(secs: f64) -> String {
    format!("{:+.0}", secs * 1e6)
}

/// The paragraph under a store's overhead table for the rows above target: what was
/// measured, then why and what it would take (each reason once).
pub(crate) fn above_target(r: &OverheadResult, rows: &[&OpResult]) -> String {
    let measured: Vec<String> = rows
        .iter()
        .map(|x| {
            let (r50, r99) = x.library.ratios(&x.floor);
            format!(
                "{} (p50 ratio {}, p99 ratio {}, {} slower at p50)",
                x.op.label(),
                fmt_ratio(r50),
                fmt_ratio(r99),
                fmt_dur(x.library.p50.saturating_sub(x.floor.p50))
            )
        })
        .collect();
    let mut reasons: Vec<String> = Vec::new();
    let mut add = |s: String| {
        if !reasons.contains(&s) {
            reasons.push(s);
        }
    };
    for x in rows {
        let p50_met = crate::report::p50_ok(&x.library, &x.floor);
        if p50_met && r.store != StoreKind::Memory {
            add(TAIL.to_owned());
            continue;
        }
        add(reason(r.store, x.op).to_owned());
        if r.store != StoreKind::Memory && x.op != Op::Renew {
            add(CLIENT.to_owned());
        }
    }
    if r.store == StoreKind::Memory {
        let over: Vec<String> = rows
            .iter()
            .filter(|x| !crate::report::p50_ok(&x.library, &x.floor))
            .map(|x| {
                format!(
                    "{} ({})",
                    x.op.label(),
                    fmt_dur(x.library.p50.saturating_sub(x.floor.p50))
                )
            })
            .collect();
        add(if over.is_empty() {
            format!(
                "Every p50 gap here is within the target's {} µs allowance; the p99 is what is above.",
                crate::report::P50_ABS.as_micros()
            )
        } else {
            format!(
                "In this run the p50 gap exceeds the {} µs allowance for {}.",
                crate::report::P50_ABS.as_micros(),
                over.join(", ")
            )
        });
    }
    format!(
        "**Above target**: {}.\n\n*Why, and what it would take*: {}",
        measured.join("; "),
        reasons.join(" ")
    )
}

/// For a row whose p50 meets the target and only the p99 does not.
const TAIL: &str = "The median meets the target; the difference is in the slowest samples. On this shared two-core \
    machine (the store server runs on the same cores) a few samples in a hundred wait for a time slice, and the \
    library's path has more scheduling points than the floor's (its attempt runs in a spawned task, its grant and \
    release pass through the renewal driver's task), so it collects more of those waits. It would take a quiet \
    machine, or the in-caller path described under MemoryStore, to tell how much of it is cost and how much noise.";

/// The lease client's own cost, common to every store.
const CLIENT: &str = "On top of the store operation, the lease client itself costs a few tens of µs per acquire or \
    release (the \"lease client\" term above; MemoryStore shows it alone): `try_acquire` runs its attempt in a spawned task (so that dropping the future can \
    never leave a lease held with nobody renewing it) and registers the grant with the client's renewal driver over a \
    channel; `release` goes through the driver and back. Each of those is a cross-thread wake-up.";

fn reason(store: StoreKind, op: Op) -> &'static str {
    match (store, op) {
        (StoreKind::Memory, Op::Renew) => {
            "Renewal is the same in-process call on both sides (the driver's renewal is one `CasStore::renew`, \
             measured here without the driver), so a p99 gap on it is preemption noise: a sample that lost its \
             time slice to another process on this two-core machine."
        }
        (StoreKind::Memory, _) => {
            "The floor here is a bare function call of one or two µs, so any ratio is large: the gap is the whole \
             cost of the lease client, the same on every store. `try_acquire` runs its attempt in a spawned task (so \
             that dropping the future can never leave a lease held with nobody renewing it) and registers the grant \
             with the client's renewal driver over a channel; `release` goes through the driver task and back; each \
             is a cross-thread wake-up, and on this loaded two-core machine some of them wait for a time slice, \
             which is the p99. It would take running the attempt and the release write in the caller's task, \
             with only a non-blocking message to the driver, to remove most of it (a leasehold-core change)."
        }
        (StoreKind::Postgres, Op::Release) => {
            "The store's statement is larger than the floor's `UPDATE`: a data-modifying CTE whose `UNION ALL` branch \
             returns the current row when the write does not apply, and it calls `pg_notify` so that waiters blocked \
             in `acquire` wake at once (section 4): the notification is queued in the transaction and delivered \
             under a cluster-wide lock at commit. It would take dropping the notification (waiters would poll, as on \
             SQLite) and the current-row branch (a second round trip on every conflict) to reach the floor."
        }
        (StoreKind::Postgres, _) => {
            "The store's statement does more than the floor's: a data-modifying CTE with a `UNION ALL` branch that \
             returns the current row when the write does not apply (so a refused acquire costs no second round \
             trip), validation of the stored row (token and TTL ranges, a regular expression on the holder: a \
             corrupt row is an error, never a free lease), the time left computed by the server, and a wider row (9 \
             columns against 4). The commit's WAL flush, which dominates both, is the same. It would take dropping \
             the validation and the current-row branch, i.e. a second round trip on every conflict and trusting \
             whatever is in the row, which is not worth some tens of µs next to a network round trip."
        }
        (StoreKind::Sqlite, _) => {
            "The store's statement sets every column through `CASE WHEN <precondition> THEN new ELSE old END` so that \
             `RETURNING` yields the current row even when the write does not apply (a refused acquire costs no second \
             statement), validates the stored row (types, ranges, a `GLOB` on the holder) and computes the time \
             left; the floor's `WHERE` clause simply skips the row. It would take a statement without the \
             conflict-row answer (a second statement on every conflict) to close that part."
        }
        (StoreKind::Etcd, Op::Release) => {
            "The release writes the vacant record back (a put with a value, in a Txn whose else-branch reads the \
             record) where the floor deletes its key: by design a release never deletes, so the record keeps its \
             token and a released lease reads as released, not as never taken. A delete-on-release would reach the \
             floor here (the token counter lives in its own key)."
        }
        (StoreKind::Etcd, _) => {
            "The claim Txn compares two keys (the record and the name's token counter) and writes both, and its \
             else-branch reads both back, where the floor compares and writes one key: the counter is what makes \
             tokens 1, 2, 3 per name. When the store's picture of the record is stale (etcd deleted it on expiry \
             since the store last saw it) a second Txn follows. It would take using the record's create revision \
             as the token (etcd already keeps it monotonic) to save the counter write, at the price of tokens that \
             jump by every write in the cluster."
        }
        (StoreKind::Redis, _) => {
            "One request on both sides, but the library's is an `EVALSHA` of a script that reads and validates \
             the record hash and the name's counter hash (`TYPE`, `HGETALL`, `HLEN`, `HMGET`, `PTTL`), raises the token counter, rewrites \
             the hash with its expiry and returns the record (a release also `PUBLISH`es to wake waiters): about a \
             dozen commands inside Redis against one `SET NX PX` or a two-command script. On loopback, where the \
             round trip is about 100 µs, those tens of µs of script time make a large ratio; over a real network \
             the same absolute cost is a small one. It would take a script that does not re-validate what it reads \
             (trusting that nothing else writes these keys) to shave part of it; the second, persistent hash has to \
             stay, since the record itself is removed by `PX` and the token sequence must outlive it."
        }
        (StoreKind::Dynamo, _) => {
            "Measured on moto, whose request time is Python's and grows with what a request carries: the library's \
             `UpdateItem` sets five or six attributes (holder, token, TTL, wall-clock expiry, a fresh 128-bit \
             version, the format) and asks for `ALL_NEW` (and `ALL_OLD` on failure), the floor's sets two or three \
             and returns nothing. Since leasehold-dynamodb writes \
             the token verbatim, it could ask for no return values on success (the written record is known) and \
             keep `ALL_OLD` for conflicts; on DynamoDB itself, where the network and storage dominate, the \
             difference would be far smaller, which this emulator cannot show."
        }
        (StoreKind::S3, Op::Release) => {
            "The library's release is a PutObject of the vacant record (it keeps the token for the next grant); the \
             floor's is a DeleteObject, which moto serves faster (no body to hash and store). Deleting would lose \
             the token sequence, so it would take nothing short of changing the design; on S3 both are one request \
             of tens of ms."
        }
        (StoreKind::S3, _) => {
            "Both sides send one conditional PutObject to moto; the library's body is the JSON record (with its \
             random nonce) instead of a short string, and the difference is within the emulator's jitter at these \
             sample counts."
        }
    }
}

/// The sentence under a peer table: who is faster, and why.
pub(crate) fn peer(p: &PeerResult) -> String {
    let (r50, _) = p.library[2].ratios(&p.other[2]);
    let who = if r50 > 1.0 {
        format!(
            "**The peer is faster**: the library's acquire + release p50 is {} × the peer's.",
            fmt_ratio(r50)
        )
    } else {
        format!(
            "**The library is faster**: its acquire + release p50 is {} × the peer's.",
            fmt_ratio(r50)
        )
    };
    format!("{who} {}", peer_reason(p.store))
}

fn peer_reason(store: StoreKind) -> &'static str {
    match store {
        StoreKind::Redis => {
            "rslock's cycle is the Redis floor of section 1 (`SET NX PX`, then a compare-and-delete script), so \
             the gap is the same as there: the library's script (validation, the token counter, the release \
             notification) and the lease client's hand-offs. What the difference buys: a fencing token per grant, \
             renewal by one driver task for all leases, and a loss signal; rslock offers none of them."
        }
        StoreKind::Etcd => {
            "etcd's lock RPC runs the whole lock inside the server (create the key with the lease, find the owner) \
             in one request, like the library's claim Txn, and unlock is a single delete where the library writes \
             the vacant record back; the rest is the lease client's hand-offs. The library adds a token that \
             counts 1, 2, 3 per name, and its renewal needs no extra request when the session's keep-alive covers it."
        }
        StoreKind::Postgres => {
            "An advisory lock lives in the server's shared memory: taking and dropping it writes nothing, so it \
             costs two cheap queries and no WAL flush, while every library grant and release is a durable, \
             fsync'd row write (fsync and synchronous_commit on) carrying a fencing token and an expiry. That \
             durability is the difference, and it is what the advisory lock lacks: it lasts exactly as long as one \
             connection (a frozen holder keeps it while its TCP connection lives), pins that connection for the \
             whole hold, survives no restart or failover, and has no token to fence a late writer."
        }
        _ => "",
    }
}

/// The paragraph under the scale table.
pub(crate) fn scale(rows: &[ScaleResult]) -> String {
    let mut out = vec![
        "One driver task renews every lease of the client from one ordered schedule (no task or timer per lease), \
         so the store operations per second are the leases divided by the renewal interval, and the client's CPU \
         grows with the renewals per second, not with the leases held."
            .to_owned(),
    ];
    for s in rows {
        let ratio = s.ops_per_sec / s.expected_ops_per_sec;
        out.push(format!(
            "{} with {} leases: {:.2} % of one core for {:.0} renewals per second ({:.1} µs of CPU per renewal), \
             {:.0} bytes per held lease, {:.3} × the expected store operations{}.",
            s.store.label(),
            s.leases,
            s.cpu_share * 100.0,
            s.ops_per_sec,
            if s.ops_per_sec > 0.0 {
                s.cpu_share / s.ops_per_sec * 1e6
            } else {
                0.0
            },
            s.rss_per_lease,
            ratio,
            if s.lost == 0 {
                ", no lease lost".to_owned()
            } else {
                format!(", {} leases lost", s.lost)
            }
        ));
    }
    out.push(
        "For Postgres the CPU is mostly sqlx encoding and decoding one statement per renewal; the server's own CPU is \
         not counted here."
            .to_owned(),
    );
    out.join(" ")
}

/// The paragraph under the handoff table.
pub(crate) fn handoff(rows: &[HandoffResult]) -> String {
    let calls = |k: StoreKind, n: usize| {
        rows.iter()
            .find(|h| h.store == k && h.waiters == n)
            .map(|h| h.calls_per_handoff)
    };
    let max_n = rows.iter().map(|h| h.waiters).max().unwrap_or(0);
    let mut out = Vec::new();
    let one: Vec<String> = [StoreKind::Etcd, StoreKind::Postgres]
        .into_iter()
        .filter_map(|k| calls(k, max_n).map(|c| format!("{} {c:.1}", k.label())))
        .collect();
    if !one.is_empty() {
        out.push(format!(
            "leasehold-etcd's watch wakes one waiter per change and leasehold-postgres' `LISTEN` board one per release (on etcd the grant is \
             a change too, which wakes the next one to find the lease held again), so with {max_n} waiters a handoff \
             costs a few store calls ({}). The wake-up a release hands out is passed on if its waiter does not \
             claim (an election observer that shares the store with its campaign, or a waiter that went away: \
             after 500 ms).",
            one.join(", ")
        ));
    }
    let herd: Vec<String> = [StoreKind::Redis, StoreKind::Memory]
        .into_iter()
        .filter_map(|k| calls(k, max_n).map(|c| format!("{} {c:.0}", k.label())))
        .collect();
    if !herd.is_empty() {
        out.push(format!(
            "Redis (pub/sub) and MemoryStore wake every waiter of the process on each release: each tries once, one \
             wins, the others are refused and wait again, so a handoff costs about N store calls ({} with {max_n} \
             waiters) — a thundering herd, bounded to one round trip per waiter because a refused attempt returns \
             the holder in the same round trip; leasehold-postgres' `notify.rs` is the pattern that would make it \
             constant. The latency stays a few ms either way.",
            herd.join(", ")
        ));
    }
    out.push(
        "SQLite, DynamoDB and S3 have no push: a waiter sleeps until the holder's lease could have run out (the TTL \
         with 0–20 % jitter, the observation window on S3 and DynamoDB) and tries again, so with one waiter a \
         handoff takes about a TTL, and with more waiters one of them usually polls soon after the release; the \
         cost is one or two requests per waiter per TTL, whatever happens. At N = 100 the emulator (one request at \
         a time, a few ms each) is saturated by the polling itself, which is what its handoff times show: a \
         shorter TTL or more waiters cost requests, not just latency."
            .to_owned(),
    );
    out.join(" ")
}

/// The paragraph under the contention table.
pub(crate) fn contention(rows: &[ContentionResult]) -> String {
    let _ = rows;
    "On independent names every grant costs exactly two store round trips (the acquire write and the release \
     write) and nothing is refused: throughput is the store's write rate for one-row (one-key) updates with this \
     many callers. On one hot name every refused attempt costs one round trip that returns the holder, or about \
     two on DynamoDB and S3 (a challenger whose last view shows another holder reads before it writes, and S3's \
     failed conditional PUT carries no record), and grants per second fall to \
     what one name's sequence of writes allows; the workers here retry at once, which is the worst case — \
     `LeaseClient::acquire` waits for the holder's remaining time or a notification instead."
        .to_owned()
}
