//! A child process a test talks to by lines: it prints what it does on its stdout, one
//! line each, and waits on its stdin where the test must say "go on". Killed (after a
//! `SIGCONT`, in case it is frozen) if the test ends first.

use std::io::{BufRead, BufReader, Write as _};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

use leasehold_core::testing::process;
use tokio::sync::mpsc::UnboundedReceiver;

/// A running child process and the lines it printed so far.
#[derive(Debug)]
pub struct Talker {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: UnboundedReceiver<String>,
    seen: Vec<String>,
}

impl Talker {
    /// Starts `cmd` with piped stdin and stdout; its stdout is read on a thread of its
    /// own.
    ///
    /// # Panics
    /// If the process cannot start.
    pub fn spawn(mut cmd: Command) -> Self {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
        let stdout = child.stdout.take().unwrap_or_else(|| panic!("the child's stdout"));
        let stdin = child.stdin.take();
        let (tx, lines) = tokio::sync::mpsc::unbounded_channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self {
            child,
            stdin,
            lines,
            seen: Vec::new(),
        }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Every line the process printed so far (up to the last one waited for).
    pub fn seen(&self) -> &[String] {
        &self.seen
    }

    /// Waits up to `within` for a line for which `want` holds; returns it.
    ///
    /// # Panics
    /// If the process exits first, or the time runs out (with what it printed).
    pub async fn line(&mut self, within: Duration, want: impl Fn(&str) -> bool) -> String {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            match tokio::time::timeout_at(deadline, self.lines.recv()).await {
                Ok(Some(line)) => {
                    self.seen.push(line.clone());
                    if want(&line) {
                        return line;
                    }
                }
                Ok(None) => panic!("the child exited before the line awaited; output: {:?}", self.seen),
                Err(_) => panic!("timed out waiting for a line; output: {:?}", self.seen),
            }
        }
    }

    /// Tells the process to go on (a line on its stdin, which is then closed).
    ///
    /// # Panics
    /// If it was told already, or its stdin is gone.
    pub fn go_on(&mut self) {
        let mut stdin = self.stdin.take().unwrap_or_else(|| panic!("the child's stdin"));
        stdin
            .write_all(b"go\n")
            .unwrap_or_else(|e| panic!("tell the child to go on: {e}"));
    }

    /// Waits for the process to exit, which it must do successfully.
    ///
    /// # Panics
    /// If it failed (with what it printed).
    pub fn exit_ok(&mut self) {
        let status = self.child.wait().unwrap_or_else(|e| panic!("wait for the child: {e}"));
        assert!(status.success(), "the child failed ({status}); output: {:?}", self.seen);
    }
}

impl Drop for Talker {
    fn drop(&mut self) {
        // Only a child not yet waited on: a reaped pid may already be someone else's.
        if matches!(self.child.try_wait(), Ok(None)) {
            let pid = self.child.id();
            let _ = process::resume(pid);
            let _ = process::kill9(pid);
            let _ = self.child.wait();
        }
    }
}
