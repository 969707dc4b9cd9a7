//! Freezing and resuming real processes, and polling with a deadline: the pieces of a
//! frozen-holder test (a holder SIGSTOPped past its TTL, a takeover, the holder resumed
//! and its writes refused).

use std::process::Command;
use std::time::Duration;

use tokio::time::Instant;

fn signal(pid: u32, sig: &str) -> std::io::Result<()> {
    let status = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status()?;
    if status.success() {
        Ok(())
    } else {
        Err(std::io::Error::other(format!("kill -{sig} {pid} failed: {status}")))
    }
}

/// Sends SIGSTOP to `pid` and waits until the kernel reports it stopped.
///
/// # Errors
/// If the signal cannot be sent or the process is not stopped within 5 s.
pub async fn freeze(pid: u32) -> std::io::Result<()> {
    signal(pid, "STOP")?;
    let ok = poll(Duration::from_secs(5), || process_state(pid) == Some('T')).await;
    if ok {
        Ok(())
    } else {
        Err(std::io::Error::other(format!("process {pid} did not stop")))
    }
}

/// Sends SIGCONT to `pid`.
///
/// # Errors
/// If the signal cannot be sent.
pub fn resume(pid: u32) -> std::io::Result<()> {
    signal(pid, "CONT")
}

/// Sends SIGKILL to `pid`.
///
/// # Errors
/// If the signal cannot be sent.
pub fn kill9(pid: u32) -> std::io::Result<()> {
    signal(pid, "KILL")
}

/// The process state letter from `/proc/PID/stat` (`R`, `S`, `T` for stopped, …), or
/// `None` if the process is gone.
pub fn process_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may contain spaces: the state follows ')'.
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

/// Polls `cond` every 5 ms until it holds (true) or `timeout` passes (false).
pub async fn poll(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Like [`poll`] for an async condition.
pub async fn poll_async<F, Fut>(timeout: Duration, mut cond: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if cond().await {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn freeze_and_resume_a_real_process() {
        let mut child = Command::new("sleep").arg("30").spawn().expect("spawn sleep");
        let pid = child.id();
        freeze(pid).await.expect("freeze");
        assert_eq!(process_state(pid), Some('T'));
        resume(pid).expect("resume");
        assert!(poll(Duration::from_secs(5), || process_state(pid) != Some('T')).await);
        kill9(pid).expect("kill");
        let _ = child.wait();
    }
}
