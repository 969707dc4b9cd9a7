//! Running one script call: an `EVALSHA` (reloading the script once on `NOSCRIPT`) with
//! an optional time bound, its reply split, its failure classified.

use std::fmt;
use std::time::Duration;

use leasehold_core::Result;
use redis::ScriptInvocation;
use redis::aio::ConnectionLike;

use crate::error::{self, Effect};
use crate::reply::Reply;

/// What a call does, as its errors name it (`write of jobs/a`): put into words only
/// when an error is made, not on every call.
#[derive(Clone, Copy)]
pub(crate) struct What<'a> {
    op: &'static str,
    of: &'a (dyn fmt::Display + Sync),
}

impl<'a> What<'a> {
    /// `op` of `subject` (a lease name, a key).
    pub(crate) fn of(op: &'static str, subject: &'a (dyn fmt::Display + Sync)) -> Self {
        Self { op, of: subject }
    }
}

impl fmt::Display for What<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} of {}", self.op, self.of)
    }
}

/// Runs one script invocation (an `EVALSHA`, reloading the script once on `NOSCRIPT`)
/// with an optional time bound, and splits its reply.
pub(crate) async fn invoke<'w, C>(
    conn: &mut C,
    timeout: Option<Duration>,
    inv: &ScriptInvocation<'_>,
    effect: Effect,
    what: What<'w>,
) -> Result<Reply<'w>>
where
    C: ConnectionLike + Send,
{
    let value = with_timeout(timeout, effect, what, inv.invoke_async::<redis::Value>(conn)).await?;
    Reply::parse(value, effect, what)
}

pub(crate) async fn with_timeout<T>(
    timeout: Option<Duration>,
    effect: Effect,
    what: impl fmt::Display + Copy,
    call: impl Future<Output = redis::RedisResult<T>>,
) -> Result<T> {
    let result = match timeout {
        Some(d) => match tokio::time::timeout(d, call).await {
            Ok(r) => r,
            Err(_) => return Err(error::timed_out(effect, what, d)),
        },
        None => call.await,
    };
    result.map_err(|e| error::from_redis(e, effect, what))
}

#[cfg(test)]
mod tests {
    use leasehold_core::LeaseName;

    use super::*;

    #[test]
    fn an_error_names_the_call_it_comes_from() {
        let name = LeaseName::new("jobs/a").expect("name");
        let what = What::of("write", &name);
        assert_eq!(what.to_string(), "write of jobs/a");
        let e = error::bad_reply(Effect::Write, what, "status \"odd\"");
        assert!(
            e.to_string().contains("redis write of jobs/a"),
            "the error does not name its call: {e}"
        );
    }
}
