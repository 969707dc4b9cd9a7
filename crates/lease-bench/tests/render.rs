//! The committed document against the committed results file, and the renderer's
//! refusals. No store needed.

use std::path::{Path, PathBuf};
use std::process::Command;

use leasehold_bench::data::Results;
use leasehold_bench::render::{NOT_MEASURED, render};
use leasehold_bench::{StoreKind, markers};

fn docs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs")
}

fn committed() -> (Results, String) {
    let results = Results::load(&docs().join("performance.json")).unwrap_or_else(|e| panic!("{e}"));
    let doc = std::fs::read_to_string(docs().join("PERFORMANCE.md")).unwrap_or_else(|e| panic!("{e}"));
    (results, doc)
}

#[test]
fn the_committed_document_is_rendered_from_the_committed_results() {
    let (results, doc) = committed();
    let rendered = render(&doc, &results).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        rendered == doc,
        "docs/PERFORMANCE.md differs from a render of docs/performance.json (edited inside the markers, or \
         the results file changed without rendering): run `cargo run -p leasehold-bench -- render \
         docs/performance.json docs/PERFORMANCE.md`"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_leasehold-bench"))
        .args(["render", "--check"])
        .arg(docs().join("performance.json"))
        .arg(docs().join("PERFORMANCE.md"))
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn a_document_missing_a_marker_is_refused_and_left_unchanged() {
    let (_, doc) = committed();
    let regions = markers::parse(&doc).unwrap_or_else(|e| panic!("{e:?}"));
    let handoff = regions
        .iter()
        .find(|r| r.name == "handoff")
        .unwrap_or_else(|| panic!("the document has a handoff table"));
    let open = handoff.marker();
    let close = markers::closing(handoff.kind);
    // The handoff table without its two marker lines.
    let inner = handoff.inner.clone();
    let (open_at, close_end) = (inner.start - open.len(), inner.end + close.len());
    assert_eq!(&doc[open_at..inner.start], open);
    assert_eq!(&doc[inner.end..close_end], close);
    let broken = format!(
        "{}{}{}",
        &doc[..open_at],
        &doc[inner.start + 1..inner.end],
        &doc[close_end + 1..]
    );

    let dir = std::env::temp_dir().join(format!("leasehold-bench-render-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let path = dir.join("PERFORMANCE.md");
    std::fs::write(&path, &broken).unwrap_or_else(|e| panic!("{e}"));
    let out = Command::new(env!("CARGO_BIN_EXE_leasehold-bench"))
        .arg("render")
        .arg(docs().join("performance.json"))
        .arg(&path)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "rendering a document without the handoff markers fails"
    );
    assert!(
        stderr.contains("missing region `<!-- bench:table handoff -->` … `<!-- /bench:table -->`")
            && stderr.contains("nothing was written"),
        "the error names the missing marker: {stderr}"
    );
    let after = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{e}"));
    assert!(after == broken, "the document is left as it was");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn broken_and_unknown_markers_are_refused() {
    let (results, doc) = committed();
    for (change, says) in [
        (
            doc.replacen("<!-- /bench:table -->", "", 1),
            "is not closed before the next region opens",
        ),
        (
            doc.replacen("<!-- bench:table scale -->", "<!-- bench:table scales -->", 1),
            "no region is called \"scales\"",
        ),
        (
            doc.replacen("<!-- bench:table scale -->", "<!-- bench:text scale -->", 1)
                .replacen(
                    "<!-- /bench:table -->\n\nOne driver task",
                    "<!-- /bench:text -->\n\nOne driver task",
                    1,
                ),
            "this region is `bench:table`",
        ),
        (
            doc.replacen("<!-- bench:table peer redis -->", "<!-- bench:table peer sqlite -->", 1),
            "SQLite has no peer",
        ),
        (
            doc.clone() + "\n<!-- bench:table machine -->\n<!-- /bench:table -->\n",
            "appears twice",
        ),
    ] {
        let e = render(&change, &results)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains(says), "expected {says:?}, got: {e}");
    }
}

#[test]
fn a_store_the_results_do_not_have_reads_not_measured() {
    let (mut results, doc) = committed();
    results.overhead.retain(|o| o.store != StoreKind::Sqlite);
    results.handoff.clear();
    let md = render(&doc, &results).unwrap_or_else(|e| panic!("{e}"));
    let regions = markers::parse(&md).unwrap_or_else(|e| panic!("{e:?}"));
    for r in &regions {
        let inner = md[r.inner.clone()].trim();
        // SQLite's rows were taken out; a store the committed results never had (one
        // added since the last run) reads the same.
        let measured = results.overhead.iter().any(|o| Some(o.store.key()) == r.arg);
        let empty = (r.name == "overhead" && !measured) || r.name == "handoff";
        assert_eq!(inner == NOT_MEASURED, empty, "{}", r.marker());
    }
}
