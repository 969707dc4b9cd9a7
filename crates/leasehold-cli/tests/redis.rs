//! The `leasehold` binary as real processes on the tests' Redis (`LEASEHOLD_REDIS_URL`; without it they fail).

mod common;

common::scenarios::scenario_tests!(common::Store::redis().await);

/// `observe` never goes on showing an old answer while the store cannot be read: with
/// every connection to Redis cut, it prints `unknown` with the store's error, and once
/// the store answers again, who leads (here: nobody) once more. The `unknown` line does
/// not count toward `--count`: `--count 2` ends on the second line naming who leads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observe_says_unknown_while_the_store_cannot_be_read() {
    use common::Lines;
    use std::time::Duration;
    const LIMIT: Duration = Duration::from_secs(20);
    let store = common::Store::redis().await;
    let url = leasehold_testkit::redis_url();
    let rest = url.strip_prefix("redis://").expect("a redis:// URL");
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    let proxy = leasehold_testkit::proxy::Proxy::start(authority).await;
    let proxied = format!("redis://127.0.0.1:{}/{path}", proxy.port());
    let name = store.name("observe-outage");
    let mut child = store.spawn(&[
        "--store",
        &proxied,
        "observe",
        &name,
        "--json",
        "--interval",
        "200ms",
        "--count",
        "2",
    ]);
    let lines = Lines::of(&mut child);
    let state = |line: &str| -> serde_json::Value { serde_json::from_str(line).expect("a JSON line") };
    lines.wait_for(LIMIT, "the first state", |l| !l.is_empty()).await;
    proxy.cut();
    lines.wait_for(LIMIT, "unknown", |l| l.len() >= 2).await;
    proxy.reconnect();
    let printed = lines
        .wait_for(LIMIT, "the state once read again", |l| l.len() >= 3)
        .await;
    let [first, cut, again] = [0, 1, 2].map(|i| state(&printed[i]));
    assert_eq!(first["state"], "none", "{printed:?}");
    assert_eq!(cut["state"], "unknown", "{printed:?}");
    assert!(cut["token"].is_null() && cut["holder"].is_null(), "{printed:?}");
    assert!(cut["error"].as_str().is_some_and(|e| !e.is_empty()), "{printed:?}");
    assert_eq!(again["state"], "none", "{printed:?}");
    let status = common::wait_exit(&mut child, LIMIT).await;
    assert_eq!(status.code(), Some(0), "{printed:?}");
    assert_eq!(lines.wait_end(LIMIT).await.len(), 3, "nothing after the second state");
}
