//! The hand-written lock of the SQL floors, one for every sqlx database: an upsert that
//! takes a free or expired row and answers its token, and guarded updates for renew and
//! release. Each backend brings its statements (placeholders, clock), the order they
//! bind their values in, how the upsert answers, and its pool.

use std::time::Duration;

use async_trait::async_trait;
use sqlx::query::Query;
use sqlx::{AssertSqlSafe, ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, Pool, Row, Type};

use super::{Floor, RawLock, lost, ttl_ms};
use crate::Result;

/// A value a floor statement binds.
#[derive(Debug, Clone, Copy)]
pub(super) enum Param {
    /// The lock's name (the row's key).
    Name,
    /// The holder value.
    Holder,
    /// The TTL in milliseconds.
    TtlMs,
    /// The token the lock was taken with.
    Token,
}

/// One statement of a floor.
pub(super) struct Statement {
    /// The SQL.
    pub(super) sql: String,
    /// The values its placeholders take, in their order (a value may repeat where the
    /// placeholders are positional).
    pub(super) params: &'static [Param],
}

/// The values a lock operation has for its statement's [`Param`]s.
struct Values<'a> {
    name: &'a str,
    holder: &'a str,
    ttl_ms: i64,
    token: i64,
}

impl Statement {
    /// The statement with its parameters bound from `v`.
    fn bind<'q, DB>(&'q self, v: &Values<'_>) -> Query<'q, DB, <DB as Database>::Arguments>
    where
        DB: Database,
        for<'a> &'a str: Encode<'a, DB> + Type<DB>,
        for<'a> i64: Encode<'a, DB> + Type<DB>,
    {
        self.params
            .iter()
            .fold(sqlx::query(AssertSqlSafe(self.sql.as_str())), |q, p| match p {
                Param::Name => q.bind(v.name),
                Param::Holder => q.bind(v.holder),
                Param::TtlMs => q.bind(v.ttl_ms),
                Param::Token => q.bind(v.token),
            })
    }
}

/// How the take statement answers with the token it wrote.
pub(super) enum Answer<DB: Database> {
    /// A row holding the token; no row when the lock is held (`RETURNING token`).
    Returning,
    /// No row: the reply's insert id is the token, 0 when the lock is held (MySQL's
    /// `LAST_INSERT_ID(expr)`); the driver's `last_insert_id`.
    InsertId(fn(&DB::QueryResult) -> u64),
}

/// The floor's three statements on one pool.
pub(super) struct SqlFloor<DB: Database> {
    pub(super) pool: Pool<DB>,
    /// `"postgres"`, `"sqlite"`, `"mysql"`: for messages.
    pub(super) label: &'static str,
    /// Takes a free or expired row (acquire, plant and takeover alike), answering as
    /// [`answer`](SqlFloor::answer) says.
    pub(super) take: Statement,
    /// How [`take`](SqlFloor::take) answers.
    pub(super) answer: Answer<DB>,
    /// Extends a held row: one affected row when still held.
    pub(super) renew: Statement,
    /// Frees a held row: one affected row when still held.
    pub(super) release: Statement,
    /// The driver's `rows_affected` (an inherent method of each `QueryResult`).
    pub(super) rows_affected: fn(&DB::QueryResult) -> u64,
}

impl<DB: Database> SqlFloor<DB> {
    fn held(&self, done: &DB::QueryResult, lock: &RawLock) -> Result<()> {
        if (self.rows_affected)(done) == 1 {
            Ok(())
        } else {
            Err(lost(self.label, &lock.key))
        }
    }
}

#[async_trait]
impl<DB> Floor for SqlFloor<DB>
where
    DB: Database,
    <DB as Database>::Arguments: IntoArguments<DB>,
    for<'c> &'c Pool<DB>: Executor<'c, Database = DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    for<'q> i64: Encode<'q, DB> + Decode<'q, DB> + Type<DB>,
    usize: ColumnIndex<DB::Row>,
{
    fn label(&self) -> &'static str {
        self.label
    }

    async fn take(&self, key: &str, holder: &str, ttl: Duration) -> Result<Option<RawLock>> {
        let values = Values {
            name: key,
            holder,
            ttl_ms: ttl_ms(ttl),
            token: 0,
        };
        let query = self.take.bind(&values);
        let token = match self.answer {
            Answer::Returning => match query.fetch_optional(&self.pool).await? {
                Some(row) => Some(row.try_get::<i64, _>(0)?.to_string()),
                None => None,
            },
            Answer::InsertId(insert_id) => match insert_id(&query.execute(&self.pool).await?) {
                0 => None,
                token => Some(token.to_string()),
            },
        };
        Ok(token.map(|t| RawLock::new(key, holder, t)))
    }

    async fn renew(&self, lock: &mut RawLock, ttl: Duration) -> Result<()> {
        let values = Values {
            name: &lock.key,
            holder: &lock.holder,
            ttl_ms: ttl_ms(ttl),
            token: lock.version.parse()?,
        };
        let done = self.renew.bind(&values).execute(&self.pool).await?;
        self.held(&done, lock)
    }

    async fn release(&self, lock: RawLock) -> Result<()> {
        let values = Values {
            name: &lock.key,
            holder: &lock.holder,
            ttl_ms: 0, // no release statement binds a TTL
            token: lock.version.parse()?,
        };
        let done = self.release.bind(&values).execute(&self.pool).await?;
        self.held(&done, &lock)
    }
}
