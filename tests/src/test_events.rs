//! Events for the checkers' unit tests ([`crate::checker`], [`crate::permits`]), each
//! built from the few numbers a case varies.

use crate::history::Event;

/// `worker` was granted the one lease of a lease run with `token` at `at_ms`, trusting
/// it until `until`, its request sent 5 ms before.
pub(crate) fn granted(worker: u32, token: u64, at_ms: u64, until: u64) -> Event {
    grant(None, worker, token, at_ms, until)
}

/// [`granted`] for a permit of a semaphore run: the lease of slot `slot`.
pub(crate) fn granted_slot(slot: u32, worker: u32, token: u64, at_ms: u64, until: u64) -> Event {
    grant(Some(slot), worker, token, at_ms, until)
}

fn grant(slot: Option<u32>, worker: u32, token: u64, at_ms: u64, until: u64) -> Event {
    Event::Granted {
        worker,
        token,
        at_ms,
        valid_until_ms: Some(until),
        sent_after_ms: Some(at_ms.saturating_sub(5)),
        slot,
    }
}

/// `worker` began releasing its grant of `token` at `at_ms`.
pub(crate) fn releasing(worker: u32, token: u64, at_ms: u64) -> Event {
    Event::Releasing { worker, token, at_ms }
}
