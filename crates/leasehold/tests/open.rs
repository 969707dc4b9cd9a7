//! Opening a SQL store by URL: what the server refuses is said at once and classified.
//! Unknown credentials or database are `Misconfigured` (retrying will not help), a port
//! nobody listens on is `Unavailable`; none waits for the connect timeout, and the
//! message carries the server's words without the driver's decorations.
#![cfg(all(feature = "postgres", feature = "mysql"))]
#![allow(missing_docs)]

use std::time::{Duration, Instant};

use leasehold::url::{OpenOptions, StoreUrl};

/// Longer than any of these answers may take: a refusal that waited for it failed.
const PATIENT: Duration = Duration::from_secs(20);

/// Opens `url` with a connect timeout of [`PATIENT`]; the error, and whether it came
/// before the timeout.
async fn open_error(url: &str) -> (leasehold::Error, bool) {
    let url = StoreUrl::parse(url).unwrap_or_else(|e| panic!("{url}: {e}"));
    let mut options = OpenOptions::default();
    options.connect_timeout = PATIENT;
    let started = Instant::now();
    let err = match url.open(&options).await {
        Ok(_) => panic!("{url} opened"),
        Err(e) => e,
    };
    (err, started.elapsed() < PATIENT / 2)
}

/// `url` with its user (and password) replaced by `user`.
fn with_user(url: &str, user: &str) -> String {
    let (scheme, rest) = url.split_once("://").expect("a URL");
    let host = rest.split_once('@').map_or(rest, |(_, host)| host);
    format!("{scheme}://{user}@{host}")
}

/// `url` with its database replaced by `db`.
fn with_database(url: &str, db: &str) -> String {
    let (scheme, rest) = url.split_once("://").expect("a URL");
    let authority = rest.split(['/', '?']).next().expect("an authority");
    format!("{scheme}://{authority}/{db}")
}

fn assert_misconfigured(err: &leasehold::Error, words: &str) {
    assert!(
        matches!(err, leasehold::Error::Misconfigured { .. }),
        "not Misconfigured: {err:?}"
    );
    assert!(!err.is_retryable(), "{err}");
    let text = err.to_string();
    assert!(text.contains(words), "{text}");
    assert!(!text.contains(" at line "), "a driver decoration: {text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_refusals_are_misconfigured_at_once() {
    let pg = leasehold_testkit::pg_url();
    let (err, soon) = open_error(&with_user(&pg, "no_such_role_lh")).await;
    assert_misconfigured(&err, "role \"no_such_role_lh\" does not exist (code 28000)");
    assert!(soon, "waited for the connect timeout: {err}");
    let (err, soon) = open_error(&with_database(&pg, "no_such_db_lh")).await;
    assert_misconfigured(&err, "database \"no_such_db_lh\" does not exist (code 3D000)");
    assert!(soon, "waited for the connect timeout: {err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_refusals_are_misconfigured_at_once() {
    let my = leasehold_testkit::env("LEASEHOLD_MYSQL_URL");
    let (err, soon) = open_error(&with_database(&my, "no_such_db_lh")).await;
    assert_misconfigured(&err, "Unknown database 'no_such_db_lh' (error 1049");
    assert!(soon, "waited for the connect timeout: {err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_port_nobody_listens_on_is_unavailable_at_once() {
    let (err, soon) = open_error("postgres://postgres@127.0.0.1:1/postgres").await;
    assert!(
        matches!(err, leasehold::Error::Unavailable { .. }),
        "not Unavailable: {err:?}"
    );
    assert!(err.to_string().contains("refused"), "{err}");
    assert!(soon, "waited for the connect timeout: {err}");
}
