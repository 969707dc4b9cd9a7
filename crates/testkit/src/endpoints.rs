//! Endpoints that misbehave the way real networks do, for the stores' fault tests.

use std::time::Duration;

use leasehold_core::store::{CasStore, ClockSource, LeaseRecord, Precondition};
use leasehold_core::{ClientConfig, Error, FencingToken, HolderId, LeaseClient, LeaseName, Ttl};

use crate::proxy::{Proxy, ProxyMode};
use tokio::io::AsyncReadExt;
use tokio::net::TcpListener;

/// An HTTP-looking endpoint that accepts connections and reads forever, never answering
/// a byte: a hung server, or a network that drops every answer. Its `http://` URL; it
/// serves until the runtime ends.
pub async fn silent_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind a loopback port");
    let addr = listener.local_addr().expect("the bound address");
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                while matches!(conn.read(&mut buf).await, Ok(n) if n > 0) {}
            });
        }
    });
    format!("http://{addr}")
}

/// A client on any store (Redis included: these cases are about its requests, not its
/// guarantee).
fn any_client<S: CasStore + 'static>(store: S) -> LeaseClient {
    LeaseClient::efficiency_only(store, ClientConfig::default()).expect("client")
}

/// A `try_acquire` on `store`, whose endpoint is a [`silent_server`], sends its write and
/// never hears back. It must report [`Error::Indeterminate`] ("may have applied"),
/// never [`Error::Unavailable`] ("did not apply, safe to retry"), even though the read
/// meant to settle the outcome fails too; and it must end within `bound`.
///
/// # Panics
/// If it reports anything else, or takes longer.
pub async fn assert_acquire_is_in_doubt<S: CasStore + 'static>(store: S, bound: Duration) {
    let client = any_client(store);
    let started = tokio::time::Instant::now();
    let attempt = client.try_acquire("silent/acquire", Duration::from_secs(5));
    match tokio::time::timeout(bound + Duration::from_secs(10), attempt).await {
        Ok(Err(Error::Indeterminate { .. })) => {}
        Ok(other) => panic!("an acquire whose write got no answer gave {other:?}"),
        Err(_) => panic!("an acquire against a silent endpoint hung"),
    }
    let took = started.elapsed();
    assert!(took <= bound, "took {took:?}, beyond its bound of {bound:?}");
}

/// A store whose every request goes through `proxy`, bounded by its request timeout
/// `bound`, against a server that answers slowly and then not at all; `direct` is a
/// store on the same server without the proxy.
///
/// - Answers late but within the bound: an acquire and a release succeed.
/// - Answers only after the bound: a read is [`Error::Unavailable`], a write
///   [`Error::Indeterminate`] ("may have applied"), or `Unavailable` only if it did not
///   apply, each within about the bound; once answers flow again the store recovers,
///   and shows what `direct` shows.
/// - No answers at all: the same; once the partition ends (its connections cut) the
///   store recovers; and an acquire is in doubt ([`assert_acquire_is_in_doubt`]).
///
/// # Panics
/// If any of these does not hold.
pub async fn slow_then_silent<S, D>(store: S, direct: D, proxy: &Proxy, bound: Duration)
where
    S: CasStore + Clone + 'static,
    D: CasStore,
{
    let case = crate::unique_suffix();
    let name = |what: &str| LeaseName::new(format!("slow/{case}/{what}")).expect("name");
    let client = any_client(store.clone());
    proxy.set_mode(ProxyMode::Delay(bound / 10));
    let started = tokio::time::Instant::now();
    let lease = client
        .try_acquire(name("within").as_str(), Duration::from_secs(5))
        .await
        .expect("an acquire answered late but within the bound")
        .granted()
        .expect("a free lease is granted");
    assert!(started.elapsed() >= bound / 10, "the proxy did not delay the answers");
    lease
        .release()
        .await
        .expect("a release answered late but within the bound");

    let record = LeaseRecord::held(
        HolderId::new("slow-writer").expect("holder"),
        FencingToken::FIRST,
        Ttl::from_millis(30_000).expect("ttl"),
    );
    let create = if store.capabilities().clock == ClockSource::Store {
        Precondition::Claimable
    } else {
        Precondition::Absent
    };
    for (mode, what) in [(ProxyMode::Delay(bound * 4), "late"), (ProxyMode::Withhold, "never")] {
        let key = name(what);
        proxy.set_mode(mode);
        let started = tokio::time::Instant::now();
        let read = store.read(&key).await;
        assert!(
            matches!(read, Err(Error::Unavailable { .. })),
            "answers {what}: a read gave {read:?}"
        );
        let write = store.write(&key, &create, &record).await;
        assert!(
            matches!(write, Err(Error::Indeterminate { .. } | Error::Unavailable { .. })),
            "answers {what}: a write gave {write:?}"
        );
        let took = started.elapsed();
        assert!(
            took < bound * 3 + Duration::from_secs(1),
            "answers {what}: a read and a write took {took:?}, bound {bound:?} each"
        );
        if mode == ProxyMode::Withhold {
            // Lost answers on a live connection cannot happen on TCP: a partition ends
            // with its connections broken. (A pipelined protocol such as Redis's would
            // otherwise match every later answer to an earlier, lost one.)
            proxy.cut();
            proxy.reconnect();
        }
        proxy.set_mode(ProxyMode::Forward);
        // The store recovers once answers flow again, and the write, if it reached the
        // server (a protocol that prepares a statement first may not have sent it), is
        // the record written.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        let now = loop {
            match store.read(&key).await {
                Ok(now) => break now,
                Err(_) if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => panic!("answers {what}: the store never recovered: {e}"),
            }
        };
        if let Some(now) = &now {
            assert_eq!(now.record.holder, record.holder, "answers {what}: {now:?}");
        }
        let seen = direct.read(&key).await.expect("a direct read");
        assert_eq!(seen.is_some(), now.is_some(), "answers {what}: the two stores disagree");
        // "Did not apply" must be true.
        if matches!(write, Err(Error::Unavailable { .. })) {
            assert!(
                seen.is_none(),
                "answers {what}: a write reported as not applied applied: {seen:?}"
            );
        }
    }
    proxy.set_mode(ProxyMode::Withhold);
    assert_acquire_is_in_doubt(store, bound * 4 + Duration::from_secs(1)).await;
    proxy.set_mode(ProxyMode::Forward);
}
