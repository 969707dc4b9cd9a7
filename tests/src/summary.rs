//! Several torture runs of one store added up: the long runs put K instances of a store
//! side by side (each its own store instance, seed and histories) and report their sum.

use std::collections::BTreeMap;
use std::fmt;

use crate::checker::Report;
use crate::torture::RunReport;

/// The sum of several runs of one store.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    /// The store's name.
    pub store: String,
    /// The runs' seeds.
    pub seeds: Vec<u64>,
    /// The runs' TTL in ms (the first run's; the long runs use one TTL per store).
    pub ttl_ms: u128,
    /// The longest run's fault phase, in seconds.
    pub elapsed_s: f64,
    /// Pause takeovers, summed.
    pub pause_takeovers: u64,
    /// Kill -9 takeovers, summed.
    pub kill_takeovers: u64,
    /// Faults by kind, summed.
    pub faults: BTreeMap<String, u64>,
    /// Every run's takeover times after kill -9, merged and sorted.
    pub takeover_after_kill_ms: Vec<u64>,
    /// Worker processes started, summed.
    pub workers_spawned: u64,
    /// The checkers' counts, summed (violations and explanations concatenated).
    pub check: Report,
}

impl Summary {
    /// Adds up `runs` (all of one store).
    pub fn of(runs: &[RunReport]) -> Self {
        let mut s = Summary::default();
        for r in runs {
            if s.store.is_empty() {
                s.store = r.kind.name().to_owned();
                s.ttl_ms = r.ttl.as_millis();
            }
            s.seeds.push(r.seed);
            s.elapsed_s = s.elapsed_s.max(r.elapsed.as_secs_f64());
            s.pause_takeovers += r.pause_takeovers;
            s.kill_takeovers += r.kill_takeovers;
            for (k, v) in &r.faults {
                *s.faults.entry(k.clone()).or_default() += v;
            }
            s.takeover_after_kill_ms.extend(&r.takeover_after_kill_ms);
            s.workers_spawned += u64::from(r.workers_spawned);
            s.check.absorb(&r.check, String::clone);
        }
        s.takeover_after_kill_ms.sort_unstable();
        s
    }

    /// Pause and kill cycles that ended in a takeover.
    pub fn cycles(&self) -> u64 {
        self.pause_takeovers + self.kill_takeovers
    }

    /// Faults of kinds starting with `prefix`.
    pub fn faults_of(&self, prefix: &str) -> u64 {
        crate::torture::sum_with_prefix(&self.faults, prefix)
    }

    /// The `q` quantile (0-1, nearest rank) of the merged takeover times.
    pub fn takeover_quantile(&self, q: f64) -> Option<u64> {
        crate::torture::quantile(&self.takeover_after_kill_ms, q)
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = &self.check;
        let seeds: Vec<String> = self.seeds.iter().map(u64::to_string).collect();
        writeln!(
            f,
            "TOTAL {} ({} runs, seeds {}; ttl {} ms; longest fault phase {:.0} s; {} workers spawned)",
            self.store,
            self.seeds.len(),
            seeds.join(","),
            self.ttl_ms,
            self.elapsed_s,
            self.workers_spawned
        )?;
        writeln!(
            f,
            "  cycles {} (pause takeovers {}, kill -9 takeovers {}); store restarts {}; proxy faults {} \
             (store {}, resource {})",
            self.cycles(),
            self.pause_takeovers,
            self.kill_takeovers,
            self.faults_of("store_restart"),
            self.faults_of("proxy_") + self.faults_of("resource_"),
            self.faults_of("proxy_"),
            self.faults_of("resource_")
        )?;
        let faults: Vec<String> = self.faults.iter().map(|(k, v)| format!("{k} {v}")).collect();
        writeln!(f, "  faults: {}", faults.join(", "))?;
        writeln!(
            f,
            "  acquire calls {}, grants {}, epochs {}, observations {}",
            c.acquires, c.grants, c.epochs, c.observations
        )?;
        writeln!(
            f,
            "  writes: sent {}, accepted {} (acknowledged {}), refused {}, unknown {}",
            c.writes_sent, c.writes_accepted, c.writes_acknowledged, c.writes_refused, c.writes_unknown
        )?;
        writeln!(
            f,
            "  stale writes: {} -> accepted {} / refused {} / unknown {}; grants below the high-water mark {} \
             (writes accepted {} / refused {} / unknown {})",
            c.stale.sent,
            c.stale.accepted,
            c.stale.refused,
            c.stale.unknown,
            c.reissued_grants,
            c.reissued.accepted,
            c.reissued.refused,
            c.reissued.unknown
        )?;
        match (self.takeover_quantile(0.5), self.takeover_quantile(0.99)) {
            (Some(p50), Some(p99)) => {
                let ttl = self.ttl_ms.max(1) as f64;
                writeln!(
                    f,
                    "  takeover after kill -9 ({} samples): p50 {p50} ms ({:.2} TTL), p99 {p99} ms ({:.2} TTL)",
                    self.takeover_after_kill_ms.len(),
                    p50 as f64 / ttl,
                    p99 as f64 / ttl
                )?;
            }
            _ => writeln!(f, "  takeover after kill -9: no samples")?,
        }
        write!(
            f,
            "  explained by data loss {}; not judged (granted across a data-loss restart) {}; violations {}",
            c.explained.len(),
            c.unjudged.len(),
            c.violations.len()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::OutcomeCounts;
    use crate::stores::StoreKind;
    use std::path::PathBuf;
    use std::time::Duration;

    fn run(seed: u64, kills: &[u64], violations: usize) -> RunReport {
        let mut faults = BTreeMap::new();
        faults.insert("pause".to_owned(), 10 + seed);
        faults.insert("proxy_drop".to_owned(), 2);
        faults.insert("store_restart_redis_kill9".to_owned(), 1);
        RunReport {
            kind: StoreKind::Redis,
            seed,
            ttl: Duration::from_millis(400),
            elapsed: Duration::from_secs(seed * 10),
            workers_spawned: 3,
            faults,
            pause_takeovers: 7,
            kill_takeovers: kills.len() as u64,
            takeover_after_kill_ms: kills.to_vec(),
            clock_jumps: 0,
            no_holder: 0,
            stalls: Vec::new(),
            missed_windows: 0,
            permits: None,
            check: Report {
                writes_accepted: 5,
                stale: OutcomeCounts {
                    sent: 2,
                    refused: 2,
                    ..OutcomeCounts::default()
                },
                violations: vec!["v".to_owned(); violations],
                ..Report::default()
            },
            out_dir: PathBuf::new(),
        }
    }

    #[test]
    fn runs_add_up() {
        let s = Summary::of(&[run(1, &[900, 300], 0), run(2, &[500], 1)]);
        assert_eq!(s.seeds, vec![1, 2]);
        assert_eq!(s.cycles(), 7 + 2 + 7 + 1);
        assert_eq!(s.faults["pause"], 11 + 12);
        assert_eq!(s.faults_of("store_restart"), 2);
        assert_eq!(s.takeover_after_kill_ms, vec![300, 500, 900]);
        assert_eq!(s.takeover_quantile(0.5), Some(500));
        assert_eq!(s.check.writes_accepted, 10);
        assert_eq!(s.check.stale.refused, 4);
        assert_eq!(s.check.violations.len(), 1);
        assert!((s.elapsed_s - 20.0).abs() < f64::EPSILON);
        let text = s.to_string();
        assert!(text.contains("cycles 17"), "{text}");
        assert!(text.contains("violations 1"), "{text}");
    }
}
