//! `leasehold run NAME -- CMD…`: a command under a lease.
//!
//! Takes the lease (once, `--wait` as long as it takes, or `--timeout`), starts the
//! command with `LEASEHOLD_TOKEN`, `LEASEHOLD_NAME` and `LEASEHOLD_HOLDER`, renews in
//! the background, forwards SIGINT and SIGTERM to it, and:
//! - when the command exits, releases the lease and exits with the command's code
//!   (128 + N if signal N ended it);
//! - when the lease is lost, sends the command SIGTERM, SIGKILL after `--grace`, says why
//!   on stderr and exits with [`exit::LOST`].

use std::os::unix::process::ExitStatusExt as _;
use std::process::ExitStatus;
use std::time::Duration;

use leasehold::{AcquireOutcome, Lease, LeaseClient, LeaseName, Ttl};
use tokio::process::{Child, Command};
use tokio::signal::unix::{Signal, SignalKind, signal};

use crate::cli::RunArgs;
use crate::error::{CliError, report};
use crate::exit;
use crate::{holder, open};
use leasehold::url::StoreUrl;

/// The longest a release at the end may take before the lease is left to expire.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs `leasehold run`; the exit code.
///
/// # Errors
/// [`CliError`] for bad input, a store failure, a lease held by someone else, a lease
/// lost while running, or a command that cannot be started.
pub(crate) async fn run(url: &StoreUrl, args: RunArgs) -> Result<u8, CliError> {
    let name = LeaseName::new(&args.name).map_err(|e| CliError::from_lease("lease name", &e))?;
    Ttl::new(args.ttl).map_err(|e| CliError::from_lease("--ttl", &e))?;
    let mut signals = Signals::new()?;
    let client = open::open(url, &holder::label()).await?;
    let lease = tokio::select! {
        lease = acquire(&client, &name, &args) => lease?,
        sig = signals.next() => {
            return Err(CliError::Signalled {
                message: format!("{} while waiting for lease {name}", sig.name()),
                signal: sig.number(),
            });
        }
    };
    let mut child = match spawn(&args.command, &lease) {
        Ok(child) => child,
        Err(e) => {
            release(lease).await;
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
                release(lease).await;
                return Ok(code);
            }
            sig = signals.next() => {
                if let Some(pid) = pid {
                    send(pid, sig.signal());
                }
            }
            cause = lease.lost() => break cause,
        }
    };
    let token = lease.token();
    drop(lease);
    // The one line saying why, before the command is stopped.
    report(&format!(
        "lost lease {name} (token {token}) while the command ran: {cause}; stopping it (SIGTERM, SIGKILL after {})",
        humantime::format_duration(args.grace)
    ));
    stop(&mut child, pid, args.grace).await;
    Ok(exit::LOST)
}

/// Takes the lease as the options say.
async fn acquire(client: &LeaseClient, name: &LeaseName, args: &RunArgs) -> Result<Lease, CliError> {
    let what = format!("lease {name}");
    if args.wait {
        return client
            .acquire(name, args.ttl)
            .await
            .map_err(|e| CliError::from_lease(&what, &e));
    }
    if let Some(timeout) = args.timeout {
        return match client.acquire_timeout(name, args.ttl, timeout).await {
            Ok(lease) => Ok(lease),
            Err(leasehold::Error::Timeout { .. }) => Err(CliError::Held(format!(
                "lease {name} is held by someone else; gave up after {}",
                humantime::format_duration(timeout)
            ))),
            Err(e) => Err(CliError::from_lease(&what, &e)),
        };
    }
    match client
        .try_acquire(name, args.ttl)
        .await
        .map_err(|e| CliError::from_lease(&what, &e))?
    {
        AcquireOutcome::Granted(lease) => Ok(lease),
        AcquireOutcome::Held { holder, token, .. } => Err(CliError::Held(format!(
            "lease {name} is held by {} (token {token}); use --wait or --timeout to wait for it",
            holder
                .as_ref()
                .map_or_else(|| "someone else".to_owned(), ToString::to_string)
        ))),
    }
}

/// Starts the command with the lease in its environment.
fn spawn(command: &[String], lease: &Lease) -> Result<Child, CliError> {
    let (program, args) = command
        .split_first()
        .ok_or_else(|| CliError::Usage("no command given after --".into()))?;
    Command::new(program)
        .args(args)
        .env("LEASEHOLD_TOKEN", lease.token().to_string())
        .env("LEASEHOLD_NAME", lease.name().as_str())
        .env("LEASEHOLD_HOLDER", lease.holder().as_str())
        .spawn()
        .map_err(|e| CliError::Spawn {
            message: format!("cannot run {program}: {e}"),
            not_found: e.kind() == std::io::ErrorKind::NotFound,
        })
}

/// Releases the lease at the end, within [`RELEASE_TIMEOUT`]; a failure is reported,
/// and the lease then expires after its TTL.
async fn release(lease: Lease) {
    let name = lease.name().clone();
    match tokio::time::timeout(RELEASE_TIMEOUT, lease.release()).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => report(&format!(
            "releasing lease {name}: {}; it expires after its TTL",
            crate::error::describe(&e)
        )),
        Err(_) => report(&format!("releasing lease {name}: no answer; it expires after its TTL")),
    }
}

/// SIGTERM to the command, SIGKILL after `grace`, and waits for it to end.
async fn stop(child: &mut Child, pid: Option<u32>, grace: Duration) {
    if let Some(pid) = pid {
        send(pid, rustix::process::Signal::TERM);
    }
    if tokio::time::timeout(grace, child.wait()).await.is_err() {
        let _ = child.start_kill();
        let _ = child.wait().await;
    }
}

/// Sends `sig` to the process `pid` (our child, not yet reaped).
fn send(pid: u32, sig: rustix::process::Signal) {
    let pid = i32::try_from(pid).ok().and_then(rustix::process::Pid::from_raw);
    if let Some(pid) = pid {
        let _ = rustix::process::kill_process(pid, sig);
    }
}

/// The exit code of `leasehold run` for the command's `status`.
fn exit_code(status: ExitStatus) -> u8 {
    if let Some(code) = status.code() {
        return u8::try_from(code & 0xff).unwrap_or(u8::MAX);
    }
    let signal = status.signal().unwrap_or(0);
    exit::SIGNAL_BASE.saturating_add(u8::try_from(signal & 0x7f).unwrap_or(0))
}

/// A signal `run` forwards.
#[derive(Debug, Clone, Copy)]
enum Forwarded {
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

    fn number(self) -> u8 {
        match self {
            Self::Interrupt => 2,
            Self::Terminate => 15,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Interrupt => "SIGINT",
            Self::Terminate => "SIGTERM",
        }
    }
}

/// The SIGINT and SIGTERM streams.
struct Signals {
    interrupt: Signal,
    terminate: Signal,
}

impl Signals {
    fn new() -> Result<Self, CliError> {
        let install = |kind| signal(kind).map_err(|e| CliError::Store(format!("cannot handle signals: {e}")));
        Ok(Self {
            interrupt: install(SignalKind::interrupt())?,
            terminate: install(SignalKind::terminate())?,
        })
    }

    /// The next signal received.
    async fn next(&mut self) -> Forwarded {
        tokio::select! {
            _ = self.interrupt.recv() => Forwarded::Interrupt,
            _ = self.terminate.recv() => Forwarded::Terminate,
        }
    }
}
