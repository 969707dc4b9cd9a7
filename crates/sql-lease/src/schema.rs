//! The lease table's definition per dialect, and the check that a live table matches it.
//!
//! One row per lease name. A release keeps the row (holder `NULL`, token kept); an
//! administrative delete leaves a *tombstone* (`deleted`), so the name's token and
//! version sequences continue if it is ever used again: neither is reused, even after
//! delete and re-create. Nothing ever removes rows, so the role needs only `SELECT`,
//! `INSERT` and `UPDATE` on the table.

use std::fmt::Write as _;

use leasehold_core::fence::Dialect;
use leasehold_core::{Error, MAX_HOLDER_LEN, MAX_NAME_LEN, Result};

use crate::LeaseTable;

/// The column types the lease statements need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Text,
    Int,
    Timestamp,
    Bool,
}

/// Which databases' lease tables have a column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum On {
    All,
    Postgres,
    /// SQLite and MySQL, which keep times as integer ms.
    NotPostgres,
    Sqlite,
}

/// The default of a `NOT NULL` column, so that rows of an earlier layout, and inserts
/// that do not name it, are valid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fill {
    None,
    False,
    Zero,
    Empty,
}

/// One column of the lease table.
struct Column {
    name: &'static str,
    kind: Kind,
    nullable: bool,
    /// For text: the longest value, if the column is a `VARCHAR`.
    len: Option<usize>,
    default: Fill,
    on: On,
}

const fn col(name: &'static str, kind: Kind, nullable: bool, on: On) -> Column {
    Column {
        name,
        kind,
        nullable,
        len: None,
        default: Fill::None,
        on,
    }
}

const fn varchar(name: &'static str, len: usize, nullable: bool) -> Column {
    Column {
        len: Some(len),
        ..col(name, Kind::Text, nullable, On::All)
    }
}

const fn with_default(column: Column, default: Fill) -> Column {
    Column { default, ..column }
}

/// Every column of every database's lease table, in the order of its `CREATE TABLE`;
/// `name` is the key.
const COLUMNS: &[Column] = &[
    varchar("name", MAX_NAME_LEN, false),
    varchar("holder", MAX_HOLDER_LEN, true),
    col("fence_token", Kind::Int, false, On::All),
    col("version", Kind::Int, false, On::All),
    col("ttl_ms", Kind::Int, false, On::All),
    col("acquired_at", Kind::Timestamp, false, On::Postgres),
    col("expires_at", Kind::Timestamp, false, On::Postgres),
    col("acquired_at_ms", Kind::Int, false, On::NotPostgres),
    col("expires_at_ms", Kind::Int, false, On::NotPostgres),
    col("wall_expires_at_ms", Kind::Int, true, On::All),
    with_default(col("deleted", Kind::Bool, false, On::All), Fill::False),
    with_default(col("write_id", Kind::Int, false, On::Sqlite), Fill::Zero),
    with_default(col("boot_id", Kind::Text, false, On::Sqlite), Fill::Empty),
];

/// The storage engine a MySQL lease table must use: its row locks and transactional
/// writes are what make one statement one atomic compare-and-swap (MyISAM has neither).
pub const MYSQL_ENGINE: &str = "InnoDB";

/// The SQLite columns added since the first table layout, with their definitions:
/// [`crate::SqlStore::provision`] adds those an existing table lacks
/// (`ALTER TABLE … ADD COLUMN`). A row written before has `boot_id` `''`: another boot's,
/// so it is expired (claimable at once, its token sequence continuing).
pub const SQLITE_ADDED_COLUMNS: &[(&str, &str)] = &[("boot_id", "TEXT NOT NULL DEFAULT ''")];

impl Column {
    fn exists_on(&self, dialect: Dialect) -> bool {
        match self.on {
            On::All => true,
            On::Postgres => dialect == Dialect::Postgres,
            On::NotPostgres => dialect != Dialect::Postgres,
            On::Sqlite => dialect == Dialect::Sqlite,
        }
    }

    /// The kind the live column must have: SQLite has no booleans.
    fn kind_on(&self, dialect: Dialect) -> Kind {
        match (dialect, self.kind) {
            (Dialect::Sqlite, Kind::Bool) => Kind::Int,
            (_, kind) => kind,
        }
    }

    /// The column's definition in `dialect`'s `CREATE TABLE` (after its name).
    fn definition(&self, dialect: Dialect) -> String {
        let (int, boolean) = match dialect {
            Dialect::Sqlite => ("INTEGER", "INTEGER"),
            _ => ("BIGINT", "BOOLEAN"),
        };
        let ty = match (self.kind, self.len) {
            (Kind::Text, Some(len)) if dialect == Dialect::MySql => {
                // ASCII with a binary collation: names and holders compare byte for byte
                // (every valid one is ASCII), never case-folded.
                format!("VARCHAR({len}) CHARACTER SET ascii COLLATE ascii_bin")
            }
            (Kind::Text, Some(len)) => format!("VARCHAR({len})"),
            (Kind::Text, None) => "TEXT".to_owned(),
            (Kind::Int, _) => int.to_owned(),
            (Kind::Bool, _) => boolean.to_owned(),
            (Kind::Timestamp, _) => "TIMESTAMPTZ".to_owned(),
        };
        let null = match (self.name, self.nullable) {
            ("name", _) if dialect == Dialect::Postgres => " PRIMARY KEY",
            ("name", _) => " NOT NULL PRIMARY KEY",
            (_, true) if dialect == Dialect::MySql => " NULL",
            (_, true) => "",
            (_, false) => " NOT NULL",
        };
        let default = match (self.default, dialect) {
            (Fill::None, _) => "",
            (Fill::False, Dialect::Sqlite) | (Fill::Zero, _) => " DEFAULT 0",
            (Fill::False, _) => " DEFAULT FALSE",
            (Fill::Empty, _) => " DEFAULT ''",
        };
        format!("{ty}{null}{default}")
    }
}

fn columns(dialect: Dialect) -> Result<impl Iterator<Item = &'static Column>> {
    match dialect {
        Dialect::Postgres | Dialect::Sqlite | Dialect::MySql => {
            Ok(COLUMNS.iter().filter(move |c| c.exists_on(dialect)))
        }
        _ => Err(Error::invalid(
            "sql dialect",
            "only Postgres, SQLite and MySQL keep lease tables",
        )),
    }
}

/// The `CREATE TABLE IF NOT EXISTS` statement for `table`: one statement, idempotent.
///
/// # Errors
/// [`Error::InvalidInput`] for a dialect other than Postgres, SQLite and MySQL.
pub fn create_table(dialect: Dialect, table: &LeaseTable) -> Result<String> {
    let body: Vec<String> = columns(dialect)?
        .map(|c| format!("    {:<18} {}", c.name, c.definition(dialect)))
        .collect();
    let options = match dialect {
        Dialect::Sqlite => " WITHOUT ROWID".to_owned(),
        Dialect::MySql => format!(" ENGINE={MYSQL_ENGINE}"),
        _ => String::new(),
    };
    Ok(format!(
        "CREATE TABLE IF NOT EXISTS {} (\n{}\n){options}",
        table.quoted(dialect),
        body.join(",\n")
    ))
}

/// The schema as a plain SQL file for users who run their own migrations: the same
/// statement [`create_table`] returns, with a header saying what it is.
///
/// # Errors
/// As [`create_table`].
pub fn schema_sql(dialect: Dialect, table: &LeaseTable) -> Result<String> {
    let mut out = String::new();
    let (db, clock, access) = match dialect {
        Dialect::Postgres => (
            "Postgres",
            "acquired_at / expires_at are the server's now() (timestamptz).",
            "The role needs SELECT, INSERT and UPDATE on the table.",
        ),
        Dialect::MySql => (
            "MySQL / MariaDB",
            "acquired_at_ms / expires_at_ms are Unix ms on the server's clock (UTC_TIMESTAMP(6)); InnoDB is required.",
            "The user needs SELECT, INSERT and UPDATE on the table.",
        ),
        _ => (
            "SQLite",
            "acquired_at_ms / expires_at_ms are boot-clock ms in the boot boot_id names (else expired).",
            "Every leasing process needs write access to the database file and its directory.",
        ),
    };
    writeln!(
        out,
        "-- leasehold lease table ({db}). Idempotent: safe to run more than once."
    )
    .ok();
    writeln!(
        out,
        "-- One row per lease name; rows are never deleted (a release clears holder,"
    )
    .ok();
    let never_repeat = if dialect == Dialect::MySql {
        "-- an administrative delete sets deleted), so tokens never repeat; a version is a random write id."
    } else {
        "-- an administrative delete sets deleted), so tokens and versions never repeat."
    };
    writeln!(out, "{never_repeat}").ok();
    writeln!(out, "-- {clock}").ok();
    writeln!(out, "-- {access}").ok();
    out.push_str(&create_table(dialect, table)?);
    out.push_str(";\n");
    Ok(out)
}

/// One column of a live table, as the database describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnInfo {
    /// Column name.
    pub name: String,
    /// Declared type (Postgres: `format_type` output; SQLite: the declared type).
    pub decl_type: String,
    /// Whether the column is `NOT NULL`.
    pub not_null: bool,
}

impl ColumnInfo {
    /// The columns a catalog query returned, one row each, with the text columns `name`
    /// and `decl_type`; `not_null` reads the row's nullability (a boolean in Postgres,
    /// 0 or 1 in MySQL).
    ///
    /// # Errors
    /// The driver's error for a column that does not decode.
    pub fn from_rows<R>(
        rows: &[R],
        not_null: impl Fn(&R) -> std::result::Result<bool, sqlx::Error>,
    ) -> std::result::Result<Vec<Self>, sqlx::Error>
    where
        R: sqlx::Row,
        for<'r> String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
        for<'a> &'a str: sqlx::ColumnIndex<R>,
    {
        rows.iter()
            .map(|r| {
                Ok(Self {
                    name: r.try_get("name")?,
                    decl_type: r.try_get("decl_type")?,
                    not_null: not_null(r)?,
                })
            })
            .collect()
    }
}

/// The longest lease name and holder id the live table can hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ColumnLimits {
    /// Longest lease name, in bytes (all valid names are ASCII).
    pub name: usize,
    /// Longest holder id, in bytes.
    pub holder: usize,
}

impl Default for ColumnLimits {
    fn default() -> Self {
        Self {
            name: MAX_NAME_LEN,
            holder: MAX_HOLDER_LEN,
        }
    }
}

impl ColumnLimits {
    /// Refuses a lease name or holder id the table cannot hold, before anything is sent.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming the column and its limit.
    pub fn check(&self, name: &str, holder: Option<&str>) -> Result<()> {
        if name.len() > self.name {
            return Err(Error::invalid(
                "lease name",
                format!(
                    "{} bytes; the lease table's name column holds at most {}",
                    name.len(),
                    self.name
                ),
            ));
        }
        if let Some(h) = holder.filter(|h| h.len() > self.holder) {
            return Err(Error::invalid(
                "holder id",
                format!(
                    "{} bytes; the lease table's holder column holds at most {}",
                    h.len(),
                    self.holder
                ),
            ));
        }
        Ok(())
    }
}

fn misconfigured(table: &LeaseTable, what: impl std::fmt::Display) -> Error {
    Error::Misconfigured {
        message: format!("lease table {}: {what}", table.display()),
        source: None,
    }
}

/// What `provision` creates is missing from `table`.
fn not_provisioned(table: &LeaseTable, what: impl std::fmt::Display) -> Error {
    Error::NotProvisioned {
        message: format!("lease table {}: {what}", table.display()),
        source: None,
    }
}

/// Checks a live table's columns against what the statements need, and reads the length
/// limits of its name and holder columns. Extra columns are allowed (they must be
/// nullable or have a default, or writes fail with [`Error::Misconfigured`]).
///
/// `name_is_unique_key`: whether `name` alone is the primary key (or a unique index):
/// the statements' `ON CONFLICT (name)` needs it.
///
/// # Errors
/// [`Error::NotProvisioned`] for a missing table (no columns) or a column a table of an
/// earlier version lacks (`provision` adds it); [`Error::Misconfigured`] for another
/// missing column, a column of the wrong type or nullability, or no unique key on `name`.
pub fn check_columns(
    dialect: Dialect,
    table: &LeaseTable,
    live: &[ColumnInfo],
    name_is_unique_key: bool,
) -> Result<ColumnLimits> {
    let expected = columns(dialect)?;
    if live.is_empty() {
        return Err(not_provisioned(
            table,
            "does not exist (create it with provision() or the shipped .sql file)",
        ));
    }
    let mut limits = ColumnLimits::default();
    for want in expected {
        let Some(have) = live.iter().find(|c| c.name == want.name) else {
            let added = dialect == Dialect::Sqlite && SQLITE_ADDED_COLUMNS.iter().any(|(c, _)| *c == want.name);
            if added {
                let what = format!(
                    "has no column {:?} (a table of an earlier version: provision() adds it)",
                    want.name
                );
                return Err(not_provisioned(table, what));
            }
            return Err(misconfigured(table, format!("has no column {:?}", want.name)));
        };
        let ty = have.decl_type.to_ascii_lowercase();
        let kind = want.kind_on(dialect);
        let (ok, len) = type_matches(dialect, kind, &ty);
        if !ok {
            return Err(misconfigured(
                table,
                format!(
                    "column {:?} has type {:?}, expected {}",
                    want.name,
                    have.decl_type,
                    kind_name(dialect, kind)
                ),
            ));
        }
        if have.not_null == want.nullable {
            let rule = if want.nullable {
                "must allow NULL"
            } else {
                "must be NOT NULL"
            };
            return Err(misconfigured(table, format!("column {:?} {rule}", want.name)));
        }
        match (want.name, len) {
            ("name", Some(n)) => limits.name = n.min(MAX_NAME_LEN),
            ("holder", Some(n)) => limits.holder = n.min(MAX_HOLDER_LEN),
            _ => {}
        }
    }
    if !name_is_unique_key {
        return Err(misconfigured(table, "column \"name\" must be the primary key"));
    }
    if limits.name == 0 || limits.holder == 0 {
        return Err(misconfigured(
            table,
            "name and holder columns must hold at least one character",
        ));
    }
    Ok(limits)
}

fn kind_name(dialect: Dialect, kind: Kind) -> &'static str {
    match (dialect, kind) {
        (Dialect::Postgres, Kind::Text) => "text or varchar",
        (Dialect::Postgres, Kind::Int) => "bigint",
        (Dialect::Postgres, Kind::Timestamp) => "timestamptz",
        (Dialect::Postgres, Kind::Bool) => "boolean",
        (Dialect::MySql, Kind::Text) => "varchar(n) or text",
        (Dialect::MySql, Kind::Int) => "bigint (signed)",
        (Dialect::MySql, Kind::Bool) => "boolean (tinyint(1))",
        (Dialect::MySql, Kind::Timestamp) => "datetime(6)",
        (_, Kind::Text) => "a TEXT-affinity type (TEXT, VARCHAR(n))",
        _ => "an INTEGER-affinity type (INTEGER, BIGINT)",
    }
}

/// Whether a declared type (lower case) fits, and its length limit if it has one.
fn type_matches(dialect: Dialect, kind: Kind, ty: &str) -> (bool, Option<usize>) {
    match dialect {
        Dialect::Postgres => match kind {
            Kind::Text => {
                if ty == "text" || ty == "character varying" {
                    (true, None)
                } else if let Some(n) = ty.strip_prefix("character varying(").and_then(|r| r.strip_suffix(')')) {
                    n.parse::<usize>().map_or((false, None), |n| (true, Some(n)))
                } else {
                    (false, None)
                }
            }
            Kind::Int => (ty == "bigint", None),
            Kind::Timestamp => (ty == "timestamp with time zone", None),
            Kind::Bool => (ty == "boolean", None),
        },
        // information_schema's COLUMN_TYPE: `bigint(20)` on MariaDB, `bigint` on MySQL 8.
        Dialect::MySql => match kind {
            Kind::Text => {
                if ty == "text" {
                    (true, None)
                } else if let Some(n) = ty.strip_prefix("varchar(").and_then(|r| r.strip_suffix(')')) {
                    n.parse::<usize>().map_or((false, None), |n| (true, Some(n)))
                } else {
                    (false, None)
                }
            }
            Kind::Int => (ty == "bigint" || (ty.starts_with("bigint(") && ty.ends_with(')')), None),
            Kind::Bool => (ty == "tinyint(1)" || ty == "tinyint", None),
            Kind::Timestamp => (ty == "datetime(6)", None),
        },
        _ => {
            // SQLite's affinity rules (https://sqlite.org/datatype3.html, 3.1).
            let int = ty.contains("int");
            let text = !int && (ty.contains("char") || ty.contains("clob") || ty.contains("text"));
            match kind {
                Kind::Text => (text, declared_len(ty)),
                _ => (int, None),
            }
        }
    }
}

/// `varchar(200)` → 200.
fn declared_len(ty: &str) -> Option<usize> {
    let open = ty.find('(')?;
    let inner = ty[open + 1..].strip_suffix(')')?;
    inner.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn added_sqlite_columns_are_defined_as_in_a_new_table() {
        for (name, definition) in SQLITE_ADDED_COLUMNS {
            let column = COLUMNS
                .iter()
                .find(|c| c.name == *name)
                .expect("an added column is a column");
            assert_eq!(column.definition(Dialect::Sqlite), *definition, "{name}");
        }
    }

    fn info(name: &str, ty: &str, not_null: bool) -> ColumnInfo {
        ColumnInfo {
            name: name.into(),
            decl_type: ty.into(),
            not_null,
        }
    }

    fn pg_ok() -> Vec<ColumnInfo> {
        vec![
            info("name", "character varying(200)", true),
            info("holder", "character varying(128)", false),
            info("fence_token", "bigint", true),
            info("version", "bigint", true),
            info("ttl_ms", "bigint", true),
            info("acquired_at", "timestamp with time zone", true),
            info("expires_at", "timestamp with time zone", true),
            info("wall_expires_at_ms", "bigint", false),
            info("deleted", "boolean", true),
        ]
    }

    #[test]
    fn a_matching_table_passes_with_its_limits() {
        let t = LeaseTable::default();
        let mut cols = pg_ok();
        assert_eq!(
            check_columns(Dialect::Postgres, &t, &cols, true).expect("ok"),
            ColumnLimits::default()
        );
        cols[0] = info("name", "character varying(20)", true);
        cols.push(info("extra", "text", false));
        assert_eq!(check_columns(Dialect::Postgres, &t, &cols, true).expect("ok").name, 20);
    }

    #[test]
    fn mismatches_are_misconfigured() {
        let t = LeaseTable::default();
        let mis = |cols: &[ColumnInfo], unique: bool| {
            matches!(
                check_columns(Dialect::Postgres, &t, cols, unique),
                Err(Error::Misconfigured { .. })
            )
        };
        // A missing table is what `provision` creates: its own kind.
        assert!(
            matches!(
                check_columns(Dialect::Postgres, &t, &[], true),
                Err(Error::NotProvisioned { .. })
            ),
            "missing table"
        );
        assert!(mis(&pg_ok(), false), "no primary key");
        let mut c = pg_ok();
        c.retain(|c| c.name != "version");
        assert!(mis(&c, true), "missing column");
        let mut c = pg_ok();
        c[2] = info("fence_token", "integer", true);
        assert!(mis(&c, true), "wrong type");
        let mut c = pg_ok();
        c[1] = info("holder", "text", true);
        assert!(mis(&c, true), "holder NOT NULL");
    }

    #[test]
    fn sqlite_types_follow_affinity() {
        let t = LeaseTable::default();
        let cols = vec![
            info("name", "VARCHAR(40)", true),
            info("holder", "TEXT", false),
            info("fence_token", "INTEGER", true),
            info("version", "BIGINT", true),
            info("ttl_ms", "INTEGER", true),
            info("acquired_at_ms", "INTEGER", true),
            info("expires_at_ms", "INTEGER", true),
            info("wall_expires_at_ms", "INTEGER", false),
            info("deleted", "INTEGER", true),
            info("write_id", "INTEGER", true),
            info("boot_id", "TEXT", true),
        ];
        let limits = check_columns(Dialect::Sqlite, &t, &cols, true).expect("ok");
        assert_eq!(limits.name, 40);
        assert_eq!(limits.holder, MAX_HOLDER_LEN);
        let mut bad = cols.clone();
        bad[2] = info("fence_token", "TEXT", true);
        assert!(check_columns(Dialect::Sqlite, &t, &bad, true).is_err());
        let mut old = cols.clone();
        old.retain(|c| c.name != "boot_id");
        let err = check_columns(Dialect::Sqlite, &t, &old, true).expect_err("a table without boot_id");
        assert!(matches!(err, Error::NotProvisioned { .. }), "{err:?}");
        assert!(err.to_string().contains("provision() adds it"), "{err}");
        // A column no earlier table lacked is not provision's to add.
        let mut other = cols.clone();
        other.retain(|c| c.name != "write_id");
        let err = check_columns(Dialect::Sqlite, &t, &other, true).expect_err("a table without write_id");
        assert!(matches!(err, Error::Misconfigured { .. }), "{err:?}");
    }

    #[test]
    fn mysql_types_follow_information_schema() {
        let t = LeaseTable::default();
        let cols = vec![
            info("name", "varchar(200)", true),
            info("holder", "varchar(128)", false),
            info("fence_token", "bigint(20)", true),
            info("version", "bigint", true),
            info("ttl_ms", "bigint(20)", true),
            info("acquired_at_ms", "bigint(20)", true),
            info("expires_at_ms", "bigint(20)", true),
            info("wall_expires_at_ms", "bigint(20)", false),
            info("deleted", "tinyint(1)", true),
        ];
        assert_eq!(check_columns(Dialect::MySql, &t, &cols, true).expect("ok").name, 200);
        let mut bad = cols.clone();
        bad[2] = info("fence_token", "bigint(20) unsigned", true);
        assert!(check_columns(Dialect::MySql, &t, &bad, true).is_err(), "unsigned token");
        let mut bad = cols;
        bad[3] = info("version", "int(11)", true);
        assert!(check_columns(Dialect::MySql, &t, &bad, true).is_err(), "32-bit version");
        let ddl = create_table(Dialect::MySql, &t).expect("ddl");
        assert!(
            ddl.ends_with("ENGINE=InnoDB") && ddl.contains("`leasehold_leases`"),
            "{ddl}"
        );
    }

    #[test]
    fn limits_refuse_long_inputs() {
        let l = ColumnLimits { name: 5, holder: 3 };
        assert!(l.check("abcde", Some("abc")).is_ok());
        assert!(matches!(
            l.check("abcdef", None),
            Err(Error::InvalidInput { what: "lease name", .. })
        ));
        assert!(matches!(
            l.check("a", Some("abcd")),
            Err(Error::InvalidInput { what: "holder id", .. })
        ));
    }
}
