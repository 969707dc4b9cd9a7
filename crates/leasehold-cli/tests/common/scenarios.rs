//! The scenarios every store runs: each takes a [`Store`] and fails on any deviation.

use std::time::{Duration, Instant};

use leasehold::testing::process::{poll, process_state};

use super::*;

const LIMIT: Duration = Duration::from_secs(20);

/// The scenarios as tests of one store: `scenario_tests!(Store::postgres().await)` in a
/// test file with `mod common;`.
#[allow(unused_macros)] // not every test binary runs the scenarios
macro_rules! scenario_tests {
    ($store:expr) => {
        common::scenarios::scenario_tests!(@cases $store;
            token_reaches_the_command_and_matches_the_store => token,
            a_second_run_is_refused_or_waits => held_then_wait,
            killed_run_frees_the_lease_after_its_ttl => kill9,
            frozen_run_stops_its_command_and_exits_lost => frozen,
            forced_release_keeps_the_token => forced_release,
            stores_check_passes_and_leaves_nothing_behind => stores_check,
            list_shows_each_lease_under_a_prefix => list,
            elect_leads_one_at_a_time_and_observe_prints_each_leader => elect_and_observe,
            elect_stops_its_command_when_leadership_is_taken => elect_lost,
            at_least_keeps_the_lease_taken_after_a_short_command => at_least,
            at_least_keeps_nothing_once_the_lease_is_lost => at_least_lost,
        );
    };
    (@cases $store:expr; $($test:ident => $scenario:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $test() {
                common::scenarios::$scenario(&$store).await;
            }
        )*
    };
}
#[allow(unused_imports)]
pub(crate) use scenario_tests;

fn token_of(v: &serde_json::Value) -> u64 {
    v["token"].as_u64().unwrap_or_else(|| panic!("no token in {v}"))
}

/// The token a command wrote to `file` (`echo "$LEASEHOLD_TOKEN" > file`).
async fn token_in(store: &Store, file: &str) -> u64 {
    store
        .wait_line(file, LIMIT)
        .await
        .parse()
        .expect("the token is a number")
}

/// `run NAME [extra…] -- sh -c 'echo "$LEASEHOLD_TOKEN" > FILE'` exits 0: the token it
/// handed the command.
async fn run_once(store: &Store, name: &str, extra: &[&str], file: &str) -> u64 {
    let script = format!("echo \"$LEASEHOLD_TOKEN\" > {file}");
    let mut args = vec!["run", name];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--", "sh", "-c", &script]);
    let out = store.output(&args, LIMIT).await;
    assert_eq!(code(&out), 0, "{out:?}");
    token_in(store, file).await
}

/// Starts `run NAME --ttl TTL [extra…] -- sh -c SCRIPT`, where the script writes its
/// token to `token1` (and its pid to `pid` if `pid`): the running `run` and that token.
async fn holding(store: &Store, name: &str, ttl: &str, extra: &[&str], script: &str) -> (Child, u64) {
    let mut args = vec!["run", name, "--ttl", ttl];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--", "sh", "-c", script]);
    let child = store.spawn(&args);
    (child, token_in(store, "token1").await)
}

/// `run` hands the token, name and holder to the command; `show` (run by the command
/// itself, while it holds the lease) and the store agree; the command's exit code is
/// passed through; the lease is released at the end and the next grant's token is higher.
pub async fn token(store: &Store) {
    let name = store.name("token");
    let child = "echo \"$LEASEHOLD_TOKEN\" > token; echo \"$LEASEHOLD_NAME\" > name; \
                 echo \"$LEASEHOLD_HOLDER\" > holder; \"$LEASEHOLD_BIN\" show \"$LEASEHOLD_NAME\" --json > shown; exit 7";
    let out = store
        .output(&["run", &name, "--ttl", "10s", "--", "sh", "-c", child], LIMIT)
        .await;
    assert_eq!(code(&out), 7, "the command's code passes through: {out:?}");
    let token = token_in(store, "token").await;
    assert_eq!(store.wait_line("name", LIMIT).await, name);
    let holder = store.wait_line("holder", LIMIT).await;
    let shown: serde_json::Value = serde_json::from_str(&store.wait_line("shown", LIMIT).await).expect("json");
    assert_eq!(shown["state"], "held", "{shown}");
    assert_eq!(token_of(&shown), token, "{shown}");
    assert_eq!(shown["holder"], holder.as_str(), "{shown}");
    if shown["clock"] == "store" {
        assert!(
            shown["remaining_ms"].as_u64().is_some_and(|ms| ms > 0 && ms <= 10_000),
            "{shown}"
        );
    } else {
        assert_eq!(shown["clock"], "observation", "{shown}");
        assert!(shown["remaining_ms"].is_null(), "judged by observation: {shown}");
    }
    assert!(shown["version"].is_string(), "{shown}");

    // After the command: released, token kept, in the store and in `show`.
    let stored = store.read(&name).await.expect("a record");
    assert!(stored.record.is_vacant(), "{stored:?}");
    assert_eq!(stored.record.token.get(), token);
    let after = store.show(&name).await;
    assert_eq!(after["state"], "vacant", "{after}");
    assert_eq!(token_of(&after), token);
    assert_eq!(after["version"].as_str(), Some(stored.version.as_str()), "{after}");

    let token2 = run_once(store, &name, &[], "token2").await;
    assert!(token2 > token, "{token2} after {token}");
    assert_eq!(store.read(&name).await.expect("record").record.token.get(), token2);
}

/// `CMD NAME --timeout 300ms -- touch ran-timeout` while another process holds NAME:
/// the "held" exit code, one line that says `says`, and the command never ran.
async fn gives_up_naming(store: &Store, cmd: &str, name: &str, says: &str) {
    let out = store
        .output(&[cmd, name, "--timeout", "300ms", "--", "touch", "ran-timeout"], LIMIT)
        .await;
    let err = assert_one_line(&out, HELD);
    assert!(err.contains(says), "{err}");
    assert!(!store.file("ran-timeout").exists(), "{cmd} ran its command");
}

/// `run --at-least 6s` whose command exits at once keeps the lease taken until 6 s
/// after its grant: another `run` meanwhile exits with the "held" code, saying so,
/// without running its command; one that waits gets the lease, with the next token, no
/// sooner (by the commands' own clock readings). On etcd and ZooKeeper, whose records
/// live on the writer's session, the first `leasehold` itself stays until then; on the
/// other stores it exits at once.
pub async fn at_least(store: &Store) {
    const AT_LEAST: Duration = Duration::from_secs(6);
    let name = store.name("at-least");
    let stamp = |file: &str| format!("echo \"$LEASEHOLD_TOKEN $(date +%s%3N)\" > {file}");
    let read = async |file: &str| -> (u64, u64) {
        let line = store.wait_line(file, LIMIT).await;
        let (token, ms) = line.split_once(' ').expect("token and time");
        (token.parse().expect("token"), ms.parse().expect("ms"))
    };
    let started = Instant::now();
    let mut first = store.spawn(&[
        "run",
        &name,
        "--ttl",
        "2s",
        "--at-least",
        "6s",
        "--",
        "sh",
        "-c",
        &stamp("ran1"),
    ]);
    let (token1, ran1) = read("ran1").await;
    let deadline = Instant::now() + LIMIT;
    while !store
        .read(&name)
        .await
        .and_then(|s| s.record.holder)
        .is_some_and(|h| h.as_str().starts_with("=held="))
    {
        assert!(Instant::now() < deadline, "the lease was not kept after its command");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let out = store.output(&["run", &name, "--", "touch", "ran-early"], LIMIT).await;
    let err = assert_one_line(&out, HELD);
    assert!(err.contains("kept after its run for its at-least time"), "{err}");
    assert!(
        !store.file("ran-early").exists(),
        "ran its command while the lease was kept"
    );
    let status = wait_exit(&mut first, LIMIT).await;
    assert_eq!(status.code(), Some(0));
    let took = since(started);
    if store.url.starts_with("etcd:") || store.url.starts_with("zookeeper:") {
        assert!(
            took >= AT_LEAST,
            "left after {took:?}: the session holding the record ended"
        );
    } else {
        assert!(took < AT_LEAST, "stayed {took:?}");
    }
    let out = store
        .output(
            &["run", &name, "--timeout", "30s", "--", "sh", "-c", &stamp("ran2")],
            LIMIT,
        )
        .await;
    assert_eq!(code(&out), 0, "{out:?}");
    let (token2, ran2) = read("ran2").await;
    let apart = Duration::from_millis(ran2 - ran1);
    assert!(
        apart >= AT_LEAST - Duration::from_millis(50),
        "granted again {apart:?} after the first run"
    );
    assert!(token2 > token1, "{token2} after {token1}");
}

/// `run --at-least 60s` frozen (SIGSTOP) past its TTL, nobody taking over meanwhile
/// (the store may still name it), keeps nothing: resumed while its command runs, it
/// counts the lease lost, stops its command and exits with the "lost" code; resumed
/// after its command exited during the freeze (whichever it notices first), it keeps
/// nothing either. Each time the next `run` is granted long before the at-least time,
/// with a higher token.
pub async fn at_least_lost(store: &Store) {
    for (case, command) in [("running", "exec sleep 60"), ("exited", "sleep 1")] {
        let name = store.name(&format!("at-least-lost-{case}"));
        let script = format!("echo \"$LEASEHOLD_TOKEN\" > {case}1; {command}");
        let mut args = vec!["run", &name, "--ttl", "1s", "--at-least", "60s", "--grace", "200ms"];
        args.extend_from_slice(&["--", "sh", "-c", &script]);
        let mut first = store.spawn(&args);
        let token1 = token_in(store, &format!("{case}1")).await;
        leasehold::testing::process::freeze(first.id()).await.expect("SIGSTOP");
        // The fault: frozen for twice its TTL.
        tokio::time::sleep(Duration::from_secs(2)).await;
        leasehold::testing::process::resume(first.id()).expect("SIGCONT");
        let status = wait_exit(&mut first, LIMIT).await;
        let mut err = String::new();
        std::io::Read::read_to_string(first.stderr.as_mut().expect("stderr"), &mut err).expect("read stderr");
        if case == "running" {
            assert_eq!(status.code(), Some(LOST), "{err}");
        }
        assert!(err.contains("was not kept for --at-least"), "{case}: {err}");
        let next = format!("echo \"$LEASEHOLD_TOKEN\" > {case}2");
        let out = store
            .output(&["run", &name, "--timeout", "15s", "--", "sh", "-c", &next], LIMIT)
            .await;
        assert_eq!(code(&out), 0, "{case}: a lost lease was kept for --at-least: {out:?}");
        assert!(token_in(store, &format!("{case}2")).await > token1, "{case}");
    }
}

/// While one `run` holds the lease, another exits with the "held" code at once (no wait)
/// or after `--timeout`; one with `--wait` starts right after the first ends.
pub async fn held_then_wait(store: &Store) {
    let name = store.name("held");
    let script = "echo \"$LEASEHOLD_TOKEN\" > token1; while [ ! -e go ]; do sleep 0.02; done";
    let (mut first, token1) = holding(store, &name, "10s", &[], script).await;

    let out = store.output(&["run", &name, "--", "touch", "ran-once"], LIMIT).await;
    let err = assert_one_line(&out, HELD);
    assert!(err.contains("held by"), "{err}");
    // It names who holds the lease, as a refusal without --timeout does.
    let holder = store.read(&name).await.expect("record").record.holder.expect("held");
    let started = Instant::now();
    let says = format!("held by {holder} (token {token1}); gave up after 300ms");
    gives_up_naming(store, "run", &name, &says).await;
    assert!(
        since(started) >= Duration::from_millis(300),
        "gave up before its timeout"
    );
    assert!(!store.file("ran-once").exists());

    let mut waiter = store.spawn(&[
        "run",
        &name,
        "--wait",
        "--",
        "sh",
        "-c",
        "echo \"$LEASEHOLD_TOKEN\" > token3",
    ]);
    // The waiter waits: it neither exits nor runs its command while the first holds.
    let exited = poll(Duration::from_secs(1), || {
        waiter.try_wait().expect("try_wait").is_some()
    })
    .await;
    assert!(!exited, "the waiter must wait while the first holds the lease");
    assert!(!store.file("token3").exists());

    std::fs::write(store.file("go"), "").expect("go");
    let status = wait_exit(&mut first, LIMIT).await;
    assert_eq!(status.code(), Some(0));
    let released = Instant::now();
    let status = wait_exit(&mut waiter, LIMIT).await;
    assert_eq!(status.code(), Some(0));
    let token3 = token_in(store, "token3").await;
    assert!(token3 > token1);
    // After the release, not after the first's 10 s TTL: at once where the store pushes
    // releases, within the client's longest poll (`max_acquire_backoff`, 5 s, plus up to
    // 20 % jitter) where it does not (S3, DynamoDB).
    assert!(
        since(released) < Duration::from_secs(7),
        "the waiter took {:?} after the release",
        since(released)
    );
}

/// `run` killed with SIGKILL: the lease stays held until its TTL runs out, then another
/// `run` gets it.
pub async fn kill9(store: &Store) {
    let name = store.name("kill9");
    let script = "echo $$ > pid; echo \"$LEASEHOLD_TOKEN\" > token1; exec sleep 60";
    let (mut first, token1) = holding(store, &name, "1s", &[], script).await;
    // The command runs (and is killed when the test ends, if it is still there).
    let command = store.wait_pid("pid", LIMIT).await;
    signal(first.id(), rustix::process::Signal::KILL);
    let _ = wait_exit(&mut first, LIMIT).await;
    let killed = Instant::now();
    // Nobody renews the lease any more: the kernel ends the command too.
    assert!(
        poll(LIMIT, || gone(command)).await,
        "the command outlived its killed run"
    );
    let shown = store.show(&name).await;
    assert_eq!(shown["state"], "held", "still held right after the kill: {shown}");
    assert_eq!(token_of(&shown), token1);

    // Poll: another run is refused until the TTL has run out, then granted. Where expiry
    // is judged by observation (DynamoDB, S3) a single try never sees the TTL pass: each
    // try waits (bounded) long enough to observe it.
    let tries: &[&str] = if shown["clock"] == "store" {
        &[]
    } else {
        &["--timeout", "10s"]
    };
    let mut granted = None;
    let deadline = Instant::now() + LIMIT;
    while Instant::now() < deadline {
        let mut args = vec!["run", name.as_str()];
        args.extend_from_slice(tries);
        args.extend_from_slice(&["--", "sh", "-c", "echo \"$LEASEHOLD_TOKEN\" > token2"]);
        let out = store.output(&args, LIMIT).await;
        match code(&out) {
            0 => {
                granted = Some(since(killed));
                break;
            }
            HELD => {}
            other => panic!("unexpected exit {other}: {out:?}"),
        }
    }
    let after = granted.expect("the lease was never free after the kill");
    assert!(
        after >= Duration::from_millis(500),
        "free {after:?} after the kill: before its TTL"
    );
    assert!(token_in(store, "token2").await > token1);
}

/// The fenced write a command makes with its `LEASEHOLD_TOKEN`, on a SQLite resource in
/// the test's directory (`resource.db`, made by [`fenced_resource`]): the guard
/// `last_token < token`. It prints how many rows it changed (1: applied, 0: refused).
fn fenced_write(value: &str) -> String {
    format!(
        "sqlite3 -cmd '.timeout 5000' resource.db \
         \"UPDATE resource SET value = '{value}', last_token = $LEASEHOLD_TOKEN \
           WHERE id = 1 AND last_token < $LEASEHOLD_TOKEN; SELECT changes();\""
    )
}

/// The resource the commands' fenced writes go to, and a reader of `(value, last_token)`.
fn fenced_resource(store: &Store) -> impl Fn() -> String + '_ {
    let sql = "CREATE TABLE resource (id INTEGER PRIMARY KEY, value TEXT NOT NULL, last_token INTEGER NOT NULL); \
               INSERT INTO resource VALUES (1, 'none', 0);";
    let ok = std::process::Command::new("sqlite3")
        .arg(store.file("resource.db"))
        .arg(sql)
        .status()
        .expect("sqlite3 (scripts/install-deps.sh installs it)");
    assert!(ok.success(), "creating the resource");
    move || {
        let out = std::process::Command::new("sqlite3")
            .arg(store.file("resource.db"))
            .arg("SELECT value || ' ' || last_token FROM resource WHERE id = 1")
            .output()
            .expect("sqlite3");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }
}

/// `run` frozen (SIGSTOP) past its TTL while its command keeps running; another `run`
/// takes over and its command's fenced write with the new token applies; the first
/// command's fenced write with its old token, made after the takeover, is refused;
/// resumed (SIGCONT), the first `run` stops its command, SIGKILL after the grace (the
/// command ignores SIGTERM), and exits with the "lost" code.
pub async fn frozen(store: &Store) {
    let name = store.name("frozen");
    let resource = fenced_resource(store);
    let script = format!(
        "trap '' TERM; echo $$ > pid; echo \"$LEASEHOLD_TOKEN\" > token1; \
         while [ ! -e go ]; do sleep 0.02; done; {} > fenced1; exec sleep 60",
        fenced_write("first")
    );
    let (mut first, token1) = holding(store, &name, "1s", &["--grace", "300ms"], &script).await;
    let child = store.wait_pid("pid", LIMIT).await;

    leasehold::testing::process::freeze(first.id()).await.expect("SIGSTOP");
    let second = format!(
        "echo \"$LEASEHOLD_TOKEN\" > token2; {} > fenced2",
        fenced_write("second")
    );
    let out = store
        .output(&["run", &name, "--timeout", "15s", "--", "sh", "-c", &second], LIMIT)
        .await;
    assert_eq!(code(&out), 0, "{out:?}");
    let token2 = token_in(store, "token2").await;
    assert!(token2 > token1, "the second run takes over");
    assert_eq!(
        store.wait_line("fenced2", LIMIT).await,
        "1",
        "the new holder's fenced write applies"
    );
    assert_eq!(resource(), format!("second {token2}"));

    // The first command, still running under its frozen `run`, writes with its old token.
    std::fs::write(store.file("go"), "").expect("go");
    assert_eq!(
        store.wait_line("fenced1", LIMIT).await,
        "0",
        "the old holder's fenced write is refused"
    );
    assert_eq!(
        resource(),
        format!("second {token2}"),
        "the refused write changed nothing"
    );
    assert_eq!(process_state(first.id()), Some('T'), "the first run is still frozen");
    assert!(!gone(child), "the first run's command kept running while it was frozen");

    let resumed = Instant::now();
    leasehold::testing::process::resume(first.id()).expect("SIGCONT");
    let ok = poll(LIMIT, || gone(child)).await;
    assert!(ok, "the command still runs {LIMIT:?} after the resume");
    let stopped = since(resumed);
    let status = wait_exit(&mut first, LIMIT).await;
    let out = first.wait_with_output().expect("output");
    let err = stderr(&out);
    assert_eq!(status.code(), Some(LOST), "stderr: {err}");
    assert!(err.contains("lost lease"), "{err}");
    assert_eq!(err.lines().count(), 1, "one line on stderr: {err:?}");
    assert!(!err.contains("panicked"), "{err}");
    // It ignores SIGTERM, so it was killed after the grace, not before.
    assert!(
        stopped >= Duration::from_millis(300),
        "killed {stopped:?} after the resume"
    );
    assert!(
        stopped < Duration::from_secs(10),
        "killed only {stopped:?} after the resume"
    );
}

/// `release --force` makes a held lease vacant, keeps its token, warns; the holder
/// notices and exits with the "lost" code, and what its command started (a background
/// job) is stopped with it; the next grant's token is higher.
pub async fn forced_release(store: &Store) {
    let name = store.name("release");
    let script = "sleep 60 & echo $! > grandchild; echo \"$LEASEHOLD_TOKEN\" > token1; wait";
    let (mut first, token1) = holding(store, &name, "2s", &[], script).await;
    let grandchild = store.wait_pid("grandchild", LIMIT).await;
    let out = store.output(&["release", "--force", &name], LIMIT).await;
    let err = assert_one_line(&out, 0);
    assert!(err.contains("may still be running"), "{err}");
    let stored = store.read(&name).await.expect("record");
    assert!(
        stored.record.is_vacant() && stored.record.token.get() == token1,
        "{stored:?}"
    );
    let status = wait_exit(&mut first, LIMIT).await;
    assert_eq!(status.code(), Some(LOST));
    assert!(
        poll(LIMIT, || gone(grandchild)).await,
        "the command's background job outlived the lost lease"
    );
    // The holder says who ended its lease: someone released it, it did not run out.
    // (Read once the background job, which shares the pipe, is gone.)
    let mut stderr = String::new();
    std::io::Read::read_to_string(first.stderr.as_mut().expect("stderr"), &mut stderr).expect("read stderr");
    assert!(
        stderr.contains(&format!(
            "lost lease {name} (token {token1}) while the command ran: released by someone else"
        )),
        "{stderr}"
    );

    let out = store.output(&["release", "--force", &name], LIMIT).await;
    assert_eq!(code(&out), 0, "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("already vacant"),
        "{out:?}"
    );
    assert!(run_once(store, &name, &[], "token2").await > token1);
}

/// The tokens of the leaders `observe --json` printed, in order (`null` lines skipped),
/// each line checked for its name and shape.
fn observed_tokens(lines: &[String], name: &str) -> Vec<u64> {
    lines
        .iter()
        .filter_map(|line| {
            let v: serde_json::Value =
                serde_json::from_str(line).unwrap_or_else(|e| panic!("observe --json line {line:?}: {e}"));
            assert_eq!(v["name"], name, "{line}");
            if v["token"].is_null() {
                assert!(v["holder"].is_null() && v["identity"].is_null(), "{line}");
                // Nobody leads, or (a read failed) nobody knows: then the line says why.
                match v["state"].as_str() {
                    Some("none") => assert!(v.get("error").is_none(), "{line}"),
                    Some("unknown") => assert!(v["error"].as_str().is_some_and(|e| !e.is_empty()), "{line}"),
                    _ => panic!("state: {line}"),
                }
                None
            } else {
                assert_eq!(v["state"], "leader", "{line}");
                let holder = v["holder"].as_str().expect("holder");
                let identity = v["identity"].as_str().expect("identity");
                assert!(holder.starts_with(identity), "{line}");
                Some(token_of(&v))
            }
        })
        .collect()
}

/// Two `elect` candidates: the first leads and runs its command, the second waits; when
/// the first's command exits, it resigns and the second leads at once with a higher
/// token. `observe --json`, started before both, prints each leader (token and holder)
/// in order, and `no leader` once the second resigns; SIGTERM ends it with 0. An `elect
/// --timeout` while someone leads exits with the "held" code without running its command.
pub async fn elect_and_observe(store: &Store) {
    let name = store.name("elect");
    let mut observer = store.spawn(&["observe", &name, "--json"]);
    let seen = Lines::of(&mut observer);
    seen.wait_for(LIMIT, "the first observation", |l| !l.is_empty()).await;
    assert_eq!(
        observed_tokens(&seen.now(), &name),
        Vec::<u64>::new(),
        "nobody leads yet"
    );

    let first_cmd = "echo \"$LEASEHOLD_TOKEN\" > lead1; echo \"$LEASEHOLD_HOLDER\" > holder1; \
                     while [ ! -e go1 ]; do sleep 0.02; done";
    let mut first = store.spawn(&["elect", &name, "--ttl", "10s", "--", "sh", "-c", first_cmd]);
    let token1 = token_in(store, "lead1").await;
    let holder1 = store.wait_line("holder1", LIMIT).await;
    let lines = seen
        .wait_for(LIMIT, "the first leader", |l| observed_tokens(l, &name) == [token1])
        .await;
    assert!(lines.iter().any(|l| l.contains(&holder1)), "{lines:?}");

    let second_cmd = "echo \"$LEASEHOLD_TOKEN\" > lead2; while [ ! -e go2 ]; do sleep 0.02; done";
    let mut second = store.spawn(&["elect", &name, "--ttl", "10s", "--", "sh", "-c", second_cmd]);
    let says = format!("has another leader, {holder1} (token {token1}); gave up after 300ms");
    gives_up_naming(store, "elect", &name, &says).await;
    // The second candidate waits while the first leads.
    let led = poll(Duration::from_secs(1), || store.file("lead2").exists()).await;
    assert!(!led, "the second candidate must not lead while the first does");

    std::fs::write(store.file("go1"), "").expect("go1");
    assert_eq!(wait_exit(&mut first, LIMIT).await.code(), Some(0));
    let resigned = Instant::now();
    let token2 = token_in(store, "lead2").await;
    assert!(token2 > token1, "{token2} after {token1}");
    // At once where the store pushes releases; within the longest poll where it does not.
    assert!(
        since(resigned) < Duration::from_secs(7),
        "led {:?} after the resignation",
        since(resigned)
    );
    seen.wait_for(LIMIT, "the second leader", |l| {
        observed_tokens(l, &name) == [token1, token2]
    })
    .await;

    std::fs::write(store.file("go2"), "").expect("go2");
    assert_eq!(wait_exit(&mut second, LIMIT).await.code(), Some(0));
    let lines = seen
        .wait_for(LIMIT, "no leader after the second resigned", |l| {
            l.last().is_some_and(|last| last.contains("\"token\":null"))
        })
        .await;
    assert_eq!(observed_tokens(&lines, &name), [token1, token2], "{lines:?}");
    assert!(
        !lines.windows(2).any(|w| w[0] == w[1]),
        "only changes are printed: {lines:?}"
    );

    signal(observer.id(), rustix::process::Signal::TERM);
    assert_eq!(
        wait_exit(&mut observer, LIMIT).await.code(),
        Some(0),
        "observe ends with 0 on SIGTERM"
    );

    // `--count 1` prints the leader now and exits, in text.
    let out = store.output(&["observe", &name, "--count", "1"], LIMIT).await;
    assert_eq!(code(&out), 0, "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.trim(), format!("{name}: no leader"), "{out:?}");
}

/// A leader whose lease is released by force stops leading: its command gets SIGTERM,
/// the one line on stderr says leadership was lost, and `elect` exits with the "lost"
/// code.
pub async fn elect_lost(store: &Store) {
    let name = store.name("elect-lost");
    let script = "echo $$ > pid; echo \"$LEASEHOLD_TOKEN\" > token1; exec sleep 60";
    let mut leader = store.spawn(&[
        "elect", &name, "--ttl", "2s", "--grace", "500ms", "--", "sh", "-c", script,
    ]);
    let token1 = token_in(store, "token1").await;
    let child = store.wait_pid("pid", LIMIT).await;
    let out = store.output(&["release", "--force", &name], LIMIT).await;
    assert_eq!(code(&out), 0, "{out:?}");
    let status = wait_exit(&mut leader, LIMIT).await;
    let out = leader.wait_with_output().expect("output");
    let err = stderr(&out);
    assert_eq!(status.code(), Some(LOST), "stderr: {err}");
    assert!(
        err.contains(&format!("lost leadership of {name} (token {token1})")),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "one line on stderr: {err:?}");
    assert!(poll(LIMIT, || gone(child)).await, "the command was not stopped");
}

/// `list PREFIX` shows the leases under the prefix and no others: one held (by a running
/// `run`), one released, in name order, with their state, holder and token; `--json` is
/// an array of `show --json` objects; an empty prefix match prints only the header.
pub async fn list(store: &Store) {
    let base = store.name("list");
    let (held, vacant) = (format!("{base}/held"), format!("{base}/done"));
    let token_done = run_once(store, &vacant, &[], "token-done").await;
    let script = "echo $$ > pid; echo \"$LEASEHOLD_TOKEN\" > token1; echo \"$LEASEHOLD_HOLDER\" > holder1; \
                  exec sleep 60";
    let (_running, token_held) = holding(store, &held, "10s", &[], script).await;
    // Killed with the store, as the `run` holding it is.
    store.wait_pid("pid", LIMIT).await;
    let holder = store.wait_line("holder1", LIMIT).await;
    run_once(store, &format!("{base}x"), &[], "token-sibling").await;

    let prefix = format!("{base}/");
    let out = store.output(&["list", &prefix, "--json"], LIMIT).await;
    assert_eq!(code(&out), 0, "{out:?}");
    let listed: Vec<serde_json::Value> =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("list --json: {e}: {out:?}"));
    let names: Vec<&str> = listed.iter().map(|v| v["name"].as_str().expect("name")).collect();
    assert_eq!(names, [vacant.as_str(), held.as_str()], "{listed:?}");
    assert_eq!(listed[0]["state"], "vacant", "{listed:?}");
    assert_eq!(token_of(&listed[0]), token_done);
    assert_eq!(listed[1]["state"], "held", "{listed:?}");
    assert_eq!(listed[1]["holder"], holder.as_str(), "{listed:?}");
    assert_eq!(token_of(&listed[1]), token_held);

    let out = store.output(&["list", &prefix], LIMIT).await;
    assert_eq!(code(&out), 0, "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "a header and two leases: {text}");
    assert!(lines[0].starts_with("NAME") && lines[0].contains("TOKEN"), "{text}");
    assert!(lines[1].starts_with(&vacant) && lines[1].contains("vacant"), "{text}");
    assert!(lines[2].starts_with(&held) && lines[2].contains(&holder), "{text}");
    assert!(lines[2].contains(&format!(" {token_held} ")), "{text}");

    let out = store.output(&["list", &format!("{base}/none")], LIMIT).await;
    assert_eq!(code(&out), 0, "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).lines().count(),
        1,
        "only the header: {out:?}"
    );
}

/// `stores check` on a store that is set up: three `ok:` lines (setup, write, list),
/// nothing on stderr, exit 0, and its probe lease deleted again.
pub async fn stores_check(store: &Store) {
    let out = store.output(&["stores", "check"], LIMIT).await;
    assert_eq!(code(&out), 0, "{out:?}");
    assert!(out.stderr.is_empty(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(lines.iter().all(|l| l.starts_with("ok: ")), "{text}");
    assert!(lines[0].contains("set up"), "{text}");
    let probe = lines[1]
        .split_whitespace()
        .find(|w| w.starts_with("leasehold-check/"))
        .unwrap_or_else(|| panic!("no probe named: {text}"));
    assert!(
        store.read(probe).await.is_none(),
        "the probe lease {probe} was left behind"
    );
}
