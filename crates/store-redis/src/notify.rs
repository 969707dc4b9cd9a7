//! Waking waiters on release: one pub/sub connection per store, one channel per lease
//! name (subscribed while somebody waits on it), feeding the core's [`WakeHub`].
//!
//! The release and delete scripts `PUBLISH` the name's new version (`epoch:n`) on its
//! channel in the same atomic step as the write. The connection's dispatcher announces
//! each message to the hub as a change at position `n` that left the lease free, and the
//! hub wakes **one** acquirer of that name (and every observer), passing the wake-up on if it goes unused (see
//! [`WakeHub`]); each write's outcome tells the hub when the lease was claimed
//! ([`Notifier::claimed`]). A message that does not parse (anyone may `PUBLISH`) is
//! ignored. Positions count within one epoch: the hub's key is the channel and the
//! epoch, so versions that start again under a new epoch (the counter hash lost) are
//! never compared with the old ones.
//!
//! A waiter enters the hub first (so waiters are woken in the order they came; it
//! returns at once if a change it has not seen was announced), then subscribes. A
//! release published before the subscription took effect reached nobody, so whoever
//! subscribes the channel reads the record right after and announces what it shows as
//! one more change: its version, free if the record is vacant; with no record, the
//! version counter's position (a delete raised it). The hub wakes the waiters that had
//! not seen it, as for a release, and every waiter that comes later and saw less
//! returns at once. A waiter that saw no record waits for a grant, which publishes
//! nothing: it looks once and sleeps.
//!
//! A lost connection wakes every waiter (messages may have been dropped); they subscribe
//! again on a new one. Anything going wrong when subscribing degrades to sleeping until
//! the deadline: a waiter never returns early because of an error, so a dead server
//! cannot turn waiting into a busy loop.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use futures::StreamExt;
use leasehold_core::store::{Version, Wait, WakeHub};
use redis::aio::{PubSubSink, PubSubStream};
use tokio::sync::oneshot;
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
    /// Outlives connections: waiters stay registered across a reconnect.
    hub: WakeHub,
}

struct Live {
    generation: u64,
    sink: PubSubSink,
    /// Dropping it stops the connection's dispatcher task.
    _stop: oneshot::Sender<()>,
}

#[derive(Default)]
struct Chan {
    /// Changed only under the `channels` lock.
    waiters: AtomicUsize,
    /// Changed only under the `conn` lock.
    subscribed: AtomicBool,
}

/// A name's record as the store reads it for its waiters: `HMGET` of the record's `v`
/// and `h`, and of the version counter hash's `e` and `n` (`None` where missing).
#[derive(Debug, Default)]
pub(crate) struct Now {
    pub(crate) version: Option<String>,
    pub(crate) holder: Option<String>,
    pub(crate) epoch: Option<String>,
    pub(crate) counter: Option<String>,
}

impl Now {
    /// The change the record shows, as a version and whether it left the lease free:
    /// the record's version (free if vacant), or with no record the counter's (free).
    fn change(&self) -> Option<(String, bool)> {
        match (&self.version, &self.epoch, &self.counter) {
            (Some(v), _, _) => Some((v.clone(), self.holder.as_deref() == Some(""))),
            (None, Some(e), Some(n)) => Some((format!("{e}:{n}"), true)),
            _ => None,
        }
    }
}

/// A version's epoch and its position in the epoch (`epoch:n`).
fn position(version: &str) -> Option<(&str, u64)> {
    let (epoch, n) = version.split_once(':')?;
    if epoch.is_empty() || !epoch.bytes().all(|b| b.is_ascii_digit()) || n.starts_with('+') {
        return None;
    }
    n.parse().ok().filter(|&n| n > 0).map(|n| (epoch, n))
}

/// The hub's key for the versions of `channel` in `epoch`.
fn hub_key(channel: &str, epoch: &str) -> String {
    format!("{channel} {epoch}")
}

impl Notifier {
    pub(crate) fn new(client: redis::Client) -> Self {
        Self {
            inner: Arc::new(Inner {
                client,
                conn: tokio::sync::Mutex::new(None),
                channels: Mutex::new(HashMap::new()),
                generation: AtomicU64::new(0),
                hub: WakeHub::new(),
            }),
        }
    }

    /// Waits until `channel` announces a change the caller, who saw `seen`, has not
    /// seen in the way `wait` asks for, or until it is time to look again. `now` reads
    /// the record, if this wait has to.
    pub(crate) async fn wait(
        &self,
        channel: &str,
        seen: Option<&Version>,
        wait: Wait,
        now: impl Future<Output = redis::RedisResult<Now>>,
    ) {
        let deadline = Instant::now() + wait.after();
        let Some((epoch, at)) = seen.and_then(|v| position(v.as_str())) else {
            // No record seen: the next change is a grant, which publishes nothing.
            let present = tokio::time::timeout_at(deadline, now).await;
            if !matches!(present, Ok(Ok(Now { version: Some(_), .. }))) {
                tokio::time::sleep_until(deadline).await;
            }
            return;
        };
        let reg = Registration::new(&self.inner, channel);
        let key = hub_key(channel, epoch);
        let mut woken = Box::pin(self.inner.hub.wait(&key, at, wait));
        if futures::poll!(woken.as_mut()).is_ready() {
            return;
        }
        match tokio::time::timeout_at(deadline, self.inner.subscribe(channel, &reg.chan, now)).await {
            Ok(Ok(())) => woken.await,
            Ok(Err(e)) => {
                if futures::poll!(woken.as_mut()).is_ready() {
                    // Woken while subscribing (the connection dropped and every waiter
                    // was woken): look again now, as every other waiter does.
                    return;
                }
                tracing::warn!(channel, error = %e, "redis pub/sub unavailable; waiting without notification");
                // Leave the hub: a sleeper must not take a wake-up meant for another.
                drop(woken);
                tokio::time::sleep_until(deadline).await;
            }
            Err(_) => {}
        }
    }

    /// A write through this store showed the record of `channel` at `version` (its
    /// outcome): a wake-up handed out for an older release did its work.
    pub(crate) fn claimed(&self, channel: &str, version: &Version) {
        if let Some((epoch, at)) = position(version.as_str()) {
            self.inner.hub.claimed(&hub_key(channel, epoch), at);
        }
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

    /// Subscribes `channel` unless it is; a new subscription reads the record (`now`)
    /// and announces what it shows.
    async fn subscribe(
        self: &Arc<Self>,
        channel: &str,
        chan: &Chan,
        now: impl Future<Output = redis::RedisResult<Now>>,
    ) -> redis::RedisResult<()> {
        let mut conn = self.conn.lock().await;
        if chan.subscribed.load(Ordering::SeqCst) && conn.is_some() {
            return Ok(());
        }
        let live = match conn.as_mut() {
            Some(live) => live,
            None => conn.insert(self.connect().await?),
        };
        if let Err(e) = live.sink.subscribe(channel).await {
            // A refusal (an ACL without `SUBSCRIBE`) leaves the connection as it was.
            if e.is_unrecoverable_error() {
                self.drop_connection(&mut conn);
            }
            return Err(e);
        }
        chan.subscribed.store(true, Ordering::SeqCst);
        // A failed read only leaves a release before the subscription to the wait's `Wait::after`.
        let change = now.await.ok().and_then(|now| now.change());
        if let Some((version, free)) = change {
            if let Some((epoch, at)) = position(&version) {
                self.hub.announce(&hub_key(channel, epoch), at, free);
            }
        }
        Ok(())
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

    /// Drops the connection (`conn`, locked): its messages may be lost, so every waiter
    /// wakes and looks again.
    fn drop_connection(&self, conn: &mut Option<Live>) {
        *conn = None;
        self.forget_subscriptions();
        self.hub.wake_all();
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
                if live
                    .sink
                    .unsubscribe(&channel)
                    .await
                    .is_err_and(|e| e.is_unrecoverable_error())
                {
                    self.drop_connection(&mut conn);
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

/// Announces each release to the hub until the connection ends or the store is dropped;
/// then wakes every waiter (they subscribe again on a new connection or time out).
async fn dispatch(inner: Weak<Inner>, generation: u64, mut stream: PubSubStream, mut stopped: oneshot::Receiver<()>) {
    loop {
        tokio::select! {
            _ = &mut stopped => return,
            msg = stream.next() => match msg {
                Some(msg) => {
                    let Some(inner) = inner.upgrade() else { return };
                    let payload = msg.get_payload::<String>().unwrap_or_default();
                    match position(&payload) {
                        Some((epoch, at)) => inner.hub.announce(&hub_key(msg.get_channel_name(), epoch), at, true),
                        None => tracing::debug!(channel = msg.get_channel_name(), payload = payload.as_str(), "ignored a message that is not ours"),
                    }
                }
                None => break,
            },
        }
    }
    let Some(inner) = inner.upgrade() else { return };
    let mut conn = inner.conn.lock().await;
    tracing::debug!("redis pub/sub connection ended; waking waiters");
    if conn.as_ref().is_some_and(|l| l.generation == generation) {
        inner.drop_connection(&mut conn);
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
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn an_unreachable_pubsub_server_degrades_to_sleeping_the_whole_wait() {
        // Nothing listens on port 1: connecting is refused at once.
        let client = redis::Client::open("redis://127.0.0.1:1/").expect("client");
        let n = Notifier::new(client);
        let started = Instant::now();
        let seen = Version::new("17:3");
        let now = Now {
            version: Some("17:4".to_owned()),
            ..Now::default()
        };
        n.wait("c", Some(&seen), Wait::Change(Duration::from_millis(150)), async {
            Ok(now)
        })
        .await;
        let waited = started.elapsed();
        assert!(waited >= Duration::from_millis(150), "returned early after {waited:?}");
        assert!(
            lease_core_poll(|| n.channel_count() == 0).await,
            "registration not cleaned up"
        );
    }

    #[test]
    fn only_versions_of_this_store_are_positions() {
        assert_eq!(position("1733000000123456:42"), Some(("1733000000123456", 42)));
        for foreign in [
            "deleted", "", "7", ":3", "x:3", "17:0", "17:-3", "17:+3", "17:3:4", "17:ab",
        ] {
            assert_eq!(position(foreign), None, "{foreign:?}");
        }
    }

    #[test]
    fn a_snapshot_is_the_records_version_or_the_counters_and_free_when_nobody_holds_it() {
        let s = |v: Option<&str>, h: Option<&str>, e: Option<&str>, n: Option<&str>| Now {
            version: v.map(str::to_owned),
            holder: h.map(str::to_owned),
            epoch: e.map(str::to_owned),
            counter: n.map(str::to_owned),
        };
        let held = s(Some("17:3"), Some("w1"), Some("17"), Some("3")).change();
        assert_eq!(held, Some(("17:3".to_owned(), false)));
        let vacant = s(Some("17:3"), Some(""), Some("17"), Some("3")).change();
        assert_eq!(vacant, Some(("17:3".to_owned(), true)));
        let deleted = s(None, None, Some("17"), Some("4")).change();
        assert_eq!(deleted, Some(("17:4".to_owned(), true)));
        assert_eq!(s(None, None, None, None).change(), None, "never written");
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
