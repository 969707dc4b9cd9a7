//! The databases the SQL stores run on, as a trait of sqlx's own database types: what
//! differs between them is known from the executor's type at compile time.

use async_trait::async_trait;
use leasehold_core::Error;
use leasehold_core::fence::Dialect;
use sqlx::query::Query;
use sqlx::{AssertSqlSafe, Pool, Row};

use crate::errors::{self, Phase, Target};
use crate::fenced::bind_values;
use crate::statements::{NewVersion, Reply};
use crate::{LeaseArgs, LeaseStatement, RawRow, RenewBatch, RenewalArgs, SqlValue};

/// Where running a lease statement failed.
#[derive(Debug)]
pub enum RunError {
    /// Getting a connection from the pool: nothing was sent.
    Connect(sqlx::Error),
    /// The statement, or decoding its rows.
    Statement(sqlx::Error),
}

/// A sqlx database that leasehold's SQL code supports: the dialect its statements are
/// generated in, the meaning of its error codes, and running a lease statement.
///
/// Implemented for [`sqlx::Postgres`], [`sqlx::Sqlite`] and [`sqlx::MySql`] (MySQL and
/// MariaDB). A fence built for one
/// database cannot be run on another's executor: the type says which.
#[async_trait]
pub trait SqlDatabase: sqlx::Database {
    /// The placeholder and quoting style of this database's statements.
    const DIALECT: Dialect;

    /// Classifies a driver error from `phase` of an operation on `target`, keeping the
    /// driver error as the source.
    fn map_error(err: sqlx::Error, phase: Phase, target: Target, context: &str) -> Error;

    /// The rows a statement changed.
    fn rows_affected(result: &Self::QueryResult) -> u64;

    /// Binds `value` onto `q` (a `None` as a `NULL` of the value's type).
    fn bind_value(
        q: Query<'_, Self, <Self as sqlx::Database>::Arguments>,
        value: SqlValue,
    ) -> Query<'_, Self, <Self as sqlx::Database>::Arguments>;

    /// Whether a fenced write can report its own refusal in one statement
    /// ([`SqlDatabase::fenced_reporting`]; Postgres and SQLite can, MySQL cannot).
    const REPORTS_REFUSAL: bool = true;

    /// The rows a fenced write wrote, from its result (`upsert`: an insert-or-update).
    fn fenced_written(result: &Self::QueryResult, upsert: bool) -> u64 {
        let _ = upsert;
        Self::rows_affected(result)
    }

    /// The lease rows that a statement answering with counters ([`Reply`] other than
    /// `Rows`) stands for, from its result: the row it wrote, or none. MySQL's override
    /// adds the insert id of its claims and creates.
    ///
    /// # Errors
    /// A protocol error where counters cannot stand for rows.
    fn counted_rows(
        reply: Reply,
        result: &Self::QueryResult,
        args: &LeaseArgs,
    ) -> std::result::Result<Vec<RawRow>, RunError> {
        affected_rows(reply, Self::rows_affected(result), args)
    }

    /// Runs one lease statement with its values on a connection of `pool` and decodes
    /// its rows.
    ///
    /// # Errors
    /// Where it failed, with the driver's error.
    async fn fetch_lease_rows(
        pool: &Pool<Self>,
        statement: &LeaseStatement,
        args: &LeaseArgs,
    ) -> std::result::Result<Vec<RawRow>, RunError>;

    /// Runs a batch of renewals ([`RenewBatch`], Postgres's and MySQL's) on a
    /// connection of `pool`: each row with the position (from 1) of the renewal it
    /// answers. Databases without those statements never call it.
    ///
    /// # Errors
    /// Where it failed, with the driver's error.
    async fn fetch_renewal_rows(
        pool: &Pool<Self>,
        statements: &RenewBatch,
        batch: &RenewalArgs,
    ) -> std::result::Result<Vec<(i64, RawRow)>, RunError> {
        let _ = (pool, statements, batch);
        Err(RunError::Statement(sqlx::Error::Protocol(
            "batched renewals on a database without the statement".into(),
        )))
    }

    /// Runs `sql`, a statement without parameters or rows (DDL), on a connection of
    /// `pool`: the rows it changed.
    ///
    /// # Errors
    /// The driver's error.
    async fn execute(pool: &Pool<Self>, sql: &str) -> std::result::Result<u64, sqlx::Error>;

    /// Runs a listing query ([`crate::SqlStore`]'s `list`) with the name prefix as its
    /// one parameter, on a connection of `pool`: the `name` column of each row.
    ///
    /// # Errors
    /// Where it failed, with the driver's error.
    async fn fetch_names(pool: &Pool<Self>, sql: &str, prefix: &str) -> std::result::Result<Vec<String>, RunError>;

    /// Runs `sql` with a name and a version as its parameters, on a connection of
    /// `pool`: the rows it changed ([`crate::SqlStore`]'s `purge`).
    ///
    /// # Errors
    /// Where it failed, with the driver's error.
    async fn execute_on_name(
        pool: &Pool<Self>,
        sql: &str,
        name: &str,
        version: i64,
    ) -> std::result::Result<u64, RunError>;

    /// Runs `sql`, a query without parameters answering one `BIGINT`, on a connection
    /// of `pool` (the server's clock, [`crate::SqlStore`]'s `store_now_ms`).
    ///
    /// # Errors
    /// Where it failed, with the driver's error.
    async fn fetch_i64(pool: &Pool<Self>, sql: &str) -> std::result::Result<i64, RunError>;

    /// Runs a fenced write that reports its own refusal (Postgres: the write and the
    /// mark before it in one statement) on `conn`: `(applied, found, mark)`.
    ///
    /// # Errors
    /// The driver's error.
    async fn fenced_reporting(
        conn: &mut Self::Connection,
        sql: &str,
        values: Vec<SqlValue>,
    ) -> std::result::Result<(i64, i64, Option<String>), sqlx::Error>;

    /// Runs a fenced write on `conn` and, if it wrote nothing, the read of the mark:
    /// `(rows written, None)` or `(0, Some(rows read: the mark of each))`.
    ///
    /// # Errors
    /// The driver's error.
    async fn fenced_then_read(
        conn: &mut Self::Connection,
        write: (&str, Vec<SqlValue>),
        read: (&str, Vec<SqlValue>),
    ) -> std::result::Result<(u64, Option<Vec<Option<String>>>), sqlx::Error>;
}

/// The marks the read `$read` (`(sql, values)`) returns on `$conn`, one per row (its
/// `mark` column), or the driver's error from the enclosing function.
macro_rules! marks_of {
    ($conn:ident, $read:ident) => {{
        let rows = bind_values(sqlx::query(AssertSqlSafe($read.0.to_owned())), $read.1)
            .fetch_all(&mut *$conn)
            .await?;
        rows.iter()
            .map(|r| r.try_get("mark"))
            .collect::<std::result::Result<_, _>>()?
    }};
}

/// The lease rows `$query` returns on `$conn`, decoded.
macro_rules! lease_rows {
    ($query:ident, $conn:ident) => {{
        let rows = $query.fetch_all(&mut *$conn).await.map_err(RunError::Statement)?;
        rows.iter()
            .map(RawRow::decode)
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(RunError::Statement)
    }};
}

/// The `name` column of the rows the listing `$sql` returns for `$prefix` on `$pool`,
/// from the enclosing function.
macro_rules! names_of {
    ($pool:ident, $sql:ident, $prefix:ident) => {{
        let mut conn = $pool.acquire().await.map_err(RunError::Connect)?;
        let rows = sqlx::query(AssertSqlSafe($sql.to_owned()))
            .bind($prefix.to_owned())
            .fetch_all(&mut *conn)
            .await
            .map_err(RunError::Statement)?;
        rows.iter()
            .map(|r| r.try_get::<String, _>("name"))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(RunError::Statement)
    }};
}

/// The row an `UPDATE` answering with its count of affected rows ([`Reply::Affected`],
/// [`Reply::Vacates`]) wrote: one affected row, the bound values; none, nothing.
fn affected_rows(reply: Reply, affected: u64, args: &LeaseArgs) -> std::result::Result<Vec<RawRow>, RunError> {
    let row = match reply {
        _ if affected == 0 => return Ok(Vec::new()),
        Reply::Affected { deletes, version } => args.written_row(args.token(), deletes, version),
        Reply::Vacates { version } => args.vacated_row(version),
        Reply::Rows | Reply::InsertId { .. } => {
            return Err(RunError::Statement(sqlx::Error::Protocol(format!(
                "a {reply:?} reply on a database that cannot answer it with counted rows"
            ))));
        }
    };
    Ok(vec![row])
}

/// The rows of a batch of renewals, each with its renewal's position (`i`, from 1).
fn positioned<R>(rows: &[R]) -> std::result::Result<Vec<(i64, RawRow)>, RunError>
where
    R: Row,
    for<'c> &'c str: sqlx::ColumnIndex<R>,
    for<'r> bool: sqlx::Decode<'r, R::Database>,
    bool: sqlx::Type<R::Database>,
    for<'r> i64: sqlx::Decode<'r, R::Database>,
    i64: sqlx::Type<R::Database>,
    for<'r> String: sqlx::Decode<'r, R::Database>,
    String: sqlx::Type<R::Database>,
{
    rows.iter()
        .map(|r| Ok((r.try_get::<i64, _>("i")?, RawRow::decode(r)?)))
        .collect::<std::result::Result<Vec<_>, sqlx::Error>>()
        .map_err(RunError::Statement)
}

/// One implementation for every database: the concrete types satisfy sqlx's bounds.
/// `$item`s override the trait's provided methods (MySQL's counters).
macro_rules! sql_database {
    ($db:ty, $dialect:expr, $errors:ident $(, $item:item)*) => {
        #[async_trait]
        impl SqlDatabase for $db {
            const DIALECT: Dialect = $dialect;

            $($item)*

            fn map_error(err: sqlx::Error, phase: Phase, target: Target, context: &str) -> Error {
                errors::$errors::map_error(err, phase, target, context)
            }

            fn rows_affected(result: &Self::QueryResult) -> u64 {
                result.rows_affected()
            }

            fn bind_value(
                q: Query<'_, Self, <Self as sqlx::Database>::Arguments>,
                value: SqlValue,
            ) -> Query<'_, Self, <Self as sqlx::Database>::Arguments> {
                match value {
                    SqlValue::Int(v) => q.bind(v),
                    SqlValue::Text(v) => q.bind(v),
                    SqlValue::Float(v) => q.bind(v),
                    SqlValue::Bool(v) => q.bind(v),
                    SqlValue::Bytes(v) => q.bind(v),
                }
            }

            async fn fenced_reporting(
                conn: &mut Self::Connection,
                sql: &str,
                values: Vec<SqlValue>,
            ) -> std::result::Result<(i64, i64, Option<String>), sqlx::Error> {
                if !Self::REPORTS_REFUSAL {
                    return Err(sqlx::Error::Configuration(
                        "a fenced write that reports its refusal in one statement is Postgres only".into(),
                    ));
                }
                let row = bind_values(sqlx::query(AssertSqlSafe(sql.to_owned())), values)
                    .fetch_one(&mut *conn)
                    .await?;
                Ok((
                    row.try_get("applied")?,
                    row.try_get("found")?,
                    row.try_get("mark")?,
                ))
            }

            async fn fenced_then_read(
                conn: &mut Self::Connection,
                write: (&str, Vec<SqlValue>),
                read: (&str, Vec<SqlValue>),
            ) -> std::result::Result<(u64, Option<Vec<Option<String>>>), sqlx::Error> {
                let upsert = write.0.starts_with("INSERT");
                let done = bind_values(sqlx::query(AssertSqlSafe(write.0.to_owned())), write.1)
                    .execute(&mut *conn)
                    .await?;
                let written = Self::fenced_written(&done, upsert);
                if written > 0 {
                    return Ok((written, None));
                }
                Ok((0, Some(marks_of!(conn, read))))
            }

            async fn execute(pool: &Pool<Self>, sql: &str) -> std::result::Result<u64, sqlx::Error> {
                let done = sqlx::query(AssertSqlSafe(sql.to_owned())).execute(pool).await?;
                Ok(done.rows_affected())
            }

            async fn execute_on_name(
                pool: &Pool<Self>,
                sql: &str,
                name: &str,
                version: i64,
            ) -> std::result::Result<u64, RunError> {
                let mut conn = pool.acquire().await.map_err(RunError::Connect)?;
                let done = sqlx::query(AssertSqlSafe(sql.to_owned()))
                    .bind(name.to_owned())
                    .bind(version)
                    .execute(&mut *conn)
                    .await
                    .map_err(RunError::Statement)?;
                Ok(done.rows_affected())
            }

            async fn fetch_i64(pool: &Pool<Self>, sql: &str) -> std::result::Result<i64, RunError> {
                let mut conn = pool.acquire().await.map_err(RunError::Connect)?;
                sqlx::query_scalar::<_, i64>(AssertSqlSafe(sql.to_owned()))
                    .fetch_one(&mut *conn)
                    .await
                    .map_err(RunError::Statement)
            }

            async fn fetch_names(
                pool: &Pool<Self>,
                sql: &str,
                prefix: &str,
            ) -> std::result::Result<Vec<String>, RunError> {
                names_of!(pool, sql, prefix)
            }

            async fn fetch_lease_rows(
                pool: &Pool<Self>,
                statement: &LeaseStatement,
                args: &LeaseArgs,
            ) -> std::result::Result<Vec<RawRow>, RunError> {
                let mut conn = pool.acquire().await.map_err(RunError::Connect)?;
                let query = args.bind(statement, sqlx::query(AssertSqlSafe(statement.sql.clone())));
                if statement.reply == Reply::Rows {
                    return lease_rows!(query, conn);
                }
                let done = query.execute(&mut *conn).await.map_err(RunError::Statement)?;
                Self::counted_rows(statement.reply, &done, args)
            }
        }
    };
}

sql_database!(
    sqlx::Postgres,
    Dialect::Postgres,
    postgres,
    /// One `UPDATE … FROM unnest(…)`: the renewals' columns bound as six arrays.
    async fn fetch_renewal_rows(
        pool: &Pool<Self>,
        statements: &RenewBatch,
        batch: &RenewalArgs,
    ) -> std::result::Result<Vec<(i64, RawRow)>, RunError> {
        let mut conn = pool.acquire().await.map_err(RunError::Connect)?;
        let rows = sqlx::query(AssertSqlSafe(statements.sql.to_string()))
            .bind(&batch.names)
            .bind(&batch.holders)
            .bind(&batch.tokens)
            .bind(&batch.versions)
            .bind(&batch.ttls_ms)
            .bind(&batch.walls_ms)
            .fetch_all(&mut *conn)
            .await
            .map_err(RunError::Statement)?;
        positioned(&rows)
    }
);
sql_database!(sqlx::Sqlite, Dialect::Sqlite, sqlite);

// MySQL (and MariaDB): no `UPDATE … RETURNING` (MySQL has no `RETURNING` at all), so a
// write answers with its reply's counters ([`Reply`]): the insert id that
// `LAST_INSERT_ID(expr)` set, or the affected rows; the row it wrote is the bound values.
sql_database!(
    sqlx::MySql,
    Dialect::MySql,
    mysql,
    /// Not generated for MySQL ([`leasehold_core::fence::FencedUpdate::reporting`] is
    /// Postgres only).
    const REPORTS_REFUSAL: bool = false;,
    /// A fenced `UPDATE` wrote when it matched a row (sqlx sets `CLIENT_FOUND_ROWS`: a
    /// row set to the values it had counts); an insert-or-update wrote when its
    /// `LAST_INSERT_ID()` is 1 ([`leasehold_core::fence::FencedUpdate::build_upsert`]).
    fn fenced_written(result: &Self::QueryResult, upsert: bool) -> u64 {
        if upsert {
            u64::from(result.last_insert_id() == 1)
        } else {
            result.rows_affected()
        }
    },
    fn counted_rows(
        reply: Reply,
        result: &Self::QueryResult,
        args: &LeaseArgs,
    ) -> std::result::Result<Vec<RawRow>, RunError> {
        let Reply::InsertId { issues_token } = reply else {
            return affected_rows(reply, result.rows_affected(), args);
        };
        let id = result.last_insert_id();
        if id == 0 {
            return Ok(Vec::new());
        }
        let token = if issues_token {
            i64::try_from(id)
                .map_err(|_| RunError::Statement(sqlx::Error::Protocol(format!("insert id {id} is not a token"))))?
        } else {
            args.token()
        };
        Ok(vec![args.written_row(token, false, NewVersion::WriteId)])
    },
    /// The `UPDATE` joined to `JSON_TABLE` of the renewals, then the read of their rows,
    /// on one connection (two statements for the whole batch): each renewal carries a
    /// fresh write id, and a row that shows it (with the renewal's holder and token) is
    /// the renewal applied. A row that another writer changed in between reads as a
    /// conflict, and its lease ends: never a renewal reported that did not apply.
    async fn fetch_renewal_rows(
        pool: &Pool<Self>,
        statements: &RenewBatch,
        batch: &RenewalArgs,
    ) -> std::result::Result<Vec<(i64, RawRow)>, RunError> {
        let Some(read_back) = &statements.read_back else {
            return Err(RunError::Statement(sqlx::Error::Protocol(
                "a MySQL renewal batch without its read".into(),
            )));
        };
        let renewals: Vec<(&str, &str, i64, i64, i64, Option<i64>, i64)> = (0..batch.names.len())
            .map(|k| {
                (
                    batch.names[k].as_str(),
                    batch.holders[k].as_str(),
                    batch.tokens[k],
                    batch.versions[k],
                    batch.ttls_ms[k],
                    batch.walls_ms[k],
                    crate::args::fresh_write_id(),
                )
            })
            .collect();
        let json =
            serde_json::to_string(&renewals).map_err(|e| RunError::Statement(sqlx::Error::Encode(Box::new(e))))?;
        let mut conn = pool.acquire().await.map_err(RunError::Connect)?;
        sqlx::query(AssertSqlSafe(statements.sql.to_string()))
            .bind(&json)
            .execute(&mut *conn)
            .await
            .map_err(RunError::Statement)?;
        let rows = sqlx::query(AssertSqlSafe(read_back.to_string()))
            .bind(&json)
            .fetch_all(&mut *conn)
            .await
            .map_err(RunError::Statement)?;
        positioned(&rows)
    }
);
