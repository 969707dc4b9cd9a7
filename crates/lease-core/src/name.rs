//! Validated lease names and holder ids.

use std::fmt;
use std::sync::Arc;

use crate::{Error, Result};

/// The longest lease name accepted, in bytes.
pub const MAX_NAME_LEN: usize = 200;

/// The longest holder id accepted, in bytes.
pub const MAX_HOLDER_LEN: usize = 128;

/// The name of a lease: what is being held (`"payouts:2026-11-30"`).
///
/// Accepted: 1 to [`MAX_NAME_LEN`] bytes of ASCII letters, digits and `- _ . : / @ = #`;
/// no leading or trailing `/`, no empty path segment (`a//b`), no `.` or `..` segment.
/// These rules make every valid name a safe S3 key suffix, etcd key, Redis key and SQL
/// value, so each store can map names without escaping.
///
/// ```
/// use leasehold_core::LeaseName;
/// assert!(LeaseName::new("jobs/nightly-payout:2026-11-30").is_ok());
/// assert!(LeaseName::new("").is_err());
/// assert!(LeaseName::new("a/../b").is_err());
/// let refused = LeaseName::new("has space").unwrap_err().to_string();
/// assert!(refused.contains(r#""has space": character ' ' is not allowed (allowed: ASCII letters"#), "{refused}");
/// ```
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LeaseName(Arc<str>);

impl LeaseName {
    /// Validates and wraps a lease name.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming the rule that was broken.
    pub fn new(name: impl AsRef<str>) -> Result<Self> {
        let name = name.as_ref();
        validate_token_chars(name, "lease name", MAX_NAME_LEN)?;
        if name.starts_with('/') || name.ends_with('/') {
            return Err(Error::invalid("lease name", "must not start or end with '/'"));
        }
        for segment in name.split('/') {
            match segment {
                "" => return Err(Error::invalid("lease name", "empty path segment ('//')")),
                "." | ".." => {
                    return Err(Error::invalid("lease name", "'.' and '..' segments are not allowed"));
                }
                _ => {}
            }
        }
        Ok(Self(Arc::from(name)))
    }

    /// The name as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for LeaseName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl TryFrom<&str> for LeaseName {
    type Error = Error;
    fn try_from(value: &str) -> Result<Self> {
        Self::new(value)
    }
}

/// The start of lease names, for listing ([`crate::store::CasStore::list`]): `""` for
/// every name, `"jobs/"` for the names under `jobs/`.
///
/// Accepted: up to [`MAX_NAME_LEN`] bytes of the characters a [`LeaseName`] allows, not
/// starting with `/` and without `//`; so a prefix needs no escaping in any store either
/// (it holds no SQL `LIKE`, Redis glob or S3 delimiter surprises beyond `_`, which
/// stores match literally).
///
/// ```
/// use leasehold_core::{LeaseName, NamePrefix};
/// let jobs = NamePrefix::new("jobs/")?;
/// assert!(jobs.matches(&LeaseName::new("jobs/nightly")?));
/// assert!(!jobs.matches(&LeaseName::new("jobsx")?));
/// assert!(NamePrefix::all().matches(&LeaseName::new("anything")?));
/// assert!(NamePrefix::new("has space").is_err());
/// # Ok::<(), leasehold_core::Error>(())
/// ```
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub struct NamePrefix(Arc<str>);

impl NamePrefix {
    /// Validates and wraps a name prefix.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming the rule that was broken.
    pub fn new(prefix: impl AsRef<str>) -> Result<Self> {
        let prefix = prefix.as_ref();
        if prefix.is_empty() {
            return Ok(Self::all());
        }
        validate_token_chars(prefix, "lease name prefix", MAX_NAME_LEN)?;
        if prefix.starts_with('/') {
            return Err(Error::invalid("lease name prefix", "must not start with '/'"));
        }
        if prefix.contains("//") {
            return Err(Error::invalid("lease name prefix", "empty path segment ('//')"));
        }
        Ok(Self(Arc::from(prefix)))
    }

    /// The empty prefix: every name.
    pub fn all() -> Self {
        Self(Arc::from(""))
    }

    /// The prefix as a string (`""` for every name).
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `name` starts with this prefix.
    pub fn matches(&self, name: &LeaseName) -> bool {
        name.as_str().starts_with(&*self.0)
    }
}

/// Who holds a lease: unique per grant, so a holder never mistakes another
/// acquisition (even its own earlier one) for the lease it holds now.
///
/// Same character rules as [`LeaseName`], without the path rules, up to
/// [`MAX_HOLDER_LEN`] bytes.
///
/// ```
/// use leasehold_core::HolderId;
/// assert!(HolderId::new("worker-7#a1b2").is_ok());
/// assert!(HolderId::new("x".repeat(200)).is_err());
/// ```
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HolderId(Arc<str>);

impl HolderId {
    /// Validates and wraps a holder id.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming the rule that was broken.
    pub fn new(id: impl AsRef<str>) -> Result<Self> {
        let id = id.as_ref();
        validate_token_chars(id, "holder id", MAX_HOLDER_LEN)?;
        Ok(Self(Arc::from(id)))
    }

    /// The id as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// `Debug` as the quoted string and `Display` as the string itself, for the string types
/// of this module.
macro_rules! shown_as_str {
    ($($t:ty),*) => {$(
        impl fmt::Debug for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&*self.0, f)
            }
        }

        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    )*};
}

shown_as_str!(LeaseName, NamePrefix, HolderId);

fn validate_token_chars(s: &str, what: &'static str, max: usize) -> Result<()> {
    if s.is_empty() {
        return Err(Error::invalid(what, "must not be empty"));
    }
    if s.len() > max {
        return Err(Error::invalid(what, format!("{} bytes is longer than {max}", s.len())));
    }
    if let Some(c) = s
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':' | '/' | '@' | '=' | '#')))
    {
        return Err(Error::invalid(
            what,
            format!("{s:?}: character {c:?} is not allowed (allowed: ASCII letters and digits, and - _ . : / @ = #)"),
        ));
    }
    Ok(())
}
