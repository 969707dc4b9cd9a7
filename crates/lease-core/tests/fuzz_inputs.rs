//! Arbitrary bytes and strings into every decoder of stored data and every parser of
//! user-supplied names: never a panic, a typed error or a valid value, never a grant.
#![allow(missing_docs)]

use leasehold_core::fence::{Dialect, FencedUpdate, Ident};
use leasehold_core::{Error, HolderId, LeaseName, store::record_codec};
use proptest::prelude::*;

fn name() -> LeaseName {
    LeaseName::new("fuzz/target").expect("valid")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2_000, ..ProptestConfig::default() })]

    #[test]
    fn record_decoder_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        match record_codec::decode(&name(), &bytes) {
            Ok(rec) => {
                // Anything accepted round-trips and carries a real token.
                prop_assert!(rec.token.get() > 0);
                prop_assert_eq!(record_codec::decode(&name(), &record_codec::encode(&rec)).expect("round trip"), rec);
            }
            Err(Error::CorruptRecord { .. }) => {}
            Err(other) => prop_assert!(false, "wrong error kind: {other:?}"),
        }
    }

    #[test]
    fn near_valid_records_are_corrupt_not_free(
        holder in "\\PC{0,40}", token in any::<u64>(), ttl in any::<u64>(), extra in "[a-z]{0,5}"
    ) {
        let json = format!(r#"{{"f":1,"holder":{},"token":{token},"ttl_ms":{ttl}{}}}"#,
            serde_json::to_string(&holder).expect("json"),
            if extra.is_empty() { String::new() } else { format!(r#","{extra}":1"#) });
        match record_codec::decode(&name(), json.as_bytes()) {
            Ok(rec) => {
                prop_assert!(extra.is_empty() || extra == "f" || extra == "holder" || extra == "token" || extra == "ttl_ms" || extra == "wall_exp_ms");
                prop_assert_eq!(rec.holder.as_ref().map(HolderId::as_str), Some(holder.as_str()));
                prop_assert!(token > 0);
            }
            Err(Error::CorruptRecord { .. }) => {}
            Err(other) => prop_assert!(false, "wrong error kind: {other:?}"),
        }
    }

    #[test]
    fn names_and_holders_validate_without_panicking(s in "\\PC{0,300}") {
        if let Ok(n) = LeaseName::new(&s) {
            prop_assert!(n.as_str().len() <= leasehold_core::MAX_NAME_LEN);
            prop_assert!(!n.as_str().split('/').any(|seg| seg.is_empty() || seg == ".." || seg == "."));
            prop_assert!(n.as_str().bytes().all(|b| b.is_ascii_graphic()));
        }
        if let Ok(h) = HolderId::new(&s) {
            prop_assert!(h.as_str().len() <= leasehold_core::MAX_HOLDER_LEN);
        }
    }

    #[test]
    fn sql_identifiers_cannot_inject(table in "\\PC{0,70}", col in "\\PC{0,70}") {
        let built = FencedUpdate::new(&table, "last_token")
            .and_then(|f| f.set(&col))
            .and_then(|f| f.key("id"))
            .and_then(|f| f.build(Dialect::Postgres));
        match built {
            Ok(stmt) => {
                prop_assert!(Ident::table(&table).is_ok() && Ident::column(&col).is_ok());
                for forbidden in [";", "--", "'", "/*"] {
                    prop_assert!(!stmt.sql.contains(forbidden), "{forbidden} in {}", stmt.sql);
                }
                prop_assert_eq!(stmt.sql.matches('"').count() % 2, 0);
            }
            Err(Error::InvalidInput { .. }) => {}
            Err(other) => prop_assert!(false, "wrong error kind: {other:?}"),
        }
    }
}
