//! The lease statements, one per store operation, per dialect.
//!
//! Every operation is **one statement**, judged on the database's clock:
//!
//! | operation | statement |
//! |-----------|-----------|
//! | read | `SELECT … WHERE name = ?`, time left computed by the database |
//! | write `Claimable` | `INSERT … ON CONFLICT (name) DO UPDATE … WHERE vacant OR expired`, token = old + 1 (1 when new) |
//! | write `Absent` | `INSERT … ON CONFLICT (name) DO UPDATE … WHERE deleted` |
//! | write `Version(v)` | `UPDATE … WHERE name = ? AND version = v AND fence_token <= :token AND <the row is a valid record>` (a foreign writer can change a row without its version: a token it raised is never written back, a corrupt row never healed) |
//! | delete `v` | `UPDATE … SET deleted … WHERE name = ? AND version = v` (a tombstone) |
//!
//! A write that does not apply returns the current row **in the same statement**:
//!
//! - Postgres: the write is a data-modifying CTE; a `UNION ALL` branch reads the current
//!   row when the CTE returned nothing. That branch sees the statement's snapshot, which
//!   can predate a row a concurrent transaction committed while this statement waited for
//!   its lock; the client therefore judges whether the snapshot row would have satisfied
//!   the precondition ([`crate::row::Guard`]; the branch's `stale` is NULL), and such an
//!   answer is reported as [`leasehold_core::store::Current::Unknown`] rather than as a
//!   current record. Otherwise the
//!   snapshot row is a state the record had during the statement, on which the
//!   precondition failed: a linearizable answer. Renewals and releases are the
//!   exception, as on SQLite below: a plain guarded `UPDATE` (a release's `RETURNING`
//!   only notifies), one changed row means written, and the rare refused one is
//!   followed by a read.
//! - SQLite: the `ON CONFLICT DO UPDATE` (or `UPDATE`) always matches the row and sets
//!   each column to `CASE WHEN <precondition> THEN <new> ELSE <old> END` (the
//!   precondition evaluated once, in a subquery of one row), so `RETURNING`
//!   yields the row either way; `applied` is whether the row now carries this write's
//!   random `write_id`. SQLite runs one writer at a time, so the answer is exact.
//!   Renewals and releases are the exception: guarded in the `WHERE` clause, they return
//!   no row, one changed row means written ([`Reply`]), and the rare refused one is
//!   followed by a read.
//! - MySQL (and MariaDB) have no `UPDATE … RETURNING`: a write answers with its reply's
//!   counters ([`Reply`]) instead of rows. A claim or create is an `INSERT … ON DUPLICATE
//!   KEY UPDATE` whose first assignment decides once (the row's `version` becomes this
//!   write's random id, [`Arg::WriteId`], only if the precondition holds of the row as it
//!   was) and whose token assignment sets `LAST_INSERT_ID(expr)`: the insert id is the
//!   token written, 0 when nothing was. Version writes, renewals and deletes are `UPDATE`s
//!   guarded in the `WHERE` clause: one affected row means written. The written row is
//!   the bound values; a refused write says only that it wrote nothing, so the store
//!   reads (a version write, a delete) or the client does (a claim). The version is the
//!   writer's random 63-bit id rather than a counter, so that the reply need not carry it.
//!
//! Postgres uses `now()`: the start of the statement's transaction, which in autocommit is
//! when the server began this statement, after the client sent it (rule 3 of docs/DESIGN.md counts
//! the holder's validity from before sending). One instant serves the expiry judgement,
//! the new `expires_at` and the time left, so they agree with each other; a wait for a row
//! lock only makes the takeover judgement conservative. `clock_timestamp()` would move
//! within the statement. SQLite binds "now" ([`Arg::NowMs`]) from the host's boot clock
//! ([`crate::HostClock`]), read just before the statement runs, and the boot's id
//! ([`Arg::BootId`]): every process of the host reads the same clock, and no step of
//! the wall clock (NTP, a resumed VM, a process's fake clock) moves it. A record whose
//! `boot_id` is another boot's is expired (claimable, no time left, its token sequence
//! continuing); a "now" read before the statement only judges expiry later.
//! MySQL judges on `UTC_TIMESTAMP(6)`, the server's clock at the statement's start, as
//! Unix ms (one value per statement, whatever the session's `time_zone`).

use std::fmt::Write as _;
use std::sync::Arc;

use leasehold_core::fence::Dialect;
use leasehold_core::store::EXPIRY_SLACK;
use leasehold_core::{Error, MAX_HOLDER_LEN, Result, Ttl};

use crate::LeaseTable;

/// A value a lease statement binds, in the order [`LeaseStatement::args`] lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arg {
    /// The lease name (text).
    Name,
    /// The holder (text, `NULL` for a vacant record).
    Holder,
    /// The record's fencing token (bigint).
    Token,
    /// The TTL in milliseconds (bigint).
    TtlMs,
    /// The holder's wall-clock expiry in Unix ms (bigint, nullable).
    WallMs,
    /// The expected version (bigint).
    Version,
    /// This write's random id (bigint; SQLite: the row's `write_id`; MySQL: the row's
    /// new version).
    WriteId,
    /// Now on the host's boot clock, in ms ([`crate::HostClock::now_ms`]; SQLite only).
    NowMs,
    /// The host's boot id ([`crate::HostClock::boot_id`]; SQLite only).
    BootId,
}

/// One statement's SQL text and its bind order.
#[derive(Debug, Clone)]
pub struct LeaseStatement {
    /// The SQL text (one statement, no `;`).
    pub sql: Arc<str>,
    /// What to bind at each placeholder, in order.
    pub args: Vec<Arg>,
    /// How the statement answers.
    pub reply: Reply,
}

/// How a lease statement answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    /// Rows of [`RESULT_COLUMNS`] (a `SELECT`, or a write with `RETURNING` or a CTE).
    Rows,
    /// (MySQL) a write without rows: `LAST_INSERT_ID()` is the token it wrote (0: it
    /// wrote nothing), and the written row is the bound values, at the version
    /// [`Arg::WriteId`]. `issues_token`: the token is the store's (a claim), not the
    /// bound one.
    InsertId {
        /// The store issued the token (a claim): take it from `LAST_INSERT_ID()`.
        issues_token: bool,
    },
    /// An `UPDATE` answering with its count of changed rows (MySQL's version writes,
    /// renewals and deletes; SQLite's and Postgres's renewals): one affected row means it wrote the bound values at `version`; none,
    /// that it wrote nothing.
    Affected {
        /// The write is a delete (the row is now a tombstone).
        deletes: bool,
        /// The version the write left.
        version: NewVersion,
    },
    /// A release's `UPDATE` answering with its count of changed rows (every dialect's):
    /// one affected row means
    /// the row is now vacant with the bound token at `version`; none, that it wrote
    /// nothing.
    Vacates {
        /// The version the release left.
        version: NewVersion,
    },
}

impl Reply {
    /// Whether the statement answers with its count of changed rows ([`Reply::Affected`],
    /// [`Reply::Vacates`]): a refused one says only that it wrote nothing.
    pub fn is_counted(self) -> bool {
        matches!(self, Self::Affected { .. } | Self::Vacates { .. })
    }
}

/// The version a write that answers with counters ([`Reply`]) left on the row it wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NewVersion {
    /// The write's own id, [`Arg::WriteId`] (MySQL: every write sets it as the version).
    WriteId,
    /// The bound [`Arg::Version`] plus one (SQLite: a version counts its row's writes).
    Next,
}

/// The lease statements of one table in one dialect.
#[derive(Debug, Clone)]
pub struct Statements {
    /// Reads one record.
    pub read: LeaseStatement,
    /// Creates a record if none exists (or only a tombstone).
    pub write_absent: LeaseStatement,
    /// Writes on an exact version.
    pub write_version: LeaseStatement,
    /// Renews on an exact version: extends the expiry (and sets the TTL) only while the
    /// row still shows the renewing holder with its token, and writes nothing else.
    pub renew: LeaseStatement,
    /// Releases on an exact version: leaves the row vacant (no holder, no wall-clock
    /// expiry, a new version) only while it still shows the releasing holder with its
    /// token, and writes nothing else: never the token.
    pub release: LeaseStatement,
    /// Claims a missing, vacant, deleted or expired record and issues the next token
    /// (never past [`leasehold_core::FencingToken::MAX`]: a row at it is not claimed).
    pub write_claimable: LeaseStatement,
    /// Turns the record into a tombstone if its version matches.
    pub delete: LeaseStatement,
    /// True when a refused [`Self::write_version`] returns no row (its guard is a
    /// `WHERE` clause, as on SQLite and MySQL): the store then reads the current record
    /// with [`Self::read`]. False when it answers a refusal with the current row itself
    /// (Postgres). A statement that answers with its count of changed rows
    /// ([`Reply::is_counted`]: every dialect's renewal and release) is always followed by
    /// that read when it wrote nothing.
    pub read_after_refused_version_write: bool,
    /// Whether a refused claim or create answers with the current row in the same
    /// statement ([`leasehold_core::store::Capabilities::conflict_returns_current`]):
    /// false on MySQL, whose refused claim says only that it wrote nothing (the client
    /// then reads), and whose refused delete the store answers with a read.
    pub conflict_returns_current: bool,
    /// (Postgres, MySQL) Renews many leases in one request ([`RenewBatch`]). `None`
    /// where renewals are sent one by one (SQLite).
    pub renew_batch: Option<RenewBatch>,
}

/// The statements of a batch of renewals, each row guarded as [`Statements::renew`]
/// guards one (its own version, holder and token).
#[derive(Debug, Clone)]
pub struct RenewBatch {
    /// Postgres: one statement, the renewals' columns bound as arrays in
    /// [`RENEWAL_BATCH_ARRAYS`] order; each row is a renewal's answer, as
    /// [`Statements::renew`]'s, with its position in the batch (`i`, from 1). A renewal
    /// with no row found no row under its name.
    ///
    /// MySQL: an `UPDATE` that answers only with its counters; its one parameter is
    /// the renewals as a JSON array of arrays, each in [`MYSQL_RENEWAL_FIELDS`] order
    /// (read with `JSON_TABLE`, since MySQL has no arrays), and it sets each renewed
    /// row's version to that renewal's write id.
    pub sql: Arc<str>,
    /// MySQL: the query sent next on the same connection, with the same parameter, that
    /// answers each renewal as Postgres's statement does: its row, `applied` when the
    /// row carries the renewal's write id with its holder and token. Two statements for
    /// a batch, where MySQL has no `UPDATE … RETURNING`. `None` on Postgres.
    pub read_back: Option<Arc<str>>,
}

/// What each renewal of a MySQL batch carries, in order ([`RenewBatch::sql`]): name,
/// holder, token, expected version, TTL in ms, wall-clock expiry in ms (or `null`), and
/// the write id that becomes the row's new version.
pub const MYSQL_RENEWAL_FIELDS: [&str; 7] = ["name", "holder", "token", "version", "ttl_ms", "wall", "write_id"];

/// The arrays Postgres's [`RenewBatch::sql`] binds, in order: names, holders, tokens,
/// versions, TTLs in ms, wall-clock expiries in ms (nullable).
pub const RENEWAL_BATCH_ARRAYS: [&str; 6] = ["name", "holder", "token", "version", "ttl_ms", "wall"];

/// The columns every statement returns, in this order.
pub const RESULT_COLUMNS: &[&str] = &[
    "applied",
    "stale",
    "deleted",
    "holder",
    "fence_token",
    "version",
    "ttl_ms",
    "wall_expires_at_ms",
    "remaining_ms",
];

/// The characters a holder id may contain, as a regular-expression / GLOB class body
/// (kept equal to `leasehold_core::HolderId`'s rule; a test checks every ASCII character).
pub const HOLDER_CLASS: &str = "A-Za-z0-9_.:/@=#-";

struct Placeholders {
    dialect: Dialect,
    args: Vec<Arg>,
}

impl Placeholders {
    fn new(dialect: Dialect) -> Self {
        Self {
            dialect,
            args: Vec::new(),
        }
    }

    fn get(&mut self, a: Arg) -> String {
        if self.dialect == Dialect::MySql {
            // MySQL's `?` is bound once per occurrence, in order.
            self.args.push(a);
            return "?".to_owned();
        }
        let n = match self.args.iter().position(|x| *x == a) {
            Some(i) => i + 1,
            None => {
                self.args.push(a);
                self.args.len()
            }
        };
        match self.dialect {
            Dialect::Postgres => format!("${n}"),
            _ => format!("?{n}"),
        }
    }

    /// The placeholders of `args`, numbered (or, on MySQL, bound) in this order.
    fn all<const N: usize>(&mut self, args: [Arg; N]) -> [String; N] {
        args.map(|a| self.get(a))
    }

    fn finish(self, sql: String) -> LeaseStatement {
        self.finish_with(sql, Reply::Rows)
    }

    fn finish_with(self, sql: String, reply: Reply) -> LeaseStatement {
        LeaseStatement {
            sql: sql.into(),
            args: self.args,
            reply,
        }
    }
}

impl Statements {
    /// The statements for `table` in `dialect`.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a dialect other than Postgres, SQLite and MySQL.
    pub fn new(dialect: Dialect, table: &LeaseTable) -> Result<Self> {
        match dialect {
            Dialect::Postgres => Ok(Self::of(&Postgres::new(table))),
            Dialect::Sqlite => Ok(Self::of(&Sqlite::new(table))),
            Dialect::MySql => Ok(Self::of(&MySql::new(table))),
            _ => Err(Error::invalid(
                "sql dialect",
                "only Postgres, SQLite and MySQL keep lease tables",
            )),
        }
    }

    /// Every statement of `dialect`.
    fn of<D: LeaseDialect>(dialect: &D) -> Self {
        Self {
            read: dialect.read(),
            write_absent: dialect.write_absent(),
            write_version: dialect.write_version(),
            renew: dialect.renew(),
            release: dialect.release(),
            write_claimable: dialect.write_claimable(),
            delete: dialect.delete(),
            read_after_refused_version_write: D::READ_AFTER_REFUSED_VERSION_WRITE,
            conflict_returns_current: D::CONFLICT_RETURNS_CURRENT,
            renew_batch: dialect.renew_batch(),
        }
    }

    /// Whether the statements bind the host clock ([`Arg::NowMs`], [`Arg::BootId`]):
    /// SQLite's do, Postgres's use the server's `now()`.
    pub fn use_host_clock(&self) -> bool {
        self.all().iter().any(|s| s.args.contains(&Arg::NowMs))
    }

    /// Every statement.
    fn all(&self) -> [&LeaseStatement; 7] {
        [
            &self.read,
            &self.write_absent,
            &self.write_version,
            &self.renew,
            &self.release,
            &self.write_claimable,
            &self.delete,
        ]
    }
}

/// How one dialect writes the lease statements, one per [`Statements`] field.
trait LeaseDialect {
    /// [`Statements::read_after_refused_version_write`].
    const READ_AFTER_REFUSED_VERSION_WRITE: bool;
    /// [`Statements::conflict_returns_current`].
    const CONFLICT_RETURNS_CURRENT: bool;

    /// [`Statements::read`].
    fn read(&self) -> LeaseStatement;
    /// [`Statements::write_absent`].
    fn write_absent(&self) -> LeaseStatement;
    /// [`Statements::write_version`].
    fn write_version(&self) -> LeaseStatement;
    /// [`Statements::renew`].
    fn renew(&self) -> LeaseStatement;
    /// [`Statements::release`].
    fn release(&self) -> LeaseStatement;
    /// [`Statements::write_claimable`].
    fn write_claimable(&self) -> LeaseStatement;
    /// [`Statements::delete`].
    fn delete(&self) -> LeaseStatement;
    /// [`Statements::renew_batch`].
    fn renew_batch(&self) -> Option<RenewBatch>;
}

/// The read of the row named by the one placeholder from `t`, where the database
/// answers with integers for booleans (SQLite, MySQL): nothing applied, nothing stale,
/// the time left as `remaining` writes it (its placeholders numbered after the name's).
fn plain_read(dialect: Dialect, t: &str, remaining: impl FnOnce(&mut Placeholders) -> String) -> LeaseStatement {
    let mut p = Placeholders::new(dialect);
    let name = p.get(Arg::Name);
    let remaining = remaining(&mut p);
    let sql = format!(
        "SELECT 0 AS applied, 0 AS stale, deleted, holder, fence_token, version, ttl_ms, wall_expires_at_ms, \
         {remaining} FROM {t} WHERE name = {name}"
    );
    p.finish(sql)
}

/// The placeholders of a write on a version, in this order.
const VERSION_WRITE: [Arg; 6] = [
    Arg::Name,
    Arg::Holder,
    Arg::Token,
    Arg::TtlMs,
    Arg::WallMs,
    Arg::Version,
];

const I64_MAX_MINUS_1: &str = "9223372036854775806";

/// [`leasehold_core::FencingToken::MAX`] (`i64::MAX - 1`, the last valid token): a claim
/// never issues the token after it (a row at it is not claimable), and the client then
/// reports [`leasehold_core::Error::TokensExhausted`]. A row at `i64::MAX` is invalid.
const TOKEN_MAX: &str = "9223372036854775806";

fn ttl_bounds() -> (u128, u128) {
    (Ttl::MIN.as_millis(), Ttl::MAX.as_millis())
}

struct Postgres {
    t: String,
    channel: String,
}

impl Postgres {
    fn new(table: &LeaseTable) -> Self {
        Self {
            t: table.quoted(Dialect::Postgres),
            channel: table.channel(),
        }
    }

    /// Whether the row under alias `a` is a valid record (decodes as one). `holder` is
    /// the statement's own holder placeholder: a valid holder id by construction, so a
    /// stored holder equal to it (every renewal's) skips the length and character checks.
    fn valid(a: &str, holder: &str) -> String {
        let (min, max) = ttl_bounds();
        format!(
            "{a}.fence_token BETWEEN 1 AND {TOKEN_MAX} AND {a}.ttl_ms BETWEEN {min} AND {max} \
             AND {a}.version BETWEEN 1 AND {I64_MAX_MINUS_1} AND isfinite({a}.expires_at) \
             AND ({a}.holder IS NULL OR (({a}.holder IS NOT DISTINCT FROM {holder} \
             OR (length({a}.holder) BETWEEN 1 AND {MAX_HOLDER_LEN} AND {a}.holder ~ '^[{HOLDER_CLASS}]+$')) \
             AND {a}.expires_at <= now() + ({a}.ttl_ms + {slack}) * interval '1 millisecond')) \
             AND ({a}.wall_expires_at_ms IS NULL OR {a}.wall_expires_at_ms >= 0)",
            slack = EXPIRY_SLACK.as_millis()
        )
    }

    /// What a version-guarded write also requires of the row it replaces, because a
    /// foreign writer (an operator's `UPDATE`) can change a row without touching its
    /// version: a token not above the new one (a token never goes backwards) and a valid
    /// record (a corrupt one is reported, never healed).
    fn unchanged_by_others(a: &str, token: &str, holder: &str) -> String {
        format!("{a}.fence_token <= {token} AND {}", Self::valid(a, holder))
    }

    fn claimable(a: &str, holder: &str) -> String {
        format!(
            "({a}.deleted OR {a}.holder IS NULL OR {a}.expires_at <= now()) AND {a}.fence_token < {TOKEN_MAX} AND {}",
            Self::valid(a, holder)
        )
    }

    fn remaining(a: &str) -> String {
        format!(
            "CASE WHEN isfinite({a}.expires_at) \
             THEN GREATEST(0, CEIL(EXTRACT(EPOCH FROM ({a}.expires_at - now())) * 1000))::bigint END"
        )
    }

    fn row(a: &str) -> String {
        format!(
            "{a}.deleted, {a}.holder, {a}.fence_token, {a}.version, {a}.ttl_ms, {a}.wall_expires_at_ms, {} AS remaining_ms",
            Self::remaining(a)
        )
    }

    /// `WITH w AS (<write> RETURNING l.*)` + the applied row, or the current row with
    /// `stale` NULL: whether that row would have let the write apply is judged by the
    /// client ([`crate::row::Guard`]), which saves the server building and evaluating the
    /// write's whole condition a second time in every statement.
    fn with_current(&self, write: &str, p: &mut Placeholders) -> String {
        let name = p.get(Arg::Name);
        format!(
            "WITH w AS ({write} RETURNING l.*) \
             SELECT TRUE AS applied, FALSE AS stale, {applied_row}, \
             CASE WHEN w.holder IS NULL OR w.deleted THEN pg_notify('{channel}', w.version::text || ' ' || w.name)::text END AS notified \
             FROM w \
             UNION ALL \
             SELECT FALSE, NULL::boolean, {current_row}, NULL::text FROM {t} c WHERE c.name = {name} AND NOT EXISTS (SELECT 1 FROM w)",
            applied_row = Self::row("w"),
            current_row = Self::row("c"),
            channel = self.channel,
            t = self.t,
        )
    }

    /// The renewal statement of many leases: an `UPDATE … FROM unnest(arrays)`, each row
    /// guarded as [`Self::held_write`] guards one (its own version, holder and token),
    /// and for each renewal that did not apply, its current row (`stale` NULL: the
    /// client judges it, as for [`Self::with_current`]).
    fn renew_batch_sql(&self) -> String {
        let t = &self.t;
        let guard = |a: &str| {
            format!(
                "{a}.version = b.version AND NOT {a}.deleted AND {a}.holder = b.holder AND {a}.fence_token = b.token AND {}",
                Self::valid(a, "b.holder")
            )
        };
        format!(
            "WITH b AS (SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[]) \
             WITH ORDINALITY AS b(name, holder, token, version, ttl_ms, wall, i)), \
             w AS (UPDATE {t} AS l SET version = l.version + 1, ttl_ms = b.ttl_ms, \
             expires_at = now() + b.ttl_ms * interval '1 millisecond', wall_expires_at_ms = b.wall \
             FROM b WHERE l.name = b.name AND {applies} RETURNING l.*, b.i) \
             SELECT w.i, TRUE AS applied, FALSE AS stale, {applied_row} FROM w \
             UNION ALL \
             SELECT b.i, FALSE, NULL::boolean, {current_row} FROM b JOIN {t} c ON c.name = b.name \
             WHERE NOT EXISTS (SELECT 1 FROM w WHERE w.i = b.i)",
            applies = guard("l"),
            applied_row = Self::row("w"),
            current_row = Self::row("c"),
        )
    }

    /// An `UPDATE … SET {set}` of the row this grant holds, guarded on its version,
    /// holder and token. The holder and the token are compared, never written: an
    /// operator's change to either (the version untouched) refuses the write instead of
    /// being undone, and a row given to someone else stays as it is.
    ///
    /// It answers with its count of changed rows (`reply`), not with rows: what it wrote
    /// is the bound values at the next version, and a refused one wrote nothing, after
    /// which the store reads the row. A renewal or release is almost never refused, and
    /// the current-row branch of [`Self::with_current`] cost each of them about 10 µs of
    /// server time (docs/PERFORMANCE.md, Postgres). `returning`, if any, is evaluated for
    /// the written row only (a release's `pg_notify`).
    fn held_write(
        &self,
        reply: Reply,
        returning: Option<&str>,
        set: impl FnOnce(&mut Placeholders) -> String,
    ) -> LeaseStatement {
        let t = &self.t;
        let mut p = Placeholders::new(Dialect::Postgres);
        let [name, holder, token, ver] = p.all([Arg::Name, Arg::Holder, Arg::Token, Arg::Version]);
        let set = set(&mut p);
        let mut sql = format!(
            "UPDATE {t} AS l SET {set} WHERE l.name = {name} AND l.version = {ver} AND NOT l.deleted \
             AND l.holder = {holder} AND l.fence_token = {token} AND {}",
            Self::valid("l", &holder)
        );
        if let Some(returning) = returning {
            sql.push_str(" RETURNING ");
            sql.push_str(returning);
        }
        p.finish_with(sql, reply)
    }

    /// `INSERT … ON CONFLICT (name) DO UPDATE` of a claim or create: `token` is the new
    /// row's token (`"arg"`: the bound one), `on_conflict` the token and version rules of
    /// the update; every other column is replaced from `EXCLUDED`.
    fn insert(&self, p: &mut Placeholders, token: &str, on_conflict: &str) -> String {
        let t = &self.t;
        let [name, holder, ttl, wall] = p.all([Arg::Name, Arg::Holder, Arg::TtlMs, Arg::WallMs]);
        let token = if token == "arg" {
            p.get(Arg::Token)
        } else {
            token.to_owned()
        };
        format!(
            "INSERT INTO {t} AS l (name, holder, fence_token, version, ttl_ms, acquired_at, expires_at, wall_expires_at_ms, deleted) \
             VALUES ({name}, {holder}, {token}, 1, {ttl}, now(), now() + {ttl} * interval '1 millisecond', {wall}, FALSE) \
             ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, {on_conflict}, ttl_ms = EXCLUDED.ttl_ms, \
             acquired_at = EXCLUDED.acquired_at, expires_at = EXCLUDED.expires_at, \
             wall_expires_at_ms = EXCLUDED.wall_expires_at_ms, deleted = FALSE"
        )
    }
}

impl LeaseDialect for Postgres {
    const READ_AFTER_REFUSED_VERSION_WRITE: bool = false;
    const CONFLICT_RETURNS_CURRENT: bool = true;

    fn read(&self) -> LeaseStatement {
        let t = &self.t;
        let mut p = Placeholders::new(Dialect::Postgres);
        let name = p.get(Arg::Name);
        let sql = format!(
            "SELECT FALSE AS applied, FALSE AS stale, {} FROM {t} c WHERE c.name = {name}",
            Self::row("c")
        );
        p.finish(sql)
    }

    fn write_claimable(&self) -> LeaseStatement {
        let mut p = Placeholders::new(Dialect::Postgres);
        let ins = self.insert(&mut p, "1", "fence_token = l.fence_token + 1, version = l.version + 1");
        let holder = p.get(Arg::Holder);
        let write = format!("{ins} WHERE {}", Self::claimable("l", &holder));
        let sql = self.with_current(&write, &mut p);
        p.finish(sql)
    }

    fn write_absent(&self) -> LeaseStatement {
        let mut p = Placeholders::new(Dialect::Postgres);
        let ins = self.insert(
            &mut p,
            "arg",
            "fence_token = EXCLUDED.fence_token, version = l.version + 1",
        );
        let write = format!("{ins} WHERE l.deleted");
        let sql = self.with_current(&write, &mut p);
        p.finish(sql)
    }

    fn write_version(&self) -> LeaseStatement {
        let t = &self.t;
        let mut p = Placeholders::new(Dialect::Postgres);
        let [name, holder, token, ttl, wall, ver] = p.all(VERSION_WRITE);
        let write = format!(
            "UPDATE {t} AS l SET holder = {holder}, fence_token = {token}, version = l.version + 1, ttl_ms = {ttl}, \
             acquired_at = CASE WHEN l.holder IS NOT DISTINCT FROM {holder} AND l.fence_token = {token} \
             THEN l.acquired_at ELSE now() END, \
             expires_at = now() + {ttl} * interval '1 millisecond', wall_expires_at_ms = {wall} \
             WHERE l.name = {name} AND l.version = {ver} AND NOT l.deleted AND {guard}",
            guard = Self::unchanged_by_others("l", &token, &holder),
        );
        let sql = self.with_current(&write, &mut p);
        p.finish(sql)
    }

    /// A refused renewal writes nothing, and the store reads the row.
    fn renew(&self) -> LeaseStatement {
        let renewed = Reply::Affected {
            deletes: false,
            version: NewVersion::Next,
        };
        self.held_write(renewed, None, |p| {
            let [ttl, wall] = p.all([Arg::TtlMs, Arg::WallMs]);
            format!(
                "version = l.version + 1, ttl_ms = {ttl}, expires_at = now() + {ttl} * interval '1 millisecond', \
                 wall_expires_at_ms = {wall}"
            )
        })
    }

    /// A refused release writes nothing, and the store reads the row; one that applies
    /// notifies the waiters (`pg_notify`, delivered at commit).
    fn release(&self) -> LeaseStatement {
        let vacated = Reply::Vacates {
            version: NewVersion::Next,
        };
        let notify = format!("pg_notify('{}', l.version::text || ' ' || l.name)", self.channel);
        self.held_write(vacated, Some(&notify), |_| {
            "holder = NULL, version = l.version + 1, wall_expires_at_ms = NULL".to_owned()
        })
    }

    fn delete(&self) -> LeaseStatement {
        let t = &self.t;
        let mut p = Placeholders::new(Dialect::Postgres);
        let [name, ver] = p.all([Arg::Name, Arg::Version]);
        let write = format!(
            "UPDATE {t} AS l SET deleted = TRUE, holder = NULL, version = l.version + 1 \
             WHERE l.name = {name} AND l.version = {ver} AND NOT l.deleted"
        );
        let sql = self.with_current(&write, &mut p);
        p.finish(sql)
    }

    fn renew_batch(&self) -> Option<RenewBatch> {
        Some(RenewBatch {
            sql: self.renew_batch_sql().into(),
            read_back: None,
        })
    }
}

struct Sqlite {
    t: String,
}

/// The SQLite columns a write sets, in order.
const SQLITE_SET: &[&str] = &[
    "holder",
    "fence_token",
    "version",
    "ttl_ms",
    "acquired_at_ms",
    "expires_at_ms",
    "wall_expires_at_ms",
    "deleted",
    "write_id",
    "boot_id",
];

impl Sqlite {
    fn new(table: &LeaseTable) -> Self {
        Self {
            t: table.quoted(Dialect::Sqlite),
        }
    }

    /// Whether the row is a valid record. A held record's expiry lies at most its TTL
    /// plus the slack ahead of `now`, when it was written in this boot (`boot`); an
    /// expiry of another boot counts from another zero. With a `NULL` clock no held
    /// record is valid, and a write fails (`expires_at_ms` is `NOT NULL`).
    fn valid(now: &str, boot: &str, holder: &str) -> String {
        let (min, max) = ttl_bounds();
        format!(
            "typeof(l.fence_token) = 'integer' AND l.fence_token BETWEEN 1 AND {TOKEN_MAX} \
             AND typeof(l.ttl_ms) = 'integer' AND l.ttl_ms BETWEEN {min} AND {max} \
             AND typeof(l.version) = 'integer' AND l.version BETWEEN 1 AND {I64_MAX_MINUS_1} \
             AND typeof(l.deleted) = 'integer' AND typeof(l.expires_at_ms) = 'integer' \
             AND (l.holder IS NULL OR ((l.holder IS {holder} OR (typeof(l.holder) = 'text' \
             AND length(l.holder) BETWEEN 1 AND {MAX_HOLDER_LEN} AND l.holder NOT GLOB '*[^{HOLDER_CLASS}]*')) \
             AND (l.boot_id <> {boot} OR l.expires_at_ms <= {now} + l.ttl_ms + {slack}))) \
             AND (l.wall_expires_at_ms IS NULL OR (typeof(l.wall_expires_at_ms) = 'integer' AND l.wall_expires_at_ms >= 0))",
            slack = EXPIRY_SLACK.as_millis()
        )
    }

    /// Time left on the boot clock: none for a record of another boot.
    fn remaining(now: &str, boot: &str) -> String {
        format!(
            "CASE WHEN typeof(expires_at_ms) = 'integer' \
             THEN CASE WHEN boot_id = {boot} THEN max(expires_at_ms - {now}, 0) ELSE 0 END END AS remaining_ms"
        )
    }

    fn returning(write_id: &str, now: &str, boot: &str) -> String {
        format!(
            "RETURNING write_id = {write_id} AS applied, 0 AS stale, deleted, holder, fence_token, version, ttl_ms, \
             wall_expires_at_ms, {}",
            Self::remaining(now, boot)
        )
    }

    /// `(cols…) = (SELECT CASE WHEN ok THEN new ELSE l.col END, … FROM (SELECT cond AS ok))`
    /// for every column in `new`: each column keeps its old value unless `cond` holds of
    /// the row, and `cond` (the precondition with the stored row's validation) is
    /// evaluated once for the row, not once per column (6–9 µs of a claim:
    /// docs/PERFORMANCE.md, SQLite).
    fn guarded_set(cond: &str, new: &[(&str, String)]) -> String {
        let (cols, values): (Vec<&str>, Vec<String>) = SQLITE_SET
            .iter()
            .filter_map(|col| {
                let (_, value) = new.iter().find(|(c, _)| c == col)?;
                Some((*col, format!("CASE WHEN ok THEN {value} ELSE l.{col} END")))
            })
            .unzip();
        format!(
            "({}) = (SELECT {} FROM (SELECT {cond} AS ok))",
            cols.join(", "),
            values.join(", ")
        )
    }

    /// An `UPDATE … SET {set}` of the row this grant holds, guarded on its version,
    /// holder and token, compared and never written (see the Postgres statement). `set`
    /// is given the write id, now and boot placeholders. It returns no row: what it wrote
    /// is the bound values at the next version (`reply`), and a refused one wrote
    /// nothing, after which the store reads the row. A renewal or release is almost never
    /// refused, and `RETURNING` cost it about 13 µs (docs/PERFORMANCE.md, SQLite).
    fn held_write(
        &self,
        reply: Reply,
        set: impl FnOnce(&mut Placeholders, &str, &str, &str) -> String,
    ) -> LeaseStatement {
        let t = &self.t;
        let mut p = Placeholders::new(Dialect::Sqlite);
        let [name, holder, token, ver, wid, now, boot] = p.all([
            Arg::Name,
            Arg::Holder,
            Arg::Token,
            Arg::Version,
            Arg::WriteId,
            Arg::NowMs,
            Arg::BootId,
        ]);
        let set = set(&mut p, &wid, &now, &boot);
        let sql = format!(
            "UPDATE {t} AS l SET {set} WHERE l.name = {name} AND l.version = {ver} AND l.deleted = 0 \
             AND l.holder = {holder} AND l.fence_token = {token} AND {}",
            Self::valid(&now, &boot, &holder),
        );
        p.finish_with(sql, reply)
    }

    /// `INSERT … ON CONFLICT (name) DO UPDATE` of a claim or create, answering with the
    /// row either way: every write replaces the same columns from `excluded`; only the
    /// new row's token (`token_value`, `"arg"`: the bound one), the precondition `cond`
    /// and the update's token rule (`token_set`) differ.
    fn upsert(&self, p: &mut Placeholders, token_value: &str, cond: &str, token_set: &str) -> String {
        let t = &self.t;
        let [name, holder, ttl, wall, wid, now, boot] = p.all([
            Arg::Name,
            Arg::Holder,
            Arg::TtlMs,
            Arg::WallMs,
            Arg::WriteId,
            Arg::NowMs,
            Arg::BootId,
        ]);
        let token = if token_value == "arg" {
            p.get(Arg::Token)
        } else {
            token_value.to_owned()
        };
        let set = Self::guarded_set(
            cond,
            &[
                ("holder", "excluded.holder".into()),
                ("fence_token", token_set.into()),
                ("version", "l.version + 1".into()),
                ("ttl_ms", "excluded.ttl_ms".into()),
                ("acquired_at_ms", "excluded.acquired_at_ms".into()),
                ("expires_at_ms", "excluded.expires_at_ms".into()),
                ("wall_expires_at_ms", "excluded.wall_expires_at_ms".into()),
                ("deleted", "0".into()),
                ("write_id", "excluded.write_id".into()),
                ("boot_id", "excluded.boot_id".into()),
            ],
        );
        format!(
            "INSERT INTO {t} AS l (name, holder, fence_token, version, ttl_ms, acquired_at_ms, expires_at_ms, \
             wall_expires_at_ms, deleted, write_id, boot_id) \
             VALUES ({name}, {holder}, {token}, 1, {ttl}, {now}, {now} + {ttl}, {wall}, 0, {wid}, {boot}) \
             ON CONFLICT (name) DO UPDATE SET {set} {}",
            Self::returning(&wid, &now, &boot)
        )
    }
}

impl LeaseDialect for Sqlite {
    const READ_AFTER_REFUSED_VERSION_WRITE: bool = true;
    const CONFLICT_RETURNS_CURRENT: bool = true;

    fn read(&self) -> LeaseStatement {
        plain_read(Dialect::Sqlite, &self.t, |p| {
            let [now, boot] = p.all([Arg::NowMs, Arg::BootId]);
            Self::remaining(&now, &boot)
        })
    }

    fn write_claimable(&self) -> LeaseStatement {
        let mut p = Placeholders::new(Dialect::Sqlite);
        // The clock's placeholders are numbered here, before the upsert names them.
        let [now, boot, holder] = p.all([Arg::NowMs, Arg::BootId, Arg::Holder]);
        // A record of another boot is expired: its holder ran before the reboot.
        let cond = format!(
            "((l.deleted <> 0 OR l.holder IS NULL OR l.boot_id <> {boot} OR l.expires_at_ms <= {now}) \
             AND {} AND l.fence_token < {TOKEN_MAX})",
            Self::valid(&now, &boot, &holder)
        );
        let sql = self.upsert(&mut p, "1", &cond, "l.fence_token + 1");
        p.finish(sql)
    }

    fn write_absent(&self) -> LeaseStatement {
        let mut p = Placeholders::new(Dialect::Sqlite);
        let sql = self.upsert(&mut p, "arg", "(l.deleted <> 0)", "excluded.fence_token");
        p.finish(sql)
    }

    fn write_version(&self) -> LeaseStatement {
        let t = &self.t;
        let mut p = Placeholders::new(Dialect::Sqlite);
        let [name, holder, token, ttl, wall, ver] = p.all(VERSION_WRITE);
        let [wid, now, boot] = p.all([Arg::WriteId, Arg::NowMs, Arg::BootId]);
        // A foreign writer (an operator's `UPDATE`) can change the row without
        // touching its version: the token must not be above the new one (tokens never
        // go backwards) and the record must be valid (a corrupt one is reported, never
        // healed). The guard is the `WHERE` clause, evaluated once; a refused write
        // returns no row, and the store reads the current one
        // ([`Statements::read_after_refused_version_write`]): renewals and releases are
        // almost never refused, so they should not pay for the refusal's answer.
        let cond = format!(
            "l.version = {ver} AND l.deleted = 0 AND l.fence_token <= {token} AND {}",
            Self::valid(&now, &boot, &holder)
        );
        let set = [
            ("holder", holder.clone()),
            ("fence_token", token.clone()),
            ("version", "l.version + 1".into()),
            ("ttl_ms", ttl.clone()),
            (
                "acquired_at_ms",
                format!(
                    "CASE WHEN l.holder IS {holder} AND l.fence_token = {token} AND l.boot_id = {boot} \
                     THEN l.acquired_at_ms ELSE {now} END"
                ),
            ),
            ("expires_at_ms", format!("{now} + {ttl}")),
            ("wall_expires_at_ms", wall),
            ("write_id", wid.clone()),
            ("boot_id", boot.clone()),
        ]
        .iter()
        .map(|(col, value)| format!("{col} = {value}"))
        .collect::<Vec<_>>()
        .join(", ");
        let sql = format!(
            "UPDATE {t} AS l SET {set} WHERE l.name = {name} AND {cond} {}",
            Self::returning(&wid, &now, &boot)
        );
        p.finish(sql)
    }

    /// A refused renewal writes nothing, as a refused version write does.
    fn renew(&self) -> LeaseStatement {
        let renewed = Reply::Affected {
            deletes: false,
            version: NewVersion::Next,
        };
        self.held_write(renewed, |p, wid, now, boot| {
            let [ttl, wall] = p.all([Arg::TtlMs, Arg::WallMs]);
            format!(
                "version = l.version + 1, ttl_ms = {ttl}, expires_at_ms = {now} + {ttl}, \
                 wall_expires_at_ms = {wall}, write_id = {wid}, boot_id = {boot}"
            )
        })
    }

    /// A refused release writes nothing, as a refused version write does.
    fn release(&self) -> LeaseStatement {
        let vacated = Reply::Vacates {
            version: NewVersion::Next,
        };
        self.held_write(vacated, |_, wid, _, _| {
            format!("holder = NULL, version = l.version + 1, wall_expires_at_ms = NULL, write_id = {wid}")
        })
    }

    fn delete(&self) -> LeaseStatement {
        let t = &self.t;
        let mut p = Placeholders::new(Dialect::Sqlite);
        let [name, ver, wid, now, boot] = p.all([Arg::Name, Arg::Version, Arg::WriteId, Arg::NowMs, Arg::BootId]);
        let cond = format!("(l.version = {ver} AND l.deleted = 0)");
        let set = Self::guarded_set(
            &cond,
            &[
                ("holder", "NULL".into()),
                ("version", "l.version + 1".into()),
                ("deleted", "1".into()),
                ("write_id", wid.clone()),
            ],
        );
        let sql = format!(
            "UPDATE {t} AS l SET {set} WHERE l.name = {name} {}",
            Self::returning(&wid, &now, &boot)
        );
        p.finish(sql)
    }

    /// Renewals are sent one by one.
    fn renew_batch(&self) -> Option<RenewBatch> {
        None
    }
}

struct MySql {
    t: String,
}

/// How a MySQL version write or renewal answers: one affected row, the bound values at
/// the write's id.
const MYSQL_WROTE: Reply = Reply::Affected {
    deletes: false,
    version: NewVersion::WriteId,
};

/// "Now" on the MySQL server's clock, in Unix ms: `UTC_TIMESTAMP(6)` is the statement's
/// start (one value for the whole statement) and the difference is plain arithmetic, so
/// neither the session's `time_zone` nor a daylight-saving change moves it.
const MYSQL_NOW_MS: &str = "(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000)";

/// The query answering the server's clock in Unix ms, one `BIGINT`, where the server
/// has one (SQLite's statements run in the client's process: `None`).
pub(crate) fn server_now_ms_sql(dialect: Dialect) -> Option<String> {
    match dialect {
        Dialect::Postgres => Some("SELECT CAST(FLOOR(EXTRACT(EPOCH FROM now()) * 1000) AS BIGINT)".to_owned()),
        Dialect::MySql => Some(format!("SELECT CAST({MYSQL_NOW_MS} AS SIGNED)")),
        _ => None,
    }
}

/// The MySQL columns a claim or create writes after `version`, in order.
const MYSQL_SET: &[&str] = &[
    "holder",
    "ttl_ms",
    "acquired_at_ms",
    "expires_at_ms",
    "wall_expires_at_ms",
    "deleted",
];

impl MySql {
    fn new(table: &LeaseTable) -> Self {
        Self {
            t: table.quoted(Dialect::MySql),
        }
    }

    /// Whether the row is a valid record. The range checks come before any arithmetic
    /// (MySQL evaluates `AND` left to right and stops at the first false), so a planted
    /// extreme value never overflows a `BIGINT` here.
    fn valid(p: &mut Placeholders) -> String {
        Self::valid_for(&p.get(Arg::Holder))
    }

    /// [`Self::valid`] with `holder` (a placeholder or a column) as the holder this
    /// write names.
    fn valid_for(holder: &str) -> String {
        let (min, max) = ttl_bounds();
        format!(
            "fence_token BETWEEN 1 AND {TOKEN_MAX} AND ttl_ms BETWEEN {min} AND {max} \
             AND version BETWEEN 1 AND {I64_MAX_MINUS_1} \
             AND (holder IS NULL OR ((holder <=> {holder} OR (CHAR_LENGTH(holder) BETWEEN 1 AND {MAX_HOLDER_LEN} \
             AND holder REGEXP '^[{HOLDER_CLASS}]+$')) \
             AND expires_at_ms <= {MYSQL_NOW_MS} + ttl_ms + {slack})) \
             AND (wall_expires_at_ms IS NULL OR wall_expires_at_ms >= 0)",
            slack = EXPIRY_SLACK.as_millis()
        )
    }

    /// Time left on the server's clock (never an overflow: a past expiry is 0).
    fn remaining() -> String {
        format!("CAST(IF(expires_at_ms > {MYSQL_NOW_MS}, expires_at_ms - {MYSQL_NOW_MS}, 0) AS SIGNED) AS remaining_ms")
    }

    /// `INSERT … ON DUPLICATE KEY UPDATE` of a claim (`token` `None`: the store issues
    /// the next one) or a create (`Some`: the bound token) that applies on a duplicate
    /// only when `cond` holds of the row as it is.
    ///
    /// MySQL assigns the `UPDATE` columns left to right, each seeing the ones before: the
    /// first assignment decides, once, on the row as it was (`version` becomes this
    /// write's id only if `cond` holds), and every later one asks whether it did
    /// (`version = <write id>`). `LAST_INSERT_ID(0)` there takes back the insert's value,
    /// and the token's assignment sets it again only when the write applies: the reply's
    /// insert id is the token written, or 0.
    fn upsert(
        &self,
        p: &mut Placeholders,
        claim: bool,
        cond: impl FnOnce(&mut Placeholders) -> String,
    ) -> LeaseStatement {
        let t = &self.t;
        let now = MYSQL_NOW_MS;
        let [name, holder] = p.all([Arg::Name, Arg::Holder]);
        let token = if claim {
            "LAST_INSERT_ID(1)".to_owned()
        } else {
            format!("LAST_INSERT_ID({})", p.get(Arg::Token))
        };
        let [wid, ttl, ttl2, wall] = p.all([Arg::WriteId, Arg::TtlMs, Arg::TtlMs, Arg::WallMs]);
        let mut sql = format!(
            "INSERT INTO {t} (name, holder, fence_token, version, ttl_ms, acquired_at_ms, expires_at_ms, \
             wall_expires_at_ms, deleted) VALUES ({name}, {holder}, {token}, {wid}, {ttl}, {now}, {now} + {ttl2}, {wall}, 0) \
             ON DUPLICATE KEY UPDATE "
        );
        let cond = cond(p);
        let wid = p.get(Arg::WriteId);
        write!(sql, "version = IF(LAST_INSERT_ID(0) = 0 AND {cond}, {wid}, version)").ok();
        let mine = |p: &mut Placeholders| format!("version = {}", p.get(Arg::WriteId));
        let applied = mine(p);
        let next = if claim {
            "LAST_INSERT_ID(fence_token + 1)".to_owned()
        } else {
            format!("LAST_INSERT_ID({})", p.get(Arg::Token))
        };
        write!(sql, ", fence_token = IF({applied}, {next}, fence_token)").ok();
        for col in MYSQL_SET {
            let applied = mine(p);
            let value = match *col {
                "holder" => p.get(Arg::Holder),
                "ttl_ms" => p.get(Arg::TtlMs),
                "acquired_at_ms" => now.to_owned(),
                "expires_at_ms" => format!("{now} + {}", p.get(Arg::TtlMs)),
                "wall_expires_at_ms" => p.get(Arg::WallMs),
                _ => "0".to_owned(),
            };
            write!(sql, ", {col} = IF({applied}, {value}, {col})").ok();
        }
        let args = std::mem::take(&mut p.args);
        LeaseStatement {
            sql: sql.into(),
            args,
            reply: Reply::InsertId { issues_token: claim },
        }
    }

    /// An `UPDATE … SET {set}` of the row this grant holds, guarded on its version,
    /// holder and token, compared and never written (see Postgres). MySQL binds each `?`
    /// in the order it appears: `set`'s first.
    fn held_write(&self, reply: Reply, set: impl FnOnce(&mut Placeholders) -> String) -> LeaseStatement {
        let t = &self.t;
        let mut p = Placeholders::new(Dialect::MySql);
        let set = set(&mut p);
        let [name, ver, holder, token] = p.all([Arg::Name, Arg::Version, Arg::Holder, Arg::Token]);
        let valid = Self::valid(&mut p);
        let sql = format!(
            "UPDATE {t} SET {set} WHERE name = {name} AND version = {ver} AND deleted = 0 AND holder = {holder} \
             AND fence_token = {token} AND {valid}"
        );
        p.finish_with(sql, reply)
    }

    /// The renewals of a batch, as a table: `JSON_TABLE` over the one parameter (see
    /// [`RenewBatch::sql`]), its columns prefixed `b_` so that the lease table's own
    /// need no qualifier, and its row number `i`.
    fn batch_table() -> String {
        let ascii = |n: usize| format!("VARCHAR({n}) CHARACTER SET ascii COLLATE ascii_bin");
        format!(
            "JSON_TABLE(?, '$[*]' COLUMNS(i FOR ORDINALITY, \
             b_name {name} PATH '$[0]' ERROR ON ERROR, b_holder {holder} PATH '$[1]' ERROR ON ERROR, \
             b_token BIGINT PATH '$[2]' ERROR ON ERROR, b_version BIGINT PATH '$[3]' ERROR ON ERROR, \
             b_ttl_ms BIGINT PATH '$[4]' ERROR ON ERROR, b_wall BIGINT PATH '$[5]' ERROR ON ERROR, \
             b_write_id BIGINT PATH '$[6]' ERROR ON ERROR)) AS b",
            name = ascii(leasehold_core::MAX_NAME_LEN),
            holder = ascii(MAX_HOLDER_LEN),
        )
    }

    /// The renewal of many leases: an `UPDATE` of the lease table joined to the batch
    /// (each row found by its primary key), each row guarded as [`Self::held_write`]
    /// guards one, then the read of every renewal's row (see [`RenewBatch`]).
    fn batch_statements(&self) -> RenewBatch {
        let t = &self.t;
        let now = MYSQL_NOW_MS;
        let b = Self::batch_table();
        let sql = format!(
            "UPDATE {b} STRAIGHT_JOIN {t} AS l ON l.name = b.b_name \
             SET version = b.b_write_id, ttl_ms = b.b_ttl_ms, expires_at_ms = {now} + b.b_ttl_ms, \
             wall_expires_at_ms = b.b_wall \
             WHERE version = b.b_version AND deleted = 0 AND holder = b.b_holder AND fence_token = b.b_token AND {valid}",
            valid = Self::valid_for("b.b_holder")
        );
        let read_back = format!(
            "SELECT b.i AS i, IF(version = b.b_write_id AND deleted = 0 AND holder = b.b_holder \
             AND fence_token = b.b_token, 1, 0) AS applied, 0 AS stale, deleted, holder, fence_token, version, \
             ttl_ms, wall_expires_at_ms, {remaining} FROM {b} STRAIGHT_JOIN {t} AS l ON l.name = b.b_name",
            remaining = Self::remaining()
        );
        RenewBatch {
            sql: sql.into(),
            read_back: Some(read_back.into()),
        }
    }
}

impl LeaseDialect for MySql {
    const READ_AFTER_REFUSED_VERSION_WRITE: bool = true;
    const CONFLICT_RETURNS_CURRENT: bool = false;

    fn read(&self) -> LeaseStatement {
        plain_read(Dialect::MySql, &self.t, |_| Self::remaining())
    }

    fn write_claimable(&self) -> LeaseStatement {
        let now = MYSQL_NOW_MS;
        self.upsert(&mut Placeholders::new(Dialect::MySql), true, |p| {
            format!(
                "(deleted <> 0 OR holder IS NULL OR expires_at_ms <= {now}) AND {} AND fence_token < {TOKEN_MAX}",
                Self::valid(p)
            )
        })
    }

    fn write_absent(&self) -> LeaseStatement {
        self.upsert(&mut Placeholders::new(Dialect::MySql), false, |_| {
            "deleted <> 0".to_owned()
        })
    }

    fn write_version(&self) -> LeaseStatement {
        let t = &self.t;
        let now = MYSQL_NOW_MS;
        let mut p = Placeholders::new(Dialect::MySql);
        // `acquired_at_ms` first: MySQL's later assignments see the earlier ones, and
        // this one compares the holder and token the row had.
        let [h, tok] = p.all([Arg::Holder, Arg::Token]);
        let [holder, token, wid, ttl, ttl2, wall] = p.all([
            Arg::Holder,
            Arg::Token,
            Arg::WriteId,
            Arg::TtlMs,
            Arg::TtlMs,
            Arg::WallMs,
        ]);
        let [name, ver, guard_token] = p.all([Arg::Name, Arg::Version, Arg::Token]);
        // A foreign writer can change the row without its version (see Postgres).
        let valid = Self::valid(&mut p);
        let sql = format!(
            "UPDATE {t} SET acquired_at_ms = IF(holder <=> {h} AND fence_token = {tok}, acquired_at_ms, {now}), \
             holder = {holder}, fence_token = {token}, version = {wid}, ttl_ms = {ttl}, \
             expires_at_ms = {now} + {ttl2}, wall_expires_at_ms = {wall} \
             WHERE name = {name} AND version = {ver} AND deleted = 0 AND fence_token <= {guard_token} AND {valid}"
        );
        p.finish_with(sql, MYSQL_WROTE)
    }

    fn renew(&self) -> LeaseStatement {
        let now = MYSQL_NOW_MS;
        self.held_write(MYSQL_WROTE, |p| {
            let [wid, ttl, ttl2, wall] = p.all([Arg::WriteId, Arg::TtlMs, Arg::TtlMs, Arg::WallMs]);
            format!("version = {wid}, ttl_ms = {ttl}, expires_at_ms = {now} + {ttl2}, wall_expires_at_ms = {wall}")
        })
    }

    fn release(&self) -> LeaseStatement {
        self.held_write(
            Reply::Vacates {
                version: NewVersion::WriteId,
            },
            |p| {
                let [wid] = p.all([Arg::WriteId]);
                format!("holder = NULL, version = {wid}, wall_expires_at_ms = NULL")
            },
        )
    }

    fn delete(&self) -> LeaseStatement {
        let t = &self.t;
        let mut p = Placeholders::new(Dialect::MySql);
        let [wid, name, ver] = p.all([Arg::WriteId, Arg::Name, Arg::Version]);
        let sql = format!(
            "UPDATE {t} SET deleted = 1, holder = NULL, version = {wid} WHERE name = {name} AND version = {ver} AND deleted = 0"
        );
        p.finish_with(
            sql,
            Reply::Affected {
                deletes: true,
                version: NewVersion::WriteId,
            },
        )
    }

    fn renew_batch(&self) -> Option<RenewBatch> {
        Some(self.batch_statements())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use leasehold_core::HolderId;

    /// SQLite's renewal and release are guarded in their `WHERE` clause and answer with
    /// their count of changed rows: the row they wrote is the bound values at the next
    /// version, and no `RETURNING` is paid for on the path every held lease takes.
    #[test]
    fn sqlite_renewals_and_releases_answer_by_count() {
        let s = Statements::new(Dialect::Sqlite, &LeaseTable::default()).expect("sqlite");
        for (st, reply) in [
            (
                &s.renew,
                Reply::Affected {
                    deletes: false,
                    version: NewVersion::Next,
                },
            ),
            (
                &s.release,
                Reply::Vacates {
                    version: NewVersion::Next,
                },
            ),
        ] {
            assert_eq!(st.reply, reply, "{}", st.sql);
            assert!(!st.sql.contains("RETURNING"), "{}", st.sql);
            assert!(st.sql.contains("version = l.version + 1"), "{}", st.sql);
        }
        for st in [&s.write_claimable, &s.write_absent, &s.write_version, &s.delete] {
            assert_eq!(st.reply, Reply::Rows, "{}", st.sql);
        }
        assert!(s.read_after_refused_version_write);
    }

    /// Postgres's renewal and release are one plain guarded `UPDATE` each, answering by
    /// count; the release's `RETURNING` only notifies the waiters. Its other writes still
    /// answer a refusal with the current row in the same statement.
    #[test]
    fn postgres_renewals_and_releases_answer_by_count() {
        let s = Statements::new(Dialect::Postgres, &LeaseTable::default()).expect("postgres");
        assert!(s.renew.reply.is_counted() && s.release.reply.is_counted());
        assert!(
            !s.renew.sql.contains("RETURNING") && !s.renew.sql.contains("UNION"),
            "{}",
            s.renew.sql
        );
        assert!(s.release.sql.contains("RETURNING pg_notify("), "{}", s.release.sql);
        assert!(!s.release.sql.contains("UNION"), "{}", s.release.sql);
        for st in [&s.write_claimable, &s.write_absent, &s.write_version, &s.delete] {
            assert_eq!(st.reply, Reply::Rows, "{}", st.sql);
            assert!(st.sql.contains("UNION ALL"), "{}", st.sql);
        }
        assert!(!s.read_after_refused_version_write);
    }

    /// A SQLite claim sets every column through one `CASE` on its precondition, which it
    /// evaluates once for the row (the stored holder's `GLOB` check included), not once
    /// per column.
    #[test]
    fn a_sqlite_claim_judges_its_precondition_once() {
        let s = Statements::new(Dialect::Sqlite, &LeaseTable::default()).expect("sqlite");
        let claim = &s.write_claimable.sql;
        assert_eq!(claim.matches("GLOB").count(), 1, "{claim}");
        assert_eq!(claim.matches("THEN excluded.").count(), 7, "{claim}");
        assert_eq!(s.delete.sql.matches("AS ok").count(), 1, "{}", s.delete.sql);
    }

    #[test]
    fn every_statement_is_one_statement_with_contiguous_placeholders() {
        let table = LeaseTable::new("ops.leases").expect("table");
        for dialect in [Dialect::Postgres, Dialect::Sqlite] {
            let s = Statements::new(dialect, &table).expect("statements");
            for st in s.all() {
                assert!(!st.sql.contains(';'), "more than one statement: {}", st.sql);
                let mark = if dialect == Dialect::Postgres { '$' } else { '?' };
                for n in 1..=st.args.len() {
                    assert!(
                        st.sql.contains(&format!("{mark}{n}")),
                        "placeholder {n} unused in {}",
                        st.sql
                    );
                }
                assert!(!st.sql.contains(&format!("{mark}{}", st.args.len() + 1)));
                assert!(st.sql.contains(r#""ops"."leases""#));
            }
        }
        let my = Statements::new(Dialect::MySql, &table).expect("mysql");
        for st in my.all() {
            assert!(!st.sql.contains(';'), "more than one statement: {}", st.sql);
            assert_eq!(st.sql.matches('?').count(), st.args.len(), "{}", st.sql);
            assert!(st.sql.contains("`ops`.`leases`"), "{}", st.sql);
            assert!(!st.sql.contains("RETURNING"), "{}", st.sql);
            assert!(
                !st.sql.contains("NOW()") && !st.args.contains(&Arg::NowMs),
                "{}",
                st.sql
            );
        }
        assert!(!my.conflict_returns_current && my.read_after_refused_version_write);
        assert_eq!(my.write_claimable.reply, Reply::InsertId { issues_token: true });
        assert_eq!(my.renew.reply, MYSQL_WROTE);
        // The batch: an `UPDATE` and its read, each with the one JSON parameter, on the
        // server's clock, guarded as `renew` is.
        let batch = my.renew_batch.expect("MySQL batches renewals");
        let read_back = batch.read_back.expect("and reads them back");
        for sql in [&*batch.sql, &*read_back] {
            assert!(!sql.contains(';'), "more than one statement: {sql}");
            assert_eq!(sql.matches('?').count(), 1, "{sql}");
            assert!(sql.contains("JSON_TABLE(?") && sql.contains("`ops`.`leases`"), "{sql}");
            assert!(!sql.contains("NOW()") && !sql.contains("RETURNING"), "{sql}");
            assert_eq!(sql.matches("PATH '$[").count(), MYSQL_RENEWAL_FIELDS.len(), "{sql}");
        }
        assert!(batch.sql.starts_with("UPDATE JSON_TABLE"), "{}", batch.sql);
        for guard in [
            "version = b.b_version",
            "deleted = 0",
            "holder = b.b_holder",
            "fence_token = b.b_token",
            "ttl_ms BETWEEN",
        ] {
            assert!(
                batch.sql.contains(guard),
                "the batch's guard lacks {guard}: {}",
                batch.sql
            );
        }
        assert!(
            read_back.starts_with("SELECT b.i AS i, IF(version = b.b_write_id"),
            "{read_back}"
        );
        for column in RESULT_COLUMNS {
            assert!(read_back.contains(column), "the read lacks {column}: {read_back}");
        }
    }

    #[test]
    fn sqlite_judges_on_the_bound_boot_clock_postgres_on_now() {
        let table = LeaseTable::default();
        let pg = Statements::new(Dialect::Postgres, &table).expect("postgres");
        assert!(!pg.use_host_clock());
        for st in pg.all() {
            assert!(!st.args.contains(&Arg::NowMs) && !st.args.contains(&Arg::BootId));
            assert!(st.sql.contains("now()"), "{}", st.sql);
        }
        let lite = Statements::new(Dialect::Sqlite, &table).expect("sqlite");
        assert!(lite.use_host_clock());
        for st in lite.all() {
            assert!(
                st.args.contains(&Arg::NowMs) && st.args.contains(&Arg::BootId),
                "{}",
                st.sql
            );
            assert!(!st.sql.contains("julianday") && !st.sql.contains("'now'"), "{}", st.sql);
        }
    }

    #[test]
    fn holder_class_matches_lease_core() {
        let class_ok = |c: char| c.is_ascii_alphanumeric() || "_.:/@=#-".contains(c);
        for b in 0u8..128 {
            let c = char::from(b);
            assert_eq!(
                HolderId::new(c.to_string()).is_ok(),
                class_ok(c),
                "holder rule differs for {c:?}"
            );
        }
        assert_eq!(HOLDER_CLASS, "A-Za-z0-9_.:/@=#-");
    }
}
