//! Fenced writes on real rows of a user's table in SQLite: the guard on the token is
//! inside the statement, zero rows is `FenceRejected`, and a refused write changes
//! nothing.
#![allow(missing_docs)]

mod common;

use std::time::Duration;

use leasehold_core::fence::{FencedOutcome, FencedUpdate};
use leasehold_core::{Error, FencingToken, LeaseClient};
use leasehold_sqlite::RowFence;
use sqlx::Sqlite;
use sqlx::{Row, SqlitePool};

async fn accounts() -> (SqlitePool, common::TempDb) {
    let db = common::db_path("fenced");
    let pool = common::pool(db.path()).await;
    common::exec(
        &pool,
        "CREATE TABLE accounts (id INTEGER PRIMARY KEY, balance INTEGER NOT NULL, last_token INTEGER NOT NULL DEFAULT 0)",
    )
    .await;
    common::exec(&pool, "INSERT INTO accounts (id, balance) VALUES (1, 100)").await;
    (pool, db)
}

async fn row(pool: &SqlitePool, id: i64) -> Option<(i64, i64)> {
    sqlx::query("SELECT balance, last_token FROM accounts WHERE id = ?1")
        .bind(id)
        .fetch_optional(pool)
        .await
        .expect("select")
        .map(|r| (r.get(0), r.get(1)))
}

async fn write(
    pool: &SqlitePool,
    stmt: &RowFence<Sqlite>,
    token: u64,
    id: i64,
    amount: i64,
) -> leasehold_core::Result<u64> {
    let w = stmt
        .write(FencingToken::new(token))
        .value("balance", amount)
        .key("id", id);
    w.execute(pool).await.map(|o| o.applied().unwrap_or(0))
}

fn rejected(r: leasehold_core::Result<u64>) -> bool {
    matches!(r, Err(Error::FenceRejected { .. }))
}

fn builder(strict: bool, increment: bool) -> FencedUpdate {
    common::shared::accounts_update("accounts", strict, increment)
}

#[tokio::test]
async fn increments_apply_under_the_guard_and_a_missing_row_is_refused() {
    let (pool, _db) = accounts().await;
    let add = RowFence::<Sqlite>::update(&builder(false, true)).expect("stmt");
    assert!(add.sql().contains("\"last_token\" <= ?"), "{}", add.sql());
    assert_eq!(write(&pool, &add, 2, 1, -10).await.expect("token 2"), 1);
    assert_eq!(write(&pool, &add, 2, 1, -10).await.expect("token 2 again"), 1);
    assert!(
        rejected(write(&pool, &add, 1, 1, -10).await),
        "an older token was accepted"
    );
    assert_eq!(row(&pool, 1).await, Some((80, 2)), "a refused write changed the row");
    assert_eq!(write(&pool, &add, 3, 1, -5).await.expect("token 3"), 1);
    assert_eq!(row(&pool, 1).await, Some((75, 3)));
    assert!(
        matches!(
            write(&pool, &add, 9, 404, 1).await,
            Err(Error::FenceTargetMissing { .. })
        ),
        "update of a missing row"
    );
}

#[tokio::test]
async fn upsert_inserts_then_guards() {
    let (pool, _db) = accounts().await;
    for strict in [false, true] {
        let id = if strict { 20 } else { 10 };
        let up = RowFence::<Sqlite>::upsert(&builder(strict, false)).expect("upsert");
        assert_eq!(write(&pool, &up, 5, id, 1).await.expect("insert"), 1);
        assert_eq!(row(&pool, id).await, Some((1, 5)));
        let same = write(&pool, &up, 5, id, 2).await;
        if strict {
            assert!(rejected(same), "strict upsert accepted the same token");
            assert_eq!(row(&pool, id).await, Some((1, 5)));
        } else {
            assert_eq!(same.expect("same token"), 1);
            assert_eq!(row(&pool, id).await, Some((2, 5)));
        }
        assert!(
            rejected(write(&pool, &up, 4, id, 3).await),
            "an older token was accepted"
        );
        assert_eq!(write(&pool, &up, 6, id, 4).await.expect("newer"), 1);
        assert_eq!(row(&pool, id).await, Some((4, 6)));
    }
}

#[tokio::test]
async fn a_lease_token_fences_out_the_previous_holder() {
    let (pool, _db) = accounts().await;
    let store = common::store_on(&pool, "leases").await;
    let (a, b) = (LeaseClient::new(store.clone()), LeaseClient::new(store));
    let set = RowFence::<Sqlite>::update(&builder(false, false)).expect("stmt");
    let la = a.acquire("fence/ledger", Duration::from_secs(5)).await.expect("a");
    let old = la.token();
    assert_eq!(write(&pool, &set, old.get(), 1, 1).await.expect("a writes"), 1);
    la.release().await.expect("release");
    let lb = b.acquire("fence/ledger", Duration::from_secs(5)).await.expect("b");
    assert_eq!(lb.token(), old.next());
    assert_eq!(write(&pool, &set, lb.token().get(), 1, 2).await.expect("b writes"), 1);
    assert!(
        rejected(write(&pool, &set, old.get(), 1, 3).await),
        "the old holder's token was accepted"
    );
    assert_eq!(row(&pool, 1).await, Some((2, lb.token().to_i64().expect("fits"))));
    lb.release().await.expect("release");
}

#[tokio::test]
async fn bad_fenced_writes_are_typed_errors() {
    let (pool, _db) = accounts().await;
    let lite = RowFence::<Sqlite>::update(&builder(false, false)).expect("sqlite");
    let incomplete = lite.write(FencingToken::new(1)).key("id", 1_i64);
    assert!(matches!(
        incomplete.execute(&pool).await,
        Err(Error::InvalidInput { .. })
    ));
    let missing = FencedUpdate::new("no_such_table", "last_token")
        .and_then(|f| f.set("balance"))
        .and_then(|f| f.key("id"))
        .and_then(|f| RowFence::<Sqlite>::update(&f))
        .expect("stmt");
    let w = missing
        .write(FencingToken::new(1))
        .value("balance", 1_i64)
        .key("id", 1_i64);
    assert!(matches!(w.execute(&pool).await, Err(Error::Misconfigured { .. })));
    // A NOT NULL column given NULL: the database refuses the input.
    let w = lite
        .write(FencingToken::new(1))
        .value("balance", None::<i64>)
        .key("id", 1_i64);
    assert!(matches!(w.execute(&pool).await, Err(Error::InvalidInput { .. })));
    let mut tx = pool.begin().await.expect("begin");
    let w = lite
        .write(FencingToken::new(7))
        .value("balance", 999_i64)
        .key("id", 1_i64);
    assert_eq!(w.execute(&mut *tx).await.expect("in tx"), FencedOutcome::Applied(1));
    tx.rollback().await.expect("rollback");
    assert_eq!(row(&pool, 1).await, Some((100, 0)), "nothing changed");
}

/// A refused fenced write says why: a newer mark (named), no row, a mark that is not a
/// token (SQLite keeps whatever a writer stores in the column).
#[tokio::test]
async fn refused_fenced_writes_say_why() {
    let db = common::db_path("fenced-why");
    let pool = common::pool(db.path()).await;
    common::shared::refused_fenced_writes_say_why(&pool, "accounts_why", &["'abc'", "X'00'"]).await;
}
