//! Running a [`FencedStatement`] with the caller's values and token.
//!
//! [`leasehold_core::fence::FencedUpdate`] builds the statement; [`FencedWrite`] carries the
//! values for its placeholders (by column name) and the writer's token, and binds them in
//! the statement's order. The store crates execute it and turn the rows affected into
//! the outcome with [`leasehold_core::fence::check_rows`]: zero rows is
//! [`leasehold_core::Error::FenceRejected`].

use leasehold_core::fence::{FencedStatement, Param};
use leasehold_core::{Error, FencingToken, Result};
use sqlx::query::Query;
use sqlx::{Database, Encode, Type};

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

/// A fenced statement with its values and the writer's token, ready to run.
///
/// ```
/// use leasehold_core::fence::{Dialect, FencedUpdate};
/// use leasehold_core::FencingToken;
/// use leasehold_sql::FencedWrite;
/// let stmt = FencedUpdate::new("accounts", "last_token")?.increment("balance")?.key("id")?.build(Dialect::Sqlite)?;
/// let write = FencedWrite::new(&stmt, FencingToken::new(7)).value("balance", -250_i64).key("id", "acct-1");
/// assert_eq!(write.args()?.len(), 4); // balance, token, id, token
/// let incomplete = FencedWrite::new(&stmt, FencingToken::new(7)).value("balance", 1_i64);
/// assert!(incomplete.args().is_err());
/// # Ok::<(), leasehold_core::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct FencedWrite<'s> {
    statement: &'s FencedStatement,
    token: FencingToken,
    values: Vec<(String, SqlValue)>,
    keys: Vec<(String, SqlValue)>,
}

impl<'s> FencedWrite<'s> {
    /// A write of `statement` carrying `token` (the lease's [`leasehold_core::Lease::token`]).
    pub fn new(statement: &'s FencedStatement, token: FencingToken) -> Self {
        Self {
            statement,
            token,
            values: Vec::new(),
            keys: Vec::new(),
        }
    }

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

    /// The statement.
    pub fn statement(&self) -> &FencedStatement {
        self.statement
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
        let token = self.token.to_i64()?;
        let find = |list: &[(String, SqlValue)], col: &str, what: &'static str| {
            list.iter()
                .find(|(c, _)| c == col)
                .map(|(_, v)| v.clone())
                .ok_or_else(|| Error::invalid("fenced write", format!("no {what} bound for column {col:?}")))
        };
        let mut out = Vec::with_capacity(self.statement.params.len());
        for p in &self.statement.params {
            out.push(match p {
                Param::Value(c) => find(&self.values, c, "value")?,
                Param::Key(c) => find(&self.keys, c, "key")?,
                Param::Token => SqlValue::Int(Some(token)),
            });
        }
        let known = |c: &str, key: bool| {
            self.statement.params.iter().any(|p| match p {
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

    /// Binds the values in placeholder order onto a query of the statement's text.
    ///
    /// # Errors
    /// As [`FencedWrite::args`].
    pub fn bind<'q, DB>(
        &self,
        mut q: Query<'q, DB, <DB as Database>::Arguments>,
    ) -> Result<Query<'q, DB, <DB as Database>::Arguments>>
    where
        DB: Database,
        for<'a> Option<i64>: Encode<'a, DB> + Type<DB>,
        for<'a> Option<String>: Encode<'a, DB> + Type<DB>,
        for<'a> Option<f64>: Encode<'a, DB> + Type<DB>,
        for<'a> Option<bool>: Encode<'a, DB> + Type<DB>,
        for<'a> Option<Vec<u8>>: Encode<'a, DB> + Type<DB>,
    {
        for v in self.args()? {
            q = match v {
                SqlValue::Int(v) => q.bind(v),
                SqlValue::Text(v) => q.bind(v),
                SqlValue::Float(v) => q.bind(v),
                SqlValue::Bool(v) => q.bind(v),
                SqlValue::Bytes(v) => q.bind(v),
            };
        }
        Ok(q)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use leasehold_core::fence::{Dialect, FencedUpdate};

    #[test]
    fn args_follow_the_statement_order() {
        let stmt = FencedUpdate::new("t", "last_token")
            .and_then(|f| f.set("status"))
            .and_then(|f| f.key("id"))
            .and_then(|f| f.build(Dialect::Postgres))
            .expect("stmt");
        let w = FencedWrite::new(&stmt, FencingToken::new(9))
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
        let wrong_kind = FencedWrite::new(&stmt, FencingToken::new(9))
            .value("id", 4_i64)
            .value("status", "paid");
        assert!(wrong_kind.args().is_err());
        assert!(FencedWrite::new(&stmt, FencingToken::new(u64::MAX)).args().is_err());
        assert_eq!(SqlValue::from(None::<i64>), SqlValue::Int(None));
    }
}
