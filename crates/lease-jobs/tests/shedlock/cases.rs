//! The cases every ShedLock-table store passes, each generic over its [`Db`]:
//! exclusion with Java ShedLock, `lock_at_least_for` both ways, takeover of a hung
//! holder, the unfenced mode, misconfigured tables, concurrent provisioning.

use std::sync::Arc;
use std::time::Duration;

use leasehold_core::store::{CasStore, Grade};
use leasehold_core::testing::{FaultPlan, FaultStore};
use leasehold_core::{ClientConfig, FencingToken, LeaseClient, LeaseName};
use leasehold_jobs::{LockConfig, LockingExecutor, RunOutcome};
use tokio::time::Instant;

use super::java::{HolderLog, JavaShedLock};
use super::{Db, Dialect, assert_misconfigured};

/// Tries `attempt` every 7 ms until `deadline`: how many attempts ran the job.
async fn contend<Fut: Future<Output = bool>>(deadline: Instant, mut attempt: impl FnMut() -> Fut) -> i64 {
    let mut runs = 0;
    while Instant::now() < deadline {
        if attempt().await {
            runs += 1;
        }
        tokio::time::sleep(Duration::from_millis(7)).await;
    }
    runs
}

/// Two Rust instances and one Java ShedLock instance contend for one lock for four
/// seconds: each gets it, and no two holding periods overlap (database clock).
pub async fn rust_and_java_shedlock_exclude_each_other<S: Dialect>() {
    for fenced in [true, false] {
        let db = Db::<S>::connect().await;
        let table = db.fresh_table(fenced).await;
        let log = Arc::new(HolderLog::new(&db).await);
        let name = "reportJob";
        let deadline = Instant::now() + Duration::from_secs(4);
        let mut tasks = Vec::new();
        for who in ["rust-1", "rust-2"] {
            let store = db.store_on(&table).await;
            assert_eq!(store.is_fenced(), fenced);
            let executor = LockingExecutor::new(
                store
                    .lease_client(ClientConfig::builder().label(who).build().expect("client config"))
                    .expect("client"),
            );
            let log = log.clone();
            tasks.push(tokio::spawn(async move {
                let lock = LockConfig::new(name, Duration::from_secs(2));
                let (executor, lock, log) = (&executor, &lock, &log);
                contend(deadline, move || async move {
                    let out = executor
                        .run(lock, |ctx| log.hold(who, Some(ctx.token())))
                        .await
                        .expect("rust run");
                    matches!(out, RunOutcome::Ran(_))
                })
                .await
            }));
        }
        let java = JavaShedLock::new(&db, &table, "java-host-1");
        let java_task = tokio::spawn({
            let log = log.clone();
            async move {
                let (java, log) = (&java, &log);
                contend(deadline, move || async move {
                    let took = java.lock(name, Duration::from_secs(2)).await;
                    if took {
                        log.hold("java", None).await;
                        java.unlock(name, Duration::ZERO).await;
                    }
                    took
                })
                .await
            }
        });
        let mut rust_runs = 0;
        for t in tasks {
            rust_runs += t.await.expect("task");
        }
        let java_runs = java_task.await.expect("java");
        let overlaps = log.overlaps().await;
        eprintln!("fenced={fenced}: rust runs {rust_runs}, java runs {java_runs}, overlaps {overlaps}");
        assert_eq!(overlaps, 0, "fenced={fenced}: holders overlapped");
        assert!(rust_runs >= 5 && java_runs >= 5, "rust {rust_runs}, java {java_runs}");
        assert_eq!(log.ended().await, rust_runs + java_runs);
        // Rust tokens strictly increase across Rust tenures.
        let tokens = log.tokens().await;
        assert!(
            tokens.windows(2).all(|w| w[0] < w[1]),
            "fenced={fenced}: tokens {tokens:?}"
        );
    }
}

/// A Java holder's lockAtLeastFor is honoured by Rust, and a Rust holder's by Java;
/// a lease released by Rust is free for Java at once.
pub async fn lock_at_least_for_is_honoured_both_ways<S: Dialect>() {
    let db = Db::<S>::connect().await;
    let table = db.fresh_table(true).await;
    let store = db.store_on(&table).await;
    let rust = LockingExecutor::new(store.lease_client(ClientConfig::default()).expect("client"));
    let java = JavaShedLock::new(&db, &table, "java-host-2");
    let name = "nightlyJob";

    // Java runs a short job with lockAtLeastFor = 1.5 s.
    assert!(java.lock(name, Duration::from_secs(10)).await);
    let java_started = Instant::now();
    java.unlock(name, Duration::from_millis(1_500)).await;
    let lock = LockConfig::new(name, Duration::from_secs(5));
    loop {
        match rust.run(&lock, |ctx| async move { ctx.token() }).await.expect("rust") {
            RunOutcome::Skipped { holder, .. } => {
                assert_eq!(holder.as_ref().map(|h| h.as_str()), Some("java-host-2"));
                assert!(java_started.elapsed() < Duration::from_millis(1_600), "held too long");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            RunOutcome::Ran(r) => {
                assert!(
                    java_started.elapsed() >= Duration::from_millis(1_400),
                    "rust ran {:?} after java's start",
                    java_started.elapsed()
                );
                // The row Java created had no token: Rust's first grant takes 2.
                assert_eq!(r.output, FencingToken::new(2));
                break;
            }
        }
    }
    // Rust runs with lock_at_least_for = 1 s: Java is refused until then.
    let kept = LockConfig::new(name, Duration::from_secs(5)).lock_at_least_for(Duration::from_secs(1));
    let rust_started = Instant::now();
    let ran = rust
        .run(&kept, |ctx| async move { ctx.token() })
        .await
        .expect("rust")
        .ran()
        .expect("ran");
    assert_eq!(ran.output, FencingToken::new(3));
    assert!(ran.kept_for.is_some());
    while !java.lock(name, Duration::from_secs(10)).await {
        assert!(
            rust_started.elapsed() < Duration::from_secs(3),
            "java never got the lock"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        rust_started.elapsed() >= Duration::from_millis(950),
        "java got it {:?} after rust's start",
        rust_started.elapsed()
    );
    java.unlock(name, Duration::ZERO).await;
    // Released by Rust (no lock_at_least_for): Java's plain UPDATE takes it at once.
    let quick = LockConfig::new(name, Duration::from_secs(5));
    rust.run(&quick, |_| async {}).await.expect("rust").ran().expect("ran");
    assert!(
        java.lock(name, Duration::from_secs(10)).await,
        "released row not free for java"
    );
}

/// A Rust holder whose store connection hangs loses its lease before Java can take
/// the row over (Java's `lock_until <= now`), and its next token is fenced.
pub async fn a_hung_rust_holder_is_replaced_by_java_after_expiry<S: Dialect>() {
    let db = Db::<S>::connect().await;
    let table = db.fresh_table(true).await;
    let hung = FaultStore::new(db.store_on(&table).await, 3);
    let client = LeaseClient::from_dyn(Arc::new(hung.clone()), ClientConfig::default()).expect("client");
    let lease = client
        .acquire("frozenJob", Duration::from_millis(800))
        .await
        .expect("acquire");
    hung.set_plan(FaultPlan::hang());
    let valid_until = lease.valid_until();
    let java = JavaShedLock::new(&db, &table, "java-host-3");
    while !java.lock("frozenJob", Duration::from_secs(10)).await {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let java_at = Instant::now();
    assert!(
        java_at >= valid_until,
        "java took over before the rust holder's validity ended"
    );
    tokio::time::timeout(Duration::from_secs(1), lease.lost())
        .await
        .expect("rust holder saw the loss");
}

/// Unfenced tables: the store says it is efficiency-only, tokens come from the
/// database clock at each grant, stay fixed across renewals and grow at each grant.
pub async fn unfenced_table_is_efficiency_only_with_growing_tokens<S: Dialect>() {
    let db = Db::<S>::connect().await;
    let table = db.fresh_table(false).await;
    let store = db.store_on(&table).await;
    assert!(!store.is_fenced());
    assert_eq!(store.capabilities().grade, Grade::EfficiencyOnly);
    assert!(LeaseClient::from_dyn(Arc::new(store.clone()), ClientConfig::default()).is_err());
    let client = store.lease_client(ClientConfig::default()).expect("client");
    let mut last = FencingToken::ZERO;
    for _ in 0..5 {
        let lease = client
            .acquire("unfenced", Duration::from_secs(2))
            .await
            .expect("acquire");
        assert!(lease.token() > last, "{} after {last}", lease.token());
        last = lease.token();
        let first_deadline = lease.valid_until();
        // Wait for a renewal: the token must not change.
        let renewed =
            leasehold_core::testing::process::poll(Duration::from_secs(5), || lease.valid_until() != first_deadline)
                .await;
        assert!(
            renewed,
            "no renewal within 5 s of a 2 s lease: {:?}",
            lease.loss_cause()
        );
        let name = LeaseName::new("unfenced").expect("name");
        let now = client.store().read(&name).await.expect("read").expect("present");
        assert_eq!(now.record.token, lease.token(), "renewal changed an unfenced token");
        lease.release().await.expect("release");
    }
}

/// A missing table is not provisioned and a badly typed column a misconfiguration,
/// never a grant; a name longer than the column is bad input, and writes nothing.
pub async fn missing_or_mistyped_tables_are_misconfigured<S: Dialect>() {
    let db = Db::<S>::connect().await;
    match db.open(&db.fresh_name().await).await {
        Err(leasehold_core::Error::NotProvisioned { .. }) => {}
        other => panic!("missing table: {other:?}"),
    }
    let table = db.fresh_table(false).await;
    db.exec(format!("ALTER TABLE {} ADD COLUMN fence TEXT", S::quoted(&table)))
        .await;
    assert_misconfigured(db.open(&table).await, "text fence");
    let fenced = db.fresh_table(true).await;
    let store = db.store_on(&fenced).await;
    let long = LeaseName::new("x".repeat(65)).expect("name");
    assert!(matches!(
        store.read(&long).await,
        Err(leasehold_core::Error::InvalidInput { .. })
    ));
    assert_eq!(
        db.count(format!("SELECT COUNT(*) FROM {}", S::quoted(&fenced))).await,
        0,
        "nothing was written"
    );
}

/// A table dropped under a running store: every call is `NotProvisioned` and names
/// this store's `provision`, and nothing is granted.
pub async fn a_table_dropped_under_the_store_is_not_provisioned<S: Dialect>() {
    let db = Db::<S>::connect().await;
    let table = db.fresh_table(true).await;
    let store = db.store_on(&table).await;
    let name = LeaseName::new("dropped").expect("name");
    assert!(store.read(&name).await.expect("read").is_none());
    db.exec(format!("DROP TABLE {}", S::quoted(&table))).await;
    let client = store.lease_client(ClientConfig::default()).expect("client");
    let errors = [
        client.store().read(&name).await.map(drop),
        client.try_acquire("dropped", Duration::from_secs(5)).await.map(drop),
    ];
    for err in errors {
        match err {
            Err(e @ leasehold_core::Error::NotProvisioned { .. }) => {
                let text = e.to_string();
                assert!(text.contains(&format!("{}::provision", S::NAME)), "{text}");
            }
            other => panic!("a dropped table: {other:?}"),
        }
    }
}

/// A ShedLock table the user has no privilege on is hidden from `information_schema`,
/// but it is there: opening it is `Misconfigured` (permission denied), never
/// `NotProvisioned`, which would send the operator to `provision`, which cannot fix it.
/// The same user opens a table it may read.
pub async fn a_table_the_user_may_not_read_is_not_reported_missing<S: Dialect>() {
    let db = Db::<S>::connect().await;
    let hidden = db.fresh_table(true).await;
    let visible = db.fresh_table(true).await;
    let user = format!("lh_blind_{}", visible.rsplit('_').next().unwrap_or("0"));
    let (create, drop) = S::reader(&user, &visible);
    for sql in create {
        db.exec(sql).await;
    }
    let blind = S::connect_as(&user, "pw").await;
    let opened = S::open(&blind, &visible).await.map(|s| s.is_fenced());
    let err = S::open(&blind, &hidden)
        .await
        .expect_err("opened a table the user may not read");
    S::close(blind).await;
    for sql in drop {
        db.exec(sql).await;
    }
    assert!(matches!(opened, Ok(true)), "the table the user may read: {opened:?}");
    assert!(matches!(err, leasehold_core::Error::Misconfigured { .. }), "{err:?}");
    assert!(err.to_string().contains("denied"), "{err}");
}

/// Sixteen sessions, connected in advance and released together, create one fenced
/// ShedLock table (`CREATE` then `ADD COLUMN fence`): every call succeeds and the
/// table has its fence column. Unserialized on Postgres, these collide with `42P07` /
/// `42710` / `23505` / `42701` (CI once failed on the lease table's equivalent).
pub async fn sixteen_sessions_creating_one_fenced_table_at_once_all_succeed<S: Dialect>() {
    let admin = Db::<S>::connect().await;
    let mut sessions = Vec::new();
    for _ in 0..16 {
        sessions.push(Db::<S>::session().await);
    }
    for round in 0..S::DDL_ROUNDS {
        let table = admin.fresh_name().await;
        let barrier = Arc::new(tokio::sync::Barrier::new(sessions.len()));
        let tasks: Vec<_> = sessions
            .iter()
            .map(|db| {
                let (db, table, barrier) = (db.clone(), table.clone(), barrier.clone());
                tokio::spawn(async move {
                    barrier.wait().await;
                    db.provision(&table, true).await
                })
            })
            .collect();
        for (i, task) in tasks.into_iter().enumerate() {
            let result = task.await.expect("task");
            assert!(result.is_ok(), "round {round}, session {i}: {result:?}");
        }
        assert!(
            admin.store_on(&table).await.is_fenced(),
            "round {round}: fence column added"
        );
    }
}
