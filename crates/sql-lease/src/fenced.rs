//! The SQL fence: a fenced statement on a user's table, for one database type, and its
//! writes.
//!
//! [`leasehold_core::fence::FencedUpdate`] describes the write (table, columns, keys,
//! mode); [`RowFence`] generates it for the database `DB` (the dialect comes from the
//! type, so a Postgres fence cannot run on an SQLite pool); [`RowWrite`] carries the
//! values for its placeholders (by column name) and the writer's token, binds them in
//! the statement's order, and runs it: one statement, one round trip. A write that
//! wrote nothing says why ([`RowWrite::execute`]): a newer mark
//! ([`leasehold_core::Error::FenceRejected`], with the mark), no row
//! ([`leasehold_core::Error::FenceTargetMissing`]) or a mark that is not a token
//! ([`leasehold_core::Error::FenceMarkInvalid`]).
//!
//! # A holder frozen inside its transaction
//! A fenced write inside a transaction of the caller's holds the row's lock until the
//! transaction ends. If the holder freezes between the write and its `COMMIT` (a GC
//! pause, a SIGSTOP, a VM pause), its successor's first write to that row waits for the
//! whole freeze, and the frozen write may still commit just before it (the fence then
//! refuses nothing: the successor's token is higher and its write follows). Two settings
//! bound this on Postgres:
//! - `idle_in_transaction_session_timeout` **below the TTL** on the holders' sessions
//!   (`ALTER ROLE app SET idle_in_transaction_session_timeout = '2s'`, or a `SET` in the
//!   pool's `after_connect`): Postgres ends a session left idle inside a transaction, rolls
//!   its write back and frees the lock, before a successor can even be granted;
//! - `lock_timeout` on the fenced writes (`SET lock_timeout = '2s'`): a write that would
//!   wait longer fails as [`leasehold_core::Error::Unavailable`] (nothing written) instead
//!   of waiting out a freeze.
//!
//! `crates/store-postgres/tests/frozen_transaction.rs` freezes a real holder process
//! inside its transaction: without the first setting the successor's write waited until
//! its 1.5 s `lock_timeout` gave up; with it at 300 ms (TTL 1 s) the successor wrote 4 ms
//! after its grant.

use std::marker::PhantomData;

use leasehold_core::fence::{
    Dialect, FenceMode, FencedOutcome, FencedStatement, FencedUpdate, Param, Refusal, refusal_error,
};
use leasehold_core::{Error, FencingToken, Result};
use sqlx::query::Query;
use sqlx::{Acquire, Database};

use crate::SqlDatabase;
use crate::errors::{Phase, Target};

/// A value bound to a fenced statement. `None` binds a typed `NULL`.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum SqlValue {
    /// A 64-bit integer (`BIGINT`, `INTEGER`).
    Int(Option<i64>),
    /// Text.
    Text(Option<String>),
    /// A double (`DOUBLE PRECISION`, `REAL`).
    Float(Option<f64>),
    /// A boolean.
    Bool(Option<bool>),
    /// Bytes (`BYTEA`, `BLOB`).
    Bytes(Option<Vec<u8>>),
}

impl std::fmt::Display for SqlValue {
    /// The value as an error message names it: numbers and booleans plainly, text
    /// quoted, bytes by their length.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Int(Some(v)) => write!(f, "{v}"),
            Self::Text(Some(v)) => write!(f, "{v:?}"),
            Self::Float(Some(v)) => write!(f, "{v}"),
            Self::Bool(Some(v)) => write!(f, "{v}"),
            Self::Bytes(Some(v)) => write!(f, "<{} bytes>", v.len()),
            Self::Int(None) | Self::Text(None) | Self::Float(None) | Self::Bool(None) | Self::Bytes(None) => {
                f.write_str("NULL")
            }
        }
    }
}

macro_rules! from_value {
    ($($t:ty => $variant:ident $(via $conv:expr)?),* $(,)?) => {
        $(
            impl From<$t> for SqlValue {
                fn from(v: $t) -> Self {
                    SqlValue::$variant(Some(from_value!(@conv v $(, $conv)?)))
                }
            }
            impl From<Option<$t>> for SqlValue {
                fn from(v: Option<$t>) -> Self {
                    SqlValue::$variant(v.map(|v| from_value!(@conv v $(, $conv)?)))
                }
            }
        )*
    };
    (@conv $v:ident) => { $v };
    (@conv $v:ident, $conv:expr) => { $conv($v) };
}

from_value! {
    i64 => Int,
    i32 => Int via i64::from,
    String => Text,
    &str => Text via str::to_owned,
    f64 => Float,
    bool => Bool,
    Vec<u8> => Bytes,
}

/// A fenced statement on a user's table, generated for the database `DB`.
///
/// ```
/// use leasehold_core::fence::FencedUpdate;
/// use leasehold_sql::RowFence;
/// use sqlx::{Postgres, Sqlite};
/// let pay = FencedUpdate::new("payouts", "last_token")?.set("status")?.key("id")?;
/// let pg = RowFence::<Postgres>::update(&pay)?;
/// assert_eq!(pg.sql(), r#"UPDATE "payouts" SET "status" = $1, "last_token" = $2 WHERE "id" = $3 AND "last_token" <= $2"#);
/// let lite = RowFence::<Sqlite>::upsert(&pay.strict())?;
/// assert!(lite.sql().starts_with(r#"INSERT INTO "payouts" ("id", "status", "last_token") VALUES (?, ?, ?) ON CONFLICT"#));
/// # Ok::<(), leasehold_core::Error>(())
/// ```
///
/// A fence for one database does not run on another's executor; this does not compile:
///
/// ```compile_fail
/// # async fn demo(pg: sqlx::PgPool, lite: leasehold_sql::RowFence<sqlx::Sqlite>) {
/// let _ = lite.write(leasehold_core::FencingToken::new(1)).execute(&pg).await;
/// # }
/// ```
pub struct RowFence<DB> {
    statement: FencedStatement,
    /// How a refusal is explained: the write with the mark in one statement (Postgres),
    /// or a read of the mark after it (SQLite).
    refusal: Explain,
    mode: FenceMode,
    /// The table, naming the resource in errors.
    table: String,
    db: PhantomData<fn() -> DB>,
}

#[derive(Debug, Clone)]
enum Explain {
    /// One statement: `applied`, `found`, `mark`.
    Reporting(FencedStatement),
    /// The mark read after a write that wrote nothing.
    ReadAfter(FencedStatement),
}

impl<DB> Clone for RowFence<DB> {
    fn clone(&self) -> Self {
        Self {
            statement: self.statement.clone(),
            refusal: self.refusal.clone(),
            mode: self.mode,
            table: self.table.clone(),
            db: PhantomData,
        }
    }
}

impl<DB> std::fmt::Debug for RowFence<DB> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RowFence").field("sql", &self.statement.sql).finish()
    }
}

impl<DB: SqlDatabase> RowFence<DB> {
    /// The fenced `UPDATE` of `write` (zero rows when the row is missing, too).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] as [`FencedUpdate::build`].
    pub fn update(write: &FencedUpdate) -> Result<Self> {
        Self::of(write, write.build(DB::DIALECT)?)
    }

    /// The insert-or-fenced-update of `write`: creates the row if it is missing.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] as [`FencedUpdate::build_upsert`].
    pub fn upsert(write: &FencedUpdate) -> Result<Self> {
        Self::of(write, write.build_upsert(DB::DIALECT)?)
    }

    fn of(write: &FencedUpdate, statement: FencedStatement) -> Result<Self> {
        let refusal = match DB::DIALECT {
            Dialect::Postgres => Explain::Reporting(write.reporting(&statement)?),
            dialect => Explain::ReadAfter(write.build_mark_read(dialect)?),
        };
        Ok(Self {
            statement,
            refusal,
            mode: write.guard_mode(),
            table: write.table().quoted(DB::DIALECT),
            db: PhantomData,
        })
    }

    /// The SQL text.
    pub fn sql(&self) -> &str {
        &self.statement.sql
    }

    /// The generated statement and its parameter order.
    pub fn statement(&self) -> &FencedStatement {
        &self.statement
    }

    /// A write of this statement carrying `token` (the lease's
    /// [`leasehold_core::Lease::token`]); give it its values, then
    /// [`execute`](RowWrite::execute) it.
    pub fn write(&self, token: FencingToken) -> RowWrite<'_, DB> {
        RowWrite {
            fence: self,
            token,
            values: Vec::new(),
            keys: Vec::new(),
        }
    }
}

/// One write of a [`RowFence`]: its values and the writer's token, ready to run.
///
/// ```
/// use leasehold_core::fence::FencedUpdate;
/// use leasehold_core::FencingToken;
/// use leasehold_sql::RowFence;
/// let add = RowFence::<sqlx::Sqlite>::update(&FencedUpdate::new("accounts", "last_token")?.increment("balance")?.key("id")?)?;
/// let write = add.write(FencingToken::new(7)).value("balance", -250_i64).key("id", "acct-1");
/// assert_eq!(write.args()?.len(), 4); // balance, token, id, token
/// let incomplete = add.write(FencingToken::new(7)).value("balance", 1_i64);
/// assert!(incomplete.args().is_err());
/// # Ok::<(), leasehold_core::Error>(())
/// ```
pub struct RowWrite<'f, DB> {
    fence: &'f RowFence<DB>,
    token: FencingToken,
    values: Vec<(String, SqlValue)>,
    keys: Vec<(String, SqlValue)>,
}

impl<DB> Clone for RowWrite<'_, DB> {
    fn clone(&self) -> Self {
        Self {
            fence: self.fence,
            token: self.token,
            values: self.values.clone(),
            keys: self.keys.clone(),
        }
    }
}

impl<DB> std::fmt::Debug for RowWrite<'_, DB> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RowWrite")
            .field("sql", &self.fence.statement.sql)
            .field("token", &self.token)
            .field("values", &self.values)
            .field("keys", &self.keys)
            .finish()
    }
}

impl<DB: SqlDatabase> RowWrite<'_, DB> {
    /// The new value of (or the amount to add to) `column`.
    #[must_use]
    pub fn value(mut self, column: &str, value: impl Into<SqlValue>) -> Self {
        self.values.push((column.to_owned(), value.into()));
        self
    }

    /// The value of key `column`, identifying the row.
    #[must_use]
    pub fn key(mut self, column: &str, value: impl Into<SqlValue>) -> Self {
        self.keys.push((column.to_owned(), value.into()));
        self
    }

    /// The token the write carries.
    pub fn token(&self) -> FencingToken {
        self.token
    }

    /// The values in placeholder order.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a column without a value, a value for a column the
    /// statement does not have, or a token above `i64::MAX`.
    pub fn args(&self) -> Result<Vec<SqlValue>> {
        let out = self.values_for(&self.fence.statement.params)?;
        let known = |c: &str, key: bool| {
            self.fence.statement.params.iter().any(|p| match p {
                Param::Value(v) => !key && v == c,
                Param::Key(k) => key && k == c,
                Param::Token => false,
            })
        };
        for (c, _) in &self.values {
            if !known(c, false) {
                return Err(Error::invalid(
                    "fenced write",
                    format!("the statement sets no column {c:?}"),
                ));
            }
        }
        for (c, _) in &self.keys {
            if !known(c, true) {
                return Err(Error::invalid(
                    "fenced write",
                    format!("the statement has no key column {c:?}"),
                ));
            }
        }
        Ok(out)
    }

    /// The values for `params`, in their order.
    fn values_for(&self, params: &[Param]) -> Result<Vec<SqlValue>> {
        let token = self.token.to_i64()?;
        let find = |list: &[(String, SqlValue)], col: &str, what: &'static str| {
            list.iter()
                .find(|(c, _)| c == col)
                .map(|(_, v)| v.clone())
                .ok_or_else(|| Error::invalid("fenced write", format!("no {what} bound for column {col:?}")))
        };
        params
            .iter()
            .map(|p| match p {
                Param::Value(c) => find(&self.values, c, "value"),
                Param::Key(c) => find(&self.keys, c, "key"),
                Param::Token => Ok(SqlValue::Int(Some(token))),
            })
            .collect()
    }

    /// The resource the write names, for errors: the table and the key values.
    fn resource(&self) -> String {
        let keys: Vec<String> = self.keys.iter().map(|(c, v)| format!("{c} = {v}")).collect();
        format!("the row of {} where {}", self.fence.table, keys.join(" and "))
    }

    /// Binds the values in placeholder order onto a query of the statement's text.
    ///
    /// # Errors
    /// As [`RowWrite::args`].
    pub fn bind<'q>(
        &self,
        q: Query<'q, DB, <DB as Database>::Arguments>,
    ) -> Result<Query<'q, DB, <DB as Database>::Arguments>> {
        Ok(bind_values(q, self.args()?))
    }
}

/// Binds `values` in order onto `q`.
pub(crate) fn bind_values<'q, DB: SqlDatabase>(
    q: Query<'q, DB, <DB as Database>::Arguments>,
    values: Vec<SqlValue>,
) -> Query<'q, DB, <DB as Database>::Arguments> {
    values.into_iter().fold(q, DB::bind_value)
}

impl<DB: SqlDatabase> RowWrite<'_, DB> {
    /// Runs the write on `conn`: a pool, a connection or a transaction of `DB` (to make
    /// the write atomic with others of the caller's).
    ///
    /// `Applied(rows)` (at least 1): the row's high-water mark is now the token. The
    /// guard is inside the statement. A write that wrote nothing says why: on Postgres
    /// in the same statement (it also reads the row's mark as it was before the write),
    /// on SQLite with a read of the mark right after it, on the same connection (inside
    /// the caller's transaction, if any).
    ///
    /// # Errors
    /// - [`Error::FenceRejected`] with the row's mark: it has seen a newer token (or,
    ///   strict, this one); the caller has lost the lease and must stop. Without a mark
    ///   when a concurrent writer moved it between the read and the guard.
    /// - [`Error::FenceTargetMissing`]: no row under the key (a plain update).
    /// - [`Error::FenceMarkInvalid`]: the row's mark is `NULL` or not a number.
    /// - [`Error::InvalidInput`] for missing or unknown values or a value the database
    ///   refuses; [`Error::Misconfigured`] for a missing table or column;
    ///   [`Error::Indeterminate`] when the connection broke with the statement sent;
    ///   [`Error::Unavailable`] when it was not sent (or SQLite's write lock stayed
    ///   taken past the busy timeout).
    pub async fn execute<'c, A>(&self, conn: A) -> Result<FencedOutcome<u64>>
    where
        A: Acquire<'c, Database = DB>,
    {
        let failed = |e| DB::map_error(e, Phase::Write, Target::User, "fenced write");
        let write = self.args()?;
        let mut conn = conn
            .acquire()
            .await
            .map_err(|e| DB::map_error(e, Phase::Connect, Target::User, "fenced write"))?;
        let refusal = match &self.fence.refusal {
            Explain::Reporting(statement) => {
                let values = self.values_for(&statement.params)?;
                let (applied, found, mark) = DB::fenced_reporting(&mut conn, &statement.sql, values)
                    .await
                    .map_err(failed)?;
                if applied > 0 {
                    return Ok(FencedOutcome::Applied(applied.unsigned_abs()));
                }
                if found == 0 {
                    Refusal::Missing
                } else {
                    Refusal::Mark(mark)
                }
            }
            Explain::ReadAfter(read) => {
                let read_values = self.values_for(&read.params)?;
                let (applied, marks) =
                    DB::fenced_then_read(&mut conn, (&self.fence.statement.sql, write), (&read.sql, read_values))
                        .await
                        .map_err(failed)?;
                match marks {
                    None => return Ok(FencedOutcome::Applied(applied)),
                    Some(marks) => marks.into_iter().next().map_or(Refusal::Missing, Refusal::Mark),
                }
            }
        };
        Err(refusal_error(refusal, self.fence.mode, self.token, &self.resource()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn args_follow_the_statement_order() {
        let stmt = FencedUpdate::new("t", "last_token")
            .and_then(|f| f.set("status"))
            .and_then(|f| f.key("id"))
            .and_then(|f| RowFence::<sqlx::Postgres>::update(&f))
            .expect("stmt");
        let w = stmt
            .write(FencingToken::new(9))
            .key("id", 4_i64)
            .value("status", "paid");
        assert_eq!(
            w.args().expect("args"),
            vec![
                SqlValue::Text(Some("paid".into())),
                SqlValue::Int(Some(9)),
                SqlValue::Int(Some(4))
            ]
        );
        let extra = w.clone().value("nope", 1_i64);
        assert!(extra.args().is_err());
        let wrong_kind = stmt
            .write(FencingToken::new(9))
            .value("id", 4_i64)
            .value("status", "paid");
        assert!(wrong_kind.args().is_err());
        assert!(stmt.write(FencingToken::new(u64::MAX)).args().is_err());
        assert_eq!(SqlValue::from(None::<i64>), SqlValue::Int(None));
    }
}
