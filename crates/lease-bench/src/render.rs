//! Fills the regions of `docs/PERFORMANCE.md` ([`crate::markers`]) from a results file
//! ([`crate::data`]): the tables, and the few sentences and values inside the prose
//! that come from the figures. Everything outside the regions (the headings, the
//! explanations) is written by hand and left exactly as it is.
//!
//! | region | what it holds |
//! |---|---|
//! | `text command` (block) | the command of the run the document names (and a smoke-run warning) |
//! | `text elapsed` | how long its measurements took |
//! | `table machine` | the machine it ran on |
//! | `text stores` (block) | each store's version and settings |
//! | `text target` | the overhead table's target |
//! | `table overhead STORE` | what each side sends, the overhead table, where the library's p50 goes, the rows above target |
//! | `text allowance STORE` | which p50 gaps exceed the target's absolute allowance |
//! | `table peer STORE` | heading, table and verdict of the store's peer comparison |
//! | `table scale`, `text scale-rows` | the scale table; one sentence per row |
//! | `table handoff`, `text handoff-calls STORE,STORE` | the handoff table; those stores' store calls per handoff at the most waiters |
//! | `text handoff-hold`, `text handoff-count`, `text handoff-ttl` | the handoff plan |
//! | `table contention`, `text contention-time` | the contention table; how long each configuration ran |
//!
//! Every region but `allowance`, `scale-rows` and `handoff-calls` must be in the
//! document; a region the renderer does not know, a missing or doubled one, or a
//! malformed marker is an error, and then nothing is written.

use std::fmt::Write as _;
use std::path::Path;

use crate::data::{Latency, Results, Run};
use crate::markers::{self, Region};
use crate::overhead::Op;
use crate::stats::{fmt_ops, fmt_ratio, fmt_us};
use crate::{Result, StoreKind, fail};

/// What a table region says when the results have nothing for it.
pub const NOT_MEASURED: &str = "Not measured in this run.";

/// What one region holds.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Fill {
    Command,
    Elapsed,
    Machine,
    Stores,
    Target,
    Overhead(StoreKind),
    Allowance(StoreKind),
    Peer(StoreKind),
    Scale,
    ScaleRows,
    Handoff,
    HandoffCalls(Vec<StoreKind>),
    HandoffHold,
    HandoffCount,
    HandoffTtl,
    Contention,
    ContentionTime,
}

impl Fill {
    /// The regions a document must have.
    fn required() -> Vec<Fill> {
        let mut v = vec![Fill::Command, Fill::Elapsed, Fill::Machine, Fill::Stores, Fill::Target];
        v.extend(StoreKind::ALL.map(Fill::Overhead));
        v.extend(StoreKind::ALL.into_iter().filter(|k| k.has_peer()).map(Fill::Peer));
        v.extend([
            Fill::Scale,
            Fill::Handoff,
            Fill::HandoffHold,
            Fill::HandoffCount,
            Fill::HandoffTtl,
            Fill::Contention,
            Fill::ContentionTime,
        ]);
        v
    }

    /// (kind, name, argument, block).
    fn spec(&self) -> (&'static str, &'static str, Option<String>, bool) {
        let store = |k: &StoreKind| Some(k.key().to_owned());
        match self {
            Fill::Command => ("text", "command", None, true),
            Fill::Elapsed => ("text", "elapsed", None, false),
            Fill::Machine => ("table", "machine", None, true),
            Fill::Stores => ("text", "stores", None, true),
            Fill::Target => ("text", "target", None, false),
            Fill::Overhead(k) => ("table", "overhead", store(k), true),
            Fill::Allowance(k) => ("text", "allowance", store(k), false),
            Fill::Peer(k) => ("table", "peer", store(k), true),
            Fill::Scale => ("table", "scale", None, true),
            Fill::ScaleRows => ("text", "scale-rows", None, false),
            Fill::Handoff => ("table", "handoff", None, true),
            Fill::HandoffCalls(ks) => (
                "text",
                "handoff-calls",
                Some(ks.iter().map(|k| k.key()).collect::<Vec<_>>().join(",")),
                false,
            ),
            Fill::HandoffHold => ("text", "handoff-hold", None, false),
            Fill::HandoffCount => ("text", "handoff-count", None, false),
            Fill::HandoffTtl => ("text", "handoff-ttl", None, false),
            Fill::Contention => ("table", "contention", None, true),
            Fill::ContentionTime => ("text", "contention-time", None, false),
        }
    }

    /// The opening marker of this region.
    fn marker(&self) -> String {
        let (kind, name, arg, _) = self.spec();
        markers::opening(kind, name, arg.as_deref())
    }

    /// What `region` asks for.
    fn of(region: &Region<'_>) -> std::result::Result<Fill, String> {
        let store = |a: Option<&str>| {
            let a = a.ok_or_else(|| format!("`{}` names no store", region.marker()))?;
            StoreKind::parse(a).ok_or_else(|| format!("`{}`: unknown store {a:?}", region.marker()))
        };
        let plain = |f: Fill| match region.arg {
            Some(_) => Err(format!("`{}` takes no argument", region.marker())),
            None => Ok(f),
        };
        let fill = match region.name {
            "command" => plain(Fill::Command)?,
            "elapsed" => plain(Fill::Elapsed)?,
            "machine" => plain(Fill::Machine)?,
            "stores" => plain(Fill::Stores)?,
            "target" => plain(Fill::Target)?,
            "overhead" => Fill::Overhead(store(region.arg)?),
            "allowance" => Fill::Allowance(store(region.arg)?),
            "peer" => Fill::Peer(store(region.arg)?),
            "scale" => plain(Fill::Scale)?,
            "scale-rows" => plain(Fill::ScaleRows)?,
            "handoff" => plain(Fill::Handoff)?,
            "handoff-calls" => Fill::HandoffCalls(
                region
                    .arg
                    .unwrap_or_default()
                    .split(',')
                    .map(|s| store(Some(s)))
                    .collect::<std::result::Result<_, _>>()?,
            ),
            "handoff-hold" => plain(Fill::HandoffHold)?,
            "handoff-count" => plain(Fill::HandoffCount)?,
            "handoff-ttl" => plain(Fill::HandoffTtl)?,
            "contention" => plain(Fill::Contention)?,
            "contention-time" => plain(Fill::ContentionTime)?,
            other => return Err(format!("`{}`: no region is called {other:?}", region.marker())),
        };
        let (kind, _, _, block) = fill.spec();
        if region.kind != kind {
            return Err(format!("`{}`: this region is `bench:{kind}`", region.marker()));
        }
        if region.block != block {
            return Err(format!(
                "`{}`: this region {}",
                region.marker(),
                if block {
                    "is a block: its markers stand alone on their lines"
                } else {
                    "sits inside a line of text"
                }
            ));
        }
        match &fill {
            Fill::Peer(k) if !k.has_peer() => Err(format!("`{}`: {} has no peer", region.marker(), k.label())),
            _ => Ok(fill),
        }
    }
}

/// `doc` with every region filled from `results`.
///
/// # Errors
/// Results that fail [`Results::check`], or every problem with the document's regions
/// at once (malformed, unknown, doubled or missing markers).
pub fn render(doc: &str, results: &Results) -> Result<String> {
    results.check()?;
    let regions = markers::parse(doc).map_err(problems)?;
    let mut errors = Vec::new();
    let mut fills: Vec<Fill> = Vec::new();
    for r in &regions {
        match Fill::of(r) {
            Ok(f) if fills.contains(&f) => errors.push(format!("line {}: `{}` appears twice", r.line, r.marker())),
            Ok(f) => fills.push(f),
            Err(e) => errors.push(format!("line {}: {e}", r.line)),
        }
    }
    if errors.is_empty() {
        for f in Fill::required() {
            if !fills.contains(&f) {
                let (kind, ..) = f.spec();
                errors.push(format!(
                    "missing region `{}` … `{}`: put the markers where it goes",
                    f.marker(),
                    markers::closing(kind)
                ));
            }
        }
    }
    if !errors.is_empty() {
        return Err(problems(errors));
    }
    let contents: Vec<String> = fills.iter().map(|f| fill(results, f)).collect();
    Ok(markers::fill(doc, &regions, &contents))
}

fn problems(errors: Vec<String>) -> crate::BenchError {
    fail(format!(
        "cannot render, nothing was written:\n  - {}",
        errors.join("\n  - ")
    ))
}

/// Renders the results file `json` into the document `doc`, written to `out` (by
/// default `doc` itself) when that changes it, and its charts
/// ([`crate::charts`]) into `charts/` beside it. Returns whether anything changed.
///
/// # Errors
/// A file cannot be read or written, or [`render`] fails (then nothing is written).
pub fn render_file(json: &Path, doc: &Path, out: Option<&Path>) -> Result<bool> {
    let results = Results::load(json)?;
    let text = std::fs::read_to_string(doc).map_err(|e| fail(format!("cannot read {}: {e}", doc.display())))?;
    let rendered = render(&text, &results).map_err(|e| fail(format!("{}: {e}", doc.display())))?;
    let out = out.unwrap_or(doc);
    let charts = crate::charts::write(&results, &crate::charts::dir(out))?;
    let before = if out == doc {
        Some(text)
    } else {
        std::fs::read_to_string(out).ok()
    };
    if before.as_deref() == Some(rendered.as_str()) {
        return Ok(charts);
    }
    std::fs::write(out, rendered).map_err(|e| fail(format!("cannot write {}: {e}", out.display())))?;
    Ok(true)
}

fn fill(results: &Results, f: &Fill) -> String {
    let first = &results.runs[0];
    let plan = &results.plan;
    match f {
        Fill::Command => command(results, first),
        Fill::Elapsed => first
            .elapsed_s
            .map_or_else(|| "an unrecorded time".to_owned(), |s| format!("{s:.0} s")),
        Fill::Machine => machine(first),
        Fill::Stores => stores(results),
        Fill::Target => {
            let t = &results.target;
            format!(
                "p50 ratio ≤ {:.2} or at most {:.0} µs slower, and p99 ratio ≤ {:.1}",
                t.p50_ratio, t.p50_abs_us, t.p99_ratio
            )
        }
        Fill::Overhead(k) => overhead(results, *k),
        Fill::Allowance(k) => allowance(results, *k),
        Fill::Peer(k) => peer(results, *k),
        Fill::Scale => scale(results),
        Fill::ScaleRows => scale_rows(results),
        Fill::Handoff => handoff(results),
        Fill::HandoffCalls(ks) => handoff_calls(results, ks),
        Fill::HandoffHold => format!("{} ms", plan.handoff_hold.as_millis()),
        Fill::HandoffCount => plan.handoff_max.to_string(),
        Fill::HandoffTtl => format!("{} ms", plan.handoff_ttl.as_millis()),
        Fill::Contention => contention(results),
        Fill::ContentionTime => format!("{:.1} s", plan.contention_duration.as_secs_f64()),
    }
}

fn command(results: &Results, run: &Run) -> String {
    let smoke = if results.plan.smoke {
        "> **Smoke run**: tiny counts, only to show every benchmark works. The figures mean nothing.\n\n"
    } else {
        ""
    };
    format!("{smoke}```sh\n{}\n```", run.command)
}

fn loads(v: &[f64]) -> String {
    if v.is_empty() {
        return "unknown".to_owned();
    }
    v.iter().map(|x| format!("{x:.2}")).collect::<Vec<_>>().join(" ")
}

fn machine(run: &Run) -> String {
    let Some(m) = &run.machine else {
        return "Not recorded for this run.".to_owned();
    };
    format!(
        "| | |\n|---|---|\n\
         | CPUs (`nproc`) | {} |\n\
         | CPU | {} |\n\
         | Memory | {} |\n\
         | Kernel | Linux {} |\n\
         | Store data (Postgres, etcd, SQLite files) | {} ({}) |\n\
         | Load average (1, 5, 15 min) | {} at the start, {} at the end |\n\
         | Build | {}, profile `bench-fast` (release optimisation, 16 codegen units, no LTO) |",
        m.nproc,
        m.cpu_model,
        m.memory_gib
            .map_or_else(|| "unknown".to_owned(), |g| format!("{g:.1} GiB")),
        m.kernel,
        m.stores_dir,
        m.stores_fs,
        loads(&m.load_start),
        loads(&m.load_end),
        m.rustc
    )
}

fn stores(results: &Results) -> String {
    if results.stores.is_empty() {
        return NOT_MEASURED.to_owned();
    }
    let mut o = String::new();
    for s in &results.stores {
        let _ = writeln!(o, "- **{}**: {}", s.kind.label(), s.version);
        for line in &s.settings {
            let _ = writeln!(o, "  - {line}");
        }
    }
    o
}

/// The footnote mark of a run's rows (none for the first run).
fn mark(run: usize) -> String {
    "\\*".repeat(run)
}

/// `label` with the mark of `run`.
fn marked(label: &str, run: usize) -> String {
    if run == 0 {
        label.to_owned()
    } else {
        format!("{label} {}", mark(run))
    }
}

/// "A", "A and B", "A, B and C".
fn and_list(items: &[&str]) -> String {
    match items {
        [] => String::new(),
        [one] => (*one).to_owned(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// The footnotes of the rows (store, run) of a table from runs after the first.
fn footnotes(results: &Results, rows: &[(StoreKind, usize)]) -> String {
    let mut runs: Vec<usize> = rows.iter().map(|&(_, r)| r).filter(|&r| r > 0).collect();
    runs.sort_unstable();
    runs.dedup();
    let mut o = String::new();
    for run in runs {
        let mut stores: Vec<&str> = Vec::new();
        for &(k, r) in rows {
            if r == run && !stores.contains(&k.label()) {
                stores.push(k.label());
            }
        }
        let _ = write!(
            o,
            "\n\n{} {} rows {}",
            mark(run),
            and_list(&stores),
            remeasured(results, run)
        );
    }
    o
}

/// "re-measured on DATE by `COMMAND` (...). NOTE".
fn remeasured(results: &Results, run: usize) -> String {
    let r = &results.runs[run];
    let mut o = "re-measured".to_owned();
    if let Some(d) = &r.date {
        let _ = write!(o, " on {d}");
    }
    let _ = write!(
        o,
        " by `{}` (the other rows are from the run named at the top).",
        r.command
    );
    if let Some(n) = &r.note {
        let _ = write!(o, " {n}");
    }
    o
}

/// The mark and footnote of a section that comes from one run.
fn section_run(results: &Results, run: usize) -> (String, String) {
    if run == 0 {
        (String::new(), String::new())
    } else {
        (
            format!(" {}", mark(run)),
            format!("\n\n{} These figures {}", mark(run), remeasured(results, run)),
        )
    }
}

fn latency_cells(l: &Latency) -> String {
    format!(
        "{} | {} | {}",
        fmt_us(l.p50_us),
        fmt_us(l.p99_us),
        fmt_ops(l.ops_per_sec)
    )
}

fn overhead(results: &Results, store: StoreKind) -> String {
    let Some(r) = results.overhead.iter().find(|o| o.store == store) else {
        return NOT_MEASURED.to_owned();
    };
    let mut o = String::new();
    if let Some(si) = results.stores.iter().find(|s| s.kind == store) {
        let _ = writeln!(o, "| operation | the library sends | the floor sends |\n|---|---|---|");
        for op in Op::ALL {
            let pick = |t: &crate::backends::OpTexts| match op {
                Op::Acquire => t.acquire.clone(),
                Op::Renew => t.renew.clone(),
                Op::Release => t.release.clone(),
                Op::Takeover => t.takeover.clone(),
            };
            let _ = writeln!(
                o,
                "| {} | {} | {} |",
                op.label(),
                pick(&si.library_ops),
                pick(&si.floor_ops)
            );
        }
        o.push('\n');
    }
    let _ = writeln!(
        o,
        "| operation | library p50 | library p99 | library ops/s | floor p50 | floor p99 | floor ops/s | \
         p50 ratio | p99 ratio | store calls/op | target |\n|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|"
    );
    for x in &r.ops {
        let verdict = match (x.p50_met, x.p99_met) {
            (true, true) => "met",
            (false, true) => "**p50 above**",
            (true, false) => "**p99 above**",
            (false, false) => "**p50, p99 above**",
        };
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {:.2} | {verdict} |",
            x.op.label(),
            latency_cells(&x.library),
            latency_cells(&x.floor),
            fmt_ratio(x.p50_ratio),
            fmt_ratio(x.p99_ratio),
            x.store_calls,
        );
    }
    let (run_mark, footnote) = section_run(results, r.run);
    let n = r.ops.first().map_or(0, |x| x.library.n);
    let tk = r.ops.iter().find(|x| x.op == Op::Takeover);
    let retries = tk
        .and_then(|x| x.retries)
        .filter(|t| (t.library, t.floor) != (0, 0))
        .map_or(String::new(), |t| {
            format!(
                "; untimed attempts that still found the lease held: library {}, floor {}",
                t.library, t.floor
            )
        });
    let _ = write!(
        o,
        "\n{n} samples per side for acquire, renew and release; {} per side for takeover (planted leases of {} ms{retries}).{run_mark}",
        tk.map_or(0, |x| x.library.n),
        r.takeover_ttl_ms,
    );
    let parts: Vec<String> = r
        .ops
        .iter()
        .filter_map(|x| {
            let d = x.direct?;
            Some(format!(
                "{}: the lease client {:+.0} µs (library − the store crate's `CasStore::write` alone, {}), the store \
                 operation {:+.0} µs (that call − floor)",
                x.op.label(),
                d.client_us,
                fmt_us(d.p50_us),
                d.store_op_us
            ))
        })
        .collect();
    if !parts.is_empty() {
        let _ = write!(o, "\n\nWhere the library's p50 goes — {}.", parts.join("; "));
    }
    let above: Vec<String> = r
        .ops
        .iter()
        .filter(|x| !(x.p50_met && x.p99_met))
        .map(|x| {
            format!(
                "{} (p50 ratio {}, p99 ratio {}, {} slower at p50)",
                x.op.label(),
                fmt_ratio(x.p50_ratio),
                fmt_ratio(x.p99_ratio),
                fmt_us(x.p50_gap_us)
            )
        })
        .collect();
    if above.is_empty() {
        o.push_str("\n\n**Above target**: none in this run.");
    } else {
        let _ = write!(o, "\n\n**Above target**: {}.", above.join("; "));
    }
    o.push_str(&footnote);
    o
}

fn allowance(results: &Results, store: StoreKind) -> String {
    let Some(r) = results.overhead.iter().find(|o| o.store == store) else {
        return NOT_MEASURED.to_owned();
    };
    let abs = results.target.p50_abs_us;
    let over: Vec<String> = r
        .ops
        .iter()
        .filter(|x| !x.p50_met)
        .map(|x| format!("{} ({})", x.op.label(), fmt_us(x.p50_gap_us)))
        .collect();
    if over.is_empty() {
        format!("In this run every p50 gap is within the {abs:.0} µs allowance.")
    } else {
        format!(
            "In this run the p50 gap exceeds the {abs:.0} µs allowance for {}.",
            over.join(", ")
        )
    }
}

fn peer(results: &Results, store: StoreKind) -> String {
    let Some(p) = results.peers.iter().find(|p| p.store == store) else {
        return format!("### {} against its peer\n\n{NOT_MEASURED}", store.label());
    };
    let mut o = format!("### {} against {}\n\n", store.label(), p.peer);
    let _ = writeln!(
        o,
        "| | library p50 | library p99 | library ops/s | peer p50 | peer p99 | peer ops/s | p50 ratio | p99 ratio |\n\
         |---|--:|--:|--:|--:|--:|--:|--:|--:|"
    );
    for (label, row) in [
        ("acquire", &p.acquire),
        ("release", &p.release),
        ("acquire + release", &p.cycle),
    ] {
        let _ = writeln!(
            o,
            "| {label} | {} | {} | {} | {} |",
            latency_cells(&row.library),
            latency_cells(&row.peer),
            fmt_ratio(row.p50_ratio),
            fmt_ratio(row.p99_ratio)
        );
    }
    let ratio = fmt_ratio(p.cycle.p50_ratio);
    let verdict = if p.cycle.p50_ratio > 1.0 {
        format!("**The peer is faster**: the library's acquire + release p50 is {ratio} × the peer's.")
    } else {
        format!("**The library is faster**: its acquire + release p50 is {ratio} × the peer's.")
    };
    let (run_mark, footnote) = section_run(results, p.run);
    let _ = write!(
        o,
        "\n{} cycles per side. {verdict}{run_mark}{footnote}",
        p.cycle.library.n
    );
    // What the library's side carries that the peer's does not, measured in the same
    // run; docs/PERFORMANCE.md says in prose what each table separates out.
    if let Some(w) = &p.wal_flush {
        let _ = write!(
            o,
            "\n\n| the durable write | upsert, `synchronous_commit = on`, p50 | the same upsert, off, p50 | \
             one WAL flush | library acquire + release without two flushes, p50 | ÷ peer |\n\
             |---|--:|--:|--:|--:|--:|\n\
             | {} each, alternated | {} | {} | {} | {} | {} |",
            w.durable.n,
            fmt_us(w.durable.p50_us),
            fmt_us(w.unflushed.p50_us),
            fmt_us(w.flush_p50_us),
            fmt_us(w.cycle_without_flushes_p50_us),
            fmt_ratio(w.ratio)
        );
    }
    if let Some(f) = &p.fenced_floor {
        let _ = write!(
            o,
            "\n\n| the fenced floor | acquire p50 | release p50 | acquire + release p50 | ÷ peer | library ÷ it |\n\
             |---|--:|--:|--:|--:|--:|\n\
             | in the same rounds | {} | {} | {} | {} | {} |",
            fmt_us(f.acquire.p50_us),
            fmt_us(f.release.p50_us),
            fmt_us(f.cycle.p50_us),
            fmt_ratio(f.peer_ratio),
            fmt_ratio(f.library_ratio)
        );
    }
    o
}

/// A table with a store column: `header` (and its rule line), one line per row (given
/// the row and its store's label, marked if the row is of a later run), then the
/// footnotes of the later runs.
fn store_table<T>(
    results: &Results,
    header: &str,
    rows: &[T],
    key: impl Fn(&T) -> (StoreKind, usize),
    line: impl Fn(&T, &str) -> String,
) -> String {
    if rows.is_empty() {
        return NOT_MEASURED.to_owned();
    }
    let keys: Vec<(StoreKind, usize)> = rows.iter().map(key).collect();
    let mut o = header.to_owned();
    for (row, &(store, run)) in rows.iter().zip(&keys) {
        o.push('\n');
        o.push_str(&line(row, &marked(store.label(), run)));
    }
    o + &footnotes(results, &keys)
}

fn scale(results: &Results) -> String {
    store_table(
        results,
        "| store | leases | TTL (renewal every) | time to grant all | CPU share of one core | memory per lease | \
         renewals/s | expected renewals/s | measured ÷ expected | store requests/s | leases lost |\n\
         |---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
        &results.scale,
        |s| (s.store, s.run),
        |s, store| {
            format!(
                "| {store} | {} | {:.1} s ({:.1} s) | {:.1} s | {:.2} % | {:.0} B | {:.0} | {:.0} | {:.3} | {:.0} | {} |",
                s.leases,
                s.ttl_s,
                s.renew_every_s,
                s.grant_all_s,
                s.cpu_percent,
                s.memory_per_lease_bytes,
                renewals_per_sec(s),
                s.expected_ops_per_sec,
                s.measured_over_expected,
                s.store_ops_per_sec,
                s.lost
            )
        },
    )
}

/// Leases renewed per second: as many as requests in runs before batched renewals.
fn renewals_per_sec(s: &crate::data::Scale) -> f64 {
    s.renewals_per_sec.unwrap_or(s.store_ops_per_sec)
}

fn scale_rows(results: &Results) -> String {
    if results.scale.is_empty() {
        return NOT_MEASURED.to_owned();
    }
    let sentences: Vec<String> = results
        .scale
        .iter()
        .map(|s| {
            format!(
                "{} with {} leases: {:.2} % of one core for {:.0} renewals per second ({:.1} µs of CPU per \
                 renewal, {:.0} store requests per second), {:.0} bytes per held lease, {:.3} × the expected \
                 renewals{}.",
                s.store.label(),
                s.leases,
                s.cpu_percent,
                renewals_per_sec(s),
                s.cpu_per_renewal_us,
                s.store_ops_per_sec,
                s.memory_per_lease_bytes,
                s.measured_over_expected,
                match s.lost {
                    0 => ", no lease lost".to_owned(),
                    n => format!(", {n} leases lost"),
                }
            )
        })
        .collect();
    sentences.join(" ")
}

fn handoff(results: &Results) -> String {
    store_table(
        results,
        "| store | waiters wake by | N waiting | handoffs | p50 | p99 | store calls / handoff | waits / handoff |\n\
         |---|---|--:|--:|--:|--:|--:|--:|",
        &results.handoff,
        |h| (h.store, h.run),
        |h, store| {
            format!(
                "| {store} | {} | {} | {} | {} | {} | {:.1} | {:.1} |",
                h.wakes_by,
                h.waiters,
                h.handoffs,
                fmt_us(h.p50_us),
                fmt_us(h.p99_us),
                h.calls_per_handoff,
                h.waits_per_handoff
            )
        },
    )
}

fn handoff_calls(results: &Results, stores: &[StoreKind]) -> String {
    let most = results.handoff.iter().map(|h| h.waiters).max().unwrap_or(0);
    let calls: Vec<String> = stores
        .iter()
        .filter_map(|&k| {
            let h = results.handoff.iter().find(|h| h.store == k && h.waiters == most)?;
            Some(format!("{} {:.1}", k.label(), h.calls_per_handoff))
        })
        .collect();
    if calls.is_empty() {
        "not measured in this run".to_owned()
    } else {
        format!("with {most} waiters: {}", calls.join(", "))
    }
}

fn contention(results: &Results) -> String {
    store_table(
        results,
        "| store | M workers × K names | grants/s | refused attempts per grant | store round trips per grant | \
         errors |\n|---|---|--:|--:|--:|--:|",
        &results.contention,
        |c| (c.store, c.run),
        |c, store| {
            format!(
                "| {store} | {} × {}{} | {:.0} | {:.2} | {:.2} | {} |",
                c.workers,
                c.names,
                if c.names == 1 { " (hot)" } else { "" },
                c.grants_per_sec,
                c.refused_per_grant,
                c.trips_per_grant,
                c.errors
            )
        },
    )
}
