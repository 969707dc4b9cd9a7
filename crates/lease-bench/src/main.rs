//! `leasehold-bench`: runs the benchmarks into a results file, and renders a results
//! file into the tables of a document and its charts (`charts/*.svg` beside it).
//!
//! ```text
//! leasehold-bench [run] [--smoke] [--stores memory,postgres,...] [--command "<as run>"]
//!                       [--json docs/performance.json] [--merge]
//! leasehold-bench render docs/performance.json docs/PERFORMANCE.md [--out FILE | --check]
//! leasehold-bench redis-server-time [ROUNDS] [PAIRS]
//! leasehold-bench client-cpu STORE [ROUNDS] [PAIRS] [--idle-us N]
//! ```
//!
//! The stores come from `eval "$(scripts/stores.sh env)"`; `scripts/bench.sh` does all
//! of it (run, then render) and is the documented way to run this.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use leasehold_bench::data::{Results, Target};
use leasehold_bench::{Plan, StoreKind, charts, render, run};

const USAGE: &str = "usage: leasehold-bench [run] [--smoke] [--stores memory,postgres,sqlite,mysql,etcd,zookeeper,dynamo,s3,redis] \
                     [--command TEXT] [--json FILE] [--merge]\n       \
                     leasehold-bench render RESULTS.json DOC.md [--out FILE | --check]\n       \
                     leasehold-bench redis-server-time [ROUNDS] [PAIRS]\n       \
                     leasehold-bench client-cpu STORE [ROUNDS] [PAIRS] [--idle-us N]";

struct RunArgs {
    smoke: bool,
    stores: Vec<StoreKind>,
    json: PathBuf,
    merge: bool,
    command: String,
}

fn parse_run(args: &[String]) -> Result<RunArgs, String> {
    let mut out = RunArgs {
        smoke: false,
        stores: StoreKind::ALL.to_vec(),
        json: "docs/performance.json".into(),
        merge: false,
        command: "scripts/bench.sh".into(),
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = |what: &str| it.next().cloned().ok_or(format!("{a} needs {what}"));
        match a.as_str() {
            "--smoke" => out.smoke = true,
            "--merge" => out.merge = true,
            "--stores" => {
                out.stores = value("a list")?
                    .split(',')
                    .map(|s| StoreKind::parse(s.trim()).ok_or(format!("unknown store {s:?}")))
                    .collect::<Result<_, _>>()?;
            }
            "--json" => out.json = value("a path")?.into(),
            "--command" => out.command = value("a string")?,
            "-h" | "--help" => return Err(USAGE.into()),
            other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
        }
    }
    Ok(out)
}

fn runtime() -> Result<tokio::runtime::Runtime, ExitCode> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            eprintln!("leasehold-bench: cannot start the runtime: {e}");
            ExitCode::FAILURE
        })
}

fn scale_child(args: &[String]) -> ExitCode {
    let parsed = (|| -> Result<(StoreKind, usize, u64), String> {
        let kind = args
            .first()
            .and_then(|s| StoreKind::parse(s))
            .ok_or("--scale-child STORE LEASES TTL_MS")?;
        let leases = args.get(1).and_then(|s| s.parse().ok()).ok_or("LEASES")?;
        let ttl = args.get(2).and_then(|s| s.parse().ok()).ok_or("TTL_MS")?;
        Ok((kind, leases, ttl))
    })();
    let (kind, leases, ttl) = match parsed {
        Ok(p) => p,
        Err(e) => {
            eprintln!("leasehold-bench: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match runtime() {
        Ok(r) => r,
        Err(code) => return code,
    };
    match runtime.block_on(leasehold_bench::scale_child(
        kind,
        leases,
        std::time::Duration::from_millis(ttl),
    )) {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("leasehold-bench: scale child: {e}");
            ExitCode::FAILURE
        }
    }
}

fn measure(args: &[String]) -> ExitCode {
    let args = match parse_run(args) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let mut plan = if args.smoke { Plan::smoke() } else { Plan::full() };
    plan.child_exe = std::env::current_exe().ok();
    // Check what the run merges into before measuring for minutes.
    let earlier = if args.merge {
        match Results::load(&args.json).and_then(|r| r.can_merge(&plan, &Target::CURRENT).map(|()| r)) {
            Ok(r) => Some(r),
            Err(e) => {
                eprintln!("leasehold-bench: --merge into {}: {e}", args.json.display());
                return ExitCode::FAILURE;
            }
        }
    } else {
        None
    };
    let runtime = match runtime() {
        Ok(r) => r,
        Err(code) => return code,
    };
    let report = match runtime.block_on(run(&plan, &args.stores)) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("leasehold-bench: {e}");
            return ExitCode::FAILURE;
        }
    };
    let results = Results::from_report(&report, &args.command);
    let results = match earlier.map_or(Ok(results.clone()), |e| e.merge(results)) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("leasehold-bench: --merge: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Err(e) = results.save(&args.json) {
        eprintln!("leasehold-bench: {e}");
        return ExitCode::FAILURE;
    }
    eprintln!(
        "leasehold-bench: wrote {} ({:.0} s)",
        args.json.display(),
        report.elapsed.as_secs_f64()
    );
    ExitCode::SUCCESS
}

fn render_cmd(args: &[String]) -> ExitCode {
    let mut paths: Vec<&Path> = Vec::new();
    let (mut out, mut check) = (None, false);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--check" => check = true,
            "--out" => match it.next() {
                Some(p) => out = Some(Path::new(p)),
                None => {
                    eprintln!("--out needs a path\n{USAGE}");
                    return ExitCode::from(2);
                }
            },
            "-h" | "--help" => {
                eprintln!("{USAGE}");
                return ExitCode::from(2);
            }
            p if !p.starts_with('-') => paths.push(Path::new(p)),
            other => {
                eprintln!("unknown argument {other:?}\n{USAGE}");
                return ExitCode::from(2);
            }
        }
    }
    if out.is_some() && check {
        eprintln!("render: --out and --check do not go together\n{USAGE}");
        return ExitCode::from(2);
    }
    let &[json, doc] = paths.as_slice() else {
        eprintln!("render needs a results file and a document\n{USAGE}");
        return ExitCode::from(2);
    };
    if check {
        let checked = Results::load(json).and_then(|r| {
            let text = std::fs::read_to_string(doc)?;
            let stale = charts::stale(&r, &charts::dir(doc))?;
            for path in &stale {
                eprintln!(
                    "leasehold-bench: {} is not drawn from {}",
                    path.display(),
                    json.display()
                );
            }
            Ok(render::render(&text, &r)? == text && stale.is_empty())
        });
        return match checked {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => {
                eprintln!(
                    "leasehold-bench: {} is not rendered from {}: run `leasehold-bench render {} {}`",
                    doc.display(),
                    json.display(),
                    json.display(),
                    doc.display()
                );
                ExitCode::FAILURE
            }
            Err(e) => {
                eprintln!("leasehold-bench: {}: {e}", doc.display());
                ExitCode::FAILURE
            }
        };
    }
    match render::render_file(json, doc, out) {
        Ok(changed) => {
            let target = out.unwrap_or(doc).display();
            if changed {
                eprintln!("leasehold-bench: rendered {} into {target}", json.display());
            } else {
                eprintln!("leasehold-bench: {target} already shows {}", json.display());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("leasehold-bench: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The smallest and the largest of `values`.
fn range(values: &[f64]) -> (f64, f64) {
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(0.0, f64::max);
    (lo, hi)
}

/// `[ROUNDS] [PAIRS]`, each a positive count, or `defaults`; a usage error otherwise.
fn rounds_and_pairs(args: &[String], defaults: (usize, usize)) -> Result<(usize, usize), ExitCode> {
    let number = |i: usize, default: usize| match args.get(i) {
        None => Ok(default),
        Some(a) => a
            .parse::<usize>()
            .ok()
            .filter(|&n| n > 0)
            .ok_or(format!("{a:?} is not a count\n{USAGE}")),
    };
    match (number(0, defaults.0), number(1, defaults.1)) {
        (Ok(r), Ok(p)) if args.len() <= 2 => Ok((r, p)),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("{e}");
            Err(ExitCode::from(2))
        }
        _ => {
            eprintln!("{USAGE}");
            Err(ExitCode::from(2))
        }
    }
}

/// `client-cpu STORE [ROUNDS] [PAIRS] [--idle-us N]` (default 10 rounds of 1,000 pairs,
/// no idle time): the process CPU per operation of the library and of the store crate's
/// calls alone, and the p50 of their pairs and operations
/// ([`leasehold_bench::client_cpu`]).
fn client_cpu(args: &[String]) -> ExitCode {
    let Some(kind) = args.first().and_then(|s| StoreKind::parse(s)) else {
        eprintln!("client-cpu needs a store\n{USAGE}");
        return ExitCode::from(2);
    };
    let mut counts = args[1..].to_vec();
    let mut idle = Duration::ZERO;
    if let Some(i) = counts.iter().position(|a| a == "--idle-us") {
        let Some(us) = counts.get(i + 1).and_then(|n| n.parse::<u64>().ok()) else {
            eprintln!("--idle-us needs a number of microseconds\n{USAGE}");
            return ExitCode::from(2);
        };
        idle = Duration::from_micros(us);
        counts.drain(i..i + 2);
    }
    let (rounds, pairs) = match rounds_and_pairs(&counts, (10, 1_000)) {
        Ok(counts) => counts,
        Err(code) => return code,
    };
    let runtime = match runtime() {
        Ok(r) => r,
        Err(code) => return code,
    };
    let measured = runtime.block_on(async {
        let backend = leasehold_bench::backends::open(kind, &format!("cpu{}", std::process::id())).await?;
        leasehold_bench::client_cpu::measure(&backend, rounds, pairs, idle).await
    });
    match measured {
        Ok(sides) => {
            let how = if idle.is_zero() {
                "; process CPU per operation".to_owned()
            } else {
                format!(", the thread idle {} µs before each operation", idle.as_micros())
            };
            println!(
                "{}: {rounds} rounds of {pairs} acquire + release pairs per side{how}:",
                kind.label()
            );
            let p50 = |s: &leasehold_bench::stats::Samples| leasehold_bench::stats::micros(s.summary().p50);
            for side in &sides {
                let latency = format!(
                    "p50 pair {:.1} µs, acquire {:.1} µs, release {:.1} µs",
                    p50(&side.pairs),
                    p50(&side.acquires),
                    p50(&side.releases)
                );
                if side.cpu_per_op_us.is_empty() {
                    println!("  {:40} {latency}", side.label);
                } else {
                    let (lo, hi) = range(&side.cpu_per_op_us);
                    println!(
                        "  {:40} median {:6.2} µs  (rounds {lo:.2} to {hi:.2}); {latency}",
                        side.label,
                        side.median_cpu_us(),
                    );
                }
            }
            if sides[0].cpu_per_op_us.is_empty() {
                println!(
                    "  the lease client: {:+.1} µs per acquire, {:+.1} µs per release (p50; CPU not read with --idle-us)",
                    p50(&sides[0].acquires) - p50(&sides[1].acquires),
                    p50(&sides[0].releases) - p50(&sides[1].releases)
                );
            } else {
                println!(
                    "  the lease client: {:+.2} µs of CPU per operation",
                    sides[0].median_cpu_us() - sides[1].median_cpu_us()
                );
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("leasehold-bench: client-cpu: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `redis-server-time [ROUNDS] [PAIRS]` (default 15 rounds of 2,000 pairs): the server
/// time per operation of each side, median and range over the rounds
/// ([`leasehold_bench::backends::redis_server_time`]).
fn redis_server_time(args: &[String]) -> ExitCode {
    let (rounds, pairs) = match rounds_and_pairs(args, (15, 2_000)) {
        Ok(counts) => counts,
        Err(code) => return code,
    };
    let runtime = match runtime() {
        Ok(r) => r,
        Err(code) => return code,
    };
    match runtime.block_on(leasehold_bench::backends::redis_server_time::measure(rounds, pairs)) {
        Ok(sides) => {
            println!("Redis server time per operation, {rounds} rounds of {pairs} acquire + release pairs per side:");
            for side in &sides {
                let (lo, hi) = range(&side.per_op_us);
                let (clo, chi) = range(&side.client_cpu_us);
                println!(
                    "  {:56} median {:5.1} µs  (rounds {lo:.1} to {hi:.1}); client CPU median {:5.1} µs (rounds {clo:.1} to {chi:.1})",
                    side.label,
                    side.median_us(),
                    side.median_client_cpu_us()
                );
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("leasehold-bench: redis-server-time: {e}");
            ExitCode::FAILURE
        }
    }
}

fn main() -> ExitCode {
    let raw: Vec<String> = std::env::args().skip(1).collect();
    match raw.first().map(String::as_str) {
        Some("--scale-child") => scale_child(&raw[1..]),
        Some("render") => render_cmd(&raw[1..]),
        Some("run") => measure(&raw[1..]),
        Some("redis-server-time") => redis_server_time(&raw[1..]),
        Some("client-cpu") => client_cpu(&raw[1..]),
        _ => measure(&raw),
    }
}
