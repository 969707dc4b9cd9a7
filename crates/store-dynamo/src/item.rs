//! A lease record as a DynamoDB item, and the one UpdateItem that writes it.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use leasehold_core::{
    Error, FencingToken, LeaseName, MAX_HOLDER_LEN, Result, Ttl,
    store::{LeaseRecord, Precondition, Stored, Version, record_codec},
};

use crate::config::{
    ATTR_EXPIRES_AT, ATTR_FENCE, ATTR_FORMAT, ATTR_HOLDER, ATTR_TTL_MS, ATTR_VERSION, ATTR_WALL_EXPIRES_AT_MS,
    ITEM_FORMAT, LEASE_ATTRIBUTES,
};

/// A DynamoDB item.
pub(crate) type Item = HashMap<String, AttributeValue>;

/// A fresh version: 128 random bits. A counter would restart after a delete and reuse
/// versions; a random string never repeats in practice.
pub(crate) fn new_version() -> String {
    format!("{:032x}", rand::random::<u128>())
}

/// Reads a lease item whose partition key is `key_attribute`. Anything that is not
/// exactly a lease item written by this crate (missing or mistyped attribute, unknown
/// format, invalid holder, token or TTL, an attribute the crate never writes) is
/// [`Error::CorruptRecord`], never an absent or free lease.
///
/// An unknown extra attribute is corrupt, as an unknown field is in the portable
/// encoding (`record_codec`) and in Redis: one policy for every store. Whoever added it
/// meant something the lease protocol does not know, and no write of this crate
/// removes it.
pub(crate) fn decode(key_attribute: &str, name: &LeaseName, item: &Item) -> Result<Stored> {
    if let Some(extra) = item
        .keys()
        .find(|k| k.as_str() != key_attribute && !LEASE_ATTRIBUTES.contains(&k.as_str()))
    {
        return Err(Error::corrupt(
            name.as_str(),
            format!("attribute {extra:?} is not one a lease item has"),
        ));
    }
    let format = number(name, item, ATTR_FORMAT)?.ok_or_else(|| missing(name, ATTR_FORMAT))?;
    if format != u64::from(ITEM_FORMAT) {
        return Err(Error::corrupt(name.as_str(), format!("unknown item format {format}")));
    }
    let version = string(name, item, ATTR_VERSION)?.ok_or_else(|| missing(name, ATTR_VERSION))?;
    if version.is_empty() {
        return Err(Error::corrupt(name.as_str(), "empty version"));
    }
    let holder = string(name, item, ATTR_HOLDER)?;
    let token = number(name, item, ATTR_FENCE)?.ok_or_else(|| missing(name, ATTR_FENCE))?;
    let ttl_ms = number(name, item, ATTR_TTL_MS)?.ok_or_else(|| missing(name, ATTR_TTL_MS))?;
    let wall = number(name, item, ATTR_WALL_EXPIRES_AT_MS)?;
    // Set by `expire` for DynamoDB's Time to Live; not part of the record, but a number.
    number(name, item, ATTR_EXPIRES_AT)?;
    let record = record_codec::from_parts(name, holder, token, ttl_ms, wall)?;
    Ok(Stored::new(record, Version::new(version)))
}

fn missing(name: &LeaseName, attr: &str) -> Error {
    Error::corrupt(name.as_str(), format!("attribute {attr:?} is missing"))
}

fn string<'a>(name: &LeaseName, item: &'a Item, attr: &str) -> Result<Option<&'a str>> {
    match item.get(attr) {
        None => Ok(None),
        Some(AttributeValue::S(s)) => Ok(Some(s)),
        Some(other) => Err(Error::corrupt(
            name.as_str(),
            format!("attribute {attr:?} is not a string: {other:?}"),
        )),
    }
}

fn number(name: &LeaseName, item: &Item, attr: &str) -> Result<Option<u64>> {
    match item.get(attr) {
        None => Ok(None),
        Some(AttributeValue::N(n)) => n.parse::<u64>().map(Some).map_err(|_| {
            Error::corrupt(
                name.as_str(),
                format!("attribute {attr:?} is not a whole number: {n:?}"),
            )
        }),
        Some(other) => Err(Error::corrupt(
            name.as_str(),
            format!("attribute {attr:?} is not a number: {other:?}"),
        )),
    }
}

/// A TTL bound in whole milliseconds.
fn ttl_ms(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The expressions of a lease write.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LeaseUpdate {
    pub(crate) update_expression: String,
    pub(crate) condition_expression: String,
    pub(crate) names: HashMap<String, String>,
    pub(crate) values: HashMap<String, AttributeValue>,
}

/// What a write is, for what it requires of the item it replaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WriteKind {
    /// A grant, a takeover or a release: any valid item at the expected version.
    Any,
    /// A renewal: also the same holder and the same token as the record written.
    Renewal,
    /// A release of the (held) record given: the same holder and token on the item,
    /// which is left vacant (holder and wall-clock expiry removed, a fresh version).
    Release,
}

/// The UpdateItem that writes `record` if `expect` holds: `SET` every attribute (the
/// token as given, a fresh version), `REMOVE` the holder of a vacant record and an
/// absent wall-clock expiry.
///
/// # Errors
/// [`Error::InvalidInput`] for [`Precondition::Claimable`], which needs a store clock.
pub(crate) fn lease_update(
    key_attribute: &str,
    expect: &Precondition,
    record: &LeaseRecord,
    version: &str,
    kind: WriteKind,
) -> Result<LeaseUpdate> {
    let mut names: HashMap<String, String> = [
        ("#h", ATTR_HOLDER),
        ("#f", ATTR_FENCE),
        ("#t", ATTR_TTL_MS),
        ("#w", ATTR_WALL_EXPIRES_AT_MS),
        ("#v", ATTR_VERSION),
        ("#fmt", ATTR_FORMAT),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let mut values: HashMap<String, AttributeValue> = HashMap::new();
    let n = |v: u64| AttributeValue::N(v.to_string());
    let release = kind == WriteKind::Release;
    if release && (record.holder.is_none() || !matches!(expect, Precondition::Version(_))) {
        return Err(Error::invalid(
            "release",
            "a release names the holder it releases, on the version it holds",
        ));
    }
    if *expect != Precondition::Vacant {
        values.insert(":f".into(), n(record.token.get()));
    }
    if !release {
        values.insert(":t".into(), n(record.ttl.as_millis()));
    }
    values.insert(":v".into(), AttributeValue::S(version.to_owned()));
    values.insert(":fmt".into(), n(u64::from(ITEM_FORMAT)));
    if let Some(h) = &record.holder {
        values.insert(":h".into(), AttributeValue::S(h.as_str().to_owned()));
    }
    // A renewal's condition requires the item's token, holder and format to be the
    // record's own, so it sets only what a renewal changes (fewer attributes: less work
    // for the server); any other write sets every attribute.
    let renewal = matches!(expect, Precondition::Version(_)) && kind == WriteKind::Renewal;
    // A release's condition requires the same of the item; it changes only what
    // vacating needs: the version, the holder and the wall-clock expiry (removed).
    let (mut set, mut remove) = if release {
        (vec!["#v = :v"], vec!["#h"])
    } else {
        (vec!["#t = :t", "#v = :v"], Vec::new())
    };
    let vacant = *expect == Precondition::Vacant;
    if !renewal && !release {
        // A claim of a vacant item raises its token on the server (none: the first).
        set.push(if vacant {
            "#f = if_not_exists(#f, :zero) + :one"
        } else {
            "#f = :f"
        });
        set.push("#fmt = :fmt");
        match record.holder {
            Some(_) => set.push("#h = :h"),
            None => remove.push("#h"),
        }
    }
    match record.wall_expires_at_ms {
        Some(w) if !release => {
            values.insert(":w".into(), n(w));
            set.push("#w = :w");
        }
        _ => remove.push("#w"),
    }
    // A grant on an item given an expiry (`expire`) takes the item off it again.
    if kind == WriteKind::Any
        && record.holder.is_some()
        && matches!(expect, Precondition::Version(_) | Precondition::Vacant)
    {
        names.insert("#x".into(), ATTR_EXPIRES_AT.to_owned());
        remove.push("#x");
    }
    let mut update_expression = format!("SET {}", set.join(", "));
    if !remove.is_empty() {
        update_expression.push_str(" REMOVE ");
        update_expression.push_str(&remove.join(", "));
    }
    let (rest, bounds) = (
        "#fmt = :fmt AND attribute_type(#t, :N) AND #t BETWEEN :tmin AND :tmax \
         AND (attribute_not_exists(#w) OR (attribute_type(#w, :N) AND #w BETWEEN :zero AND :wmax))",
        [
            (":tmin", n(ttl_ms(Ttl::MIN))),
            (":tmax", n(ttl_ms(Ttl::MAX))),
            (":N", AttributeValue::S("N".into())),
            (":zero", n(0)),
            (":wmax", n(u64::MAX)),
        ],
    );
    let condition_expression = match expect {
        Precondition::Absent => {
            names.insert("#k".into(), key_attribute.to_owned());
            "attribute_not_exists(#k)".to_owned()
        }
        Precondition::Version(v) => {
            values.insert(":expect".into(), AttributeValue::S(v.as_str().to_owned()));
            values.extend(bounds.map(|(k, v)| (k.to_owned(), v)));
            // Another program can change the item without its version (an operator's
            // `update-item`): a token it raised must never be written back (tokens
            // never go backwards), so the item's token may not be above the new one;
            // and an item it made invalid is reported, never healed, so the write
            // requires every attribute to be one this crate could have written (as far as
            // a condition can say: it cannot tell a fraction from a whole number, nor
            // list the attributes an item has, which `decode` checks).
            match (kind, &record.holder) {
                (WriteKind::Any, _) => {
                    values.insert(":one".into(), n(1));
                    values.insert(":hmax".into(), n(MAX_HOLDER_LEN as u64));
                    values.insert(":S".into(), AttributeValue::S("S".into()));
                    format!(
                        "#v = :expect AND attribute_type(#f, :N) AND #f BETWEEN :one AND :f \
                         AND (attribute_not_exists(#h) OR (attribute_type(#h, :S) AND size(#h) BETWEEN :one AND :hmax)) \
                         AND {rest}"
                    )
                }
                // A renewal changes nothing but the expiry: an item whose holder or token
                // another program changed (its version untouched) is refused, never
                // written back. Equal to the renewal's own, they are valid: the
                // condition compares them instead of checking their types and ranges.
                (WriteKind::Renewal, Some(_)) => format!("#v = :expect AND #f = :f AND #h = :h AND {rest}"),
                (WriteKind::Renewal, None) => {
                    format!("#v = :expect AND #f = :f AND attribute_not_exists(#h) AND {rest}")
                }
                // A release, likewise: an item another program gave to someone else or
                // whose token it raised (its version untouched) stays as it is.
                (WriteKind::Release, _) => format!("#v = :expect AND #f = :f AND #h = :h AND {rest}"),
            }
        }
        // No item, or a vacant one whose every attribute is one this crate could have
        // written (as far as a condition can say; the store decodes the item it replaced
        // and puts back one that `decode` refuses), with a token below the highest.
        Precondition::Vacant => {
            if kind != WriteKind::Any || record.holder.is_none() {
                return Err(Error::invalid("precondition", "Vacant is a claim: a grant to a holder"));
            }
            names.insert("#k".into(), key_attribute.to_owned());
            values.extend(bounds.map(|(k, v)| (k.to_owned(), v)));
            values.insert(":one".into(), n(1));
            values.insert(":below_max".into(), n(FencingToken::MAX.get() - 1));
            values.insert(":S".into(), AttributeValue::S("S".into()));
            format!(
                "attribute_not_exists(#k) OR (attribute_not_exists(#h) AND attribute_type(#v, :S) \
                 AND attribute_type(#f, :N) AND #f BETWEEN :one AND :below_max AND {rest})"
            )
        }
        _ => return Err(leasehold_core::store::not_taken("DynamoDB", expect)),
    };
    Ok(LeaseUpdate {
        update_expression,
        condition_expression,
        names,
        values,
    })
}

#[cfg(test)]
mod tests {
    use leasehold_core::{FencingToken, HolderId};

    use super::*;

    fn name() -> LeaseName {
        LeaseName::new("jobs/a").expect("name")
    }

    fn rec() -> LeaseRecord {
        LeaseRecord {
            holder: Some(HolderId::new("w1").expect("holder")),
            token: FencingToken::new(7),
            ttl: Ttl::from_millis(1500).expect("ttl"),
            wall_expires_at_ms: Some(1_700_000_000_000),
        }
    }

    /// The item DynamoDB would hold after `lease_update` applied.
    fn applied(u: &LeaseUpdate) -> Item {
        let mut item = Item::new();
        let (set, remove) = match u.update_expression.split_once(" REMOVE ") {
            Some((s, r)) => (s, Some(r)),
            None => (u.update_expression.as_str(), None),
        };
        for part in set.trim_start_matches("SET ").split(", ") {
            let (n, v) = part.split_once(" = ").expect("assignment");
            item.insert(u.names[n].clone(), u.values[v].clone());
        }
        if let Some(r) = remove {
            for n in r.split(", ") {
                item.remove(&u.names[n]);
            }
        }
        item
    }

    #[test]
    fn held_record_round_trips() {
        let u = lease_update("lease", &Precondition::Absent, &rec(), "v1", WriteKind::Any).expect("update");
        assert_eq!(u.condition_expression, "attribute_not_exists(#k)");
        assert_eq!(u.names["#k"], "lease");
        assert!(!u.update_expression.contains("REMOVE"));
        let stored = decode("lease", &name(), &applied(&u)).expect("decode");
        assert_eq!(stored.record, rec());
        assert_eq!(stored.version.as_str(), "v1");
        assert_eq!(stored.remaining, None);
    }

    #[test]
    fn vacant_record_removes_holder_and_wall_expiry() {
        let vacant = rec().vacated();
        let u = lease_update(
            "lease",
            &Precondition::Version(Version::new("v1")),
            &vacant,
            "v2",
            WriteKind::Any,
        )
        .expect("update");
        assert!(
            u.condition_expression.starts_with("#v = :expect AND ")
                && u.condition_expression.contains("#f BETWEEN :one AND :f"),
            "{}",
            u.condition_expression
        );
        assert_eq!(u.values[":expect"], AttributeValue::S("v1".into()));
        assert!(
            u.update_expression.ends_with("REMOVE #h, #w"),
            "{}",
            u.update_expression
        );
        assert!(!u.names.contains_key("#k"), "unused names are a ValidationException");
        let stored = decode("lease", &name(), &applied(&u)).expect("decode");
        assert_eq!(stored.record, vacant);
    }

    #[test]
    fn every_name_and_value_is_used() {
        for expect in [Precondition::Absent, Precondition::Version(Version::new("x"))] {
            for r in [rec(), rec().vacated()] {
                for kind in [WriteKind::Any, WriteKind::Renewal, WriteKind::Release] {
                    let Ok(u) = lease_update("k", &expect, &r, "v", kind) else {
                        assert_eq!(kind, WriteKind::Release, "{expect:?} {r:?}");
                        continue;
                    };
                    let text = format!("{} {}", u.update_expression, u.condition_expression);
                    for n in u.names.keys() {
                        assert!(text.contains(n.as_str()), "unused name {n} in {text}");
                    }
                    for v in u.values.keys() {
                        assert!(text.contains(v.as_str()), "unused value {v} in {text}");
                    }
                }
            }
        }
    }

    #[test]
    fn a_renewal_sets_only_what_it_changes() {
        let expect = Precondition::Version(Version::new("v1"));
        let u = lease_update("lease", &expect, &rec(), "v2", WriteKind::Renewal).expect("update");
        assert_eq!(u.update_expression, "SET #t = :t, #v = :v, #w = :w");
        assert!(
            u.condition_expression.contains("#f = :f AND #h = :h"),
            "{}",
            u.condition_expression
        );
        // Applied to the item the condition accepts, it leaves the record's own.
        let mut item =
            applied(&lease_update("lease", &Precondition::Absent, &rec(), "v1", WriteKind::Any).expect("grant"));
        item.extend(applied(&u));
        let stored = decode("lease", &name(), &item).expect("decode");
        assert_eq!(stored.record, rec());
        assert_eq!(stored.version.as_str(), "v2");
    }

    #[test]
    fn a_release_vacates_only_the_holder_it_names() {
        let on_v1 = Precondition::Version(Version::new("v1"));
        let u = lease_update("lease", &on_v1, &rec(), "v2", WriteKind::Release).expect("update");
        assert_eq!(
            (u.update_expression.as_str(), u.values.contains_key(":t")),
            ("SET #v = :v REMOVE #h, #w", false)
        );
        let guard = "#v = :expect AND #f = :f AND #h = :h AND ";
        assert!(u.condition_expression.starts_with(guard), "{}", u.condition_expression);
        // The held item, with the release's SET and REMOVE applied to it.
        let grant = lease_update("lease", &Precondition::Absent, &rec(), "v1", WriteKind::Any).expect("grant");
        let mut item = applied(&grant);
        item.retain(|k, _| k != ATTR_HOLDER && k != ATTR_WALL_EXPIRES_AT_MS);
        item.extend(applied(&u));
        let released = decode("lease", &name(), &item).map(|s| (s.record, s.version));
        assert_eq!(released.expect("decode"), (rec().vacated(), Version::new("v2")));
        for bad in [
            lease_update("lease", &on_v1, &rec().vacated(), "v2", WriteKind::Release),
            lease_update("lease", &Precondition::Absent, &rec(), "v2", WriteKind::Release),
        ] {
            assert!(matches!(bad, Err(Error::InvalidInput { .. })), "{bad:?}");
        }
    }

    #[test]
    fn vacant_claims_with_a_token_raised_by_the_server_and_sends_only_what_it_uses() {
        let u = lease_update("lease", &Precondition::Vacant, &rec(), "v1", WriteKind::Any).expect("update");
        assert!(
            u.condition_expression
                .starts_with("attribute_not_exists(#k) OR (attribute_not_exists(#h) AND "),
            "{}",
            u.condition_expression
        );
        assert!(
            u.update_expression.contains("#f = if_not_exists(#f, :zero) + :one"),
            "{}",
            u.update_expression
        );
        assert!(u.update_expression.ends_with(" REMOVE #x"), "{}", u.update_expression);
        // DynamoDB refuses a request with a name or value its expressions do not use.
        let text = format!("{} {}", u.update_expression, u.condition_expression);
        for placeholder in u.names.keys().chain(u.values.keys()) {
            let used = text.match_indices(placeholder.as_str()).any(|(i, _)| {
                !text[i + placeholder.len()..].starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
            });
            assert!(used, "{placeholder} is sent but not used: {text}");
        }
        for bad in [
            lease_update("lease", &Precondition::Vacant, &rec().vacated(), "v1", WriteKind::Any),
            lease_update("lease", &Precondition::Vacant, &rec(), "v1", WriteKind::Renewal),
        ] {
            assert!(matches!(bad, Err(Error::InvalidInput { .. })), "{bad:?}");
        }
    }

    #[test]
    fn claimable_is_refused() {
        assert!(matches!(
            lease_update("lease", &Precondition::Claimable, &rec(), "v", WriteKind::Any),
            Err(Error::InvalidInput { .. })
        ));
    }

    #[test]
    fn corrupt_items_are_errors() {
        let good =
            applied(&lease_update("lease", &Precondition::Absent, &rec(), "v1", WriteKind::Any).expect("update"));
        let mut cases: Vec<Item> = Vec::new();
        for attr in [ATTR_FORMAT, ATTR_VERSION, ATTR_FENCE, ATTR_TTL_MS] {
            let mut i = good.clone();
            i.remove(attr);
            cases.push(i);
        }
        let with = |attr: &str, v: AttributeValue| {
            let mut i = good.clone();
            i.insert(attr.to_owned(), v);
            i
        };
        cases.push(with(ATTR_FORMAT, AttributeValue::N("2".into())));
        cases.push(with(ATTR_FENCE, AttributeValue::S("7".into())));
        cases.push(with(ATTR_FENCE, AttributeValue::N("0".into())));
        cases.push(with(ATTR_FENCE, AttributeValue::N("-3".into())));
        cases.push(with(ATTR_FENCE, AttributeValue::N("1.5".into())));
        cases.push(with(ATTR_TTL_MS, AttributeValue::N("0".into())));
        cases.push(with(ATTR_HOLDER, AttributeValue::N("1".into())));
        cases.push(with(ATTR_HOLDER, AttributeValue::S("has space".into())));
        cases.push(with(ATTR_VERSION, AttributeValue::S(String::new())));
        cases.push(with(ATTR_WALL_EXPIRES_AT_MS, AttributeValue::Bool(true)));
        cases.push(with("note", AttributeValue::S("set by hand".into())));
        for (i, item) in cases.iter().enumerate() {
            assert!(
                matches!(decode("lease", &name(), item), Err(Error::CorruptRecord { .. })),
                "case {i}: {item:?}"
            );
        }
        assert!(decode("lease", &name(), &good).is_ok());
        assert!(decode("lease", &name(), &with("lease", AttributeValue::S("jobs/a".into()))).is_ok());
    }

    #[test]
    fn versions_are_fresh() {
        let a = new_version();
        assert_eq!(a.len(), 32);
        assert_ne!(a, new_version());
    }
}
