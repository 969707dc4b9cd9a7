//! What the ShedLock stores share: a row's decoding into a lease record, the version
//! (the row's content), foreign `locked_by` values, the capabilities and the client
//! they call for, the names they list.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use leasehold_core::store::{Capabilities, CasStore, ClockSource, Grade, LeaseRecord, Stored, Version, record_codec};
use leasehold_core::{ClientConfig, Error, FencingToken, HolderId, LeaseClient, LeaseName, Result, Ttl};

/// One row as the statements return it.
pub(super) struct RawRow {
    pub(super) locked_by: Option<String>,
    pub(super) at_us: Option<i64>,
    pub(super) until_us: Option<i64>,
    pub(super) remaining_ms: Option<i64>,
    pub(super) fence: Option<i64>,
}

/// Decodes a row of a table with (`fenced`) or without the fence column; anything that
/// is not a lease (or a ShedLock lock) is corrupt.
pub(super) fn decode(fenced: bool, name: &LeaseName, r: &RawRow) -> Result<Stored> {
    let corrupt = |why: &str| Error::corrupt(name.as_str(), why);
    let by = r.locked_by.as_deref().ok_or_else(|| corrupt("locked_by is NULL"))?;
    let at = r.at_us.ok_or_else(|| corrupt("locked_at is NULL"))?;
    let until = r.until_us.ok_or_else(|| corrupt("lock_until is NULL"))?;
    let token = if fenced {
        match r.fence {
            // A row ShedLock created and no Rust instance ever held.
            None => FencingToken::FIRST,
            Some(f) if f > 0 => FencingToken::from_i64(f)?,
            Some(f) => return Err(corrupt(&format!("fence {f} is not a token"))),
        }
    } else {
        match u64::try_from(at) {
            Ok(t) if t > 0 => FencingToken::new(t),
            _ => return Err(corrupt("locked_at before 1970")),
        }
    };
    let holder = match by {
        "" => None,
        s => Some(holder_of(s)),
    };
    let ttl_ms = u64::try_from(until.saturating_sub(at) / 1000).unwrap_or(0);
    let ttl_ms = ttl_ms.clamp(millis(Ttl::MIN), millis(Ttl::MAX));
    let record = record_codec::from_parts(name, holder.as_ref().map(HolderId::as_str), token.get(), ttl_ms, None)?;
    let remaining = Duration::from_millis(r.remaining_ms.and_then(|m| u64::try_from(m).ok()).unwrap_or(0));
    Ok(Stored::new(record, version_of(at, until, r.fence, by)).with_remaining(Some(remaining)))
}

/// The parts of a version: `at_us:until_us:fence:locked_by`.
pub(super) struct VersionParts<'a> {
    pub(super) at: i64,
    pub(super) until: i64,
    pub(super) fence: Option<i64>,
    pub(super) by: &'a str,
}

pub(super) fn parse_version(v: &Version) -> Option<VersionParts<'_>> {
    let mut it = v.as_str().splitn(4, ':');
    let at = it.next()?.parse().ok()?;
    let until = it.next()?.parse().ok()?;
    let fence = match it.next()? {
        "-" => None,
        f => Some(f.parse().ok()?),
    };
    let by = it.next()?;
    Some(VersionParts { at, until, fence, by })
}

pub(super) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A holder id for a `locked_by` value: itself when it is a valid holder id, else (a
/// Java host name with characters holder ids do not allow, or a long one) a
/// deterministic id built from it, which never equals a Rust holder's.
pub(super) fn holder_of(locked_by: &str) -> HolderId {
    if let Ok(h) = HolderId::new(locked_by) {
        return h;
    }
    let clean: String = locked_by
        .chars()
        .take(80)
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    // FNV-1a, so the same foreign value always maps to the same id.
    let hash = locked_by.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    HolderId::new(format!("shedlock:{clean}@{hash:016x}"))
        .unwrap_or_else(|_| HolderId::new(format!("shedlock@{hash:016x}")).unwrap_or_else(|_| unreachable_holder()))
}

fn unreachable_holder() -> HolderId {
    unreachable!("a fixed-format holder id is valid")
}

pub(super) fn ttl_param(record: &LeaseRecord) -> Result<i64> {
    if record.is_vacant() {
        // A released lock: free at once, for Java instances too.
        return Ok(0);
    }
    i64::try_from(record.ttl.as_millis()).map_err(|_| Error::invalid("ttl", "too long"))
}

pub(super) fn by_param(record: &LeaseRecord) -> String {
    record
        .holder
        .as_ref()
        .map_or_else(String::new, |h| h.as_str().to_owned())
}

/// The version of a row: `at_us:until_us:fence:locked_by` (`-` for no fence).
pub(super) fn version_of(at: i64, until: i64, fence: Option<i64>, by: &str) -> Version {
    let fence = fence.map_or_else(|| "-".to_owned(), |f| f.to_string());
    Version::new(format!("{at}:{until}:{fence}:{by}"))
}

/// The capabilities of a store over a table with (`fenced`) or without the fence column.
pub(super) fn capabilities(fenced: bool) -> Capabilities {
    let grade = if fenced {
        Grade::Linearizable
    } else {
        Grade::EfficiencyOnly
    };
    Capabilities::new(ClockSource::Store, grade).with_conflict_returns_current(true)
}

/// A lease client on a store over a table with (`fenced`: a correctness client) or
/// without the fence column (an efficiency-only client).
pub(super) fn lease_client<S: CasStore + 'static>(store: S, fenced: bool, config: ClientConfig) -> Result<LeaseClient> {
    if fenced {
        LeaseClient::from_dyn(Arc::new(store), config)
    } else {
        LeaseClient::efficiency_only(store, config)
    }
}

/// The lease names among a table's `names`, sorted. A ShedLock lock whose name is not
/// a valid lease name (ShedLock allows spaces, for one) is left out: the stores cannot
/// read or write it either.
pub(super) fn lease_names(names: Vec<String>) -> Vec<LeaseName> {
    let mut names: Vec<LeaseName> = names.iter().filter_map(|n| LeaseName::new(n).ok()).collect();
    names.sort_unstable();
    names
}

/// A store's `Debug`: its type `kind`, its table and whether it is fenced.
pub(super) fn fmt_store(f: &mut fmt::Formatter<'_>, kind: &str, table: &str, fenced: bool) -> fmt::Result {
    f.debug_struct(kind)
        .field("table", &table)
        .field("fenced", &fenced)
        .finish_non_exhaustive()
}

/// Refuses a name longer than the table's `name` column (`name_len` characters).
pub(super) fn check_name(name_len: usize, name: &LeaseName) -> Result<()> {
    if name.as_str().len() > name_len {
        return Err(Error::invalid(
            "lease name",
            format!("longer than the table's name column ({name_len} characters)"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_round_trip_with_colons_in_the_holder() {
        let v = Version::new("1700000000000000:1700000001000000:7:pid-1#a:b");
        let p = parse_version(&v).expect("parses");
        assert_eq!(
            (p.at, p.until, p.fence, p.by),
            (1_700_000_000_000_000, 1_700_000_001_000_000, Some(7), "pid-1#a:b")
        );
        let unfenced = Version::new("1:2:-:");
        let p = parse_version(&unfenced).expect("parses");
        assert_eq!((p.fence, p.by), (None, ""));
        assert!(parse_version(&Version::new("garbage")).is_none());
        assert!(parse_version(&Version::new("1:2:x:y")).is_none());
    }

    #[test]
    fn foreign_holders_map_to_stable_valid_ids() {
        assert_eq!(holder_of("host-1.example").as_str(), "host-1.example");
        let odd = holder_of("my host (prod) ✓");
        assert_eq!(odd, holder_of("my host (prod) ✓"));
        assert_ne!(odd, holder_of("my host (prod) x"));
        assert!(odd.as_str().starts_with("shedlock:my_host__prod"));
        let long = holder_of(&"h".repeat(255));
        assert!(long.as_str().len() <= leasehold_core::MAX_HOLDER_LEN);
    }
}
