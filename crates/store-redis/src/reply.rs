//! Decoding the scripts' replies into records and outcomes.
//!
//! The scripts already refuse anything that is not a well-formed record; this side
//! checks again with [`record_codec::from_parts`], so a record is accepted only if both
//! agree.

use std::time::Duration;

use leasehold_core::{
    Error, FencingToken, LeaseName, Result,
    store::{LeaseRecord, Stored, Version, record_codec},
};
use redis::Value;

use crate::error::{Effect, What, bad_reply};

/// A script reply: a status word and its fields.
pub(crate) struct Reply<'w> {
    pub(crate) status: String,
    fields: Vec<Value>,
    effect: Effect,
    what: What<'w>,
}

impl<'w> Reply<'w> {
    /// Splits a script's array reply.
    pub(crate) fn parse(value: Value, effect: Effect, what: What<'w>) -> Result<Self> {
        let Value::Array(mut items) = value else {
            return Err(bad_reply(effect, what, format!("not an array: {value:?}")));
        };
        if items.is_empty() {
            return Err(bad_reply(effect, what, "an empty array"));
        }
        let status = text(&items.remove(0)).ok_or_else(|| bad_reply(effect, what, "no status word"))?;
        Ok(Self {
            status,
            fields: items,
            effect,
            what,
        })
    }

    fn bad(&self, detail: impl Into<String>) -> Error {
        bad_reply(self.effect, self.what, detail)
    }

    /// Field `i` as text.
    pub(crate) fn text(&self, i: usize) -> Result<String> {
        self.fields
            .get(i)
            .and_then(text)
            .ok_or_else(|| self.bad(format!("{} reply: field {i} is not text", self.status)))
    }

    /// The script's explanation of a corrupt record, as the error for `name`.
    pub(crate) fn corrupt(&self, name: &str) -> Error {
        let why = self.text(0).unwrap_or_else(|_| "not a lease record".to_owned());
        Error::corrupt(name, why)
    }

    /// The record in fields 0..6 (holder, token, ttl, wall, version, pttl).
    pub(crate) fn stored(&self, name: &LeaseName) -> Result<Stored> {
        if self.fields.len() != 6 {
            return Err(self.bad(format!("{} reply has {} fields, not 6", self.status, self.fields.len())));
        }
        let holder = self.text(0)?;
        let token = number(name, "token", &self.text(1)?)?;
        let ttl_ms = number(name, "ttl", &self.text(2)?)?;
        let wall = self.text(3)?;
        let wall = if wall.is_empty() {
            None
        } else {
            Some(number(name, "wall-clock expiry", &wall)?)
        };
        let version = self.text(4)?;
        if version.is_empty() {
            return Err(Error::corrupt(name.as_str(), "empty version"));
        }
        let pttl = match self.fields.get(5) {
            Some(Value::Int(ms)) => *ms,
            other => return Err(self.bad(format!("remaining time is not an integer: {other:?}"))),
        };
        let holder = (!holder.is_empty()).then_some(holder.as_str());
        let record = record_codec::from_parts(name, holder, token, ttl_ms, wall)?;
        Ok(Stored::new(record, Version::new(version))
            .with_remaining(Some(Duration::from_millis(u64::try_from(pttl).unwrap_or(0)))))
    }

    /// A write's reply (`{'written', token, version}`): `wrote`, the record the script
    /// wrote, with the token in field 0 and the version in field 1. Its time left is its
    /// TTL: the script ran on one frozen clock.
    pub(crate) fn written(&self, name: &LeaseName, wrote: &LeaseRecord) -> Result<Stored> {
        if self.fields.len() != 2 {
            return Err(self.bad(format!("{} reply has {} fields, not 2", self.status, self.fields.len())));
        }
        let token = number(name, "token", &self.text(0)?)?;
        if token == 0 || FencingToken::new(token) > FencingToken::MAX {
            return Err(self.bad(format!("the script answered token {token}")));
        }
        let version = self.text(1)?;
        if version.is_empty() {
            return Err(self.bad("an empty version"));
        }
        let mut record = wrote.clone();
        record.token = FencingToken::new(token);
        let remaining = Some(record.ttl.get());
        Ok(Stored::new(record, Version::new(version)).with_remaining(remaining))
    }
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => String::from_utf8(b.clone()).ok(),
        Value::SimpleString(s) => Some(s.clone()),
        Value::Okay => Some("OK".to_owned()),
        _ => None,
    }
}

fn number(name: &LeaseName, what: &str, s: &str) -> Result<u64> {
    s.parse::<u64>()
        .map_err(|_| Error::corrupt(name.as_str(), format!("bad {what} {s:?}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    fn name() -> LeaseName {
        LeaseName::new("a").expect("name")
    }

    #[test]
    fn a_record_reply_decodes() {
        let v = Value::Array(vec![
            bulk("ok"),
            bulk("w1"),
            bulk("7"),
            bulk("500"),
            bulk(""),
            bulk("17:3"),
            Value::Int(420),
        ]);
        let r = Reply::parse(v, Effect::Read, What::of("read", &"a")).expect("parse");
        assert_eq!(r.status, "ok");
        let s = r.stored(&name()).expect("stored");
        assert_eq!(s.record.token.get(), 7);
        assert_eq!(s.record.holder.as_ref().map(|h| h.as_str()), Some("w1"));
        assert_eq!(s.version.as_str(), "17:3");
        assert_eq!(s.remaining, Some(Duration::from_millis(420)));
        assert_eq!(s.record.wall_expires_at_ms, None);
    }

    #[test]
    fn bad_fields_are_corrupt_and_bad_shapes_are_typed() {
        let v = Value::Array(vec![
            bulk("ok"),
            bulk("bad holder!"),
            bulk("7"),
            bulk("500"),
            bulk(""),
            bulk("1:1"),
            Value::Int(1),
        ]);
        let r = Reply::parse(v, Effect::Read, What::of("read", &"a")).expect("parse");
        assert!(matches!(r.stored(&name()), Err(Error::CorruptRecord { .. })));
        let zero = Value::Array(vec![
            bulk("ok"),
            bulk(""),
            bulk("0"),
            bulk("500"),
            bulk(""),
            bulk("1:1"),
            Value::Int(1),
        ]);
        let r = Reply::parse(zero, Effect::Read, What::of("read", &"a")).expect("parse");
        assert!(matches!(r.stored(&name()), Err(Error::CorruptRecord { .. })));
        assert!(Reply::parse(Value::Int(3), Effect::Write, What::of("w", &"a")).is_err_and(|e| e.is_indeterminate()));
        assert!(Reply::parse(Value::Array(vec![]), Effect::Read, What::of("r", &"a")).is_err_and(|e| e.is_retryable()));
        let short = Reply::parse(
            Value::Array(vec![bulk("ok"), bulk("x")]),
            Effect::Write,
            What::of("w", &"a"),
        )
        .expect("parse");
        assert!(short.stored(&name()).is_err_and(|e| e.is_indeterminate()));
    }

    #[test]
    fn a_write_reply_is_the_record_sent_with_the_scripts_token_and_version() {
        use leasehold_core::{FencingToken, HolderId, Ttl};
        let sent = LeaseRecord::held(
            HolderId::new("w1").expect("holder"),
            FencingToken::ZERO,
            Ttl::from_millis(500).expect("ttl"),
        );
        let v = Value::Array(vec![bulk("written"), bulk("9"), bulk("17:4")]);
        let r = Reply::parse(v, Effect::Write, What::of("write", &"a")).expect("parse");
        let s = r.written(&name(), &sent).expect("written");
        assert_eq!(s.record.token.get(), 9);
        assert_eq!(s.record.holder, sent.holder);
        assert_eq!(s.version.as_str(), "17:4");
        assert_eq!(s.remaining, Some(Duration::from_millis(500)));
        for bad in [
            vec![bulk("written"), bulk("0"), bulk("17:4")],
            vec![bulk("written"), bulk("9"), bulk("")],
            vec![bulk("written"), bulk("9")],
            vec![bulk("written"), bulk("x"), bulk("17:4")],
        ] {
            let r = Reply::parse(Value::Array(bad), Effect::Write, What::of("write", &"a")).expect("parse");
            assert!(r.written(&name(), &sent).is_err());
        }
    }
}
