//! A command run while a tenure lasts: what `run` (a lease) and `elect` (leadership)
//! share.
//!
//! The command gets `LEASEHOLD_TOKEN`, `LEASEHOLD_NAME` and `LEASEHOLD_HOLDER`, and runs
//! in a process group of its own: SIGINT and SIGTERM are forwarded to the whole group,
//! and so are the signals that stop it, so a pipeline or a background job the command
//! started is stopped with it; and:
//! - when the command exits, the tenure ends (release, resignation) and the exit code is
//!   the command's (128 + N if signal N ended it);
//! - when the tenure is lost, the command is sent SIGTERM, SIGKILL after the grace, one
//!   line on stderr says why, and the exit code is [`exit::LOST`].

use std::os::unix::process::ExitStatusExt as _;
use std::process::ExitStatus;
use std::time::Duration;

use leasehold::Lease;
use leasehold::election::Leadership;
use tokio::process::{Child, Command};
use tokio::signal::unix::{Signal, SignalKind, signal};

use crate::cli::HeldArgs;
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

/// Runs the command of `held` while `tenure` lasts, forwarding `signals`; its grace is
/// the time between SIGTERM and SIGKILL once the tenure is lost. The exit code.
///
/// # Errors
/// [`CliError::Spawn`] when the command cannot be started (the tenure is ended first).
pub(crate) async fn supervise(tenure: impl Tenure, held: &HeldArgs, signals: &mut Signals) -> Result<u8, CliError> {
    let grace = held.grace;
    let mut child = match spawn(&held.command, &tenure) {
        Ok(child) => child,
        Err(e) => {
            end(tenure).await;
            return Err(e);
        }
    };
    let pid = child.id();
    let cause = loop {
        tokio::select! {
            status = child.wait() => {
                let code = match status {
                    Ok(status) => exit_code(status),
                    Err(e) => {
                        report(&format!("waiting for the command: {e}"));
                        exit::CANNOT_EXECUTE
                    }
                };
                end(tenure).await;
                return Ok(code);
            }
            sig = signals.next() => {
                if let Some(pid) = pid {
                    send(pid, sig.signal());
                }
            }
            cause = tenure.lease().lost() => break cause,
        }
    };
    let (what, token) = (tenure.what(), tenure.lease().token());
    drop(tenure);
    // The one line saying why, before the command is stopped.
    report(&format!(
        "lost {what} (token {token}) while the command ran: {cause}; stopping it (SIGTERM, SIGKILL after {})",
        humantime::format_duration(grace)
    ));
    stop(&mut child, pid, grace).await;
    Ok(exit::LOST)
}

/// Starts the command with the tenure in its environment.
fn spawn(command: &[String], tenure: &impl Tenure) -> Result<Child, CliError> {
    let (program, args) = command
        .split_first()
        .ok_or_else(|| CliError::Usage("no command given after --".into()))?;
    Command::new(program)
        .args(args)
        // Its own group, led by it: signals reach everything it starts.
        .process_group(0)
        .env("LEASEHOLD_TOKEN", tenure.lease().token().to_string())
        .env("LEASEHOLD_NAME", tenure.lease().name().as_str())
        .env("LEASEHOLD_HOLDER", tenure.lease().holder().as_str())
        .spawn()
        .map_err(|e| CliError::Spawn {
            message: format!("cannot run {program}: {e}"),
            not_found: e.kind() == std::io::ErrorKind::NotFound,
        })
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

/// SIGTERM to the command's process group, SIGKILL to it after `grace` (or at once when
/// the command itself has exited, for what it left running), and waits for the command.
async fn stop(child: &mut Child, pid: Option<u32>, grace: Duration) {
    if let Some(pid) = pid {
        send(pid, rustix::process::Signal::TERM);
    }
    if tokio::time::timeout(grace, child.wait()).await.is_err() {
        let _ = child.start_kill();
    }
    if let Some(pid) = pid {
        // The group outlives its leader: kill what is left of it.
        send(pid, rustix::process::Signal::KILL);
    }
    let _ = child.wait().await;
}

/// Sends `sig` to the process group `pid` leads (our child's, not yet reaped).
fn send(pid: u32, sig: rustix::process::Signal) {
    let pid = i32::try_from(pid).ok().and_then(rustix::process::Pid::from_raw);
    if let Some(pid) = pid {
        let _ = rustix::process::kill_process_group(pid, sig);
    }
}

/// The exit code for the command's `status`.
fn exit_code(status: ExitStatus) -> u8 {
    if let Some(code) = status.code() {
        return u8::try_from(code & 0xff).unwrap_or(u8::MAX);
    }
    let signal = status.signal().unwrap_or(0);
    exit::SIGNAL_BASE.saturating_add(u8::try_from(signal & 0x7f).unwrap_or(0))
}

/// A signal forwarded to the command (or, before it starts, one that ends the wait).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Forwarded {
    /// SIGINT.
    Interrupt,
    /// SIGTERM.
    Terminate,
}

impl Forwarded {
    fn signal(self) -> rustix::process::Signal {
        match self {
            Self::Interrupt => rustix::process::Signal::INT,
            Self::Terminate => rustix::process::Signal::TERM,
        }
    }

    /// The signal's number.
    pub(crate) fn number(self) -> u8 {
        match self {
            Self::Interrupt => 2,
            Self::Terminate => 15,
        }
    }

    /// The signal's name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Interrupt => "SIGINT",
            Self::Terminate => "SIGTERM",
        }
    }

    /// The error of a wait this signal ended.
    pub(crate) fn ended(self, what: &str) -> CliError {
        CliError::Signalled {
            message: format!("{} while waiting for {what}", self.name()),
            signal: self.number(),
        }
    }
}

/// The SIGINT and SIGTERM streams.
pub(crate) struct Signals {
    interrupt: Signal,
    terminate: Signal,
}

impl Signals {
    /// Handles SIGINT and SIGTERM from now on.
    ///
    /// # Errors
    /// [`CliError::Store`] when the handlers cannot be installed.
    pub(crate) fn new() -> Result<Self, CliError> {
        let install = |kind| signal(kind).map_err(|e| CliError::Store(format!("cannot handle signals: {e}")));
        Ok(Self {
            interrupt: install(SignalKind::interrupt())?,
            terminate: install(SignalKind::terminate())?,
        })
    }

    /// The next signal received.
    pub(crate) async fn next(&mut self) -> Forwarded {
        tokio::select! {
            _ = self.interrupt.recv() => Forwarded::Interrupt,
            _ = self.terminate.recv() => Forwarded::Terminate,
        }
    }
}
