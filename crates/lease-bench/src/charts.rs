//! The pictures of `docs/PERFORMANCE.md`, drawn from a results file ([`crate::data`])
//! as SVG next to the document (`charts/*.svg`), where a reader would rather look than
//! read: the library against the floor per store and operation, and the handoff's
//! latency and store calls against the number of waiters.
//!
//! Text is left to the viewer's fonts (SVG `<text>`), so drawing needs no font files
//! and the same results always give the same bytes.

use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::element::DashedPathElement;
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

/// One colour per store, each its own (the ten-colour palette of matplotlib and
/// Tableau, less its pink).
fn store_color(kind: StoreKind) -> RGBColor {
    match kind {
        StoreKind::Memory => RGBColor(127, 127, 127),
        StoreKind::Postgres => RGBColor(31, 119, 180),
        StoreKind::Sqlite => RGBColor(23, 190, 207),
        StoreKind::MySql => RGBColor(44, 160, 44),
        StoreKind::Etcd => RGBColor(255, 127, 14),
        StoreKind::ZooKeeper => RGBColor(188, 189, 34),
        StoreKind::Dynamo => RGBColor(148, 103, 189),
        StoreKind::S3 => RGBColor(140, 86, 75),
        StoreKind::Redis => RGBColor(214, 39, 40),
    }
}

/// One colour per operation.
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
                    bar_fill(color, r.p50_met),
                ))
            });
            chart
                .draw_series(bars)
                .map_err(drawn("overhead"))?
                .label(op.label())
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
        }
        let target = &results.target;
        chart
            .draw_series(DashedLineSeries::new(
                [(0.0, target.p50_ratio), (groups as f64, target.p50_ratio)],
                6,
                4,
                BLACK.stroke_width(1),
            ))
            .map_err(drawn("overhead"))?
            .label(format!(
                "target: {:.2} ×, or {:.0} µs slower",
                target.p50_ratio, target.p50_abs_us
            ))
            .legend(|(x, y)| DashedPathElement::new([(x, y), (x + 14, y)], 4, 3, BLACK));
        // What a bar's shade says: a pale one meets the p50 target (a bar above the line
        // is then within the µs allowance: a floor of a few µs makes a large ratio).
        for (met, says) in [(false, "solid: p50 target missed"), (true, "pale: p50 target met")] {
            chart
                .draw_series(std::iter::empty::<Rectangle<(f64, f64)>>())
                .map_err(drawn("overhead"))?
                .label(says)
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], bar_fill(KEY_GREY, met)));
        }
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

/// The most store calls a handoff may cost on a store that pushes its changes, however
/// many wait (the handoff target stated in docs/PERFORMANCE.md, section 4).
const HANDOFF_CALLS_TARGET: f64 = 4.0;

/// How much of its colour a bar that meets the p50 target keeps.
const PALE: f64 = 0.35;
/// The shade key's colour.
const KEY_GREY: RGBColor = RGBColor(90, 90, 90);

/// A bar's fill: its colour, pale if its row meets the p50 target.
fn bar_fill(color: RGBColor, met: bool) -> ShapeStyle {
    if met { color.mix(PALE).filled() } else { color.filled() }
}

/// Two panels against the number of waiters, one line per store: the handoff's p50
/// (ms) and its store calls. Every axis is a log scale; a store that polls (no push
/// from the store) is a dashed line.
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
    // Room above the lines for the legend.
    let most_calls = rows
        .iter()
        .map(|h| h.calls_per_handoff)
        .fold(HANDOFF_CALLS_TARGET, f64::max)
        * 4.0;
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
            None,
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
            Some(HANDOFF_CALLS_TARGET),
            true,
        )?;
        root.present().map_err(drawn("handoff"))?;
    }
    Ok(svg)
}

type Handoffs = crate::data::Handoff;

/// One panel of the handoff chart: `value` of each store's rows against the number of
/// waiters, in `range`, with a dashed `target` line and the legend if asked.
#[allow(clippy::too_many_arguments)]
fn panel(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    title: &str,
    stores: &[StoreKind],
    results: &Results,
    range: std::ops::Range<f64>,
    value: impl Fn(&Handoffs) -> f64,
    most_waiters: f64,
    target: Option<f64>,
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
        let line = color.stroke_width(2);
        let rows = || results.handoff.iter().filter(|h| h.store == kind);
        let points: Vec<(f64, f64)> = rows().map(|h| (h.waiters as f64, value(h))).collect();
        if rows().any(Handoffs::polls) {
            chart
                .draw_series(DashedLineSeries::new(points.clone(), 6, 4, line))
                .map_err(drawn("handoff"))?
                .label(format!("{}, polling", kind.label()))
                .legend(move |(x, y)| DashedPathElement::new([(x, y), (x + 14, y)], 4, 3, line));
        } else {
            chart
                .draw_series(LineSeries::new(points.clone(), line))
                .map_err(drawn("handoff"))?
                .label(kind.label())
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 14, y)], line));
        }
        chart
            .draw_series(points.into_iter().map(|p| Circle::new(p, 3, color.filled())))
            .map_err(drawn("handoff"))?;
    }
    if let Some(t) = target {
        chart
            .draw_series(DashedLineSeries::new(
                [(1.0, t), (most_waiters, t)],
                6,
                4,
                BLACK.stroke_width(1),
            ))
            .map_err(drawn("handoff"))?
            .label(format!("target where the store pushes: {t:.0}"))
            .legend(|(x, y)| DashedPathElement::new([(x, y), (x + 14, y)], 4, 3, BLACK));
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

#[cfg(test)]
mod tests {
    use super::*;

    fn committed() -> Results {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/performance.json");
        Results::load(&path).unwrap_or_else(|e| panic!("{e}"))
    }

    fn hex(c: RGBColor) -> String {
        format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2)
    }

    /// SVG elements of `svg` drawn in `color` (`fill` or `stroke`) at `opacity`.
    fn drawn_in(svg: &str, attr: &str, color: RGBColor, opacity: &str) -> usize {
        svg.lines()
            .filter(|l| {
                l.contains(&format!("opacity=\"{opacity}\"")) && l.contains(&format!("{attr}=\"{}\"", hex(color)))
            })
            .count()
    }

    #[test]
    fn every_store_has_a_colour_of_its_own() {
        let mut colours: Vec<String> = StoreKind::ALL.iter().map(|k| hex(store_color(*k))).collect();
        colours.sort();
        colours.dedup();
        assert_eq!(colours.len(), StoreKind::ALL.len(), "two stores share a colour");
    }

    #[test]
    fn a_bar_is_pale_when_its_row_meets_the_p50_target_and_solid_when_not() {
        let results = committed();
        let svg = overhead(&results).unwrap_or_else(|e| panic!("{e}"));
        for op in Op::ALL {
            let rows = results
                .overhead
                .iter()
                .flat_map(|o| o.ops.iter())
                .filter(|r| r.op == op);
            let met = rows.clone().filter(|r| r.p50_met).count();
            let missed = rows.filter(|r| !r.p50_met).count();
            let colour = op_color(op);
            assert_eq!(
                drawn_in(&svg, "fill", colour, &PALE.to_string()),
                met,
                "{op:?}: pale bars"
            );
            // The legend's square of the operation is solid too.
            assert_eq!(drawn_in(&svg, "fill", colour, "1"), missed + 1, "{op:?}: solid bars");
        }
        assert!(
            results.overhead.iter().flat_map(|o| &o.ops).any(|r| r.p50_met)
                && results.overhead.iter().flat_map(|o| &o.ops).any(|r| !r.p50_met),
            "the committed results have rows of both kinds"
        );
    }

    #[test]
    fn a_store_that_polls_is_a_dashed_line_and_one_that_pushes_a_solid_one() {
        let results = committed();
        let svg = handoff(&results).unwrap_or_else(|e| panic!("{e}"));
        let mut stores: Vec<StoreKind> = results.handoff.iter().map(|h| h.store).collect();
        stores.dedup();
        let (mut polling, mut pushing) = (0, 0);
        for kind in stores {
            // A solid line is one path per panel, plus its legend's; a dashed one is a
            // path per dash.
            let paths = svg
                .lines()
                .filter(|l| l.starts_with("<polyline") && l.contains(&format!("stroke=\"{}\"", hex(store_color(kind)))))
                .count();
            let polls = results.handoff.iter().any(|h| h.store == kind && h.polls());
            assert_eq!(
                polls,
                matches!(kind, StoreKind::MySql | StoreKind::Dynamo | StoreKind::S3),
                "{kind:?}: the stores without a push are MySQL, DynamoDB and S3"
            );
            if polls {
                polling += 1;
                assert!(paths > 10, "{kind:?} polls: dashed, but drawn in {paths} paths");
            } else {
                pushing += 1;
                assert_eq!(paths, 3, "{kind:?} pushes: one solid line per panel and the legend's");
            }
        }
        assert!(
            polling > 0 && pushing > 0,
            "the committed results have stores of both kinds"
        );
    }
}
