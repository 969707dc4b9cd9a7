//! The exit codes of `leasehold`, one constant each.
//!
//! `leasehold run` passes its command's own exit status through, so these codes were
//! chosen from the BSD `sysexits.h` range (64–78), which ordinary programs rarely use,
//! away from 1 and 2 (the usual failure codes), 126 and 127 (the shell's "cannot run" and
//! "not found"), and 128 + N (killed by signal N). A command may still exit with one of
//! them itself: whenever `leasehold` exits with a code of its own, it has printed a
//! line starting with `leasehold:` on stderr first (more may follow), which a
//! command's own exit does not produce.

/// Everything went well (`show`, `list`, `release`, `stores check`; `observe` stopped by SIGINT or SIGTERM, or
/// after `--count` lines), or stdout's reader went away (a closed pipe); for `run` and
/// `elect`, the command exited with 0.
pub(crate) const OK: u8 = 0;

/// Bad usage (`EX_USAGE`): an unknown option, a bad store URL, an invalid lease name,
/// TTL or duration. Nothing was sent to the store.
pub(crate) const USAGE: u8 = 64;

/// The store failed (`EX_UNAVAILABLE`): it cannot be reached, does not answer in time,
/// is not set up (a missing table or bucket), refused the credentials, or holds a
/// corrupt record.
pub(crate) const STORE: u8 = 69;

/// The lease is held by someone else (`EX_TEMPFAIL`): `run` without `--wait` found it
/// held, or the `--timeout` of `run` or `elect` ran out; `release` found it changing under it. Trying again
/// later may succeed.
pub(crate) const HELD: u8 = 75;

/// Stdout could not be written (`EX_IOERR`): a full disk, an I/O error. A reader that
/// went away (a closed pipe, `leasehold list | head -1`) is not an error: that ends the
/// command quietly with [`OK`].
pub(crate) const OUTPUT: u8 = 74;

/// The lease (for `elect`, leadership) was lost while the command ran (it expired, was taken over, or the store
/// stopped answering renewals): the command was sent SIGTERM, then SIGKILL after
/// `--grace`. Also when it was lost while what the command left running in its group
/// was being stopped, after the command exited.
pub(crate) const LOST: u8 = 76;

/// The command was found but could not be started (as in a shell).
pub(crate) const CANNOT_EXECUTE: u8 = 126;

/// The command was not found (as in a shell).
pub(crate) const NOT_FOUND: u8 = 127;

/// Added to a signal's number when the command (or `leasehold`, while waiting for the
/// lease) was ended by that signal, as in a shell: 129 for SIGHUP, 130 for SIGINT, 131
/// for SIGQUIT, 143 for SIGTERM.
pub(crate) const SIGNAL_BASE: u8 = 128;

/// The exit-code table printed by `--help` (`after_help`) and copied in the README.
pub(crate) const TABLE: &str = "\
Exit codes:
  N      run, elect: the command's own exit code, passed through (128+N if killed by signal N;
         killed by SIGHUP, SIGINT or SIGTERM, leasehold then ends by that signal too)
  128+N  run, elect: signal N (SIGHUP, SIGINT, SIGQUIT, SIGTERM) came before the command started
         (SIGHUP, SIGINT, SIGTERM: leasehold ends by that signal)
  0      show, list, release, stores check: done; observe: stopped by SIGINT/SIGTERM, or --count lines printed;
         and for them all when stdout's reader went away (a closed pipe: 'leasehold list | head -1')
  64     bad usage: unknown option, no subcommand, bad store URL, invalid lease name, TTL or duration,
         a TTL under 1s for run or elect, a --grace the TTL cannot hold, --count 0; no --store with
         neither XDG_DATA_HOME nor HOME set (to an absolute path); two different URLs for stores check
  69     store error: unreachable, no answer in time, not set up, corrupt record, cannot list; also a
         --timeout that ran out while the store kept failing; and what leasehold could not set up for
         itself (its runtime, its signal handlers, the default store's directory)
  74     cannot write to stdout (a full disk, an I/O error)
  75     lease held by someone else (run without --wait, or --timeout ran out while it was held);
         release --force: the record kept changing under it
  76     lease (or leadership) lost while the command ran (it was sent SIGTERM, then SIGKILL after --grace),
         or while what it left running in its group was being stopped after it exited
  126    the command could not be started (or waited for)
  127    the command was not found
Whenever leasehold exits with a code of its own, it prints a line starting with
'leasehold:' on stderr first.";

/// The signal `leasehold` ends by once it is done, if any (0: none): see [`ended_by`].
static RERAISE: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

/// Records that signal `signal` ended the command (or the wait for the lease): if it is
/// one a calling shell acts on (SIGHUP, SIGINT, SIGTERM), `leasehold` ends by that
/// signal too once it has released the lease ([`reraise`]), so that a script it runs in
/// stops as it would for the command itself (a shell goes on with its next line after a
/// child that caught SIGINT and exited 130, and stops after one SIGINT killed), and a
/// service manager sees the death by signal it sent rather than a failure code.
pub(crate) fn ended_by(signal: u8) {
    if [1, 2, 15].contains(&signal) {
        RERAISE.store(signal, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Ends the process by the signal recorded for `code` ([`ended_by`]), with its default
/// action; returns if there is none (or it could not be raised): then the caller exits
/// with `code`, which is 128 + N for it anyway.
pub(crate) fn reraise(code: u8) {
    let signal = RERAISE.load(std::sync::atomic::Ordering::SeqCst);
    if signal != 0 && code == SIGNAL_BASE.saturating_add(signal) {
        let _ = signal_hook::low_level::emulate_default_handler(i32::from(signal));
    }
}
