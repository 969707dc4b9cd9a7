//! Fenced writes on the user's own tables.

use leasehold_core::fence::check_rows;
use leasehold_core::{Error, Result};
use leasehold_sql::FencedWrite;
use leasehold_sql::errors::Phase;
use sqlx::{AssertSqlSafe, Executor, Postgres};

use crate::error::{Target, map_error};

/// Runs a fenced write (built with [`leasehold_core::fence::FencedUpdate`] for
/// [`leasehold_core::fence::Dialect::Postgres`]) on `executor`: a `&PgPool`, a connection or
/// a transaction (to make the write atomic with others of the caller's).
///
/// Returns the rows affected (at least 1). The guard on the token is inside the
/// statement; zero rows (the resource has seen a newer token, or the row does not exist
/// for a plain update) is [`Error::FenceRejected`]: the caller has lost the lease and
/// must stop.
///
/// # Errors
/// [`Error::FenceRejected`] for zero rows; [`Error::InvalidInput`] for missing or unknown
/// values, a statement built for another dialect, or a value the database refuses;
/// [`Error::Misconfigured`] for a missing table or column; [`Error::Indeterminate`] when
/// the connection broke with the statement sent.
pub async fn execute_fenced<'e, E>(executor: E, write: &FencedWrite<'_>) -> Result<u64>
where
    E: Executor<'e, Database = Postgres>,
{
    let statement = write.statement();
    if statement.dialect != leasehold_core::fence::Dialect::Postgres {
        return Err(Error::invalid(
            "fenced write",
            "the statement was not built for Dialect::Postgres",
        ));
    }
    let query = write.bind(sqlx::query(AssertSqlSafe(statement.sql.clone())))?;
    let done = query
        .execute(executor)
        .await
        .map_err(|e| map_error(e, Phase::Write, Target::User, "fenced write"))?;
    check_rows(done.rows_affected(), write.token())?;
    Ok(done.rows_affected())
}
