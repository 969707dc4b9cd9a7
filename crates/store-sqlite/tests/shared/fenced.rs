//! Fenced writes on real rows of a user's table, on every SQL store: the guard on the
//! token is inside the statement, a refused write says why and changes nothing, and
//! identifiers are validated. `sql_tests!(fenced, …)` runs each case on one [`TestDb`].

use std::time::Duration;

use leasehold_core::fence::{FencedOutcome, FencedUpdate};
use leasehold_core::{Error, FencingToken, LeaseClient, Result};
use leasehold_sql::RowFence;

use super::accounts_update;
use super::db::{DbOf, PoolOf, Shell, TestDb, q};

/// A table `accounts_…` of its own with row 1 (balance 100, mark 0).
async fn accounts<T: TestDb>(pool: &PoolOf<T>) -> String {
    let table = T::table("accounts");
    let t = q::<DbOf<T>>(&table);
    <DbOf<T>>::run(
        pool,
        &format!(
            "CREATE TABLE {t} (id BIGINT PRIMARY KEY, balance BIGINT NOT NULL, last_token BIGINT NOT NULL DEFAULT 0)"
        ),
    )
    .await;
    <DbOf<T>>::run(pool, &format!("INSERT INTO {t} (id, balance) VALUES (1, 100)")).await;
    table
}

async fn row<T: TestDb>(pool: &PoolOf<T>, table: &str, id: i64) -> Option<(i64, i64)> {
    let sql = format!(
        "SELECT balance, last_token FROM {} WHERE id = {id}",
        q::<DbOf<T>>(table)
    );
    <DbOf<T>>::ints(pool, &sql).await.map(|r| (r[0], r[1]))
}

async fn drop_table<T: TestDb>(pool: &PoolOf<T>, table: &str) {
    <DbOf<T>>::run(pool, &format!("DROP TABLE {}", q::<DbOf<T>>(table))).await;
}

async fn write<T: TestDb>(
    pool: &PoolOf<T>,
    fence: &RowFence<DbOf<T>>,
    token: u64,
    id: i64,
    amount: i64,
) -> Result<u64> {
    let w = fence
        .write(FencingToken::new(token))
        .value("balance", amount)
        .key("id", id);
    w.execute(pool).await.map(|o| o.applied().unwrap_or(0))
}

/// Refused with the row's mark `mark`.
fn rejected_by(r: Result<u64>, mark: u64) -> bool {
    matches!(r, Err(Error::FenceRejected { mark: Some(m), .. }) if m.get() == mark)
}

/// The plain update: the guard is `last_token <= token` (`<` when strict) inside the
/// statement, an older token is refused naming the mark, a missing row says so.
pub async fn updates_apply_under_the_guard_and_a_missing_row_is_refused<T: TestDb>() {
    let (pool, _keep) = T::fresh("fenced").await;
    let t = accounts::<T>(&pool).await;
    let mark = q::<DbOf<T>>("last_token");
    let add = RowFence::<DbOf<T>>::update(&accounts_update(&t, false, true)).expect("stmt");
    assert!(add.sql().contains(&format!("{mark} <= ")), "{}", add.sql());
    assert_eq!(write::<T>(&pool, &add, 2, 1, -10).await.expect("token 2"), 1);
    assert_eq!(write::<T>(&pool, &add, 2, 1, -10).await.expect("token 2 again"), 1);
    assert!(
        rejected_by(write::<T>(&pool, &add, 1, 1, -10).await, 2),
        "an older token was accepted"
    );
    assert_eq!(
        row::<T>(&pool, &t, 1).await,
        Some((80, 2)),
        "a refused write changed the row"
    );
    assert_eq!(write::<T>(&pool, &add, 3, 1, -5).await.expect("token 3"), 1);
    assert_eq!(row::<T>(&pool, &t, 1).await, Some((75, 3)));
    match write::<T>(&pool, &add, 9, 404, 1).await {
        Err(Error::FenceTargetMissing { resource }) => assert!(resource.contains("id = 404"), "{resource}"),
        other => panic!("update of a missing row: {other:?}"),
    }
    let strict = RowFence::<DbOf<T>>::update(&accounts_update(&t, true, false)).expect("strict");
    assert!(strict.sql().contains(&format!("{mark} < ")), "{}", strict.sql());
    assert!(
        rejected_by(write::<T>(&pool, &strict, 3, 1, 0).await, 3),
        "strict accepted the same token"
    );
    assert_eq!(write::<T>(&pool, &strict, 4, 1, 7).await.expect("newer"), 1);
    assert_eq!(row::<T>(&pool, &t, 1).await, Some((7, 4)));
    drop_table::<T>(&pool, &t).await;
}

/// The upsert inserts a missing row, then guards it like the update: for a set and an
/// increment, strict and not.
pub async fn upsert_inserts_then_guards<T: TestDb>() {
    let (pool, _keep) = T::fresh("upsert").await;
    let t = accounts::<T>(&pool).await;
    for (strict, increment) in [(false, false), (true, false), (false, true), (true, true)] {
        let id = 10 + i64::from(strict) * 10 + i64::from(increment);
        let up = RowFence::<DbOf<T>>::upsert(&accounts_update(&t, strict, increment)).expect("upsert");
        assert_eq!(write::<T>(&pool, &up, 5, id, 1).await.expect("insert"), 1);
        assert_eq!(row::<T>(&pool, &t, id).await, Some((1, 5)));
        let same = write::<T>(&pool, &up, 5, id, 2).await;
        let after_same = if strict {
            assert!(rejected_by(same, 5), "strict upsert accepted the same token");
            1
        } else {
            assert_eq!(same.expect("same token"), 1);
            if increment { 3 } else { 2 }
        };
        assert_eq!(row::<T>(&pool, &t, id).await, Some((after_same, 5)));
        assert!(
            rejected_by(write::<T>(&pool, &up, 4, id, 3).await, 5),
            "an older token (strict {strict})"
        );
        assert_eq!(
            row::<T>(&pool, &t, id).await,
            Some((after_same, 5)),
            "a refused upsert changed the row"
        );
        assert_eq!(write::<T>(&pool, &up, 6, id, 4).await.expect("newer"), 1);
        let want = if increment { after_same + 4 } else { 4 };
        assert_eq!(row::<T>(&pool, &t, id).await, Some((want, 6)));
    }
    drop_table::<T>(&pool, &t).await;
}

/// A lease's token fences out the previous holder's writes.
pub async fn a_lease_token_fences_out_the_previous_holder<T: TestDb>() {
    let (pool, _keep) = T::fresh("fence-leases").await;
    let t = accounts::<T>(&pool).await;
    let leases = T::table("lh_fence_leases");
    let store = super::store_on::<T::B>(&pool, &leases).await;
    let (a, b) = (LeaseClient::new(store.clone()), LeaseClient::new(store));
    let set = RowFence::<DbOf<T>>::update(&accounts_update(&t, false, false)).expect("stmt");
    let la = a.acquire("fence/ledger", Duration::from_secs(5)).await.expect("a");
    let old = la.token();
    assert_eq!(write::<T>(&pool, &set, old.get(), 1, 1).await.expect("a writes"), 1);
    la.release().await.expect("release");
    let lb = b.acquire("fence/ledger", Duration::from_secs(5)).await.expect("b");
    assert_eq!(lb.token(), old.next());
    assert_eq!(
        write::<T>(&pool, &set, lb.token().get(), 1, 2).await.expect("b writes"),
        1
    );
    assert!(
        rejected_by(write::<T>(&pool, &set, old.get(), 1, 3).await, lb.token().get()),
        "the old holder's token was accepted"
    );
    assert_eq!(
        row::<T>(&pool, &t, 1).await,
        Some((2, lb.token().to_i64().expect("fits")))
    );
    lb.release().await.expect("release");
    drop_table::<T>(&pool, &t).await;
    drop_table::<T>(&pool, &leases).await;
}

/// Bad fenced writes are typed errors and change nothing: a value missing, a table that
/// does not exist, identifiers that are not plain names, `NULL` (or, where the database
/// checks types, a word) for a number; inside the caller's transaction, a write rolls
/// back with it.
pub async fn bad_fenced_writes_are_typed_errors<T: TestDb>() {
    let (pool, _keep) = T::fresh("fenced-bad").await;
    let t = accounts::<T>(&pool).await;
    let set = RowFence::<DbOf<T>>::update(&accounts_update(&t, false, false)).expect("stmt");
    let incomplete = set.write(FencingToken::new(1)).key("id", 1_i64);
    assert!(matches!(
        incomplete.execute(&pool).await,
        Err(Error::InvalidInput { .. })
    ));
    let missing = FencedUpdate::new("lh_no_such_table", "last_token")
        .and_then(|f| f.set("balance"))
        .and_then(|f| f.key("id"))
        .and_then(|f| RowFence::<DbOf<T>>::update(&f))
        .expect("stmt");
    let w = missing
        .write(FencingToken::new(1))
        .value("balance", 1_i64)
        .key("id", 1_i64);
    assert!(matches!(w.execute(&pool).await, Err(Error::Misconfigured { .. })));
    for bad in [
        "acc`ounts",
        "acc\"ounts",
        "accounts; DROP TABLE x",
        "a.b.c",
        "1accounts",
    ] {
        assert!(
            matches!(FencedUpdate::new(bad, "last_token"), Err(Error::InvalidInput { .. })),
            "{bad:?} accepted"
        );
    }
    let w = set
        .write(FencingToken::new(1))
        .value("balance", None::<i64>)
        .key("id", 1_i64);
    assert!(
        matches!(w.execute(&pool).await, Err(Error::InvalidInput { .. })),
        "NULL for a NOT NULL column"
    );
    if T::TYPED {
        let w = set
            .write(FencingToken::new(1))
            .value("balance", "lots")
            .key("id", 1_i64);
        let r = w.execute(&pool).await;
        assert!(
            matches!(r, Err(Error::Misconfigured { .. } | Error::InvalidInput { .. })),
            "a word for a number: {r:?}"
        );
    }
    let w = set
        .write(FencingToken::new(7))
        .value("balance", 999_i64)
        .key("id", 1_i64);
    assert_eq!(
        <DbOf<T>>::rolled_back(&pool, &w).await.expect("in tx"),
        FencedOutcome::Applied(1)
    );
    assert_eq!(row::<T>(&pool, &t, 1).await, Some((100, 0)), "nothing changed");
    drop_table::<T>(&pool, &t).await;
}

/// A fenced write that wrote nothing says why, and changes nothing: a stale token is
/// `FenceRejected` naming the row's mark, a missing row is `FenceTargetMissing` naming
/// its key, and a `NULL` mark, or each of [`TestDb::BAD_MARKS`], is `FenceMarkInvalid`,
/// for the plain update and the upsert alike. (A mark below every token, a negative
/// number, passes the guard like a mark of 0.)
pub async fn refused_fenced_writes_say_why<T: TestDb>() {
    let (pool, _keep) = T::fresh("fenced-why").await;
    let table = T::table("accounts_why");
    let t = q::<DbOf<T>>(&table);
    <DbOf<T>>::run(
        &pool,
        &format!("CREATE TABLE {t} (id BIGINT PRIMARY KEY, balance BIGINT NOT NULL, last_token BIGINT)"),
    )
    .await;
    let mut marks = vec!["5", "NULL"];
    marks.extend_from_slice(T::BAD_MARKS);
    for (id, mark) in marks.iter().enumerate() {
        let sql = format!("INSERT INTO {t} (id, balance, last_token) VALUES ({id}, 100, {mark})");
        <DbOf<T>>::run(&pool, &sql).await;
    }
    let snapshot = format!("SELECT count(*), min(balance), max(balance) FROM {t}");
    let before = <DbOf<T>>::ints(&pool, &snapshot).await;
    for upsert in [false, true] {
        let f = accounts_update(&table, false, false);
        let fence = if upsert {
            RowFence::<DbOf<T>>::upsert(&f)
        } else {
            RowFence::<DbOf<T>>::update(&f)
        }
        .expect("fence");
        match write::<T>(&pool, &fence, 3, 0, 0).await {
            Err(Error::FenceRejected { token, mark }) => {
                assert_eq!((token.get(), mark), (3, Some(FencingToken::new(5))), "upsert {upsert}");
            }
            other => panic!("a stale token (upsert {upsert}): {other:?}"),
        }
        for (id, mark) in marks.iter().enumerate().skip(1) {
            let id = i64::try_from(id).expect("id");
            match write::<T>(&pool, &fence, 9, id, 0).await {
                Err(Error::FenceMarkInvalid { resource, reason }) => {
                    assert!(resource.contains(&format!("id = {id}")), "{resource}");
                    assert!(!reason.is_empty());
                }
                other => panic!("mark {mark} (upsert {upsert}): {other:?}"),
            }
        }
        if !upsert {
            match write::<T>(&pool, &fence, 9, 404, 0).await {
                Err(Error::FenceTargetMissing { resource }) => assert!(resource.contains("id = 404"), "{resource}"),
                other => panic!("a missing row: {other:?}"),
            }
        }
    }
    assert_eq!(
        <DbOf<T>>::ints(&pool, &snapshot).await,
        before,
        "a refused write changed a row"
    );
    drop_table::<T>(&pool, &table).await;
}
