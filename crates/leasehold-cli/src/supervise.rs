//! A command run while a tenure lasts: what `run` (a lease) and `elect` (leadership)
//! share.
//!
//! The command gets `LEASEHOLD_TOKEN`, `LEASEHOLD_NAME` and `LEASEHOLD_HOLDER`, and runs
//! in a process group of its own: SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2 and
//! SIGALRM are forwarded to the whole group (as `timeout(1)` forwards the signals it
//! does not keep for itself), and so are the
//! signals that stop it, so a pipeline or a background job the command started is
//! stopped with it. A forwarded signal ends nothing by itself: the tenure lasts until the
//! command exits (one that ignores SIGTERM, or reopens its logs on SIGUSR1, runs on,
//! renewed); and:
//! - when the command exits, whatever it left running in its group is stopped (SIGTERM,
//!   SIGKILL after the grace; one line on stderr says so), then the tenure ends
//!   (release, resignation) and the exit code is the command's (128 + N if signal N
//!   ended it), or [`exit::LOST`] if the tenure was lost while that was being stopped
//!   (one more line says so);
//! - when the tenure is lost, the command's group is sent SIGTERM, SIGKILL after the
//!   grace (the tenure counts as lost that much early: [`crate::grace`]), one line on
//!   stderr says why, the tenure ends once the command is gone, and the exit code is
//!   [`exit::LOST`];
//! - either way, what SIGKILL has not ended within [`KILL_WAIT`] is not waited for, but
//!   the tenure is then not ended ([`end_once_gone`]);
//! - when this process dies without stopping the command (SIGKILL), the kernel kills it
//!   ([`dies_with_parent`]);
//! - SIGTSTP (Ctrl-Z) does not suspend `leasehold` (see [`Signals::for_command`]): a
//!   suspended `leasehold` renews nothing while its command runs on, so the lease would
//!   expire and a second holder start beside it. One line on stderr says it was ignored.

use std::os::unix::process::ExitStatusExt as _;
use std::process::ExitStatus;
use std::time::Duration;

use leasehold::election::Leadership;
use leasehold::{FencingToken, Lease, LeaseClient, LeaseName, LossCause};
use rustix::process::{Pid, Signal};
use tokio::process::{Child, Command};
use tokio::signal::unix::{Signal as Stream, SignalKind, signal};

use crate::error::{CliError, report};
use crate::exit;

/// The longest the release (or resignation) at the end may take before the lease is
/// left to expire.
const END_TIMEOUT: Duration = Duration::from_secs(10);

/// What a command runs under: a lease, or leadership of an election.
pub(crate) trait Tenure {
    /// How stderr names it: `lease NAME`, `leadership of NAME`.
    fn what(&self) -> String;
    /// The lease it is (or is kept by).
    fn lease(&self) -> &Lease;
    /// Ends the tenure (the next holder is granted at once).
    async fn end(self) -> leasehold::Result<()>;
    /// The command started under it.
    fn started(&mut self) {}
}

impl Tenure for Lease {
    fn what(&self) -> String {
        format!("lease {}", self.name())
    }
    fn lease(&self) -> &Lease {
        self
    }
    async fn end(self) -> leasehold::Result<()> {
        self.release().await
    }
}

impl Tenure for Leadership {
    fn what(&self) -> String {
        format!("leadership of {}", self.name())
    }
    fn lease(&self) -> &Lease {
        Leadership::lease(self)
    }
    async fn end(self) -> leasehold::Result<()> {
        self.resign().await
    }
}

/// Runs `command` while `tenure` lasts, forwarding `signals`; `grace` is the time
/// between SIGTERM and SIGKILL once the tenure is lost, or once the command has exited
/// leaving processes in its group (the tenure's client counts it lost early enough for
/// that: [`crate::grace`]). The exit code.
///
/// # Errors
/// [`CliError::Spawn`] when the command cannot be started (the tenure is ended first).
pub(crate) async fn supervise(
    mut tenure: impl Tenure,
    command: &[String],
    grace: Duration,
    signals: &mut Signals,
) -> Result<u8, CliError> {
    let mut child = match spawn(command, &tenure) {
        Ok(child) => child,
        Err(e) => {
            end(tenure).await;
            return Err(e);
        }
    };
    tenure.started();
    // The command leads its group: the group's id is its pid.
    let group = child
        .id()
        .and_then(|pid| i32::try_from(pid).ok())
        .and_then(Pid::from_raw);
    let cause = loop {
        tokio::select! {
            // A loss first: ready with the command's exit, it happened while the
            // command ran.
            biased;
            cause = tenure.lease().lost() => break cause,
            status = child.wait() => {
                let code = match status {
                    Ok(status) => exit_code(status),
                    Err(e) => {
                        report(&format!("waiting for the command: {e}"));
                        exit::CANNOT_EXECUTE
                    }
                };
                // Nothing it started may run on once the lease is released.
                let left = match group {
                    Some(group) => left_running(group).await.then_some(group),
                    None => None,
                };
                let stopped = match left {
                    Some(group) => stop_leftovers(&mut child, group, grace, &tenure).await,
                    None => Stopped { lost: false, gone: true },
                };
                end_once_gone(tenure, stopped.gone).await;
                return Ok(if stopped.lost { exit::LOST } else { code });
            }
            // Every one handled, SIGUSR1 too: the command decides what it means.
            sig = signals.next_to_forward() => {
                if let Some(group) = group {
                    forward(group, sig.signal());
                }
            }
        }
    };
    // The one line saying why, before the command is stopped.
    report(&lost_line(&tenure.what(), tenure.lease().token(), &cause, grace));
    let gone = match group {
        Some(group) => stop(&mut child, group, grace).await,
        None => {
            let _ = child.start_kill();
            tokio::time::timeout(KILL_WAIT, child.wait()).await.is_ok()
        }
    };
    // Released only now: a lost lease whose record still names it (the store was
    // unreachable, the hold reached its cap) keeps everyone else out until its TTL, and
    // the release that ends that wait must not come while the command still runs.
    end_once_gone(tenure, gone).await;
    Ok(exit::LOST)
}

/// Stops what the exited command left running in its group `group` ([`stop`]), saying
/// so. The tenure may end meanwhile (the grace runs on, as for a command stopped on a
/// loss): then what it started ran on without it, which is reported as a loss (one
/// more line).
async fn stop_leftovers(child: &mut Child, group: Pid, grace: Duration, tenure: &impl Tenure) -> Stopped {
    report(&format!(
        "the command exited, leaving processes of its group running; stopping them \
         (SIGTERM, SIGKILL after {}) before releasing {}",
        shown(grace),
        tenure.what()
    ));
    let stopping = stop(child, group, grace);
    tokio::pin!(stopping);
    let mut lost = false;
    loop {
        tokio::select! {
            gone = &mut stopping => return Stopped { lost, gone },
            cause = tenure.lease().lost(), if !lost => {
                report(&format!(
                    "lost {} (token {}) while what the command left running was being stopped: {cause}",
                    tenure.what(),
                    tenure.lease().token(),
                ));
                lost = true;
            }
        }
    }
}

/// The line saying that `what` (token `token`) was lost while its command ran, why, and
/// how the command is stopped.
fn lost_line(what: &str, token: FencingToken, cause: &LossCause, grace: Duration) -> String {
    format!(
        "lost {what} (token {token}) while the command ran: {cause}; stopping it (SIGTERM, SIGKILL after {})",
        shown(grace)
    )
}

/// `d` for a message, to the millisecond: a computed grace (a sixth of the TTL) would
/// otherwise print as `1s 666ms 666us 666ns`. A nonzero `d` shows as 1ms at least.
fn shown(d: Duration) -> humantime::FormattedDuration {
    let ms = u64::try_from((d.as_nanos() + 500_000) / 1_000_000).unwrap_or(u64::MAX);
    let ms = if ms == 0 && !d.is_zero() { 1 } else { ms };
    humantime::format_duration(Duration::from_millis(ms))
}

/// How the stop of what an exited command left running ended.
struct Stopped {
    /// The tenure was lost meanwhile: the exit code says so.
    lost: bool,
    /// Everything has gone ([`stop`]'s answer).
    gone: bool,
}

/// Starts the command with the tenure in its environment.
fn spawn(command: &[String], tenure: &impl Tenure) -> Result<Child, CliError> {
    let (program, args) = command
        .split_first()
        .ok_or_else(|| CliError::Usage("no command given after --".into()))?;
    let mut command = Command::new(program);
    command
        .args(args)
        // Its own group, led by it: signals reach everything it starts.
        .process_group(0)
        .env("LEASEHOLD_TOKEN", tenure.lease().token().to_string())
        .env("LEASEHOLD_NAME", tenure.lease().name().as_str())
        .env("LEASEHOLD_HOLDER", tenure.lease().holder().as_str());
    dies_with_parent(&mut command);
    command.spawn().map_err(|e| CliError::Spawn {
        message: format!("cannot run {program}: {e}"),
        not_found: e.kind() == std::io::ErrorKind::NotFound,
    })
}

/// Has the kernel send SIGKILL to the command when this process dies without stopping
/// it (SIGKILL, the OOM killer, a crash): nobody would renew the lease any more, and the
/// command must not outlive it. Only the command itself: what it starts in the
/// background survives such a death unless a service manager (a cgroup) ends it, and
/// the kernel clears the signal when the command execs a set-user-ID program (`sudo`).
///
/// The signal is tied to the thread that spawns the command; this one is the runtime's
/// `block_on` thread or one of its workers, which live as long as the process.
#[allow(unsafe_code)]
fn dies_with_parent(command: &mut Command) {
    let parent = rustix::process::getpid();
    // SAFETY: the closure runs in the forked child before exec, where only
    // async-signal-safe calls are allowed: `prctl` and `getppid` are plain system calls
    // (rustix's are raw syscalls), and it neither allocates nor takes a lock.
    unsafe {
        command.pre_exec(move || {
            rustix::process::set_parent_process_death_signal(Some(Signal::KILL))?;
            // This process may have died before the prctl: then nothing would send it.
            if rustix::process::getppid() != Some(parent) {
                return Err(std::io::Error::from_raw_os_error(
                    rustix::io::Errno::SRCH.raw_os_error(),
                ));
            }
            Ok(())
        });
    }
}

/// After a signal ended the wait for `name`: lets an attempt whose write was in flight
/// finish and give back what it granted ([`LeaseClient::settle`]) before the process
/// exits, within [`END_TIMEOUT`], or until a second signal.
pub(crate) async fn settle(client: &LeaseClient, name: &LeaseName, signals: &mut Signals) {
    tokio::select! {
        _ = tokio::time::timeout(END_TIMEOUT, client.settle(name)) => {}
        _ = signals.next() => {}
    }
}

/// Ends the tenure ([`end`]) if the command and its group have `gone`. Otherwise a
/// process of them still runs [`KILL_WAIT`] after SIGKILL (one in uninterruptible
/// sleep, which dies only when it wakes, or one this process may not signal): then the
/// tenure is not ended, since a release would let the next holder in at once beside
/// that process; if the store still names this holder, the record expires there on its
/// own, as `leasehold` exits after this and renews nothing more. One line says so.
async fn end_once_gone(tenure: impl Tenure, gone: bool) {
    if gone {
        return end(tenure).await;
    }
    report(&format!(
        "a process of the command or its group still runs {} after SIGKILL (in uninterruptible \
         sleep, or one leasehold may not signal); {} is not released: if the store still names \
         this holder, it expires there on its own",
        shown(KILL_WAIT),
        tenure.what()
    ));
    // Not dropped: that would release it. The renewal driver stops when the process
    // exits, without a write.
    std::mem::forget(tenure);
}

/// Ends the tenure within [`END_TIMEOUT`]; a failure is reported, and the lease then
/// expires after its TTL.
async fn end(tenure: impl Tenure) {
    let what = tenure.what();
    match tokio::time::timeout(END_TIMEOUT, tenure.end()).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => report(&format!("releasing {what}: {e}; it expires after its TTL")),
        Err(_) => report(&format!("releasing {what}: no answer; it expires after its TTL")),
    }
}

/// How often [`stop`] looks whether the group has gone.
const GROUP_POLL: Duration = Duration::from_millis(20);

/// How long [`stop`] waits for the command and its group to go after their SIGKILL (a
/// process in uninterruptible sleep dies only when it wakes).
const KILL_WAIT: Duration = Duration::from_secs(1);

/// Stops the command's process group `group` (the command leads it, or led it: it may
/// have exited already, leaving the rest): SIGTERM; then, once the command has exited
/// and every other member has gone, or after `grace`, SIGKILL to what is left; waits at
/// most [`KILL_WAIT`] more for the command and the rest of the group to go. Whether
/// they have: the command was reaped or is a zombie (killed, but a tracer holds its
/// exit), wherever it went (it may have left its group), and no member of the group
/// runs.
async fn stop(child: &mut Child, group: Pid, grace: Duration) -> bool {
    forward(group, Signal::TERM);
    let deadline = tokio::time::Instant::now() + grace;
    // The command first: until it is reaped, it is a member of its group.
    let exited = tokio::time::timeout_at(deadline, child.wait()).await.is_ok();
    if exited {
        wait_group(group, deadline).await;
    }
    if !exited || group_alive(group) {
        send(group, Signal::KILL);
    }
    if !exited {
        // By its pid too, should it have left its group.
        let _ = child.start_kill();
    }
    let deadline = tokio::time::Instant::now() + KILL_WAIT;
    let reaped = tokio::time::timeout_at(deadline, child.wait()).await.is_ok();
    wait_group(group, deadline).await;
    (reaped || zombie(group)) && !group_alive(group)
}

/// Whether the process `pid` is a zombie (it has exited, and nobody has reaped it yet),
/// as `/proc` shows it; false when it cannot be read.
fn zombie(pid: Pid) -> bool {
    let path = format!("/proc/{}/stat", pid.as_raw_nonzero());
    state_and_group(std::path::Path::new(&path)).is_some_and(|(state, _)| state == "Z")
}

/// The state (`R`, `S`, `Z`, …) and process group of the process whose `/proc` stat file
/// is `path`, as text; `None` when it cannot be read.
fn state_and_group(path: &std::path::Path) -> Option<(String, String)> {
    let stat = std::fs::read_to_string(path).ok()?;
    // `PID (COMM) STATE PPID PGRP …`; COMM may hold spaces and parentheses.
    let (_, fields) = stat.rsplit_once(')')?;
    let mut fields = fields.split_whitespace();
    let state = fields.next()?.to_owned();
    let pgrp = fields.nth(1)?.to_owned();
    Some((state, pgrp))
}

/// How long the rest of an exited command's group has to go by itself before it counts
/// as left running: members a signal is ending (a forwarded SIGINT reaches the whole
/// group) may outlive the command by a moment.
const SETTLE: Duration = Duration::from_millis(100);

/// Whether the group `group` of a command that has exited (and been reaped) still has a
/// running member after [`SETTLE`].
async fn left_running(group: Pid) -> bool {
    wait_group(group, tokio::time::Instant::now() + SETTLE).await;
    group_alive(group)
}

/// Waits until the group `group` has no running member, or `deadline`.
async fn wait_group(group: Pid, deadline: tokio::time::Instant) {
    while group_alive(group) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(GROUP_POLL).await;
    }
}

/// Sends `sig` to the process group `group`, then SIGCONT, as `timeout(1)` does: a
/// member that is stopped (a command that read the terminal from outside its
/// foreground group got SIGTTIN, or someone sent it SIGSTOP) would otherwise keep the
/// signal pending, and `leasehold` would wait for it forever.
fn forward(group: Pid, sig: Signal) {
    send(group, sig);
    send(group, Signal::CONT);
}

/// Sends `sig` to the process group `group`.
fn send(group: Pid, sig: Signal) {
    let _ = rustix::process::kill_process_group(group, sig);
}

/// Whether the process group `group` has a member still running: `kill(-group, 0)`
/// finds one, and (where `/proc` shows the members) not every member found is a
/// zombie, an exited process its new parent has yet to reap (some inits reap late).
fn group_alive(group: Pid) -> bool {
    match rustix::process::test_kill_process_group(group) {
        Err(rustix::io::Errno::SRCH) => false,
        _ => !only_zombies(group),
    }
}

/// True when `/proc` shows no member of the group `group` but zombies; false when it
/// shows a running one, or cannot be read (then every member counts as running).
fn only_zombies(group: Pid) -> bool {
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return false;
    };
    let group = group.as_raw_nonzero().to_string();
    for entry in procs.flatten() {
        if let Some((state, pgrp)) = state_and_group(&entry.path().join("stat")) {
            if pgrp == group && state != "Z" {
                return false;
            }
        }
    }
    true
}

/// The exit code for the command's `status`.
fn exit_code(status: ExitStatus) -> u8 {
    if let Some(code) = status.code() {
        return u8::try_from(code & 0xff).unwrap_or(u8::MAX);
    }
    let signal = u8::try_from(status.signal().unwrap_or(0) & 0x7f).unwrap_or(0);
    exit::ended_by(signal);
    exit::SIGNAL_BASE.saturating_add(signal)
}

/// A signal forwarded to the command. Before it starts, the first four end the wait
/// ([`Signals::next`]); the others are ignored then, as nobody is there to get them.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Forwarded {
    /// SIGHUP (the terminal hung up).
    Hangup,
    /// SIGINT.
    Interrupt,
    /// SIGQUIT.
    Quit,
    /// SIGTERM.
    Terminate,
    /// SIGUSR1 (for many daemons: reopen the logs).
    User1,
    /// SIGUSR2.
    User2,
    /// SIGALRM.
    Alarm,
}

impl Forwarded {
    /// The signal itself.
    fn signal(self) -> Signal {
        match self {
            Self::Hangup => Signal::HUP,
            Self::Interrupt => Signal::INT,
            Self::Quit => Signal::QUIT,
            Self::Terminate => Signal::TERM,
            Self::User1 => Signal::USR1,
            Self::User2 => Signal::USR2,
            Self::Alarm => Signal::ALARM,
        }
    }

    /// The signal's number.
    pub(crate) fn number(self) -> u8 {
        u8::try_from(self.signal().as_raw()).unwrap_or(0)
    }

    /// The signal's name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Hangup => "SIGHUP",
            Self::Interrupt => "SIGINT",
            Self::Quit => "SIGQUIT",
            Self::Terminate => "SIGTERM",
            Self::User1 => "SIGUSR1",
            Self::User2 => "SIGUSR2",
            Self::Alarm => "SIGALRM",
        }
    }

    /// Whether it ends a wait for the tenure (or for a store): the signals that ask a
    /// process to end. SIGUSR1, SIGUSR2 and SIGALRM do not: they are for the command.
    fn ends_wait(self) -> bool {
        matches!(self, Self::Hangup | Self::Interrupt | Self::Quit | Self::Terminate)
    }

    /// The error of a wait this signal ended.
    pub(crate) fn ended(self, what: &str) -> CliError {
        CliError::Signalled {
            message: format!("{} while waiting for {what}", self.name()),
            signal: self.number(),
        }
    }
}

/// The streams of the signals handled: SIGINT and SIGTERM always; SIGHUP, SIGQUIT,
/// SIGUSR1, SIGUSR2, SIGALRM and SIGTSTP for a command ([`Signals::for_command`]).
pub(crate) struct Signals {
    interrupt: Stream,
    terminate: Stream,
    hangup: Option<Stream>,
    quit: Option<Stream>,
    user1: Option<Stream>,
    user2: Option<Stream>,
    alarm: Option<Stream>,
    suspend: Option<Stream>,
}

/// A signal received, before it is acted on.
enum Received {
    /// One forwarded to the command.
    Forwarded(Forwarded),
    /// SIGTSTP, always ignored.
    Suspend,
}

impl Signals {
    /// Handles SIGINT and SIGTERM from now on (`observe`: either ends it).
    ///
    /// # Errors
    /// [`CliError::Store`] when the handlers cannot be installed.
    pub(crate) fn new() -> Result<Self, CliError> {
        Ok(Self {
            interrupt: install(SignalKind::interrupt())?,
            terminate: install(SignalKind::terminate())?,
            hangup: None,
            quit: None,
            user1: None,
            user2: None,
            alarm: None,
            suspend: None,
        })
    }

    /// Handles, from now on, what `run` and `elect` forward to their command (SIGHUP,
    /// SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGALRM: [`Signals::next_to_forward`];
    /// before the command starts, the first four end the wait and the other three are
    /// ignored with one line on stderr: [`Signals::next`]), and SIGTSTP, which is ignored
    /// with one line on stderr: this process is never suspended by it, while it waits
    /// for a tenure or its command holds one, as its renewals would stop. Unhandled, the
    /// default action of SIGUSR1, SIGUSR2 and SIGALRM would end this process without a
    /// release, and leave what the command started running. (The handlers are the
    /// process's own: the command starts with the default ones. SIGTTIN and SIGTTOU are
    /// left alone: `leasehold` never reads the terminal, and writes to it only its
    /// one-line messages.)
    ///
    /// # Errors
    /// [`CliError::Store`] when the handlers cannot be installed.
    pub(crate) fn for_command() -> Result<Self, CliError> {
        Ok(Self {
            hangup: Some(install(SignalKind::hangup())?),
            quit: Some(install(SignalKind::quit())?),
            user1: Some(install(SignalKind::user_defined1())?),
            user2: Some(install(SignalKind::user_defined2())?),
            alarm: Some(install(SignalKind::alarm())?),
            suspend: Some(install(SignalKind::from_raw(Signal::TSTP.as_raw()))?),
            ..Self::new()?
        })
    }

    /// The next signal received that ends a wait (SIGHUP, SIGINT, SIGQUIT, SIGTERM);
    /// SIGTSTP, and SIGUSR1, SIGUSR2 and SIGALRM (no command runs, yet or any more, to
    /// get them), are reported and ignored here.
    pub(crate) async fn next(&mut self) -> Forwarded {
        loop {
            match self.receive().await {
                Received::Forwarded(sig) if sig.ends_wait() => return sig,
                Received::Forwarded(sig) => {
                    report(&format!("ignored {}: no command runs to forward it to", sig.name()))
                }
                Received::Suspend => report_suspend(),
            }
        }
    }

    /// The next signal received to forward to the running command (SIGTSTP is reported
    /// and ignored here).
    async fn next_to_forward(&mut self) -> Forwarded {
        loop {
            match self.receive().await {
                Received::Forwarded(sig) => return sig,
                Received::Suspend => report_suspend(),
            }
        }
    }

    /// The next signal received, whatever it is.
    async fn receive(&mut self) -> Received {
        tokio::select! {
            _ = self.interrupt.recv() => Received::Forwarded(Forwarded::Interrupt),
            _ = self.terminate.recv() => Received::Forwarded(Forwarded::Terminate),
            Some(()) = recv(self.hangup.as_mut()) => Received::Forwarded(Forwarded::Hangup),
            Some(()) = recv(self.quit.as_mut()) => Received::Forwarded(Forwarded::Quit),
            Some(()) = recv(self.user1.as_mut()) => Received::Forwarded(Forwarded::User1),
            Some(()) = recv(self.user2.as_mut()) => Received::Forwarded(Forwarded::User2),
            Some(()) = recv(self.alarm.as_mut()) => Received::Forwarded(Forwarded::Alarm),
            Some(()) = recv(self.suspend.as_mut()) => Received::Suspend,
        }
    }
}

/// The one line saying SIGTSTP was ignored.
fn report_suspend() {
    report(
        "ignored SIGTSTP: leasehold cannot be suspended while its command holds (or it waits for) \
         a lease: its renewals would stop, and the lease expire with the command still running",
    );
}

/// Installs the handler of `kind`: its stream.
fn install(kind: SignalKind) -> Result<Stream, CliError> {
    signal(kind).map_err(|e| CliError::Store(format!("cannot handle signals: {e}")))
}

/// The next delivery on `stream`; never, without one.
async fn recv(stream: Option<&mut Stream>) -> Option<()> {
    match stream {
        Some(stream) => stream.recv().await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use leasehold::{AcquireOutcome, MemoryStore};

    /// Long enough that nothing expires during a test.
    const TTL: Duration = Duration::from_secs(30);

    /// Whether another client finds `name` held.
    async fn held(other: &LeaseClient, name: &str) -> bool {
        match other.try_acquire(name, TTL).await.expect("try_acquire") {
            AcquireOutcome::Held { .. } => true,
            AcquireOutcome::Granted(lease) => {
                lease.release().await.expect("release");
                false
            }
        }
    }

    /// A tenure whose command's group has not gone is left held (to expire after its
    /// TTL once this process exits), not released; one whose group has gone is released.
    #[tokio::test]
    async fn a_tenure_is_released_only_once_the_group_has_gone() {
        let store = MemoryStore::new();
        let (ours, other) = (LeaseClient::new(store.clone()), LeaseClient::new(store));

        let lease = ours.acquire("still-running", TTL).await.expect("acquire");
        end_once_gone(lease, false).await;
        assert!(held(&other, "still-running").await, "released with a member running");

        let lease = ours.acquire("gone", TTL).await.expect("acquire");
        end_once_gone(lease, true).await;
        assert!(!held(&other, "gone").await, "not released once the group had gone");
    }

    /// The line saying a lease was lost gives the cause in words (the library's
    /// `Display`, not a metric label such as `outcome_unknown`) and the grace to the
    /// millisecond.
    #[test]
    fn the_lost_line_says_the_cause_in_words_and_the_grace_in_milliseconds() {
        let token = FencingToken::new(7);
        // A sixth of a 10 s TTL, the default grace there.
        let line = lost_line(
            "lease x",
            token,
            &LossCause::OutcomeUnknown,
            Duration::from_secs(10) / 6,
        );
        assert_eq!(
            line,
            "lost lease x (token 7) while the command ran: the outcome of its renewals stayed unknown \
             until its deadline; stopping it (SIGTERM, SIGKILL after 1s 667ms)"
        );
    }

    /// Durations in messages are rounded to the millisecond, a nonzero one to 1ms at
    /// least.
    #[test]
    fn durations_are_shown_to_the_millisecond() {
        for (nanos, text) in [
            (1_666_666_666, "1s 667ms"),
            (1_499_999, "1ms"),
            (1_500_000, "2ms"),
            (400, "1ms"),
            (0, "0s"),
            (5_000_000_000, "5s"),
        ] {
            assert_eq!(shown(Duration::from_nanos(nanos)).to_string(), text, "{nanos} ns");
        }
    }
}
