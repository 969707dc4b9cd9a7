//! Foreign writers: the stores' own command-line clients (`etcdctl`, `redis-cli`,
//! `psql`, `sqlite3`; boto3 for DynamoDB and S3) run the way an operator would, and a
//! holder watched while one of them changes its record.

use std::future::Future;
use std::process::Command;
use std::time::Duration;

use leasehold_core::store::Linearizable;
use leasehold_core::testing::process::poll;
use leasehold_core::{Lease, LeaseClient, LeaseName, LossCause};
use tokio::time::Instant;

/// Runs `program` with `args` and returns its standard output.
///
/// # Panics
/// If it cannot start (`scripts/install-deps.sh` installs every client the tests use)
/// or exits with an error, with its standard error.
pub fn cli(program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program} {args:?} did not run (scripts/install-deps.sh installs it): {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// [`cli`] with the arguments that reach the test server (`connection`) first, then
/// `args`.
///
/// # Panics
/// As [`cli`].
pub fn cli_with(program: &str, connection: &[&str], args: &[&str]) -> String {
    let mut all = connection.to_vec();
    all.extend_from_slice(args);
    cli(program, &all)
}

/// Takes `name` for `ttl` through `client`, waits for one renewal to land, runs `change`
/// (a foreign writer changing the record), and waits for the holder to notice: its loss
/// cause and how long after the change it fired, with the lease.
///
/// # Panics
/// If the grant fails, no renewal lands within 5 s, or the holder did not notice within
/// one renewal interval (a third of the TTL, plus 500 ms).
pub async fn hold_then(
    client: &LeaseClient,
    name: &str,
    ttl: Duration,
    change: impl Future<Output = ()>,
) -> (LossCause, Duration, Lease) {
    let lease = client.acquire(name, ttl).await.expect("acquire");
    let before = lease.valid_until();
    assert!(
        poll(Duration::from_secs(5), || lease.valid_until() > before).await,
        "no renewal of {name} landed"
    );
    change.await;
    let changed = Instant::now();
    let cause = tokio::time::timeout(ttl.max(Duration::from_secs(3)), lease.lost())
        .await
        .unwrap_or_else(|_| panic!("the holder still believes it holds {name} long after the change"));
    let after = changed.elapsed();
    // Renewals come every third of the TTL: the next one must notice.
    assert!(
        after <= ttl / 3 + Duration::from_millis(500),
        "{name}: noticed only {after:?} after the change ({cause:?})"
    );
    (cause, after, lease)
}

/// [`hold_then`] through a client of its own on `store`: how the holder lost the lease.
///
/// # Panics
/// As [`hold_then`].
pub async fn lost_after<S>(store: &S, name: &str, ttl: Duration, change: impl Future<Output = ()>) -> LossCause
where
    S: Linearizable + Clone,
{
    let (cause, _, _) = hold_then(&LeaseClient::new(store.clone()), name, ttl, change).await;
    cause
}

/// Runs `script` as an operator's boto3 program against the moto server the tests use
/// (`LEASEHOLD_MOTO_ENDPOINT`), with the venv's Python (`scripts/install-deps.sh`
/// installs boto3 there with moto), and returns its standard output.
///
/// The script starts with `client`, a boto3 client for `service` (`"s3"`, `"dynamodb"`)
/// on that endpoint (region `us-east-1`, static dummy credentials, path-style S3
/// addresses, no retries), `json` and `sys` imported, and `args`, the strings given
/// here. It runs on a blocking thread, so the caller's runtime keeps renewing.
///
/// # Panics
/// If Python or boto3 cannot start, or the script fails (a refused request included).
pub async fn boto3(service: &str, script: &str, args: &[&str]) -> String {
    const PRELUDE: &str = "import json, sys\n\
        import boto3, botocore.config\n\
        client = boto3.client(sys.argv[1], endpoint_url=sys.argv[2], region_name='us-east-1',\n\
            aws_access_key_id='leasehold-test', aws_secret_access_key='leasehold-test',\n\
            config=botocore.config.Config(s3={'addressing_style': 'path'}, retries={'max_attempts': 1}))\n\
        args = sys.argv[3:]\n";
    let python = crate::venv().join("bin/python").display().to_string();
    let mut argv = vec![
        "-c".to_owned(),
        format!("{PRELUDE}{script}"),
        service.to_owned(),
        crate::moto_endpoint(),
    ];
    argv.extend(args.iter().map(|a| (*a).to_owned()));
    tokio::task::spawn_blocking(move || {
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        cli(&python, &argv)
    })
    .await
    .unwrap_or_else(|e| panic!("the boto3 script did not finish: {e}"))
}

/// [`boto3`] with the arguments `first`, then the two strings of each of `pairs` in turn
/// (the script takes them as `zip(args[1::2], args[2::2])`).
///
/// # Panics
/// As [`boto3`].
pub async fn boto3_pairs(service: &str, script: &str, first: &str, pairs: &[(String, String)]) -> String {
    let mut args = vec![first];
    for (a, b) in pairs {
        args.extend([a.as_str(), b.as_str()]);
    }
    boto3(service, script, &args).await
}

/// [`hold_then`] for many names at once: takes each of `names` for `ttl` through
/// `client`, waits for one renewal of each to land, runs `change` once (a foreign writer
/// changing all their records, in one program run), and waits for every holder to
/// notice. Returns, per name in order, the loss cause, how long after the change it was
/// seen, and the lease.
///
/// # Panics
/// As [`hold_then`], for any of the names.
pub async fn hold_all_then(
    client: &LeaseClient,
    names: &[String],
    ttl: Duration,
    change: impl Future<Output = ()>,
) -> Vec<(LossCause, Duration, Lease)> {
    let mut leases = Vec::new();
    for name in names {
        let lease = client.acquire(name, ttl).await.expect("acquire");
        let before = lease.valid_until();
        leases.push((lease, before));
    }
    assert!(
        poll(Duration::from_secs(5), || leases
            .iter()
            .all(|(l, before)| l.valid_until() > *before))
        .await,
        "no renewal of some of {names:?} landed"
    );
    change.await;
    let changed = Instant::now();
    let mut seen: Vec<Option<Duration>> = vec![None; leases.len()];
    // Whether all noticed in time is checked per name below.
    let _ = poll(ttl.max(Duration::from_secs(3)), || {
        for ((lease, _), at) in leases.iter().zip(seen.iter_mut()) {
            if at.is_none() && lease.loss_cause().is_some() {
                *at = Some(changed.elapsed());
            }
        }
        seen.iter().all(Option::is_some)
    })
    .await;
    let mut out = Vec::new();
    for (((lease, _), at), name) in leases.into_iter().zip(seen).zip(names) {
        let Some(after) = at else {
            panic!("the holder still believes it holds {name} long after the change");
        };
        let cause = lease.loss_cause().expect("a loss cause");
        assert!(
            after <= ttl / 3 + Duration::from_millis(500),
            "{name}: noticed only {after:?} after the change ({cause:?})"
        );
        out.push((cause, after, lease));
    }
    out
}

/// What an operator's corrupting of held records by hand must give ([`hold_all_then`]
/// with `change`, which makes the record of each of `names` invalid, as the case of the
/// same place in `whats` says): each holder loses its lease within one renewal interval
/// as a store error saying the record is corrupt; the release of the lost lease, a read
/// and grants report [`leasehold_core::Error::CorruptRecord`] (grants at once). The loss
/// causes, in the order of `names`.
///
/// # Panics
/// If any of that does not hold.
pub async fn assert_corrupted_by_hand<S>(
    store: &S,
    names: &[String],
    whats: &[&str],
    ttl: Duration,
    change: impl Future<Output = ()>,
) -> Vec<LossCause>
where
    S: Linearizable + Clone,
{
    assert_eq!(names.len(), whats.len(), "a case for each name");
    let held = hold_all_then(&LeaseClient::new(store.clone()), names, ttl, change).await;
    let mut causes = Vec::new();
    for ((what, name), (cause, after, lease)) in whats.iter().zip(names).zip(held) {
        match &cause {
            LossCause::StoreError(e) if e.contains("corrupt lease record") => {}
            other => panic!("{what}: lost after {after:?} with {other:?}, not as a corrupt record"),
        }
        assert_corrupt(what, "release", lease.release().await);
        let key = LeaseName::new(name).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_corrupt(what, "read", store.read(&key).await);
        assert_grants_corrupt(&LeaseClient::new(store.clone()), name, ttl, what).await;
        causes.push(cause);
    }
    causes
}

/// Panics unless `result` (of `path` on the record `what` describes) is
/// [`leasehold_core::Error::CorruptRecord`].
pub fn assert_corrupt<T: std::fmt::Debug>(what: &str, path: &str, result: leasehold_core::Result<T>) {
    match result {
        Err(leasehold_core::Error::CorruptRecord { .. }) => {}
        other => panic!("{what}: {path} gives {other:?}, not CorruptRecord"),
    }
}

/// Panics unless grants of `name` through `client` report
/// [`leasehold_core::Error::CorruptRecord`] at once: `try_acquire`, and `acquire` within
/// 2 s (a corrupt record is never granted and never waited on).
pub async fn assert_grants_corrupt(client: &LeaseClient, name: &str, ttl: Duration, what: &str) {
    let started = Instant::now();
    assert_corrupt(what, "try_acquire", client.try_acquire(name, ttl).await.map(|_| ()));
    let attempt = client.acquire_timeout(name, ttl, Duration::from_secs(10));
    assert_corrupt(what, "acquire", attempt.await.map(|l| l.token()));
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{what}: a grant waited {:?} on a corrupt record",
        started.elapsed()
    );
}

/// The next grant of `name` through `client` (waiting up to 10 s).
///
/// # Panics
/// If it fails.
pub async fn next_grant(client: &LeaseClient, name: &str, ttl: Duration) -> Lease {
    client
        .acquire_timeout(name, ttl, Duration::from_secs(10))
        .await
        .unwrap_or_else(|e| panic!("{name}: the next grant failed: {e}"))
}

/// Takes and releases `name` through `client` `times` times, so that the next grant's
/// token is `times + 1`.
///
/// # Panics
/// If a grant or a release fails.
pub async fn take_and_release(client: &LeaseClient, name: &str, ttl: Duration, times: usize) {
    for _ in 0..times {
        client
            .acquire(name, ttl)
            .await
            .expect("acquire")
            .release()
            .await
            .expect("release");
    }
}

/// What an operator's change of a held record by hand must give ([`hold_then`] with
/// `change`): the holder (granted token 1) loses the lease within one renewal interval,
/// taken over by `expect_holder` (or itself, if `None`) with the token `highest`; `kept`
/// (given the lost lease, which it releases) checks that the record keeps what the
/// operator wrote; the next grant's token is `highest + 1`. `what` names the case in the
/// panic messages.
///
/// # Panics
/// If any of that does not hold.
pub async fn assert_changed_by_hand<S, K>(
    store: &S,
    name: &str,
    ttl: Duration,
    change: impl Future<Output = ()>,
    (expect_holder, highest): (Option<&str>, u64),
    what: &str,
    kept: impl FnOnce(Lease) -> K,
) where
    S: Linearizable + Clone,
    K: Future<Output = ()>,
{
    let client = LeaseClient::new(store.clone());
    let (cause, after, lease) = hold_then(&client, name, ttl, change).await;
    assert_eq!(lease.token().get(), 1);
    let own = lease.holder().as_str().to_owned();
    match &cause {
        LossCause::TakenOver { holder, token } => {
            assert_eq!(token.get(), highest, "{what}: the loss names the token {token}");
            let want = expect_holder.unwrap_or(&own);
            assert_eq!(holder.as_ref().map(|h| h.as_str()), Some(want), "{what}");
        }
        other => panic!("{what}: lost after {after:?} with {other:?}, not TakenOver"),
    }
    kept(lease).await;
    // A new client, which waits out the old holder's record.
    let why = format!("{what}: the next grant must be above every token the record held");
    assert_next_token(&LeaseClient::new(store.clone()), name, ttl, highest + 1, &why).await;
}

/// What an operator's delete of a held record by hand must give, where the record is
/// all the store keeps of a name: after two tenures, the holder (token 3) notices the
/// `delete` within one renewal interval as [`LossCause::Expired`]; neither that renewal
/// nor the release of the lost lease creates the record again (`gone` must be true
/// after both, and a read finds nothing); the next grant starts again at token 1.
///
/// # Panics
/// If any of that does not hold.
pub async fn assert_deleted_by_hand<S, G>(
    store: &S,
    name: &str,
    ttl: Duration,
    delete: impl Future<Output = ()>,
    gone: impl FnOnce() -> G,
) where
    S: Linearizable + Clone,
    G: Future<Output = bool>,
{
    let client = LeaseClient::new(store.clone());
    take_and_release(&client, name, ttl, 2).await;
    let (cause, after, lease) = hold_then(&client, name, ttl, delete).await;
    assert_eq!(lease.token().get(), 3);
    assert_eq!(cause, LossCause::Expired, "noticed after {after:?}");
    lease.release().await.expect("release of the lost lease");
    assert!(
        gone().await,
        "a renewal or release recreated the deleted record of {name}"
    );
    let key = LeaseName::new(name).expect("name");
    assert!(
        store.read(&key).await.expect("read").is_none(),
        "{name}: read after the delete"
    );
    let why = "the store has no record of the tokens of a deleted record";
    assert_next_token(&LeaseClient::new(store.clone()), name, ttl, 1, why).await;
}

/// What an operator's delete of a held record by hand must give, where the store keeps
/// the token counter apart from the record (etcd, ZooKeeper): the holder of `name` (a
/// name never granted before) notices the `delete` within one renewal interval, as
/// expired or taken over, and the next grant continues the token sequence (token 2; it
/// is released).
///
/// # Panics
/// If any of that does not hold.
pub async fn assert_deleted_keeps_the_counter<S>(store: &S, name: &str, ttl: Duration, delete: impl Future<Output = ()>)
where
    S: Linearizable + Clone,
{
    let cause = lost_after(store, name, ttl, delete).await;
    assert!(
        matches!(cause, LossCause::Expired | LossCause::TakenOver { .. }),
        "{cause:?}"
    );
    // The token sequence continues: the next grant is above the deleted holder's token.
    let next = crate::granted(&LeaseClient::new(store.clone()), name, ttl, "after the delete").await;
    assert_eq!(next.token().get(), 2);
    next.release().await.expect("release");
}

/// The next grant of `name` through `client` (waiting up to 10 s) has the token `want`
/// (`why` says why, in the panic message); it is released.
///
/// # Panics
/// If the grant or the release fails, or the token is another.
pub async fn assert_next_token(client: &LeaseClient, name: &str, ttl: Duration, want: u64, why: &str) {
    let next = next_grant(client, name, ttl).await;
    assert_eq!(next.token().get(), want, "{name}: {why}");
    next.release().await.expect("release");
}
