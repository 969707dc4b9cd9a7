//! `leasehold` as a process among others, on a SQLite file: the signals it forwards
//! (SIGHUP, SIGQUIT; SIGUSR1, SIGUSR2 and SIGALRM, which end nothing) and the one it
//! ignores (SIGTSTP), what a command leaves running in
//! its group (stopped before the release), and a stdout that cannot be written (a
//! reader gone: exit 0, quietly; a full disk: one line).

mod common;

use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{HELD, LOST, Lines, Store, catches, code, finish, gone, signal, stderr, wait_exit};
use leasehold::testing::process::{poll, poll_async, process_state};
use rustix::process::Signal;

const LIMIT: Duration = Duration::from_secs(20);

/// Stderr's lines, each checked: a `leasehold:` line, no panic.
fn lines(out: &Output) -> Vec<String> {
    let err = stderr(out);
    assert!(!err.contains("panicked"), "{err}");
    for line in err.lines() {
        assert!(line.starts_with("leasehold: "), "{err}");
    }
    err.lines().map(str::to_owned).collect()
}

/// Waits for `child` to exit; its output.
async fn output_of(mut child: Child) -> Output {
    wait_exit(&mut child, LIMIT).await;
    child.wait_with_output().expect("output")
}

/// The record of `name` is vacant (released).
async fn assert_released(store: &Store, name: &str) {
    let stored = store.read(name).await.expect("a record");
    assert!(stored.record.is_vacant(), "released: {stored:?}");
}

/// What the holding command of these tests runs: its pid and token written, then a wait
/// for the file `go`.
const HOLD_UNTIL_GO: &str = "echo $$ > pid; echo \"$LEASEHOLD_TOKEN\" > token1; while [ ! -e go ]; do sleep 0.02; done";

/// A `run` of `name` (TTL `ttl`) whose command holds the lease until the file `go`
/// appears, once its command runs.
async fn holding_until_go(store: &Store, name: &str, ttl: &str) -> Child {
    let run = store.spawn(&["run", name, "--ttl", ttl, "--", "sh", "-c", HOLD_UNTIL_GO]);
    store.wait_pid("pid", LIMIT).await;
    store.wait_line("token1", LIMIT).await;
    run
}

/// The record of `name` changes again (a renewal) after `what`.
async fn assert_renewed_after(store: &Store, name: &str, what: &str) {
    let before = store.read(name).await.expect("record").version;
    let before = &before;
    let renewed = poll_async(LIMIT, || async move {
        store.read(name).await.expect("record").version != *before
    })
    .await;
    assert!(renewed, "no renewal after {what}");
}

/// SIGHUP and SIGQUIT to a running `run` reach the command's whole group, as SIGINT and
/// SIGTERM do; `leasehold` ends by SIGHUP as its command did, and exits 131 after
/// SIGQUIT (128 + N: no core dump of its own); nothing of the group outlives `leasehold`, and
/// the lease is released. (A shell's background job ignores SIGQUIT: it is stopped as
/// a leftover, with one line saying so.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hangup_and_quit_reach_the_command_group() {
    let store = Store::sqlite().await;
    for (sig, number) in [(Signal::HUP, 1), (Signal::QUIT, 3)] {
        let name = store.name(&format!("signal-{number}"));
        // Its output elsewhere: were the group to outlive leasehold, it would hold the
        // pipes the test reads to their end.
        let script = format!(
            "exec > out-{number} 2>&1; echo $$ > pid-{number}; sleep 60 & echo $! > grandchild-{number}; \
             echo \"$LEASEHOLD_TOKEN\" > token-{number}; wait"
        );
        let run = store.spawn(&["run", &name, "--ttl", "10s", "--grace", "2s", "--", "sh", "-c", &script]);
        let child = store.wait_pid(&format!("pid-{number}"), LIMIT).await;
        let grandchild = store.wait_pid(&format!("grandchild-{number}"), LIMIT).await;
        store.wait_line(&format!("token-{number}"), LIMIT).await;
        signal(run.id(), sig);
        let out = output_of(run).await;
        common::assert_ended_by_signal(&out.status, number);
        assert!(lines(&out).len() <= 1, "{out:?}");
        assert!(gone(child), "the command outlived leasehold (signal {number})");
        assert!(
            gone(grandchild),
            "its background job outlived leasehold (signal {number})"
        );
        assert_released(&store, &name).await;
    }
}

/// SIGHUP or SIGQUIT while `run --wait` waits for the lease: one line naming the signal,
/// then the end by SIGHUP, or 131 after SIGQUIT; the command never runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hangup_and_quit_end_the_wait_with_one_line() {
    let store = Store::sqlite().await;
    let name = store.name("wait-signal");
    let holder = holding_until_go(&store, &name, "10s").await;
    for (sig, number) in [(Signal::HUP, 1), (Signal::QUIT, 3)] {
        let waiter = store.spawn(&["run", &name, "--wait", "--", "touch", "ran"]);
        // Sent once its handler is in place: before, the signal's default would end it.
        let pid = waiter.id();
        assert!(
            poll(LIMIT, || catches(pid, number)).await,
            "no handler for signal {number}"
        );
        signal(pid, sig);
        let out = output_of(waiter).await;
        common::assert_ended_by_signal(&out.status, number);
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "one line: {err:?}");
        let signame = if number == 1 { "SIGHUP" } else { "SIGQUIT" };
        assert!(
            err.contains(&format!("{signame} while waiting for lease {name}")),
            "{err}"
        );
    }
    assert!(!store.file("ran").exists(), "a command ran without the lease");
    std::fs::write(store.file("go"), "").expect("go");
    let out = output_of(holder).await;
    assert_eq!(code(&out), 0, "{out:?}");
}

/// The signals a process is sent for its own purposes, not to end it: the command
/// decides what they mean.
const FOR_THE_COMMAND: [(Signal, i32, &str); 3] = [
    (Signal::USR1, 10, "SIGUSR1"),
    (Signal::USR2, 12, "SIGUSR2"),
    (Signal::ALARM, 14, "SIGALRM"),
];

/// SIGUSR1, SIGUSR2 and SIGALRM to a running `run` reach its command (a shell that traps
/// them, as a daemon reopens its logs on SIGUSR1) and end nothing: `leasehold` runs on
/// and says nothing, the lease stays held with the same token and is still renewed; once
/// the command exits, the lease is released and the command's code passes through.
/// (Their default action would end `leasehold` at once, the lease left to expire and the
/// command's background jobs running on.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usr1_usr2_and_alrm_reach_the_command_and_end_nothing() {
    let store = Store::sqlite().await;
    let name = store.name("usr");
    // The shell's stderr elsewhere: one may report its `sleep` killed by the signal (the
    // whole group gets it).
    let script = "exec 2> sh-err; \
                  trap 'echo SIGUSR1 >> got' USR1; trap 'echo SIGUSR2 >> got' USR2; \
                  trap 'echo SIGALRM >> got' ALRM; \
                  echo $$ > pid; echo \"$LEASEHOLD_TOKEN\" > token; \
                  while [ ! -e go ]; do sleep 0.02; done; exit 3";
    let mut run = store.spawn(&["run", &name, "--ttl", "3s", "--", "sh", "-c", script]);
    store.wait_pid("pid", LIMIT).await;
    let token = store.wait_line("token", LIMIT).await;
    let got = store.file("got");
    for (sig, _, signame) in FOR_THE_COMMAND {
        signal(run.id(), sig);
        let mut exited = None;
        let reached = poll(LIMIT, || {
            exited = run.try_wait().expect("try_wait");
            exited.is_some() || std::fs::read_to_string(&got).is_ok_and(|g| g.lines().any(|l| l == signame))
        })
        .await;
        assert_eq!(exited, None, "{signame} ended leasehold");
        assert!(reached, "{signame} did not reach the command");
    }
    let shown = store.show(&name).await;
    assert_eq!(shown["state"], "held", "{shown}");
    assert_eq!(shown["token"].to_string(), token, "{shown}");

    // Renewed after the signals (a renewal every second).
    assert_renewed_after(&store, &name, "the signals").await;

    std::fs::write(store.file("go"), "").expect("go");
    let out = output_of(run).await;
    assert_eq!(code(&out), 3, "the command's code passes through: {out:?}");
    assert!(lines(&out).is_empty(), "{out:?}");
    assert_released(&store, &name).await;
}

/// SIGUSR1, SIGUSR2 or SIGALRM while `run --wait` waits for the lease: no command runs
/// yet to get it, so it is ignored, with one line each; the wait goes on, and the
/// command runs once the lease is free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usr1_usr2_and_alrm_do_not_end_the_wait() {
    let store = Store::sqlite().await;
    let name = store.name("usr-wait");
    let holder = holding_until_go(&store, &name, "10s").await;
    let mut waiter = store.spawn(&["run", &name, "--wait", "--", "touch", "ran"]);
    let said = Lines::of_stderr(&mut waiter);
    let pid = waiter.id();
    for (sig, number, signame) in FOR_THE_COMMAND {
        // Sent once its handler is in place: before, the signal's default would end it.
        assert!(poll(LIMIT, || catches(pid, number)).await, "no handler for {signame}");
        signal(pid, sig);
        said.wait_for(LIMIT, signame, |l| {
            l.iter().any(|l| l.contains(&format!("ignored {signame}")))
        })
        .await;
        assert_eq!(waiter.try_wait().expect("try_wait"), None, "{signame} ended the wait");
    }
    assert!(!store.file("ran").exists(), "a command ran without the lease");

    std::fs::write(store.file("go"), "").expect("go");
    let out = output_of(holder).await;
    assert_eq!(code(&out), 0, "{out:?}");
    let status = wait_exit(&mut waiter, LIMIT).await;
    assert_eq!(status.code(), Some(0), "{status:?}");
    assert!(
        store.file("ran").exists(),
        "the command did not run once the lease was free"
    );
    let said = said.wait_end(LIMIT).await;
    assert_eq!(said.len(), 3, "one line each: {said:?}");
    assert!(said.iter().all(|l| l.starts_with("leasehold: ")), "{said:?}");
    assert_released(&store, &name).await;
}

/// SIGTSTP (Ctrl-Z) does not suspend a `run` whose command holds the lease: one line
/// says it was ignored, the lease is still renewed (and so refused to another `run`),
/// and the command's own exit ends it as usual.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tstp_is_ignored_while_the_command_holds_the_lease() {
    let store = Store::sqlite().await;
    let name = store.name("tstp");
    let mut run = store.spawn(&["run", &name, "--ttl", "1s", "--", "sh", "-c", HOLD_UNTIL_GO]);
    let said = Lines::of_stderr(&mut run);
    store.wait_pid("pid", LIMIT).await;
    store.wait_line("token1", LIMIT).await;
    signal(run.id(), Signal::TSTP);
    said.wait_for(LIMIT, "the SIGTSTP line", |l| l.iter().any(|l| l.contains("SIGTSTP")))
        .await;
    assert_ne!(process_state(run.id()), Some('T'), "leasehold was suspended");

    // Renewed after the signal (its TTL is 1 s).
    assert_renewed_after(&store, &name, "SIGTSTP").await;
    let out = store.output(&["run", &name, "--", "touch", "ran"], LIMIT).await;
    common::assert_one_line(&out, HELD);

    std::fs::write(store.file("go"), "").expect("go");
    let status = wait_exit(&mut run, LIMIT).await;
    assert_eq!(status.code(), Some(0));
    let said = said.wait_end(LIMIT).await;
    assert_eq!(said.len(), 1, "one line: {said:?}");
    assert!(
        said[0].starts_with("leasehold: ") && said[0].contains("cannot be suspended"),
        "{said:?}"
    );
    assert_released(&store, &name).await;
}

/// A command that exits leaving a background job: the job is sent SIGTERM while the
/// lease is still held (it records the lease's state when the signal comes), is gone
/// before `leasehold` exits, and only then is the lease released; one line says so;
/// the command's exit code passes through; the job going at once, nobody waits for the
/// grace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_command_leaves_running_is_stopped_before_the_release() {
    let store = Store::sqlite().await;
    let name = store.name("leftover");
    // Its output elsewhere: a shell says "Terminated" of its sleep, and were the job to
    // outlive leasehold, it would hold the pipes the test reads to their end.
    let job = "exec > job-out 2>&1; trap '\"$LEASEHOLD_BIN\" show \"$LEASEHOLD_NAME\" --json > at-term; exit 0' TERM; \
               touch ready; while :; do sleep 0.05; done";
    // The command exits once the job's trap is set.
    let script = format!(
        "sh -c '{}' & echo $! > leftover; while [ ! -e ready ]; do sleep 0.01; done; exit 4",
        job.replace('\'', "'\\''")
    );
    let started = Instant::now();
    let out = store
        .output(
            &[
                "run", &name, "--ttl", "40s", "--grace", "15s", "--", "sh", "-c", &script,
            ],
            LIMIT,
        )
        .await;
    let took = started.elapsed();
    assert_eq!(code(&out), 4, "the command's code passes through: {out:?}");
    let leftover = store.wait_pid("leftover", LIMIT).await;
    assert!(gone(leftover), "the background job outlived leasehold");
    let said = lines(&out);
    assert_eq!(said.len(), 1, "{out:?}");
    assert!(said[0].contains("leaving processes of its group running"), "{said:?}");
    let at_term: serde_json::Value =
        serde_json::from_str(&store.wait_line("at-term", LIMIT).await).expect("show --json");
    assert_eq!(at_term["state"], "held", "still held while it was stopped: {at_term}");
    assert_released(&store, &name).await;
    assert!(
        took < Duration::from_secs(10),
        "waited {took:?}: the grace, not the job"
    );

    // One that ignores SIGTERM is killed after the grace.
    let name = store.name("leftover-kill");
    let started = Instant::now();
    let out = store
        .output(
            &[
                "run",
                &name,
                "--grace",
                "500ms",
                "--",
                "sh",
                "-c",
                "trap '' TERM; sleep 30 > /dev/null 2>&1 & echo $! > stubborn",
            ],
            LIMIT,
        )
        .await;
    let took = started.elapsed();
    assert_eq!(code(&out), 0, "{out:?}");
    let stubborn = store.wait_pid("stubborn", LIMIT).await;
    assert!(gone(stubborn), "the job that ignores SIGTERM outlived leasehold");
    assert_eq!(lines(&out).len(), 1, "{out:?}");
    assert!(took >= Duration::from_millis(500), "killed before the grace: {took:?}");
    assert_released(&store, &name).await;

    // Nothing left running: nothing said.
    let name = store.name("no-leftover");
    let out = store
        .output(&["run", &name, "--", "sh", "-c", "sleep 0.01 & wait"], LIMIT)
        .await;
    assert_eq!(code(&out), 0, "{out:?}");
    assert!(out.stderr.is_empty(), "{out:?}");
}

/// The lease lost while what the command left running is being stopped: what it
/// started ran on without the lease, so `leasehold` says so in a second line and exits
/// with the "lost" code, not the command's; the job is still stopped (SIGKILL after the
/// grace). The job's SIGTERM trap releases the lease by force, so the loss comes
/// during the stop: the holder sees it at its next renewal, a third of the TTL later at
/// most, well inside the grace (44% of the TTL).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loss_while_the_leftovers_are_stopped_is_reported() {
    let store = Store::sqlite().await;
    let name = store.name("leftover-lost");
    let job = "exec > job-out 2>&1; \
               trap '\"$LEASEHOLD_BIN\" release --force \"$LEASEHOLD_NAME\"; touch forced' TERM; \
               touch ready; while :; do sleep 0.05; done";
    let script = format!(
        "sh -c '{}' & echo $! > leftover; echo \"$LEASEHOLD_TOKEN\" > token; \
         while [ ! -e ready ]; do sleep 0.01; done; exit 4",
        job.replace('\'', "'\\''")
    );
    let out = store
        .output(
            &["run", &name, "--ttl", "9s", "--grace", "4s", "--", "sh", "-c", &script],
            LIMIT,
        )
        .await;
    assert!(store.file("forced").exists(), "the job's trap did not run: {out:?}");
    assert_eq!(code(&out), LOST, "a loss, not the command's 4: {out:?}");
    let leftover = store.wait_pid("leftover", LIMIT).await;
    assert!(gone(leftover), "the background job outlived leasehold");
    let token = store.wait_line("token", LIMIT).await;
    let said = lines(&out);
    assert_eq!(said.len(), 2, "{out:?}");
    assert!(said[0].contains("leaving processes of its group running"), "{said:?}");
    assert!(
        said[1].contains(&format!(
            "lost lease {name} (token {token}) while what the command left running was being stopped: \
             released by someone else"
        )),
        "{said:?}"
    );
}

/// A tracer of process `pid` (the test's own thread, `PTRACE_SEIZE`) that never waits
/// for it: once killed, the process stays a zombie its parent cannot reap until the
/// tracer lets go, when it is dropped (its thread exits, which detaches it).
struct Tracer {
    release: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Tracer {
    /// Traces `pid` from a thread of its own, failing the test if it cannot.
    fn seize(pid: u32) -> Self {
        let (seized_tx, seized) = std::sync::mpsc::channel();
        let (release, released) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            let pid = libc::pid_t::try_from(pid).expect("a pid");
            // SAFETY: PTRACE_SEIZE takes a pid and two ignored (null) arguments; no
            // memory is passed to the kernel.
            #[allow(unsafe_code)]
            let seized = unsafe {
                libc::ptrace(
                    libc::PTRACE_SEIZE,
                    pid,
                    std::ptr::null_mut::<libc::c_void>(),
                    std::ptr::null_mut::<libc::c_void>(),
                )
            };
            let error = std::io::Error::last_os_error();
            seized_tx
                .send((seized == 0).then_some(()).ok_or(error))
                .expect("the test waits");
            // Holds the trace until the test lets go (or is gone).
            let _ = released.recv();
        });
        seized
            .recv()
            .expect("the tracer answers")
            .unwrap_or_else(|e| panic!("cannot trace pid {pid} (a descendant of this test): {e}"));
        Self {
            release: Some(release),
            thread: Some(thread),
        }
    }
}

impl Drop for Tracer {
    /// Lets go of the process: its zombie can then be reaped.
    fn drop(&mut self) {
        drop(self.release.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A command stopped on a loss, killed after the grace, whose exit its parent cannot
/// collect (a tracer holds it: the test's own): `leasehold` waits for it at most a
/// second after SIGKILL, then exits with the "lost" code and its one line, rather than
/// waiting as long as the tracer holds on. (The traced command stops at the SIGTERM,
/// which only its tracer could resume: SIGKILL ends it after the grace.) The killed
/// command is a zombie: nothing of its group still runs, so nothing more is said.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_command_whose_exit_is_held_does_not_hold_leasehold_up() {
    let store = Store::sqlite().await;
    let name = store.name("unreaped");
    let script = "echo $$ > pid; echo \"$LEASEHOLD_TOKEN\" > token; while :; do sleep 0.05; done";
    let run = store.spawn(&["run", &name, "--ttl", "9s", "--grace", "1s", "--", "sh", "-c", script]);
    let pid = store.wait_pid("pid", LIMIT).await;
    let token = store.wait_line("token", LIMIT).await;
    let tracer = Tracer::seize(pid);
    let forced = store.output(&["release", "--force", &name], LIMIT).await;
    assert_eq!(code(&forced), 0, "{forced:?}");
    let started = Instant::now();
    let out = output_of(run).await;
    let took = started.elapsed();
    let state = process_state(pid);
    drop(tracer);
    assert_eq!(state, Some('Z'), "the command's exit was not held: {out:?}");
    assert_eq!(code(&out), LOST, "{out:?}");
    let said = lines(&out);
    assert_eq!(said.len(), 1, "{out:?}");
    assert!(
        said[0].contains(&format!("lost lease {name} (token {token}) while the command ran")),
        "{said:?}"
    );
    // The next renewal (a third of the TTL) sees the loss, then the grace, then at
    // most a second for the command: about 5 s, where a wait on the tracer would last
    // as long as the test holds on.
    assert!(took < Duration::from_secs(15), "waited {took:?}");
}

/// A pipe whose reader has gone, as `leasehold list | true` gives it.
fn closed_pipe() -> Stdio {
    let mut reader = Command::new("true").stdin(Stdio::piped()).spawn().expect("start true");
    let writer = reader.stdin.take().expect("stdin is piped");
    assert!(reader.wait().expect("wait for true").success());
    Stdio::from(writer)
}

/// Every subcommand that prints, its stdout a pipe nobody reads (`| head -1`): exit 0,
/// nothing on stderr. Stdout on a full disk: one line and exit 74.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_stdout_ends_quietly_and_a_full_one_is_one_line() {
    let store = Store::sqlite().await;
    let name = store.name("pipe");
    let out = store.output(&["run", &name, "--", "true"], LIMIT).await;
    assert_eq!(code(&out), 0, "{out:?}");
    let absent = store.name("absent");
    let commands: [&[&str]; 9] = [
        &["list"],
        &["list", "--json"],
        &["show", &name],
        &["show", &name, "--json"],
        &["observe", &name],
        &["observe", &name, "--json"],
        &["release", "--force", &name],
        &["release", "--force", &absent],
        &["stores", "check"],
    ];
    for args in commands {
        let mut c = store.cmd(args);
        c.stdout(closed_pipe());
        let out = finish(c.spawn().expect("spawn"), LIMIT).await;
        assert_eq!(code(&out), 0, "{args:?}: {out:?}");
        assert!(out.stderr.is_empty(), "{args:?}: {}", stderr(&out));
    }
    for args in [&["list"][..], &["show", &name, "--json"]] {
        let mut c = store.cmd(args);
        c.stdout(
            std::fs::OpenOptions::new()
                .write(true)
                .open("/dev/full")
                .expect("/dev/full"),
        );
        let out = finish(c.spawn().expect("spawn"), LIMIT).await;
        let err = common::assert_one_line(&out, 74);
        assert!(err.contains("writing to stdout"), "{args:?}: {err}");
    }
}

/// Ctrl-C in a shell script: SIGINT to the script's process group reaches `leasehold`,
/// which forwards it to its command; the command dies of it, the lease is released, and
/// `leasehold` ends by SIGINT too, so the shell stops the script instead of going on with
/// its next line, as it does after a child that exited 130 (such a child caught the
/// signal: bash's wait-and-cooperative-exit rule).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_in_a_script_stops_the_script() {
    use std::os::unix::process::{CommandExt as _, ExitStatusExt as _};
    let store = Store::sqlite().await;
    let name = store.name("ctrl-c");
    let script = format!("\"$LEASEHOLD_BIN\" run '{name}' -- sh -c 'echo $$ > pid; exec sleep 30'; touch after");
    let mut bash = Command::new("bash")
        .args(["-c", &script])
        .env("LEASEHOLD_STORE", &store.url)
        .env("LEASEHOLD_BIN", common::BIN)
        .current_dir(&store.dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        // Its own group, as a terminal's foreground job is.
        .process_group(0)
        .spawn()
        .expect("bash");
    store.track(bash.id());
    // The command runs: `leasehold` has its handlers (installed before it acquires).
    let command = store.wait_pid("pid", LIMIT).await;
    let group = i32::try_from(bash.id())
        .ok()
        .and_then(rustix::process::Pid::from_raw)
        .expect("pid");
    rustix::process::kill_process_group(group, Signal::INT).expect("SIGINT to the group");
    let status = wait_exit(&mut bash, LIMIT).await;
    assert!(!store.file("after").exists(), "the script went on after Ctrl-C");
    assert_eq!(status.signal(), Some(2), "the shell did not end by SIGINT: {status:?}");
    assert!(gone(command), "the command outlived the script");
    assert_released(&store, &name).await;
}

/// A signal while `run` is still opening a store that never answers ends it at once (as
/// that signal, or 131 for SIGQUIT), with one line, not after the opening's own bound
/// of 10 seconds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_while_the_store_is_opened_ends_at_once() {
    let store = Store::sqlite().await;
    let silent = leasehold_testkit::endpoints::silent_server().await;
    let url = format!(
        "postgres://leasehold@{}/leasehold",
        silent.trim_start_matches("http://")
    );
    for (sig, number) in [(Signal::INT, 2), (Signal::QUIT, 3)] {
        let run = store.spawn(&["--store", &url, "run", "silent", "--", "touch", "ran"]);
        let pid = run.id();
        assert!(
            poll(LIMIT, || catches(pid, number)).await,
            "no handler for signal {number}"
        );
        let sent = Instant::now();
        signal(pid, sig);
        let out = output_of(run).await;
        let took = sent.elapsed();
        common::assert_ended_by_signal(&out.status, number);
        assert_eq!(lines(&out).len(), 1, "{out:?}");
        assert!(took < Duration::from_secs(5), "ended {took:?} after the signal");
    }
    assert!(!store.file("ran").exists(), "the command ran");
}

/// A command that is stopped (SIGSTOP here; SIGTTIN when it reads the terminal from
/// outside the foreground group) still ends on a signal `run` forwards: it is sent
/// SIGCONT after it, so `leasehold` does not wait on a stopped command forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_command_still_ends_on_a_forwarded_signal() {
    let store = Store::sqlite().await;
    let name = store.name("stopped");
    let run = store.spawn(&["run", &name, "--", "sh", "-c", "echo $$ > pid; exec sleep 60"]);
    let command = store.wait_pid("pid", LIMIT).await;
    signal(command, Signal::STOP);
    assert!(
        poll(LIMIT, || process_state(command) == Some('T')).await,
        "the command was not stopped"
    );
    signal(run.id(), Signal::TERM);
    let out = output_of(run).await;
    common::assert_ended_by_signal(&out.status, 15);
    assert!(gone(command), "the command outlived leasehold");
    assert_released(&store, &name).await;
}
