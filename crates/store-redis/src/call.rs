//! Running one script call: an `EVALSHA` (reloading the script once on `NOSCRIPT`) with
//! an optional time bound, its reply split, its failure classified.

use std::fmt;
use std::time::Duration;

use leasehold_core::Result;
use redis::ScriptInvocation;
use redis::aio::ConnectionLike;

use crate::error::{self, Effect, What};
use crate::reply::Reply;

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
