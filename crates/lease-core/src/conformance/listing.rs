//! The listing case: [`crate::store::CasStore::list`] returns exactly the names under a prefix.

use super::{Fixture, applied, rec, unique_name};
use crate::store::{DeleteOutcome, Precondition};
use crate::{LeaseName, NamePrefix};

fn name(s: &str) -> LeaseName {
    LeaseName::new(s).unwrap_or_else(|e| panic!("name {s:?}: {e}"))
}

fn prefix(s: &str) -> NamePrefix {
    NamePrefix::new(s).unwrap_or_else(|e| panic!("prefix {s:?}: {e}"))
}

/// `list` returns the names of the records under a prefix, sorted, each once, held and
/// vacant alike: not a deleted one, not a name that only shares the prefix's text
/// without it (`base` vs `basex`), and `_` matched literally (a SQL `LIKE` without
/// escaping would match `uax` for `u_`). Enough names to cross a small page.
pub async fn list_names_under_a_prefix(f: &dyn Fixture) {
    let store = f.store().await;
    let base = unique_name("list").as_str().to_owned();
    let mut ours: Vec<String> = ["a", "b/c", "u_x", "uax"]
        .iter()
        .map(|s| format!("{base}/{s}"))
        .chain((0..20).map(|i| format!("{base}/z/{i:02}")))
        .collect();
    for n in &ours {
        applied(&*store, &name(n), &Precondition::Absent, &rec("lister", 1, 60_000), n).await;
    }
    let sibling = format!("{base}x");
    applied(
        &*store,
        &name(&sibling),
        &Precondition::Absent,
        &rec("lister", 1, 60_000),
        "sibling",
    )
    .await;
    let gone = name(&format!("{base}/bb"));
    let written = applied(
        &*store,
        &gone,
        &Precondition::Absent,
        &rec("lister", 1, 60_000),
        "to delete",
    )
    .await;
    assert_eq!(
        store.delete(&gone, &written.version).await.expect("delete"),
        DeleteOutcome::Deleted
    );
    // One of them vacant: still a lease record, still listed.
    let vacant = name(&ours[0]);
    let held = store.read(&vacant).await.expect("read").expect("written");
    applied(
        &*store,
        &vacant,
        &Precondition::Version(held.version.clone()),
        &held.record.vacated(),
        "vacate",
    )
    .await;
    ours.sort();

    let list = |p: String| {
        let store = store.clone();
        async move {
            let got = store
                .list(&prefix(&p))
                .await
                .unwrap_or_else(|e| panic!("list {p:?}: {e}"));
            got.into_iter().map(|n| n.as_str().to_owned()).collect::<Vec<_>>()
        }
    };
    assert_eq!(list(format!("{base}/")).await, ours, "every name under {base}/");
    let mut with_sibling = ours.clone();
    with_sibling.push(sibling.clone());
    with_sibling.sort();
    assert_eq!(list(base.clone()).await, with_sibling, "the prefix is text, not a path");
    assert_eq!(
        list(format!("{base}/b")).await,
        [format!("{base}/b/c")],
        "a deleted record is not listed"
    );
    assert_eq!(
        list(format!("{base}/u_")).await,
        [format!("{base}/u_x")],
        "'_' is literal"
    );
    assert_eq!(list(format!("{base}/z/1")).await.len(), 10, "{base}/z/10..19");
    assert!(list(format!("{base}/nothing")).await.is_empty());
}
