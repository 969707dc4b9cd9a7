//! Futures that run in the caller's task but are never abandoned half-way.
//!
//! An acquire or a release runs its store write in the task that awaits it: no task
//! is spawned and no other task is woken on the way. A caller may still drop the future
//! at any point (a `select!`, a timeout); a write already sent may then apply, and a
//! grant nobody receives would stay held with nobody renewing it. [`FinishOnDrop`] keeps
//! the work boxed, and if it is dropped before completing, hands the box to a spawned
//! task that completes it and drops what it yields (or, built with
//! [`FinishOnDrop::or_on_drop`], passes it on to the work that must follow: an acquire
//! hands over only its write, once sent, and the task releases what that write granted).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

type Work<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// What an abandoned work's output is handed to, on the task that finished the work.
type Then<T> = Box<dyn FnOnce(T) -> Work<()> + Send + 'static>;

/// Polls `work` in place; completes it on a spawned task if dropped before it is done
/// (dropped on a thread without a Tokio context, or while the runtime shuts down, the
/// work is dropped unfinished: nothing is left to run it).
///
/// For a store whose write must finish once sent (an etcd claim on a session the store
/// keeps alive must be registered, or it would stay held for the store's lifetime):
/// the write runs in the caller's task, with no spawn and no cross-thread wake-up, and
/// only a caller that drops it half-way pays for a task.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use leasehold_core::store::FinishOnDrop;
/// let (tx, rx) = tokio::sync::oneshot::channel();
/// let work = FinishOnDrop::new(async move {
///     tokio::task::yield_now().await;
///     tx.send("finished").ok();
/// });
/// drop(work); // before its first poll: it still runs to the end, on a task
/// assert_eq!(rx.await, Ok("finished"));
/// # });
/// ```
pub struct FinishOnDrop<T: Send + 'static> {
    work: Option<Work<T>>,
    /// For an abandoned work: what runs on its output (`None`: it is dropped).
    then: Option<Then<T>>,
}

impl<T: Send + 'static> FinishOnDrop<T> {
    /// Boxes `work`, to be polled in place.
    pub fn new(work: impl Future<Output = T> + Send + 'static) -> Self {
        Self {
            work: Some(Box::pin(work)),
            then: None,
        }
    }

    /// As [`FinishOnDrop::new`], but the output of a work dropped before it completed
    /// is handed to `abandoned`, run on the same task right after the work. A work that
    /// completes in place never runs `abandoned`.
    pub(crate) fn or_on_drop<F, Fut>(work: impl Future<Output = T> + Send + 'static, abandoned: F) -> Self
    where
        F: FnOnce(T) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        Self {
            work: Some(Box::pin(work)),
            then: Some(Box::new(move |out| Box::pin(abandoned(out)))),
        }
    }
}

impl<T: Send + 'static> Future for FinishOnDrop<T> {
    type Output = T;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let Some(work) = self.work.as_mut() else {
            // Polled after completion: a caller bug; never yields twice.
            return Poll::Pending;
        };
        let out = work.as_mut().poll(cx);
        if out.is_ready() {
            self.work = None;
            self.then = None;
        }
        out
    }
}

impl<T: Send + 'static> Drop for FinishOnDrop<T> {
    fn drop(&mut self) {
        if let Some(work) = self.work.take() {
            let then = self.then.take();
            // Dropped on a thread without a Tokio context, nothing can run the work, and
            // a runtime shutting down drops at once the task it would be spawned on:
            // either way the work is dropped unfinished, and the store expires what it
            // may hold on its own.
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(async move {
                    let out = work.await;
                    match then {
                        Some(then) => then(out).await,
                        None => drop(out),
                    }
                });
            }
        }
    }
}
