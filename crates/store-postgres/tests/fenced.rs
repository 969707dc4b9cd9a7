//! Fenced writes on real rows of a user's table: the guard on the token is inside the
//! statement, zero rows is `FenceRejected`, and a refused write changes nothing.
#![allow(missing_docs)]

mod common;

use common::shared::accounts_update;

use std::time::Duration;

use leasehold_core::fence::{FencedOutcome, FencedUpdate};
use leasehold_core::{Error, FencingToken, LeaseClient};
use leasehold_postgres::RowFence;
use sqlx::Postgres;
use sqlx::{PgPool, Row};

async fn accounts(pool: &PgPool) -> String {
    let t = common::unique_table("lh_accounts");
    common::exec(
        pool,
        &format!("CREATE TABLE \"{t}\" (id BIGINT PRIMARY KEY, balance BIGINT NOT NULL, last_token BIGINT NOT NULL DEFAULT 0)"),
    )
    .await;
    common::exec(pool, &format!("INSERT INTO \"{t}\" (id, balance) VALUES (1, 100)")).await;
    t
}

async fn row(pool: &PgPool, t: &str, id: i64) -> Option<(i64, i64)> {
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT balance, last_token FROM \"{t}\" WHERE id = $1"
    )))
    .bind(id)
    .fetch_optional(pool)
    .await
    .expect("select")
    .map(|r| (r.get(0), r.get(1)))
}

async fn write(
    pool: &PgPool,
    stmt: &RowFence<Postgres>,
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

#[tokio::test]
async fn increments_apply_under_the_guard_and_a_missing_row_is_refused() {
    let pool = common::pool().await;
    let t = accounts(&pool).await;
    let add = RowFence::<Postgres>::update(&accounts_update(&t, false, true)).expect("stmt");
    assert!(add.sql().contains("\"last_token\" <= $2"), "{}", add.sql());
    assert_eq!(write(&pool, &add, 2, 1, -10).await.expect("token 2"), 1);
    assert_eq!(write(&pool, &add, 2, 1, -10).await.expect("token 2 again"), 1);
    assert!(
        rejected(write(&pool, &add, 1, 1, -10).await),
        "an older token was accepted"
    );
    assert_eq!(
        row(&pool, &t, 1).await,
        Some((80, 2)),
        "a refused write changed the row"
    );
    assert_eq!(write(&pool, &add, 3, 1, -5).await.expect("token 3"), 1);
    assert_eq!(row(&pool, &t, 1).await, Some((75, 3)));
    // A plain update of a row that does not exist says so.
    assert!(matches!(
        write(&pool, &add, 9, 404, 1).await,
        Err(Error::FenceTargetMissing { .. })
    ));
    common::exec(&pool, &format!("DROP TABLE \"{t}\"")).await;
}

#[tokio::test]
async fn upsert_inserts_then_guards() {
    let pool = common::pool().await;
    let t = accounts(&pool).await;
    for strict in [false, true] {
        let id = if strict { 20 } else { 10 };
        let up = RowFence::<Postgres>::upsert(&accounts_update(&t, strict, false)).expect("upsert");
        assert_eq!(write(&pool, &up, 5, id, 1).await.expect("insert"), 1);
        assert_eq!(row(&pool, &t, id).await, Some((1, 5)));
        let same = write(&pool, &up, 5, id, 2).await;
        if strict {
            assert!(rejected(same), "strict upsert accepted the same token");
            assert_eq!(row(&pool, &t, id).await, Some((1, 5)));
        } else {
            assert_eq!(same.expect("same token"), 1);
            assert_eq!(row(&pool, &t, id).await, Some((2, 5)));
        }
        assert!(
            rejected(write(&pool, &up, 4, id, 3).await),
            "an older token was accepted"
        );
        assert_eq!(write(&pool, &up, 6, id, 4).await.expect("newer"), 1);
        assert_eq!(row(&pool, &t, id).await, Some((4, 6)));
    }
    common::exec(&pool, &format!("DROP TABLE \"{t}\"")).await;
}

#[tokio::test]
async fn a_lease_token_fences_out_the_previous_holder() {
    let pool = common::pool().await;
    let t = accounts(&pool).await;
    let store = common::store_on(&pool, &common::unique_table("lh_fence_leases")).await;
    let (a, b) = (LeaseClient::new(store.clone()), LeaseClient::new(store.clone()));
    let set = RowFence::<Postgres>::update(&accounts_update(&t, false, false)).expect("stmt");
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
    assert_eq!(
        row(&pool, &t, 1).await,
        Some((2, lb.token().get().try_into().expect("fits")))
    );
    lb.release().await.expect("release");
    common::exec(&pool, &format!("DROP TABLE \"{t}\"")).await;
    common::exec(&pool, &format!("DROP TABLE \"{}\"", store.table().name())).await;
}

#[tokio::test]
async fn bad_fenced_writes_are_typed_errors() {
    let pool = common::pool().await;
    let t = accounts(&pool).await;
    let pg = RowFence::<Postgres>::update(&accounts_update(&t, false, false)).expect("pg");
    // A value missing: refused before sending.
    let incomplete = pg.write(FencingToken::new(1)).key("id", 1_i64);
    assert!(matches!(
        incomplete.execute(&pool).await,
        Err(Error::InvalidInput { .. })
    ));
    // A table that does not exist.
    let missing = FencedUpdate::new("lh_no_such_table", "last_token")
        .and_then(|f| f.set("balance"))
        .and_then(|f| f.key("id"))
        .and_then(|f| RowFence::<Postgres>::update(&f))
        .expect("stmt");
    let w = missing
        .write(FencingToken::new(1))
        .value("balance", 1_i64)
        .key("id", 1_i64);
    assert!(matches!(w.execute(&pool).await, Err(Error::Misconfigured { .. })));
    // A value of the wrong type for the column: the database refuses it.
    let w = pg.write(FencingToken::new(1)).value("balance", "lots").key("id", 1_i64);
    assert!(matches!(
        w.execute(&pool).await,
        Err(Error::Misconfigured { .. } | Error::InvalidInput { .. })
    ));
    // Inside the caller's transaction: rolled back with it.
    let mut tx = pool.begin().await.expect("begin");
    let w = pg
        .write(FencingToken::new(7))
        .value("balance", 999_i64)
        .key("id", 1_i64);
    assert_eq!(w.execute(&mut *tx).await.expect("in tx"), FencedOutcome::Applied(1));
    tx.rollback().await.expect("rollback");
    assert_eq!(row(&pool, &t, 1).await, Some((100, 0)), "nothing changed");
    common::exec(&pool, &format!("DROP TABLE \"{t}\"")).await;
}

/// A refused fenced write says why: a newer mark (named), no row, a mark that is not a
/// token.
#[tokio::test]
async fn refused_fenced_writes_say_why() {
    let pool = common::pool().await;
    common::shared::refused_fenced_writes_say_why(&pool, &common::unique_table("lh_accounts_why"), &[]).await;
}
