//! Fenced writes on data kept in Redis: one script compares the writer's token with
//! the resource's high-water mark and writes, in one atomic step (rule 4 of docs/DESIGN.md).
//!
//! A resource is a Redis hash; its high-water mark is one field of that hash
//! ([`HashFence::DEFAULT_MARK_FIELD`] unless chosen), so the mark and the data can
//! never be written apart. The guard is [`FenceMode::NotOlder`] (`mark <= token`, many
//! writes per tenure) unless [`HashFence::strict`] asks for `mark < token` (one write
//! per grant). This is the Redis side of the contract in [`leasehold_core::fence`]: an
//! applied write is [`FencedOutcome::Applied`] (always: Redis has no caller condition),
//! a refused one changes nothing and is [`Error::FenceRejected`].

use std::collections::HashSet;
use std::time::Duration;

use leasehold_core::fence::{FenceMode, FencedOutcome, rejected_by};
use leasehold_core::{Error, FencingToken, Result};
use redis::aio::ConnectionLike;

use crate::call::invoke;
use crate::error::{Effect, What};
use crate::reply::Reply;
use crate::scripts::{FENCE_SCRIPT, MARK_SCRIPT};

/// The largest increment (and stored value of an incremented field) accepted, in
/// absolute value: 18 decimal digits, so an increment can never overflow a Redis
/// integer half way through a script.
pub const MAX_INCREMENT: i64 = 999_999_999_999_999_999;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Op {
    Set(String, Vec<u8>),
    Incr(String, i64),
    Del(String),
}

impl Op {
    fn field(&self) -> &str {
        match self {
            Self::Set(f, _) | Self::Incr(f, _) | Self::Del(f) => f,
        }
    }
}

/// A write to one Redis hash that applies only if the writer's token is not older than
/// the hash's high-water mark, checked and written in one script (rule 4 of docs/DESIGN.md).
///
/// The mark is a field of the same hash ([`HashFence::DEFAULT_MARK_FIELD`] unless
/// [`HashFence::mark_field`] names another), so mark and data are never written
/// apart. The guard is [`FenceMode::NotOlder`] (`mark <= token`: many writes per
/// tenure) unless [`HashFence::strict`] asks for `mark < token` (one write per
/// grant). An applied write is [`FencedOutcome::Applied`] with a [`HashWrite`] (Redis
/// has no caller condition, so never [`FencedOutcome::ConditionFailed`]); a refused
/// write changes nothing and is [`Error::FenceRejected`]. All operations of one write
/// apply together or not at all.
///
/// ```no_run
/// # async fn demo(mut conn: redis::aio::ConnectionManager, lease: leasehold_core::Lease) -> leasehold_core::Result<()> {
/// use leasehold_redis::{FencedOutcome, HashFence};
/// let outcome = HashFence::new("ledger:acct-7")
///     .incr("balance", -250)
///     .set("last_payout", "2026-11-30")
///     .apply(&mut conn, lease.token())
///     .await?; // Err(Error::FenceRejected { .. }) if a newer holder has written
/// let FencedOutcome::Applied(write) = outcome else {
///     unreachable!("a Redis fenced write has no caller condition")
/// };
/// assert_eq!(write.counters.len(), 1);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HashFence {
    key: String,
    mark_field: String,
    mode: FenceMode,
    ops: Vec<Op>,
}

/// What an applied [`HashFence`] write saw and did: the output in its
/// [`FencedOutcome::Applied`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HashWrite {
    /// The high-water mark before this write ([`FencingToken::ZERO`] if none).
    pub previous_mark: FencingToken,
    /// The new value of each [`HashFence::incr`] field, in the order added.
    pub counters: Vec<(String, i64)>,
}

impl HashFence {
    /// The field that holds the high-water mark unless [`HashFence::mark_field`] is set.
    pub const DEFAULT_MARK_FIELD: &'static str = "_fence_token";

    /// A fenced write to the hash at `key`.
    pub fn new(key: impl Into<String>) -> Self {
        Self {
            key: key.into(),
            mark_field: Self::DEFAULT_MARK_FIELD.to_owned(),
            mode: FenceMode::NotOlder,
            ops: Vec::new(),
        }
    }

    /// Keeps the high-water mark in `field` instead of [`Self::DEFAULT_MARK_FIELD`].
    #[must_use]
    pub fn mark_field(mut self, field: impl Into<String>) -> Self {
        self.mark_field = field.into();
        self
    }

    leasehold_core::fence::fence_mode_setters!(mode);

    /// Sets `field` to `value` (`HSET`).
    #[must_use]
    pub fn set(mut self, field: impl Into<String>, value: impl Into<Vec<u8>>) -> Self {
        self.ops.push(Op::Set(field.into(), value.into()));
        self
    }

    /// Adds `by` to the integer in `field` (`HINCRBY`; a missing field counts as 0).
    #[must_use]
    pub fn incr(mut self, field: impl Into<String>, by: i64) -> Self {
        self.ops.push(Op::Incr(field.into(), by));
        self
    }

    /// Removes `field` (`HDEL`).
    #[must_use]
    pub fn del(mut self, field: impl Into<String>) -> Self {
        self.ops.push(Op::Del(field.into()));
        self
    }

    /// The resource key.
    pub fn key(&self) -> &str {
        &self.key
    }

    fn validate(&self, token: FencingToken) -> Result<()> {
        leasehold_core::fence::issued(token)?;
        token.to_i64()?;
        if self.key.is_empty() {
            return Err(Error::invalid("fenced write", "empty resource key"));
        }
        if self.mark_field.is_empty() {
            return Err(Error::invalid("fenced write", "empty mark field"));
        }
        let mut seen = HashSet::new();
        for op in &self.ops {
            let f = op.field();
            if f == self.mark_field {
                return Err(Error::invalid(
                    "fenced write",
                    format!("field {f:?} is the high-water mark"),
                ));
            }
            if !seen.insert(f) {
                return Err(Error::invalid("fenced write", format!("field {f:?} is written twice")));
            }
            if let Op::Incr(_, by) = op {
                if by.unsigned_abs() > MAX_INCREMENT.unsigned_abs() {
                    return Err(Error::invalid(
                        "fenced write",
                        format!("increment {by} is above {MAX_INCREMENT} in absolute value"),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Applies the write with `token` through `conn`: one `EVALSHA` (once the script is
    /// in the server's cache: [`crate::RedisStore::provision`]). Always
    /// [`FencedOutcome::Applied`] when it returns `Ok`.
    ///
    /// # Errors
    /// - [`Error::FenceRejected`] with the mark: the resource has seen a newer token (or,
    ///   strict, this same token); nothing was written. The caller has lost the lease.
    /// - [`Error::FenceMarkInvalid`]: the key is not a hash or its mark is not a token;
    ///   nothing was written.
    /// - [`Error::CorruptRecord`]: an incremented field is not an integer of at most 18
    ///   digits; nothing was written.
    /// - [`Error::InvalidInput`]: token 0 or above `i64::MAX`, an empty key, a field
    ///   written twice or named like the mark, an increment above [`MAX_INCREMENT`].
    /// - [`Error::Indeterminate`]: sent without an answer; the write may have applied.
    /// - [`Error::Unavailable`], [`Error::Misconfigured`] as for the store.
    pub async fn apply<C>(&self, conn: &mut C, token: FencingToken) -> Result<FencedOutcome<HashWrite>>
    where
        C: ConnectionLike + Send,
    {
        self.apply_with_timeout(conn, token, None).await
    }

    pub(crate) async fn apply_with_timeout<C>(
        &self,
        conn: &mut C,
        token: FencingToken,
        timeout: Option<Duration>,
    ) -> Result<FencedOutcome<HashWrite>>
    where
        C: ConnectionLike + Send,
    {
        self.validate(token)?;
        let mut inv = FENCE_SCRIPT.prepare_invoke();
        inv.key(&self.key)
            .arg(token.get())
            .arg(match self.mode {
                FenceMode::NotOlder => "le",
                FenceMode::Newer => "lt",
            })
            .arg(&self.mark_field);
        for op in &self.ops {
            match op {
                Op::Set(f, v) => inv.arg("set").arg(f).arg(v.as_slice()),
                Op::Incr(f, by) => inv.arg("incr").arg(f).arg(*by),
                Op::Del(f) => inv.arg("del").arg(f).arg(""),
            };
        }
        let what = What::of("fenced write", &self.key);
        let reply = invoke(conn, timeout, &inv, Effect::Write, what).await?;
        match reply.status.as_str() {
            "ok" => {
                let previous_mark = parse_mark(&reply, &self.key, 0)?;
                let incr_fields = self.ops.iter().filter_map(|op| match op {
                    Op::Incr(f, _) => Some(f.clone()),
                    _ => None,
                });
                let mut counters = Vec::new();
                for (i, f) in incr_fields.enumerate() {
                    let v = reply.text(i + 1)?;
                    let v = v.parse::<i64>().map_err(|_| {
                        Error::corrupt(self.key.as_str(), format!("field {f:?} holds {v:?}, not an integer"))
                    })?;
                    counters.push((f, v));
                }
                Ok(FencedOutcome::Applied(HashWrite {
                    previous_mark,
                    counters,
                }))
            }
            // Counted in the `leasehold_fence_rejections_total` metric.
            "rejected" => Err(rejected_by(token, parse_mark(&reply, &self.key, 0)?)),
            "bad_mark" => Err(Error::FenceMarkInvalid {
                resource: self.key.clone(),
                reason: reply.text(0).unwrap_or_default(),
            }),
            "corrupt" => Err(reply.corrupt(&self.key)),
            other => Err(crate::error::bad_reply(
                Effect::Write,
                what,
                format!("status {other:?}"),
            )),
        }
    }
}

fn parse_mark(reply: &Reply<'_>, key: &str, i: usize) -> Result<FencingToken> {
    let s = reply.text(i)?;
    s.parse::<u64>()
        .map(FencingToken::new)
        .map_err(|_| Error::FenceMarkInvalid {
            resource: key.to_owned(),
            reason: format!("high-water mark {s:?} is not a token"),
        })
}

/// Reads the high-water mark of the hash at `key` (kept in `mark_field`):
/// [`FencingToken::ZERO`] if the hash or the field does not exist. One `EVALSHA`.
///
/// Use it to seed a lease's token counter after Redis lost it
/// ([`crate::RedisStore::seed_fence_counter`]).
///
/// # Errors
/// [`Error::FenceMarkInvalid`] if the key is not a hash or the mark is not a token;
/// transport errors as for reads.
pub async fn read_high_water<C>(conn: &mut C, key: &str, mark_field: &str) -> Result<FencingToken>
where
    C: ConnectionLike + Send,
{
    let mut inv = MARK_SCRIPT.prepare_invoke();
    inv.key(key).arg(mark_field);
    let what = What::of("high-water read", &key);
    let reply = invoke(conn, None, &inv, Effect::Read, what).await?;
    match reply.status.as_str() {
        "mark" => parse_mark(&reply, key, 0),
        "bad_mark" => Err(Error::FenceMarkInvalid {
            resource: key.to_owned(),
            reason: reply.text(0).unwrap_or_default(),
        }),
        other => Err(crate::error::bad_reply(Effect::Read, what, format!("status {other:?}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_writes_are_refused_before_sending() {
        let t = FencingToken::new(3);
        assert!(HashFence::new("k").set("a", "1").validate(t).is_ok());
        assert!(HashFence::new("k").validate(FencingToken::ZERO).is_err());
        assert!(HashFence::new("k").validate(FencingToken::new(u64::MAX)).is_err());
        assert!(HashFence::new("").set("a", "1").validate(t).is_err());
        assert!(HashFence::new("k").set("a", "1").incr("a", 1).validate(t).is_err());
        assert!(HashFence::new("k").set("_fence_token", "1").validate(t).is_err());
        assert!(
            HashFence::new("k")
                .mark_field("m")
                .set("_fence_token", "1")
                .validate(t)
                .is_ok()
        );
        assert!(HashFence::new("k").incr("n", MAX_INCREMENT).validate(t).is_ok());
        assert!(HashFence::new("k").incr("n", -MAX_INCREMENT).validate(t).is_ok());
        assert!(HashFence::new("k").incr("n", MAX_INCREMENT + 1).validate(t).is_err());
        assert!(HashFence::new("k").incr("n", i64::MIN).validate(t).is_err());
        assert!(HashFence::new("k").mark_field("").validate(t).is_err());
    }
}
