//! Listing lease names: keys-only range reads of `[<prefix><name prefix>, its end)`,
//! paged, every page at the first page's revision (one snapshot), the record keys mapped
//! back to names ([`crate::keys`]: `<prefix><name>` is a record, `<prefix><name>!fence`
//! a fence counter, which outlives its record).

use etcd_client::GetOptions;
use leasehold_core::{LeaseName, NamePrefix, Result};

use crate::error::Effect;
use crate::keys::FENCE_SUFFIX;
use crate::store::Inner;

/// Keys per range read. A name has two keys (record and fence counter), so a page holds
/// at least 500 names; a handful of names is one request.
pub(crate) const PAGE: i64 = 1000;

/// The exclusive end of the range of every key starting with `start` (etcd's own
/// `with_prefix` rule): the last byte below 0xFF raised by one, the rest dropped; `\0`
/// (to the end of the keyspace) if there is none.
pub(crate) fn range_end(start: &[u8]) -> Vec<u8> {
    match start.iter().rposition(|b| *b < 0xFF) {
        Some(i) => {
            let mut end = start[..=i].to_vec();
            end[i] += 1;
            end
        }
        None => vec![0],
    }
}

/// The name whose lease record `key` is: the key under `prefix`, not a fence counter,
/// and a valid [`LeaseName`] (the inverse of [`crate::keys::Keys::new`]). Other keys
/// under the prefix (fence counters, a foreign key that is no name) are not records.
pub(crate) fn record_name(prefix: &str, key: &[u8]) -> Option<LeaseName> {
    let rest = key.strip_prefix(prefix.as_bytes())?;
    if rest.ends_with(FENCE_SUFFIX) {
        return None;
    }
    LeaseName::new(std::str::from_utf8(rest).ok()?).ok()
}

impl Inner {
    /// The names of the lease records under `prefix`: one keys-only range read per
    /// [`PAGE`] keys, each next page starting just after the last key of the one before.
    pub(crate) async fn list(&self, prefix: &NamePrefix) -> Result<Vec<LeaseName>> {
        let store_prefix = self.config.prefix();
        let mut start = format!("{store_prefix}{}", prefix.as_str()).into_bytes();
        let end = range_end(&start);
        let mut revision = 0;
        let mut names = Vec::new();
        loop {
            let mut opts = GetOptions::new()
                .with_range(end.clone())
                .with_keys_only()
                .with_limit(PAGE);
            if revision > 0 {
                opts = opts.with_revision(revision);
            }
            self.stats.range();
            let mut kv = self.client.kv_client();
            let resp = self
                .bounded("list lease names", Effect::Read, kv.get(start.clone(), Some(opts)))
                .await?;
            if revision == 0 {
                revision = resp.header().map_or(0, |h| h.revision());
            }
            names.extend(resp.kvs().iter().filter_map(|kv| record_name(store_prefix, kv.key())));
            match resp.kvs().last() {
                Some(last) if resp.more() => {
                    start = last.key().to_vec();
                    start.push(0);
                }
                _ => break,
            }
        }
        // etcd returns keys in byte order, which is name order; sorting again costs
        // nothing and keeps the contract whatever the server does.
        names.sort_unstable();
        names.dedup();
        Ok(names)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_ends() {
        assert_eq!(range_end(b"lh/jobs"), b"lh/jobt");
        assert_eq!(range_end(b"a\xff"), b"b");
        assert_eq!(range_end(b"\xff\xff"), b"\0");
    }

    #[test]
    fn only_record_keys_name_a_lease() {
        let name = |k: &[u8]| record_name("lh/", k).map(|n| n.as_str().to_owned());
        assert_eq!(name(b"lh/jobs/a").as_deref(), Some("jobs/a"));
        assert_eq!(name(b"lh/jobs/a!fence"), None);
        assert_eq!(name(b"other/jobs/a"), None);
        assert_eq!(name(b"lh/"), None);
        assert_eq!(name(b"lh/has space"), None);
        assert_eq!(name(b"lh/\xff"), None);
    }
}
