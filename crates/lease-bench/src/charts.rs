//! The pictures of `docs/PERFORMANCE.md`, drawn from a results file ([`crate::data`])
//! as SVG next to the document (`charts/*.svg`), where a reader would rather look than
//! read: the library against the floor per store and operation, and the handoff's
//! latency and store calls against the number of waiters.
//!
//! Text is left to the viewer's fonts (SVG `<text>`), so drawing needs no font files
//! and the same results always give the same bytes.

use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::data::Results;
use crate::overhead::Op;
use crate::{Result, StoreKind, fail};

/// The charts a document's directory gets: (file name, SVG).
pub fn draw(results: &Results) -> Result<Vec<(&'static str, String)>> {
    Ok(vec![
        ("overhead.svg", overhead(results)?),
        ("handoff.svg", handoff(results)?),
    ])
}

/// Where the charts of the document `doc` go.
pub fn dir(doc: &Path) -> PathBuf {
    doc.parent().unwrap_or(Path::new(".")).join("charts")
}

/// Writes the charts of `results` into `dir` where they differ. Returns whether any did.
///
/// # Errors
/// A chart cannot be drawn, or the directory or a file cannot be written.
pub fn write(results: &Results, dir: &Path) -> Result<bool> {
    let mut changed = false;
    for (file, svg) in draw(results)? {
        let path = dir.join(file);
        if std::fs::read_to_string(&path).ok().as_deref() == Some(svg.as_str()) {
            continue;
        }
        std::fs::create_dir_all(dir).map_err(|e| fail(format!("cannot create {}: {e}", dir.display())))?;
        std::fs::write(&path, svg).map_err(|e| fail(format!("cannot write {}: {e}", path.display())))?;
        changed = true;
    }
    Ok(changed)
}

/// The charts in `dir` that are missing or differ from a drawing of `results`.
///
/// # Errors
/// A chart cannot be drawn.
pub fn stale(results: &Results, dir: &Path) -> Result<Vec<PathBuf>> {
    Ok(draw(results)?
        .into_iter()
        .map(|(file, svg)| (dir.join(file), svg))
        .filter(|(path, svg)| std::fs::read_to_string(path).ok().as_deref() != Some(svg.as_str()))
        .map(|(path, _)| path)
        .collect())
}

fn drawn<E: std::fmt::Debug>(what: &str) -> impl FnOnce(E) -> crate::BenchError + '_ {
    move |e| fail(format!("drawing the {what} chart: {e:?}"))
}

/// One colour per store, in report order; one per operation.
fn store_color(kind: StoreKind) -> RGBColor {
    const COLORS: [RGBColor; 7] = [
        RGBColor(127, 127, 127),
        RGBColor(31, 119, 180),
        RGBColor(23, 190, 207),
        RGBColor(44, 160, 44),
        RGBColor(255, 127, 14),
        RGBColor(188, 189, 34),
        RGBColor(214, 39, 40),
    ];
    let i = StoreKind::ALL.iter().position(|k| *k == kind).unwrap_or(0);
    COLORS[i % COLORS.len()]
}

fn op_color(op: Op) -> RGBColor {
    match op {
        Op::Acquire => RGBColor(31, 119, 180),
        Op::Renew => RGBColor(255, 127, 14),
        Op::Release => RGBColor(44, 160, 44),
        Op::Takeover => RGBColor(148, 103, 189),
    }
}

/// Grouped bars: library p50 ÷ floor p50, per store (groups) and operation (bars), with
/// the target's ratio as a dashed line.
fn overhead(results: &Results) -> Result<String> {
    let rows = &results.overhead;
    let top = rows
        .iter()
        .flat_map(|o| o.ops.iter().map(|r| r.p50_ratio))
        .fold(results.target.p50_ratio, f64::max)
        * 1.1;
    let groups = rows.len().max(1);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 420)).into_drawing_area();
        root.fill(&WHITE).map_err(drawn("overhead"))?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                "library p50 ÷ bare store operation p50 (lower is better)",
                ("sans-serif", 18),
            )
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(48)
            .build_cartesian_2d(0f64..groups as f64, 0f64..top)
            .map_err(drawn("overhead"))?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(groups * 2 + 1)
            .x_label_formatter(&|x| {
                // A group's label sits at its middle.
                rows.iter()
                    .enumerate()
                    .find(|(i, _)| (x - (*i as f64 + 0.5)).abs() < 1e-9)
                    .map_or_else(String::new, |(_, o)| o.store.label().to_owned())
            })
            .y_desc("p50 ratio")
            .draw()
            .map_err(drawn("overhead"))?;
        let width = 0.8 / Op::ALL.len() as f64;
        for op in Op::ALL {
            let color = op_color(op);
            let bars = rows.iter().enumerate().filter_map(|(i, o)| {
                let j = Op::ALL.iter().position(|x| *x == op)?;
                let r = o.ops.iter().find(|r| r.op == op)?;
                let x0 = i as f64 + 0.1 + j as f64 * width;
                Some(Rectangle::new(
                    [(x0, 0.0), (x0 + width * 0.9, r.p50_ratio)],
                    color.filled(),
                ))
            });
            chart
                .draw_series(bars)
                .map_err(drawn("overhead"))?
                .label(op.label())
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
        }
        let target = results.target.p50_ratio;
        chart
            .draw_series(DashedLineSeries::new(
                [(0.0, target), (groups as f64, target)],
                6,
                4,
                BLACK.stroke_width(1),
            ))
            .map_err(drawn("overhead"))?
            .label(format!("target {target:.2}"))
            .legend(|(x, y)| PathElement::new([(x, y), (x + 12, y)], BLACK));
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK)
            .draw()
            .map_err(drawn("overhead"))?;
        root.present().map_err(drawn("overhead"))?;
    }
    Ok(svg)
}

/// Two panels against the number of waiters, one line per store: the handoff's p50
/// (ms) and its store calls. Every axis is a log scale.
fn handoff(results: &Results) -> Result<String> {
    let rows = &results.handoff;
    let mut stores: Vec<StoreKind> = rows.iter().map(|h| h.store).collect();
    stores.dedup();
    let most_waiters = rows.iter().map(|h| h.waiters).max().unwrap_or(1).max(2) as f64;
    let ms = |us: f64| (us / 1000.0).max(0.01);
    let (lo, hi) = rows
        .iter()
        .map(|h| ms(h.p50_us))
        .fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let (lo, hi) = if lo <= hi { (lo / 2.0, hi * 2.0) } else { (0.01, 1.0) };
    let most_calls = rows.iter().map(|h| h.calls_per_handoff).fold(4.0, f64::max) * 1.5;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 400)).into_drawing_area();
        root.fill(&WHITE).map_err(drawn("handoff"))?;
        let (left, right) = root.split_horizontally(450);
        let p50 = |h: &Handoffs| ms(h.p50_us);
        panel(
            &left,
            "handoff p50 (ms)",
            &stores,
            results,
            lo..hi,
            p50,
            most_waiters,
            false,
        )?;
        let calls = |h: &Handoffs| h.calls_per_handoff;
        panel(
            &right,
            "store calls per handoff",
            &stores,
            results,
            1.0..most_calls,
            calls,
            most_waiters,
            true,
        )?;
        root.present().map_err(drawn("handoff"))?;
    }
    Ok(svg)
}

type Handoffs = crate::data::Handoff;

#[allow(clippy::too_many_arguments)]
fn panel(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    title: &str,
    stores: &[StoreKind],
    results: &Results,
    range: std::ops::Range<f64>,
    value: impl Fn(&Handoffs) -> f64,
    most_waiters: f64,
    legend: bool,
) -> Result<()> {
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(34)
        .y_label_area_size(44)
        .build_cartesian_2d((1f64..most_waiters).log_scale(), range.log_scale())
        .map_err(drawn("handoff"))?;
    chart
        .configure_mesh()
        .x_desc("waiters")
        .x_label_formatter(&|v| format!("{v:.0}"))
        .draw()
        .map_err(drawn("handoff"))?;
    for &kind in stores {
        let color = store_color(kind);
        let points: Vec<(f64, f64)> = results
            .handoff
            .iter()
            .filter(|h| h.store == kind)
            .map(|h| (h.waiters as f64, value(h)))
            .collect();
        chart
            .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
            .map_err(drawn("handoff"))?
            .label(kind.label())
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 12, y)], color.stroke_width(2)));
        chart
            .draw_series(points.into_iter().map(|p| Circle::new(p, 3, color.filled())))
            .map_err(drawn("handoff"))?;
    }
    if legend {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK)
            .label_font(("sans-serif", 11))
            .draw()
            .map_err(drawn("handoff"))?;
    }
    Ok(())
}
