//! Listing lease names: `SCAN` over the record keys `P{<name prefix>*}` ([`KeyLayout`]),
//! the cursor followed back to 0, the keys mapped back to names, deduplicated and sorted.
//!
//! The pattern ends with the hash tag's `}`, so it matches record keys only: never a
//! name's counter hash `P{N}:meta`, which outlives its record. Glob characters of the
//! key prefix (`* ? [ ] \`, which a prefix may hold) are escaped; name characters are
//! none of them, but the name prefix is escaped the same way.

use std::collections::BTreeSet;
use std::time::Duration;

use leasehold_core::{LeaseName, NamePrefix, Result};
use redis::aio::ConnectionLike;

use crate::call::with_timeout;
use crate::config::KeyLayout;
use crate::error::Effect;

/// The `COUNT` hint of each `SCAN`: about how many keys of the database one call
/// examines. `SCAN` walks the whole database, whatever the pattern, so a listing costs
/// about one call per this many keys in it (one call while it holds fewer).
pub(crate) const SCAN_COUNT: usize = 1000;

/// `text` with Redis glob's special characters escaped, to match literally.
pub(crate) fn escape_glob(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The `MATCH` pattern of the record keys of the names under `prefix`.
pub(crate) fn pattern(keys: &KeyLayout, prefix: &NamePrefix) -> String {
    format!("{}{{{}*}}", escape_glob(keys.prefix()), escape_glob(prefix.as_str()))
}

/// The name whose record `key` is (the inverse of [`KeyLayout::record`]), or `None` for
/// a key that is no record key of a valid name.
pub(crate) fn record_name(keys: &KeyLayout, key: &[u8]) -> Option<LeaseName> {
    let inner = key
        .strip_prefix(keys.prefix().as_bytes())?
        .strip_prefix(b"{")?
        .strip_suffix(b"}")?;
    LeaseName::new(std::str::from_utf8(inner).ok()?).ok()
}

/// The names of the records under `prefix`: `SCAN` calls until the cursor is back at
/// 0, each bounded by `timeout`. `SCAN` may return a key twice; each name is listed
/// once.
pub(crate) async fn list<C>(
    conn: &mut C,
    keys: &KeyLayout,
    timeout: Option<Duration>,
    prefix: &NamePrefix,
) -> Result<Vec<LeaseName>>
where
    C: ConnectionLike + Send,
{
    let pattern = pattern(keys, prefix);
    let mut names = BTreeSet::new();
    let mut cursor: u64 = 0;
    loop {
        let mut cmd = redis::cmd("SCAN");
        cmd.arg(cursor).arg("MATCH").arg(&pattern).arg("COUNT").arg(SCAN_COUNT);
        let (next, batch): (u64, Vec<Vec<u8>>) =
            with_timeout(timeout, Effect::Read, "SCAN of lease records", cmd.query_async(conn)).await?;
        names.extend(batch.iter().filter_map(|k| record_name(keys, k)));
        if next == 0 {
            break;
        }
        cursor = next;
    }
    Ok(names.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_record_keys_literally() {
        let k = KeyLayout::new("leasehold:");
        assert_eq!(pattern(&k, &NamePrefix::new("jobs/").unwrap()), "leasehold:{jobs/*}");
        assert_eq!(pattern(&k, &NamePrefix::all()), "leasehold:{*}");
        assert_eq!(pattern(&k, &NamePrefix::new("u_x#1").unwrap()), "leasehold:{u_x#1*}");
        let odd = KeyLayout::new(r"a*b?[c]\:");
        assert_eq!(pattern(&odd, &NamePrefix::new("x").unwrap()), r"a\*b\?\[c\]\\:{x*}");
    }

    #[test]
    fn only_record_keys_name_a_lease() {
        let k = KeyLayout::new("p:");
        let name = |key: &str| record_name(&k, key.as_bytes()).map(|n| n.as_str().to_owned());
        let a = LeaseName::new("jobs/a").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(name(&k.record(&a)).as_deref(), Some("jobs/a"));
        assert_eq!(name(&k.meta(&a)), None);
        assert_eq!(name(&k.channel(&a)), None);
        assert_eq!(name("q:{jobs/a}"), None);
        assert_eq!(name("p:{}"), None);
        assert_eq!(name("p:{a b}"), None);
        assert_eq!(name("p:jobs/a"), None);
    }
}
