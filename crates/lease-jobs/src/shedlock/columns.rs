//! The checks both stores make of a ShedLock table's columns, as the database's
//! `information_schema` lists them.

use std::collections::HashMap;

use leasehold_core::{Error, Result};

/// One column as the catalog describes it.
pub(super) struct Column {
    /// Its data type, as the catalog names it.
    pub(super) ty: String,
    /// The most characters it holds, for a character column.
    pub(super) len: Option<i64>,
    /// Its fractional digits, for a time column (where the catalog says; the MySQL
    /// store cuts the times it writes to them).
    #[cfg_attr(not(feature = "shedlock-mysql"), allow(dead_code))]
    pub(super) digits: Option<i64>,
}

/// A table's columns by name.
pub(super) struct Columns {
    table: String,
    /// Whether names compare case-insensitively (MySQL), so they are kept lowercase.
    fold: bool,
    found: HashMap<String, Column>,
}

/// A misconfiguration the store found itself.
pub(super) fn misconfigured(message: String) -> Error {
    Error::Misconfigured { message, source: None }
}

/// A possibly schema-qualified table name as `(schema, table)`.
pub(super) fn split_table(table: &str) -> (Option<String>, String) {
    match table.split_once('.') {
        Some((s, t)) => (Some(s.to_owned()), t.to_owned()),
        None => (None, table.to_owned()),
    }
}

impl Columns {
    /// No columns yet of `table`; `fold`: names and types compare case-insensitively.
    pub(super) fn new(table: &str, fold: bool) -> Self {
        Self {
            table: table.to_owned(),
            fold,
            found: HashMap::new(),
        }
    }

    fn key(&self, name: &str) -> String {
        if self.fold {
            name.to_ascii_lowercase()
        } else {
            name.to_owned()
        }
    }

    /// Adds the column `name`.
    pub(super) fn insert(&mut self, name: &str, mut column: Column) {
        if self.fold {
            column.ty.make_ascii_lowercase();
        }
        self.found.insert(self.key(name), column);
    }

    /// The column `name`, if the table has it.
    pub(super) fn get(&self, name: &str) -> Option<&Column> {
        self.found.get(&self.key(name))
    }

    /// The data type of the column `name`, if the table has it.
    pub(super) fn ty(&self, name: &str) -> Option<&str> {
        self.get(name).map(|c| c.ty.as_str())
    }

    /// Refuses a table with no columns: it does not exist (`provision` names the
    /// store's function that creates it), [`Error::NotProvisioned`].
    pub(super) fn check_exists(&self, provision: &str) -> Result<()> {
        if self.found.is_empty() {
            return Err(Error::NotProvisioned {
                message: format!(
                    "table {} does not exist (create it with {provision} or ShedLock's DDL)",
                    self.table
                ),
                source: None,
            });
        }
        Ok(())
    }

    /// Refuses a table whose `name` or `locked_by` column is not of one of the
    /// character types `text`.
    pub(super) fn check_text(&self, text: &[&str]) -> Result<()> {
        for c in ["name", "locked_by"] {
            if !self.ty(c).is_some_and(|t| text.contains(&t)) {
                return Err(misconfigured(format!(
                    "column {c} of {} must be VARCHAR or TEXT, found {:?}",
                    self.table,
                    self.ty(c)
                )));
            }
        }
        Ok(())
    }

    /// Whether the table has the fence column `fence` (it must be a `bigint`).
    pub(super) fn fenced(&self, fence: &str) -> Result<bool> {
        match self.ty(fence) {
            None => Ok(false),
            Some("bigint") => Ok(true),
            Some(other) => Err(misconfigured(format!(
                "fence column {fence} must be BIGINT, found {other}"
            ))),
        }
    }

    /// The longest lease name the `name` column holds.
    pub(super) fn name_len(&self) -> usize {
        self.get("name")
            .and_then(|c| c.len)
            .and_then(|l| usize::try_from(l).ok())
            .unwrap_or(leasehold_core::MAX_NAME_LEN)
    }
}
