//! The SQL guard builder: a fenced `UPDATE` (or insert-or-update) on a user's table,
//! its placeholders and quoting per [`Dialect`].
//!
//! ```
//! use leasehold_core::fence::{Dialect, FencedUpdate, Param};
//! let stmt = FencedUpdate::new("accounts", "last_token")?
//!     .set("balance")?
//!     .key("id")?
//!     .build(Dialect::Postgres)?;
//! assert_eq!(
//!     stmt.sql,
//!     r#"UPDATE "accounts" SET "balance" = $1, "last_token" = $2 WHERE "id" = $3 AND "last_token" <= $2"#
//! );
//! assert_eq!(stmt.params, vec![Param::Value("balance".into()), Param::Token, Param::Key("id".into())]);
//!
//! let sqlite = FencedUpdate::new("accounts", "last_token")?.set("balance")?.key("id")?.strict().build(Dialect::Sqlite)?;
//! assert_eq!(
//!     sqlite.sql,
//!     r#"UPDATE "accounts" SET "balance" = ?, "last_token" = ? WHERE "id" = ? AND "last_token" < ?"#
//! );
//! assert_eq!(sqlite.params.len(), 4);
//! # Ok::<(), leasehold_core::Error>(())
//! ```

use std::fmt::Write as _;

use super::FenceMode;
use crate::{Error, Result};

/// Which placeholder and quoting style to generate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Dialect {
    /// `$1, $2, …`, identifiers in `"…"`; a parameter used twice is bound once.
    Postgres,
    /// `?`, identifiers in `"…"`; every placeholder is bound in order.
    Sqlite,
    /// `?`, identifiers in backticks (MySQL, MariaDB); every placeholder is bound in
    /// order. The insert-or-update form is `INSERT … ON DUPLICATE KEY UPDATE`.
    MySql,
}

/// What to bind at each placeholder, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Param {
    /// The new value of this column (or the amount to add, for [`FencedUpdate::increment`]).
    Value(String),
    /// The writer's fencing token (as a signed 64-bit integer: [`crate::FencingToken::to_i64`]).
    Token,
    /// The value of this key column, identifying the row.
    Key(String),
}

/// A generated statement and its parameter order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FencedStatement {
    /// The dialect it was built for (its placeholder and quoting style).
    pub dialect: Dialect,
    /// The SQL text.
    pub sql: String,
    /// What to bind, placeholder by placeholder.
    pub params: Vec<Param>,
}

/// A validated SQL identifier (optionally `schema.name` for tables).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ident(Vec<String>);

impl Ident {
    /// The longest identifier part accepted (Postgres truncates at 63 bytes).
    pub const MAX_LEN: usize = 63;

    /// A column name: a letter or `_`, then letters, digits or `_`; 1 to 63 bytes.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for anything else (no quoting tricks get through).
    pub fn column(s: &str) -> Result<Self> {
        Ok(Self(vec![part(s)?]))
    }

    /// A table name, optionally qualified by a schema (`schema.table`).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] as [`Ident::column`], per part.
    pub fn table(s: &str) -> Result<Self> {
        let parts: Vec<&str> = s.split('.').collect();
        if parts.len() > 2 {
            return Err(Error::invalid("sql identifier", format!("{s:?} has more than one '.'")));
        }
        Ok(Self(parts.into_iter().map(part).collect::<Result<_>>()?))
    }

    /// The unqualified last part.
    pub fn name(&self) -> &str {
        self.0.last().map_or("", String::as_str)
    }

    /// The identifier quoted for `dialect`.
    pub fn quoted(&self, dialect: Dialect) -> String {
        let q = if dialect == Dialect::MySql { '`' } else { '"' };
        self.0
            .iter()
            .map(|p| format!("{q}{p}{q}"))
            .collect::<Vec<_>>()
            .join(".")
    }
}

fn part(s: &str) -> Result<String> {
    let mut chars = s.chars();
    let ok_first = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if !ok_first || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(Error::invalid(
            "sql identifier",
            format!("{s:?} must be a letter or '_' followed by letters, digits or '_'"),
        ));
    }
    if s.len() > Ident::MAX_LEN {
        return Err(Error::invalid(
            "sql identifier",
            format!("{s:?} is longer than {} bytes", Ident::MAX_LEN),
        ));
    }
    Ok(s.to_owned())
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum SetOp {
    Assign,
    Add,
}

/// Builds a fenced `UPDATE` (or insert-or-fenced-update) on a user's table.
#[derive(Debug, Clone)]
pub struct FencedUpdate {
    table: Ident,
    token: Ident,
    set: Vec<(Ident, SetOp)>,
    keys: Vec<Ident>,
    mode: FenceMode,
}

impl FencedUpdate {
    /// A fenced write to `table` whose high-water mark is kept in `token_column`.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for an invalid identifier.
    pub fn new(table: &str, token_column: &str) -> Result<Self> {
        Ok(Self {
            table: Ident::table(table)?,
            token: Ident::column(token_column)?,
            set: Vec::new(),
            keys: Vec::new(),
            mode: FenceMode::NotOlder,
        })
    }

    /// Assigns a new value to `column`.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for an invalid or repeated column.
    pub fn set(mut self, column: &str) -> Result<Self> {
        let c = self.fresh_column(column)?;
        self.set.push((c, SetOp::Assign));
        Ok(self)
    }

    /// Adds a bound amount to `column` (`"col" = "col" + $n`).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for an invalid or repeated column.
    pub fn increment(mut self, column: &str) -> Result<Self> {
        let c = self.fresh_column(column)?;
        self.set.push((c, SetOp::Add));
        Ok(self)
    }

    /// Identifies the row by `column` (call again for a composite key).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for an invalid or repeated column.
    pub fn key(mut self, column: &str) -> Result<Self> {
        let c = self.fresh_column(column)?;
        self.keys.push(c);
        Ok(self)
    }

    crate::fence_mode_setters!(mode);

    /// The table written.
    pub fn table(&self) -> &Ident {
        &self.table
    }

    /// The guard's mode.
    pub fn guard_mode(&self) -> FenceMode {
        self.mode
    }

    fn fresh_column(&self, column: &str) -> Result<Ident> {
        let c = Ident::column(column)?;
        let taken = c.name() == self.token.name()
            || self.set.iter().any(|(s, _)| s.name() == c.name())
            || self.keys.iter().any(|k| k.name() == c.name());
        if taken {
            return Err(Error::invalid(
                "sql identifier",
                format!("column {column:?} is used twice"),
            ));
        }
        Ok(c)
    }

    fn check(&self) -> Result<()> {
        if self.keys.is_empty() {
            return Err(Error::invalid("fenced write", "needs at least one key column"));
        }
        Ok(())
    }

    /// `UPDATE … SET …, token = :token WHERE keys AND token <op> :token`.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] without a key column.
    pub fn build(&self, dialect: Dialect) -> Result<FencedStatement> {
        self.check()?;
        let mut p = Placeholders::new(dialect);
        let mut sql = format!("UPDATE {} SET ", self.table.quoted(dialect));
        for (col, op) in &self.set {
            let q = col.quoted(dialect);
            let ph = p.push(Param::Value(col.name().to_owned()));
            match op {
                SetOp::Assign => write!(sql, "{q} = {ph}, "),
                SetOp::Add => write!(sql, "{q} = {q} + {ph}, "),
            }
            .ok();
        }
        let tok = self.token.quoted(dialect);
        let ph = p.token();
        write!(sql, "{tok} = {ph} WHERE ").ok();
        for k in &self.keys {
            let ph = p.push(Param::Key(k.name().to_owned()));
            write!(sql, "{} = {ph} AND ", k.quoted(dialect)).ok();
        }
        let ph = p.token();
        write!(sql, "{tok} {} {ph}", self.mode.operator()).ok();
        Ok(FencedStatement {
            dialect,
            sql,
            params: p.params,
        })
    }

    /// Insert the row if it does not exist, otherwise the fenced update:
    /// `INSERT … ON CONFLICT (keys) DO UPDATE SET … WHERE t.token <op> excluded.token`
    /// (Postgres, SQLite), or on MySQL `INSERT … ON DUPLICATE KEY UPDATE` with each
    /// column guarded (`col = IF(token <op> ?, ?, col)`, the token column last, so that
    /// every guard sees the row's mark before the write). `increment` columns insert the
    /// bound amount.
    ///
    /// On MySQL the statement also says whether it wrote: `LAST_INSERT_ID()` is 1 after
    /// a write (insert or fenced update) and 0 after a refusal (the affected-row count
    /// cannot tell an insert from a refused update when the client sets
    /// `CLIENT_FOUND_ROWS`, as sqlx does). Keys must be a primary or unique key.
    ///
    /// ```
    /// use leasehold_core::fence::{Dialect, FencedUpdate};
    /// let f = FencedUpdate::new("accounts", "last_token")?.set("balance")?.key("id")?;
    /// let my = f.build_upsert(Dialect::MySql)?;
    /// assert_eq!(
    ///     my.sql,
    ///     "INSERT INTO `accounts` (`id`, `balance`, `last_token`) VALUES (?, ?, IF(LAST_INSERT_ID(1) = 1, ?, NULL)) \
    ///      ON DUPLICATE KEY UPDATE `balance` = IF(`last_token` <= ?, ?, `balance`), \
    ///      `last_token` = IF(LAST_INSERT_ID(0) = 0 AND `last_token` <= ? AND LAST_INSERT_ID(1) = 1, ?, `last_token`)"
    /// );
    /// assert_eq!(my.params.len(), 7);
    /// # Ok::<(), leasehold_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidInput`] without a key column.
    pub fn build_upsert(&self, dialect: Dialect) -> Result<FencedStatement> {
        self.check()?;
        if dialect == Dialect::MySql {
            return Ok(self.build_upsert_mysql());
        }
        let mut p = Placeholders::new(dialect);
        let table = self.table.quoted(dialect);
        let tok = self.token.quoted(dialect);
        let mut cols = Vec::new();
        let mut vals = Vec::new();
        for k in &self.keys {
            cols.push(k.quoted(dialect));
            vals.push(p.push(Param::Key(k.name().to_owned())));
        }
        for (c, _) in &self.set {
            cols.push(c.quoted(dialect));
            vals.push(p.push(Param::Value(c.name().to_owned())));
        }
        cols.push(tok.clone());
        vals.push(p.token());
        let keys: Vec<String> = self.keys.iter().map(|k| k.quoted(dialect)).collect();
        let mut sets: Vec<String> = self
            .set
            .iter()
            .map(|(c, op)| {
                let q = c.quoted(dialect);
                match op {
                    SetOp::Assign => format!("{q} = excluded.{q}"),
                    SetOp::Add => format!("{q} = {table}.{q} + excluded.{q}"),
                }
            })
            .collect();
        sets.push(format!("{tok} = excluded.{tok}"));
        let sql = format!(
            "INSERT INTO {table} ({}) VALUES ({}) ON CONFLICT ({}) DO UPDATE SET {} WHERE {table}.{tok} {} excluded.{tok}",
            cols.join(", "),
            vals.join(", "),
            keys.join(", "),
            sets.join(", "),
            self.mode.operator()
        );
        Ok(FencedStatement {
            dialect,
            sql,
            params: p.params,
        })
    }
}

impl FencedUpdate {
    /// MySQL's insert-or-fenced-update (see [`Self::build_upsert`]).
    fn build_upsert_mysql(&self) -> FencedStatement {
        let d = Dialect::MySql;
        let mut p = Placeholders::new(d);
        let table = self.table.quoted(d);
        let tok = self.token.quoted(d);
        let op = self.mode.operator();
        let mut cols = Vec::new();
        let mut vals = Vec::new();
        for k in &self.keys {
            cols.push(k.quoted(d));
            vals.push(p.push(Param::Key(k.name().to_owned())));
        }
        for (c, _) in &self.set {
            cols.push(c.quoted(d));
            vals.push(p.push(Param::Value(c.name().to_owned())));
        }
        cols.push(tok.clone());
        // The insert says it wrote: LAST_INSERT_ID(1) is evaluated with the row's values.
        vals.push(format!("IF(LAST_INSERT_ID(1) = 1, {}, NULL)", p.push(Param::Token)));
        let mut sets = Vec::new();
        for (c, op_kind) in &self.set {
            let q = c.quoted(d);
            let guard = p.push(Param::Token);
            let value = p.push(Param::Value(c.name().to_owned()));
            sets.push(match op_kind {
                SetOp::Assign => format!("{q} = IF({tok} {op} {guard}, {value}, {q})"),
                SetOp::Add => format!("{q} = IF({tok} {op} {guard}, {q} + {value}, {q})"),
            });
        }
        // On a duplicate key the insert's 1 is taken back, and set again only if the
        // guard passes: the token column is assigned last, so every guard above saw the
        // row's own mark.
        let guard = p.push(Param::Token);
        let value = p.push(Param::Token);
        sets.push(format!(
            "{tok} = IF(LAST_INSERT_ID(0) = 0 AND {tok} {op} {guard} AND LAST_INSERT_ID(1) = 1, {value}, {tok})"
        ));
        FencedStatement {
            dialect: d,
            sql: format!(
                "INSERT INTO {table} ({}) VALUES ({}) ON DUPLICATE KEY UPDATE {}",
                cols.join(", "),
                vals.join(", "),
                sets.join(", ")
            ),
            params: p.params,
        }
    }

    /// The read a refused write is explained by: `SELECT CAST(token AS TEXT) AS mark
    /// FROM table WHERE keys` (`AS CHAR` on MySQL), binding the key columns only. No row: the resource is
    /// missing; a `NULL` or non-numeric mark: it has no valid mark (see
    /// [`super::refusal_error`]).
    ///
    /// ```
    /// use leasehold_core::fence::{Dialect, FencedUpdate, Param};
    /// let read = FencedUpdate::new("accounts", "last_token")?.set("balance")?.key("id")?.build_mark_read(Dialect::Sqlite)?;
    /// assert_eq!(read.sql, r#"SELECT CAST("last_token" AS TEXT) AS mark FROM "accounts" WHERE "id" = ?"#);
    /// assert_eq!(read.params, vec![Param::Key("id".into())]);
    /// # Ok::<(), leasehold_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidInput`] without a key column.
    pub fn build_mark_read(&self, dialect: Dialect) -> Result<FencedStatement> {
        self.check()?;
        let mut p = Placeholders::new(dialect);
        let keys: Vec<String> = self
            .keys
            .iter()
            .map(|k| format!("{} = {}", k.quoted(dialect), p.push(Param::Key(k.name().to_owned()))))
            .collect();
        // MySQL casts to CHAR, not TEXT.
        let text = if dialect == Dialect::MySql { "CHAR" } else { "TEXT" };
        Ok(FencedStatement {
            dialect,
            sql: format!(
                "SELECT CAST({} AS {text}) AS mark FROM {} WHERE {}",
                self.token.quoted(dialect),
                self.table.quoted(dialect),
                keys.join(" AND ")
            ),
            params: p.params,
        })
    }

    /// Postgres only: `write` (this builder's [`Self::build`] or [`Self::build_upsert`])
    /// with, in the same statement, the resource's mark as it was before the write, so
    /// that a refusal says why in the same round trip. One row: `applied` (rows written),
    /// `found` (rows under the key) and `mark` (as text, `NULL` when absent or `NULL`).
    ///
    /// ```
    /// use leasehold_core::fence::{Dialect, FencedUpdate};
    /// let f = FencedUpdate::new("accounts", "last_token")?.set("balance")?.key("id")?;
    /// let stmt = f.reporting(&f.build(Dialect::Postgres)?)?;
    /// assert!(stmt.sql.starts_with(r#"WITH fence_mark AS (SELECT CAST("last_token" AS TEXT) AS mark FROM "accounts" WHERE "id" = $3)"#));
    /// # Ok::<(), leasehold_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a statement of another dialect than Postgres, or
    /// without a key column.
    pub fn reporting(&self, write: &FencedStatement) -> Result<FencedStatement> {
        self.check()?;
        if write.dialect != Dialect::Postgres {
            return Err(Error::invalid(
                "fenced write",
                "a write that reports its refusal in one statement is generated for Postgres only",
            ));
        }
        let keys: Vec<String> = self
            .keys
            .iter()
            .map(|k| {
                let at = write
                    .params
                    .iter()
                    .position(|p| matches!(p, Param::Key(c) if c == k.name()))
                    .map_or(0, |i| i + 1);
                format!("{} = ${at}", k.quoted(Dialect::Postgres))
            })
            .collect();
        Ok(FencedStatement {
            dialect: Dialect::Postgres,
            sql: format!(
                "WITH fence_mark AS (SELECT CAST({tok} AS TEXT) AS mark FROM {table} WHERE {keys}), \
                 fence_write AS ({write} RETURNING 1) \
                 SELECT (SELECT count(*) FROM fence_write) AS applied, (SELECT count(*) FROM fence_mark) AS found, \
                 (SELECT mark FROM fence_mark LIMIT 1) AS mark",
                tok = self.token.quoted(Dialect::Postgres),
                table = self.table.quoted(Dialect::Postgres),
                keys = keys.join(" AND "),
                write = write.sql,
            ),
            params: write.params.clone(),
        })
    }
}

struct Placeholders {
    dialect: Dialect,
    params: Vec<Param>,
    token_at: Option<usize>,
}

impl Placeholders {
    fn new(dialect: Dialect) -> Self {
        Self {
            dialect,
            params: Vec::new(),
            token_at: None,
        }
    }

    fn push(&mut self, p: Param) -> String {
        self.params.push(p);
        match self.dialect {
            Dialect::Postgres => format!("${}", self.params.len()),
            _ => "?".to_owned(),
        }
    }

    fn token(&mut self) -> String {
        match (self.dialect, self.token_at) {
            (Dialect::Postgres, Some(i)) => format!("${i}"),
            _ => {
                let ph = self.push(Param::Token);
                self.token_at = Some(self.params.len());
                ph
            }
        }
    }
}
