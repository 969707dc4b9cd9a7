//! Waking waiters on release: one pub/sub connection per store, one channel per lease
//! name, subscribed while somebody waits on it.
//!
//! The release and delete scripts `PUBLISH` on the name's channel in the same atomic
//! step as the write. A waiter subscribes first, then checks whether the record already
//! changed from the version it saw (so a release between its last read and the
//! subscription is not missed), then sleeps until a message or its deadline. Anything
//! going wrong on the pub/sub connection degrades to sleeping until the deadline: a
//! waiter never returns early because of an error, so a dead server cannot turn
//! waiting into a busy loop.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use futures::StreamExt;
use redis::aio::{PubSubSink, PubSubStream};
use tokio::sync::{Notify, oneshot};
use tokio::time::Instant;

/// The pub/sub side of a store.
pub(crate) struct Notifier {
    inner: Arc<Inner>,
}

impl fmt::Debug for Notifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Notifier")
            .field("channels", &self.inner.channels().len())
            .finish_non_exhaustive()
    }
}

struct Inner {
    client: redis::Client,
    /// The live connection; subscribe / unsubscribe decisions are made holding it.
    conn: tokio::sync::Mutex<Option<Live>>,
    channels: Mutex<HashMap<String, Arc<Chan>>>,
    generation: AtomicU64,
}

struct Live {
    generation: u64,
    sink: PubSubSink,
    /// Dropping it stops the connection's dispatcher task.
    _stop: oneshot::Sender<()>,
}

#[derive(Default)]
struct Chan {
    notify: Notify,
    /// Changed only under the `channels` lock.
    waiters: AtomicUsize,
    /// Changed only under the `conn` lock.
    subscribed: AtomicBool,
}

impl Notifier {
    pub(crate) fn new(client: redis::Client) -> Self {
        Self {
            inner: Arc::new(Inner {
                client,
                conn: tokio::sync::Mutex::new(None),
                channels: Mutex::new(HashMap::new()),
                generation: AtomicU64::new(0),
            }),
        }
    }

    /// Waits until a message on `channel`, until `changed` reports that the record
    /// already changed, or until `max_wait` passed.
    pub(crate) async fn wait(&self, channel: &str, max_wait: Duration, changed: impl Future<Output = bool>) {
        let deadline = Instant::now() + max_wait;
        let reg = Registration::new(&self.inner, channel);
        let notified = reg.chan.notify.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        match tokio::time::timeout_at(deadline, self.inner.subscribe(channel, &reg.chan)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::warn!(channel, error = %e, "redis pub/sub unavailable; waiting without notification");
                tokio::time::sleep_until(deadline).await;
                return;
            }
            Err(_) => return,
        }
        if tokio::time::timeout_at(deadline, changed).await == Ok(true) {
            return;
        }
        let _ = tokio::time::timeout_at(deadline, notified).await;
    }

    /// How many channels are subscribed or being waited on (for tests).
    #[cfg(test)]
    fn channel_count(&self) -> usize {
        self.inner.channels().len()
    }
}

impl Inner {
    fn channels(&self) -> MutexGuard<'_, HashMap<String, Arc<Chan>>> {
        self.channels.lock().unwrap_or_else(PoisonError::into_inner)
    }

    async fn subscribe(self: &Arc<Self>, channel: &str, chan: &Chan) -> redis::RedisResult<()> {
        let mut conn = self.conn.lock().await;
        if chan.subscribed.load(Ordering::SeqCst) && conn.is_some() {
            return Ok(());
        }
        let live = match conn.as_mut() {
            Some(live) => live,
            None => conn.insert(self.connect().await?),
        };
        match live.sink.subscribe(channel).await {
            Ok(()) => {
                chan.subscribed.store(true, Ordering::SeqCst);
                Ok(())
            }
            Err(e) => {
                *conn = None;
                self.forget_subscriptions();
                Err(e)
            }
        }
    }

    /// A new connection, with its dispatcher running. Called holding the `conn` lock.
    async fn connect(self: &Arc<Self>) -> redis::RedisResult<Live> {
        let (sink, stream) = self.client.get_async_pubsub().await?.split();
        let generation = self.generation.fetch_add(1, Ordering::SeqCst) + 1;
        let (stop, stopped) = oneshot::channel();
        self.forget_subscriptions();
        tokio::spawn(dispatch(Arc::downgrade(self), generation, stream, stopped));
        Ok(Live {
            generation,
            sink,
            _stop: stop,
        })
    }

    /// No channel is subscribed on a new (or no) connection. Called holding `conn`.
    fn forget_subscriptions(&self) {
        for chan in self.channels().values() {
            chan.subscribed.store(false, Ordering::SeqCst);
        }
    }

    /// Unsubscribes `channel` if nobody waits on it any more.
    async fn cleanup(self: Arc<Self>, channel: String) {
        let mut conn = self.conn.lock().await;
        let chan = match self.channels().get(&channel) {
            Some(c) if c.waiters.load(Ordering::SeqCst) == 0 => c.clone(),
            _ => return,
        };
        if chan.subscribed.swap(false, Ordering::SeqCst) {
            if let Some(live) = conn.as_mut() {
                if live.sink.unsubscribe(&channel).await.is_err() {
                    *conn = None;
                    self.forget_subscriptions();
                }
            }
        }
        let mut channels = self.channels();
        if channels
            .get(&channel)
            .is_some_and(|c| Arc::ptr_eq(c, &chan) && c.waiters.load(Ordering::SeqCst) == 0)
        {
            channels.remove(&channel);
        }
    }
}

/// Routes messages to waiters until the connection ends or the store is dropped; then
/// wakes every waiter (they re-subscribe on a new connection or time out).
async fn dispatch(inner: Weak<Inner>, generation: u64, mut stream: PubSubStream, mut stopped: oneshot::Receiver<()>) {
    loop {
        tokio::select! {
            _ = &mut stopped => return,
            msg = stream.next() => match msg {
                Some(msg) => {
                    let Some(inner) = inner.upgrade() else { return };
                    if let Some(chan) = inner.channels().get(msg.get_channel_name()) {
                        chan.notify.notify_waiters();
                    }
                }
                None => break,
            },
        }
    }
    let Some(inner) = inner.upgrade() else { return };
    let mut conn = inner.conn.lock().await;
    if conn.as_ref().is_some_and(|l| l.generation == generation) {
        *conn = None;
        inner.forget_subscriptions();
    }
    drop(conn);
    tracing::debug!("redis pub/sub connection ended; waking waiters");
    for chan in inner.channels().values() {
        chan.notify.notify_waiters();
    }
}

/// One waiter's interest in a channel; unsubscribes the channel when the last waiter
/// leaves (also when the waiting future is dropped).
struct Registration {
    inner: Arc<Inner>,
    channel: String,
    chan: Arc<Chan>,
}

impl Registration {
    fn new(inner: &Arc<Inner>, channel: &str) -> Self {
        let mut channels = inner.channels();
        let chan = channels.entry(channel.to_owned()).or_default().clone();
        chan.waiters.fetch_add(1, Ordering::SeqCst);
        drop(channels);
        Self {
            inner: inner.clone(),
            channel: channel.to_owned(),
            chan,
        }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut channels = self.inner.channels();
        if self.chan.waiters.fetch_sub(1, Ordering::SeqCst) != 1 {
            return;
        }
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            drop(channels);
            rt.spawn(self.inner.clone().cleanup(std::mem::take(&mut self.channel)));
        } else if !self.chan.subscribed.load(Ordering::SeqCst) {
            channels.remove(&self.channel);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_unreachable_pubsub_server_degrades_to_sleeping_the_whole_wait() {
        // Nothing listens on port 1: connecting is refused at once.
        let client = redis::Client::open("redis://127.0.0.1:1/").expect("client");
        let n = Notifier::new(client);
        let started = Instant::now();
        n.wait("c", Duration::from_millis(150), async { true }).await;
        let waited = started.elapsed();
        assert!(waited >= Duration::from_millis(150), "returned early after {waited:?}");
        assert!(
            lease_core_poll(|| n.channel_count() == 0).await,
            "registration not cleaned up"
        );
    }

    async fn lease_core_poll(mut cond: impl FnMut() -> bool) -> bool {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !cond() {
            if Instant::now() > deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        true
    }
}
