//! The machine a run measured on, and this process's CPU time and resident memory
//! (read from `/proc`, Linux only).

use std::sync::OnceLock;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// What the report says about the machine (in the results file as it is).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Machine {
    /// Logical CPUs this process may use.
    pub nproc: usize,
    /// `model name` from `/proc/cpuinfo`.
    pub cpu_model: String,
    /// `MemTotal` from `/proc/meminfo`, in GiB (`None`: unreadable).
    pub memory_gib: Option<f64>,
    /// The kernel release.
    pub kernel: String,
    /// `rustc --version` (the compiler on the PATH).
    pub rustc: String,
    /// Where the stores keep their data (`LEASEHOLD_STORES_DIR`).
    pub stores_dir: String,
    /// The filesystem and device of [`stores_dir`](Machine::stores_dir).
    pub stores_fs: String,
    /// The 1, 5 and 15 minute load averages when the run started.
    pub load_start: Vec<f64>,
    /// The same at the end of the run.
    pub load_end: Vec<f64>,
}

impl Machine {
    /// Reads the machine's description (and the load average now as both the start and
    /// the end; the run sets [`load_end`](Machine::load_end) when it ends).
    pub fn probe() -> Self {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find_map(|l| l.strip_prefix("model name"))
            .map(|v| v.trim_start_matches([' ', '\t', ':']).trim().to_owned())
            .unwrap_or_else(|| "unknown".to_owned());
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let memory_gib = meminfo
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map(|kb| kb as f64 / 1024.0 / 1024.0);
        let stores_dir = std::env::var("LEASEHOLD_STORES_DIR").ok();
        let load = load_average();
        Self {
            nproc: std::thread::available_parallelism().map_or(1, |n| n.get()),
            cpu_model,
            memory_gib,
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .map(|s| s.trim().to_owned())
                .unwrap_or_default(),
            rustc: command_output("rustc", &["--version"]).unwrap_or_else(|| "unknown".to_owned()),
            stores_fs: stores_dir
                .as_deref()
                .map_or_else(|| "unknown".to_owned(), filesystem_of),
            stores_dir: stores_dir.unwrap_or_else(|| "unknown".to_owned()),
            load_start: load.clone(),
            load_end: load,
        }
    }
}

/// The filesystem type and device of the mount holding `path` (from `/proc/mounts`).
pub fn filesystem_of(path: &str) -> String {
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    mounts
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (dev, point, fs) = (f.first()?, f.get(1)?, f.get(2)?);
            let inside = path == *point || path.starts_with(&format!("{}/", point.trim_end_matches('/')));
            inside.then(|| (point.len(), format!("{fs} on {dev}")))
        })
        .max_by_key(|(len, _)| *len)
        .map_or_else(|| "filesystem unknown".to_owned(), |(_, d)| d)
}

/// The 1, 5 and 15 minute load averages (empty when `/proc/loadavg` is unreadable).
pub fn load_average() -> Vec<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).filter_map(|v| v.parse().ok()).collect())
        .unwrap_or_default()
}

/// The first line a command prints, if it runs.
pub fn command_output(cmd: &str, args: &[&str]) -> Option<String> {
    let out = std::process::Command::new(cmd).args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    String::from_utf8(out.stdout)
        .ok()
        .and_then(|s| s.lines().next().map(|l| l.trim().to_owned()))
}

fn clock_ticks_per_sec() -> u64 {
    static TCK: OnceLock<u64> = OnceLock::new();
    *TCK.get_or_init(|| {
        command_output("getconf", &["CLK_TCK"])
            .and_then(|s| s.parse().ok())
            .filter(|&t| t > 0)
            .unwrap_or(100)
    })
}

/// CPU time (user + system) this process has used so far, from `/proc/self/stat`.
pub fn cpu_time() -> Duration {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return Duration::ZERO;
    };
    // The command name (field 2) may contain spaces: count fields after its ')'.
    let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
        return Duration::ZERO;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After ')': state is field 3, so utime (14) and stime (15) are at 11 and 12.
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    let total = ticks(11) + ticks(12);
    let tck = clock_ticks_per_sec();
    Duration::from_secs(total / tck) + Duration::from_nanos((total % tck) * 1_000_000_000 / tck)
}

/// CPU time of this process's live threads in nanoseconds resolution: the sum of the
/// first field of `/proc/self/task/*/schedstat`. Threads that exited are not counted, so
/// compare it with [`cpu_time`] (which counts them, in clock ticks) over a window.
pub fn cpu_time_fine() -> Duration {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Duration::ZERO;
    };
    let ns: u64 = tasks
        .filter_map(|t| t.ok())
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next().and_then(|v| v.parse::<u64>().ok()))
        .sum();
    Duration::from_nanos(ns)
}

/// CPU used between two readings of ([`cpu_time`], [`cpu_time_fine`]): the fine one
/// when both agree within two clock ticks (no thread exited in between), else the
/// coarse one.
pub fn cpu_between(before: (Duration, Duration), after: (Duration, Duration)) -> Duration {
    let coarse = after.0.saturating_sub(before.0);
    let fine = after.1.saturating_sub(before.1);
    let tick = Duration::from_secs(1) / u32::try_from(clock_ticks_per_sec()).unwrap_or(100);
    if fine.abs_diff(coarse) <= tick * 2 {
        fine
    } else {
        coarse
    }
}

/// Both CPU readings, for [`cpu_between`].
pub fn cpu_now() -> (Duration, Duration) {
    (cpu_time(), cpu_time_fine())
}

/// Resident memory of this process in bytes (`VmRSS`).
pub fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_process() {
        assert!(rss_bytes() > 0);
        let before = cpu_time();
        let mut x = 0u64;
        let start = std::time::Instant::now();
        // Spin until the kernel has charged a tick (10 ms) to this process.
        while cpu_time() == before && start.elapsed() < Duration::from_secs(5) {
            for _ in 0..10_000 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            }
        }
        assert!(x != 1);
        assert!(cpu_time() > before, "spinning shows as CPU time");
        let fine = cpu_time_fine();
        assert!(fine > Duration::ZERO, "schedstat is readable");
        let later = cpu_now();
        assert!(cpu_between((before, fine), later) < Duration::from_secs(60));
        let m = Machine::probe();
        assert!(m.nproc >= 1);
        assert_ne!(m.cpu_model, "");
        assert_eq!(m.load_start.len(), 3, "three load averages");
    }
}
