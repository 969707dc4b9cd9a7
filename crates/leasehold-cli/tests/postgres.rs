//! The `leasehold` binary as real processes on the tests' Postgres (`LEASEHOLD_PG_URL`; without it they fail).

mod common;

common::scenarios::scenario_tests!(common::Store::postgres().await);

mod lost {
    //! A lease lost while its command runs, on a store the first `run` reaches through
    //! a proxy that the test cuts: the command (which ignores SIGTERM) must be gone
    //! before anyone else's command starts under the lease.

    use std::time::Duration;

    use leasehold_testkit::proxy::Proxy;

    use crate::common::{self, LOST, Lines, Store};

    const LIMIT: Duration = Duration::from_secs(30);

    /// The tests' Postgres URL cut around its `host:port`: what comes before it, it,
    /// and what comes after.
    fn pg_parts() -> (String, String, String) {
        let url = leasehold_testkit::pg_url();
        let (scheme, rest) = url.split_once("://").expect("a postgres:// URL");
        let (user, rest) = rest
            .rsplit_once('@')
            .map_or((String::new(), rest), |(u, r)| (format!("{u}@"), r));
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        (format!("{scheme}://{user}"), authority.to_owned(), format!("/{path}"))
    }

    /// A proxy in front of the tests' Postgres, and the URL that reaches it through it.
    async fn proxied() -> (Proxy, String) {
        let (before, authority, after) = pg_parts();
        let proxy = Proxy::start(&authority).await;
        let url = format!("{before}127.0.0.1:{}{after}", proxy.port());
        (proxy, url)
    }

    /// Starts `run --ttl TTL --grace GRACE` on the store at `url` with a command that ignores
    /// SIGTERM: the running `run`, its stderr and the command's pid.
    async fn holder(store: &Store, url: &str, name: &str, ttl: &str, grace: &str) -> (std::process::Child, Lines, u32) {
        let script = "trap '' TERM; echo $$ > pid; exec sleep 60";
        let mut first = store.spawn(&[
            "--store", url, "run", name, "--ttl", ttl, "--grace", grace, "--", "sh", "-c", script,
        ]);
        let err = Lines::of_stderr(&mut first);
        let pid = store.wait_pid("pid", LIMIT).await;
        (first, err, pid)
    }

    /// Starts a second `run` (straight to the store) whose command writes `overlap` to
    /// `verdict` if the first command (`pid`) is still there when it starts, `alone`
    /// if not.
    fn challenger(store: &Store, name: &str, pid: u32) -> std::process::Child {
        let script =
            format!("if kill -0 {pid} 2>/dev/null; then echo overlap > verdict; else echo alone > verdict; fi");
        store.spawn(&["run", name, "--timeout", "25s", "--", "sh", "-c", &script])
    }

    /// The second `run`'s command found the first command gone when it started, and
    /// both `run`s ended as they should: the second with its command's 0, the first as
    /// lost, having said so.
    async fn second_runs_alone(
        store: &Store,
        mut second: std::process::Child,
        mut first: std::process::Child,
        err: &Lines,
    ) {
        let verdict = store.wait_line("verdict", LIMIT).await;
        assert_eq!(verdict, "alone", "stderr of the first: {:?}", err.now());
        let status = common::wait_exit(&mut second, LIMIT).await;
        assert_eq!(status.code(), Some(0));
        let status = common::wait_exit(&mut first, LIMIT).await;
        assert_eq!(status.code(), Some(LOST), "stderr: {:?}", err.now());
        assert!(err.now().iter().any(|l| l.contains("lost lease")), "{:?}", err.now());
    }

    /// Once a renewal fails, the lease counts as lost early enough for the command to be
    /// stopped (SIGTERM, SIGKILL after the grace) before the store lets the lease expire:
    /// the store unreachable to the holder for good, the next holder's command starts
    /// only after the first one is gone. (The grace used to count from the moment the
    /// lease was lost, a 5% margin before its expiry: the first command ran on beside
    /// the second for most of the grace.)
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_command_is_gone_before_the_lease_can_expire() {
        let store = Store::postgres().await;
        let (proxy, url) = proxied().await;
        let name = store.name("lost-margin");
        let (first, err, pid) = holder(&store, &url, &name, "10s", "2s").await;
        proxy.cut();
        let second = challenger(&store, &name, pid);
        second_runs_alone(&store, second, first, &err).await;
    }

    /// A lost lease is released only once its command is stopped: with the store
    /// reachable again right after the loss, the release that frees the lease at once
    /// comes after the command (which ignores SIGTERM) has been killed, not before. (The
    /// lease used to be dropped, and so released, the moment it was lost.)
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_lost_lease_is_released_only_after_its_command_is_stopped() {
        let store = Store::postgres().await;
        let (proxy, url) = proxied().await;
        let name = store.name("lost-release");
        let (first, err, pid) = holder(&store, &url, &name, "10s", "3s").await;
        proxy.cut();
        err.wait_for(LIMIT, "the lost line", |l| l.iter().any(|l| l.contains("lost lease")))
            .await;
        proxy.reconnect();
        let second = challenger(&store, &name, pid);
        second_runs_alone(&store, second, first, &err).await;
    }
}

/// A signal while `run`'s grant write is in flight: `leasehold` exits (130) only once
/// that write has answered and what it granted is given back, so the lease is not left
/// held until its TTL by a process that is gone. The write here waits on a row lock the
/// test holds. (The exit used to come at once: the write, left waiting in the server,
/// applied once the lock went, for a holder that no longer existed.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_during_the_grant_write_leaves_the_lease_free() {
    use leasehold::postgres::sqlx;
    use leasehold::testing::process::{poll, poll_async};
    use std::time::Duration;
    const LIMIT: Duration = Duration::from_secs(30);

    let store = common::Store::postgres().await;
    let name = store.name("signal-grant");
    // The row exists, vacant: the grant updates it.
    let out = store.output(&["run", &name, "--", "true"], LIMIT).await;
    assert_eq!(common::code(&out), 0, "{out:?}");
    let pool = common::pg_pool(2).await;
    let mut lock = pool.begin().await.expect("begin");
    sqlx::query("SELECT 1 FROM leasehold_leases WHERE name = $1 FOR UPDATE")
        .bind(&name)
        .execute(&mut *lock)
        .await
        .expect("lock the row");
    let locker: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(&mut *lock)
        .await
        .expect("the locking backend");
    let mut run = store.spawn(&["run", &name, "--", "true"]);
    // A backend blocked by this test's lock: the run's grant write.
    let waiting = poll_async(LIMIT, || async {
        let n: i64 = sqlx::query_scalar("SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))")
            .bind(locker)
            .fetch_one(&pool)
            .await
            .expect("pg_stat_activity");
        n > 0
    })
    .await;
    assert!(waiting, "the grant write never waited on the lock");
    common::signal(run.id(), rustix::process::Signal::INT);
    // Time to exit before the write answers, for a `run` that does not wait for it.
    let early = poll(Duration::from_millis(500), || matches!(run.try_wait(), Ok(Some(_)))).await;
    lock.rollback().await.expect("unlock");
    let status = common::wait_exit(&mut run, LIMIT).await;
    common::assert_ended_by_signal(&status, 2);
    let shown = store.show(&name).await;
    assert_ne!(
        shown["state"], "held",
        "the grant of a run that exited on SIGINT is left held (it exited before the write answered: {early}): {shown}"
    );
}
