//! Latency samples and their summaries (p50, p99, operations per second).

use std::time::{Duration, Instant};

/// Latencies of one operation, in the order they were taken.
#[derive(Debug, Clone, Default)]
pub struct Samples {
    values: Vec<Duration>,
}

impl Samples {
    /// No samples yet, room for `n`.
    pub fn with_capacity(n: usize) -> Self {
        Self {
            values: Vec::with_capacity(n),
        }
    }

    /// Adds one latency.
    pub fn push(&mut self, d: Duration) {
        self.values.push(d);
    }

    /// How many latencies were taken.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// True when nothing was measured.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The summary: percentiles by the nearest-rank method, and operations per second of
    /// one caller doing these operations back to back (1 / mean latency).
    pub fn summary(&self) -> Summary {
        let mut v = self.values.clone();
        v.sort_unstable();
        let total: Duration = v.iter().sum();
        let n = v.len();
        let rank = |permille: usize| -> Duration {
            if n == 0 {
                return Duration::ZERO;
            }
            // Nearest rank: the smallest value with at least this share of the samples at
            // or below it.
            let r = (permille * n).div_ceil(1000).max(1);
            v[r.min(n) - 1]
        };
        Summary {
            n,
            p50: rank(500),
            p99: rank(990),
            ops_per_sec: if total.is_zero() {
                0.0
            } else {
                n as f64 / total.as_secs_f64()
            },
        }
    }
}

/// What one operation cost.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// Number of samples.
    pub n: usize,
    /// Median latency.
    pub p50: Duration,
    /// 99th-percentile latency.
    pub p99: Duration,
    /// Operations per second of one caller (1 / mean latency).
    pub ops_per_sec: f64,
}

impl Summary {
    /// `self / floor` for p50 and p99 (library over raw).
    pub fn ratios(&self, floor: &Summary) -> (f64, f64) {
        (ratio(self.p50, floor.p50), ratio(self.p99, floor.p99))
    }
}

/// `a / b`, or infinity when `b` is zero.
pub fn ratio(a: Duration, b: Duration) -> f64 {
    if b.is_zero() {
        if a.is_zero() { 1.0 } else { f64::INFINITY }
    } else {
        a.as_secs_f64() / b.as_secs_f64()
    }
}

/// The median of `values` (the mean of the middle two for an even count; NaN for none).
pub fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Times one future.
pub async fn time<T, F: std::future::Future<Output = T>>(f: F) -> (Duration, T) {
    let start = Instant::now();
    let out = f.await;
    (start.elapsed(), out)
}

/// A duration in microseconds, as the results file keeps it.
pub fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// A duration of `us` microseconds in the unit that reads best in a table (µs below
/// 10 ms, ms above).
pub fn fmt_us(us: f64) -> String {
    if us < 10.0 {
        format!("{us:.1} µs")
    } else if us < 10_000.0 {
        format!("{us:.0} µs")
    } else {
        format!("{:.1} ms", us / 1000.0)
    }
}

/// Operations per second, rounded to what the noise allows.
pub fn fmt_ops(ops: f64) -> String {
    if ops >= 10_000.0 {
        format!("{:.0}k", ops / 1000.0)
    } else if ops >= 100.0 {
        format!("{ops:.0}")
    } else {
        format!("{ops:.1}")
    }
}

/// A ratio with two decimals.
pub fn fmt_ratio(r: f64) -> String {
    if r.is_finite() {
        format!("{r:.2}")
    } else {
        "∞".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let mut s = Samples::default();
        for ms in 1..=100 {
            s.push(Duration::from_millis(ms));
        }
        let sum = s.summary();
        assert_eq!(sum.n, 100);
        assert_eq!(sum.p50, Duration::from_millis(50));
        assert_eq!(sum.p99, Duration::from_millis(99));
        assert!((sum.ops_per_sec - 100.0 / 5.05).abs() < 1e-6);
    }

    #[test]
    fn table_formats() {
        assert_eq!(fmt_us(2.5), "2.5 µs");
        assert_eq!(fmt_us(4721.0), "4721 µs");
        assert_eq!(fmt_us(10_400.0), "10.4 ms");
        assert_eq!(fmt_us(micros(Duration::from_micros(1_552_000))), "1552.0 ms");
        assert_eq!(fmt_ops(12_000.0), "12k");
        assert_eq!(fmt_ops(1117.0), "1117");
        assert_eq!(fmt_ops(90.5), "90.5");
        assert_eq!(fmt_ratio(22.49), "22.49");
        assert_eq!(fmt_ratio(f64::INFINITY), "∞");
    }

    #[test]
    fn empty_summary_is_zero() {
        let s = Samples::default().summary();
        assert_eq!(s.n, 0);
        assert_eq!(s.p50, Duration::ZERO);
        assert_eq!(s.ops_per_sec, 0.0);
    }
}
