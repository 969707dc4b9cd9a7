//! `leasehold-bench`: runs the benchmarks and writes the report.
//!
//! ```text
//! leasehold-bench [--smoke] [--stores memory,postgres,...] [--out docs/PERFORMANCE.md] [--command "<as run>"]
//! ```
//!
//! The stores come from `eval "$(scripts/stores.sh env)"`; `scripts/bench.sh` does all
//! of it and is the documented way to run this.

use std::process::ExitCode;

use leasehold_bench::{Plan, StoreKind, report, run};

struct Args {
    smoke: bool,
    stores: Vec<StoreKind>,
    out: String,
    command: String,
}

fn parse() -> Result<Args, String> {
    let mut args = Args {
        smoke: false,
        stores: StoreKind::ALL.to_vec(),
        out: "docs/PERFORMANCE.md".into(),
        command: "scripts/bench.sh".into(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--smoke" => args.smoke = true,
            "--stores" => {
                let v = it.next().ok_or("--stores needs a list")?;
                args.stores = v
                    .split(',')
                    .map(|s| StoreKind::parse(s.trim()).ok_or(format!("unknown store {s:?}")))
                    .collect::<Result<_, _>>()?;
            }
            "--out" => args.out = it.next().ok_or("--out needs a path")?,
            "--command" => args.command = it.next().ok_or("--command needs a string")?,
            "-h" | "--help" => {
                return Err(
                    "usage: leasehold-bench [--smoke] [--stores memory,postgres,sqlite,etcd,dynamo,s3,redis] \
                            [--out FILE] [--command TEXT]"
                        .into(),
                );
            }
            other => return Err(format!("unknown argument {other:?} (try --help)")),
        }
    }
    Ok(args)
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
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("leasehold-bench: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
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

fn main() -> ExitCode {
    let raw: Vec<String> = std::env::args().skip(1).collect();
    if raw.first().map(String::as_str) == Some("--scale-child") {
        return scale_child(&raw[1..]);
    }
    let args = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let mut plan = if args.smoke { Plan::smoke() } else { Plan::full() };
    plan.child_exe = std::env::current_exe().ok();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("leasehold-bench: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(&plan, &args.stores)) {
        Ok(r) => {
            let md = report::render(&r, &args.command);
            if let Err(e) = std::fs::write(&args.out, md) {
                eprintln!("leasehold-bench: cannot write {}: {e}", args.out);
                return ExitCode::FAILURE;
            }
            eprintln!("leasehold-bench: wrote {} ({:.0} s)", args.out, r.elapsed.as_secs_f64());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("leasehold-bench: {e}");
            ExitCode::FAILURE
        }
    }
}
