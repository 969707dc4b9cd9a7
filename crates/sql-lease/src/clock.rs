//! The host clock the SQLite statements judge expiry on.
//!
//! Every process of one host reads the same boot clock, and nothing steps it: not NTP,
//! not `date -s`, not a process's own fake wall clock. SQLite's `julianday('now')` is
//! the wall clock of the process that runs the statement, so a process whose wall clock
//! is ahead (a step, a VM resumed with a stale clock, `faketime`) would see every other
//! holder's lease as expired.

use std::sync::OnceLock;

use leasehold_core::{Error, Result};

/// The clock every process of this host shares and that no wall-clock step moves, and
/// the identity of the boot it counts from.
///
/// On Linux: `CLOCK_BOOTTIME` in milliseconds (it counts time suspended too), read
/// through the vDSO (not libc, so a preloaded fake clock does not change it), and the
/// boot id from `/proc/sys/kernel/random/boot_id`, read once per process. A record
/// written under another boot id is expired: a reboot ends every lease. Elsewhere: the
/// wall clock in Unix milliseconds and a fixed boot id, so a step of the wall clock
/// moves expiry there.
#[derive(Debug, PartialEq, Eq)]
pub struct HostClock {
    boot_id: String,
}

#[cfg(target_os = "linux")]
const BOOT_ID_FILE: &str = "/proc/sys/kernel/random/boot_id";

impl HostClock {
    /// This process's host clock (the boot id is read on the first call).
    ///
    /// # Errors
    /// [`Error::Misconfigured`] if the boot id cannot be read (Linux without `/proc`).
    pub fn get() -> Result<&'static Self> {
        static CLOCK: OnceLock<std::result::Result<HostClock, String>> = OnceLock::new();
        CLOCK
            .get_or_init(Self::read)
            .as_ref()
            .map_err(|message| Error::Misconfigured {
                message: message.clone(),
                source: None,
            })
    }

    #[cfg(target_os = "linux")]
    fn read() -> std::result::Result<Self, String> {
        let id = std::fs::read_to_string(BOOT_ID_FILE)
            .map_err(|e| format!("the SQLite store needs this boot's id from {BOOT_ID_FILE}: {e}"))?;
        let id = id.trim();
        if id.is_empty() || id.len() > 64 {
            return Err(format!("{BOOT_ID_FILE} holds {id:?}, not a boot id"));
        }
        Ok(Self { boot_id: id.to_owned() })
    }

    #[cfg(not(target_os = "linux"))]
    fn read() -> std::result::Result<Self, String> {
        Ok(Self {
            boot_id: "wall-clock".to_owned(),
        })
    }

    /// The identity of this boot (a UUID on Linux).
    pub fn boot_id(&self) -> &str {
        &self.boot_id
    }

    /// Milliseconds on the host clock: since boot on Linux, since the Unix epoch elsewhere.
    #[cfg(target_os = "linux")]
    pub fn now_ms(&self) -> i64 {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::Boottime);
        t.tv_sec.saturating_mul(1000).saturating_add(t.tv_nsec / 1_000_000)
    }

    /// Milliseconds on the host clock: since boot on Linux, since the Unix epoch elsewhere.
    #[cfg(not(target_os = "linux"))]
    pub fn now_ms(&self) -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
    }

    /// The host's real-time clock in Unix milliseconds: on Linux `CLOCK_REALTIME` read
    /// through the vDSO, so every process of the host reads the same time, whatever fake
    /// clock one of them preloads; elsewhere the system time. For deciding when
    /// something is due ([`leasehold_core::store::CasStore::store_now_ms`]), never for
    /// expiry.
    pub fn wall_ms(&self) -> u64 {
        #[cfg(target_os = "linux")]
        {
            let t = rustix::time::clock_gettime(rustix::time::ClockId::Realtime);
            let ms = t.tv_sec.saturating_mul(1000).saturating_add(t.tv_nsec / 1_000_000);
            u64::try_from(ms).unwrap_or(0)
        }
        #[cfg(not(target_os = "linux"))]
        {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_boot_clock_moves_forward_with_one_boot_id() {
        let c = HostClock::get().expect("host clock");
        assert!(!c.boot_id().is_empty());
        assert_eq!(HostClock::get().expect("again").boot_id(), c.boot_id());
        let (a, b) = (c.now_ms(), c.now_ms());
        assert!(a > 0 && b >= a, "{a} then {b}");
    }

    #[test]
    fn the_wall_clock_is_the_system_time() {
        let system = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970")
            .as_millis();
        let host = u128::from(HostClock::get().expect("host clock").wall_ms());
        assert!(host.abs_diff(system) < 1000, "host {host} ms, system {system} ms");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_boot_clock_is_the_uptime() {
        // /proc/uptime is CLOCK_BOOTTIME in seconds, read by the kernel itself.
        let up: f64 = std::fs::read_to_string("/proc/uptime")
            .expect("uptime")
            .split_whitespace()
            .next()
            .and_then(|s| s.parse().ok())
            .expect("uptime seconds");
        let ms = HostClock::get().expect("host clock").now_ms();
        let diff = (up * 1000.0 - ms as f64).abs();
        assert!(diff < 2000.0, "boot clock {ms} ms, uptime {up} s");
    }
}
