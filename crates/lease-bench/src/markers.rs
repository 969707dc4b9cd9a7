//! The regions of a Markdown document that the renderer fills, between markers:
//!
//! ```text
//! <!-- bench:table overhead postgres -->
//! (a block region: the markers stand alone on their lines)
//! <!-- /bench:table -->
//!
//! The measurements took <!-- bench:text elapsed -->206 s<!-- /bench:text -->, after the build.
//! ```
//!
//! An opening marker is `<!-- bench:KIND NAME -->` or `<!-- bench:KIND NAME ARG -->`, the
//! closing one `<!-- /bench:KIND -->`. A region whose markers stand alone on their lines
//! is a block (its content is surrounded by one blank line on each side); one inside a
//! line is inline and stays on it. Markdown hides the comments; everything outside the
//! regions is left exactly as it is.

use std::ops::Range;

const OPEN: &str = "<!-- bench:";
const CLOSE: &str = "<!-- /bench:";

/// One region of a document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Region<'a> {
    /// `table` or `text`.
    pub kind: &'a str,
    /// What the renderer fills in (`overhead`, `elapsed`, ...).
    pub name: &'a str,
    /// The region's argument, if any (a store, a list of stores).
    pub arg: Option<&'a str>,
    /// Markers alone on their lines (a block), or inside a line.
    pub block: bool,
    /// The content between the markers, as byte offsets of the document.
    pub inner: Range<usize>,
    /// The line of the opening marker (1-based), for messages.
    pub line: usize,
}

impl Region<'_> {
    /// The opening marker as written.
    pub fn marker(&self) -> String {
        opening(self.kind, self.name, self.arg)
    }
}

/// The opening marker of a region.
pub fn opening(kind: &str, name: &str, arg: Option<&str>) -> String {
    match arg {
        Some(a) => format!("{OPEN}{kind} {name} {a} -->"),
        None => format!("{OPEN}{kind} {name} -->"),
    }
}

/// The closing marker of a region of `kind`.
pub fn closing(kind: &str) -> String {
    format!("{CLOSE}{kind} -->")
}

fn line_of(doc: &str, at: usize) -> usize {
    doc[..at].matches('\n').count() + 1
}

/// Every region of `doc`, in order.
///
/// # Errors
/// Every marker that does not pair up or is malformed, one message each.
pub fn parse(doc: &str) -> Result<Vec<Region<'_>>, Vec<String>> {
    let mut regions = Vec::new();
    let mut errors = Vec::new();
    let mut pos = 0;
    while pos < doc.len() {
        let open = doc[pos..].find(OPEN).map(|i| pos + i);
        let close = doc[pos..].find(CLOSE).map(|i| pos + i);
        if let Some(c) = close.filter(|&c| open.is_none_or(|o| c < o)) {
            errors.push(format!(
                "line {}: a closing marker with no region open",
                line_of(doc, c)
            ));
            pos = c + CLOSE.len();
            continue;
        }
        let Some(start) = open else { break };
        let line = line_of(doc, start);
        let Some(end) = doc[start..].find("-->").map(|i| start + i + 3) else {
            errors.push(format!("line {line}: a marker that does not end with `-->`"));
            break;
        };
        let words: Vec<&str> = doc[start + OPEN.len()..end - 3].split_whitespace().collect();
        let (kind, name, arg) = match words.as_slice() {
            [kind, name] => (*kind, *name, None),
            [kind, name, arg] => (*kind, *name, Some(*arg)),
            _ => {
                errors.push(format!(
                    "line {line}: `{}` is not `{OPEN}KIND NAME [ARG] -->`",
                    &doc[start..end]
                ));
                pos = end;
                continue;
            }
        };
        let close = closing(kind);
        let next_open = doc[end..].find(OPEN).map(|i| end + i);
        let Some(close_at) = doc[end..].find(close.as_str()).map(|i| end + i) else {
            errors.push(format!(
                "line {line}: `{}` is never closed by `{close}`",
                &doc[start..end]
            ));
            pos = end;
            continue;
        };
        if let Some(n) = next_open.filter(|&n| n < close_at) {
            errors.push(format!(
                "line {line}: `{}` is not closed before the next region opens (line {})",
                &doc[start..end],
                line_of(doc, n)
            ));
            pos = n;
            continue;
        }
        let close_end = close_at + close.len();
        let open_alone = (start == 0 || doc[..start].ends_with('\n')) && doc[end..].starts_with('\n');
        let close_alone =
            doc[..close_at].ends_with('\n') && (close_end == doc.len() || doc[close_end..].starts_with('\n'));
        let inner = end..close_at;
        if open_alone != close_alone {
            errors.push(format!(
                "line {line}: `{}` and `{close}` must both stand alone on their lines (a block) or both sit inside one line",
                &doc[start..end]
            ));
        } else if !open_alone && doc[inner.clone()].contains('\n') {
            errors.push(format!(
                "line {line}: the inline region `{}` spans lines",
                &doc[start..end]
            ));
        } else if !open_alone && (start == 0 || doc[..start].ends_with('\n')) {
            errors.push(format!(
                "line {line}: the inline region `{}` starts its line (Markdown would read the whole line as HTML): \
                 put text before it",
                &doc[start..end]
            ));
        } else {
            regions.push(Region {
                kind,
                name,
                arg,
                block: open_alone,
                inner,
                line,
            });
        }
        pos = close_end;
    }
    if errors.is_empty() { Ok(regions) } else { Err(errors) }
}

/// `doc` with the content of each of `regions` (from [`parse`] of `doc`) replaced by
/// the matching entry of `contents`: a block's between blank lines, an inline one's as
/// it is. Everything else is copied unchanged.
pub fn fill(doc: &str, regions: &[Region<'_>], contents: &[String]) -> String {
    let mut out = String::with_capacity(doc.len());
    let mut last = 0;
    for (r, c) in regions.iter().zip(contents) {
        out.push_str(&doc[last..r.inner.start]);
        if r.block {
            out.push_str("\n\n");
            out.push_str(c.trim_matches('\n'));
            out.push_str("\n\n");
        } else {
            out.push_str(c);
        }
        last = r.inner.end;
    }
    out.push_str(&doc[last..]);
    out
}

/// The parts of `doc` outside its regions (the markers included), which [`fill`] never
/// changes.
pub fn outside<'a>(doc: &'a str, regions: &[Region<'_>]) -> Vec<&'a str> {
    let mut parts = Vec::with_capacity(regions.len() + 1);
    let mut last = 0;
    for r in regions {
        parts.push(&doc[last..r.inner.start]);
        last = r.inner.end;
    }
    parts.push(&doc[last..]);
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = "# T\n\nTook <!-- bench:text elapsed -->5 s<!-- /bench:text -->.\n\n\
                       <!-- bench:table overhead postgres -->\nold\n<!-- /bench:table -->\n\nafter\n";

    #[test]
    fn parses_and_fills_block_and_inline_regions() {
        let regions = parse(DOC).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(regions.len(), 2);
        assert_eq!(
            (regions[0].name, regions[0].block, regions[0].line),
            ("elapsed", false, 3)
        );
        assert_eq!(
            (regions[1].kind, regions[1].name, regions[1].arg, regions[1].block),
            ("table", "overhead", Some("postgres"), true)
        );
        assert_eq!(regions[1].marker(), "<!-- bench:table overhead postgres -->");
        let filled = fill(DOC, &regions, &["7 s".into(), "| a |\n|---|".into()]);
        assert_eq!(
            filled,
            "# T\n\nTook <!-- bench:text elapsed -->7 s<!-- /bench:text -->.\n\n\
             <!-- bench:table overhead postgres -->\n\n| a |\n|---|\n\n<!-- /bench:table -->\n\nafter\n"
        );
        let again = parse(&filled).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(outside(&filled, &again), outside(DOC, &regions));
        assert_eq!(fill(&filled, &again, &["7 s".into(), "| a |\n|---|".into()]), filled);
    }

    #[test]
    fn malformed_markers_are_errors() {
        for (doc, says) in [
            ("a <!-- bench:text elapsed -->5 s\n", "never closed"),
            ("a <!-- /bench:text --> b\n", "no region open"),
            (
                "a <!-- bench:text -->x<!-- /bench:text -->\n",
                "is not `<!-- bench:KIND NAME [ARG] -->`",
            ),
            (
                "<!-- bench:text elapsed -->5 s<!-- /bench:text -->\n",
                "starts its line",
            ),
            (
                "<!-- bench:table x -->\nrow <!-- /bench:table -->\n",
                "both stand alone",
            ),
            ("a <!-- bench:text x -->1\n2<!-- /bench:text -->\n", "spans lines"),
            (
                "a <!-- bench:text x -->1 <!-- bench:text y -->2<!-- /bench:text -->\n",
                "not closed before the next region opens",
            ),
        ] {
            let errors = parse(doc).err().unwrap_or_default();
            assert!(errors.iter().any(|e| e.contains(says)), "{doc:?}: {errors:?}");
        }
    }
}
