//! Fenced writes on real rows of a user's table in MariaDB: the guard on the token is
//! inside the statement (`WHERE last_token <= ?`, or the guarded
//! `ON DUPLICATE KEY UPDATE`), identifiers are backquoted and validated, a refused write
//! says why and changes nothing.
#![allow(missing_docs)]

mod common;

use std::time::Duration;

use leasehold_core::fence::{FencedOutcome, FencedUpdate};
use leasehold_core::{Error, FencingToken, LeaseClient};
use leasehold_mysql::RowFence;
use sqlx::{MySql, MySqlPool, Row};

/// A table `accounts_…` of its own with row 1 (balance 100, mark 0).
async fn accounts(pool: &MySqlPool) -> String {
    let table = common::unique_table("accounts");
    common::exec(
        pool,
        &format!(
            "CREATE TABLE `{table}` (id BIGINT PRIMARY KEY, balance BIGINT NOT NULL, last_token BIGINT NOT NULL DEFAULT 0) ENGINE=InnoDB"
        ),
    )
    .await;
    common::exec(pool, &format!("INSERT INTO `{table}` (id, balance) VALUES (1, 100)")).await;
    table
}

async fn row(pool: &MySqlPool, table: &str, id: i64) -> Option<(i64, i64)> {
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT balance, last_token FROM `{table}` WHERE id = ?"
    )))
    .bind(id)
    .fetch_optional(pool)
    .await
    .expect("select")
    .map(|r| (r.get(0), r.get(1)))
}

async fn write(
    pool: &MySqlPool,
    stmt: &RowFence<MySql>,
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

fn builder(table: &str, strict: bool, increment: bool) -> FencedUpdate {
    common::shared::accounts_update(table, strict, increment)
}

#[tokio::test]
async fn increments_apply_under_the_guard_and_a_missing_row_is_refused() {
    let pool = common::pool().await;
    let t = accounts(&pool).await;
    let add = RowFence::<MySql>::update(&builder(&t, false, true)).expect("stmt");
    assert!(add.sql().contains("`last_token` <= ?"), "{}", add.sql());
    assert!(
        add.sql()
            .starts_with(&format!("UPDATE `{t}` SET `balance` = `balance` + ?")),
        "{}",
        add.sql()
    );
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
    match write(&pool, &add, 9, 404, 1).await {
        Err(Error::FenceTargetMissing { resource }) => assert!(resource.contains("id = 404"), "{resource}"),
        other => panic!("update of a missing row: {other:?}"),
    }
    // Strict: the same token is refused, a newer one passes.
    let strict = RowFence::<MySql>::update(&builder(&t, true, false)).expect("strict");
    assert!(strict.sql().ends_with("`last_token` < ?"), "{}", strict.sql());
    assert!(
        rejected(write(&pool, &strict, 3, 1, 0).await),
        "strict accepted the same token"
    );
    assert_eq!(write(&pool, &strict, 4, 1, 7).await.expect("newer"), 1);
    assert_eq!(row(&pool, &t, 1).await, Some((7, 4)));
    common::exec(&pool, &format!("DROP TABLE `{t}`")).await;
}

#[tokio::test]
async fn upsert_inserts_then_guards() {
    let pool = common::pool().await;
    let t = accounts(&pool).await;
    for (strict, increment) in [(false, false), (true, false), (false, true), (true, true)] {
        let id = 10 + i64::from(strict) * 10 + i64::from(increment);
        let up = RowFence::<MySql>::upsert(&builder(&t, strict, increment)).expect("upsert");
        assert!(up.sql().contains("ON DUPLICATE KEY UPDATE"), "{}", up.sql());
        assert_eq!(write(&pool, &up, 5, id, 1).await.expect("insert"), 1);
        assert_eq!(row(&pool, &t, id).await, Some((1, 5)));
        let same = write(&pool, &up, 5, id, 2).await;
        let after_same = if strict {
            assert!(rejected(same), "strict upsert accepted the same token");
            1
        } else {
            assert_eq!(same.expect("same token"), 1);
            if increment { 3 } else { 2 }
        };
        assert_eq!(row(&pool, &t, id).await, Some((after_same, 5)));
        match write(&pool, &up, 4, id, 3).await {
            Err(Error::FenceRejected { token, mark }) => {
                assert_eq!((token.get(), mark), (4, Some(FencingToken::new(5))));
            }
            other => panic!("an older token (strict {strict}): {other:?}"),
        }
        assert_eq!(
            row(&pool, &t, id).await,
            Some((after_same, 5)),
            "a refused upsert changed the row"
        );
        assert_eq!(write(&pool, &up, 6, id, 4).await.expect("newer"), 1);
        let want = if increment { after_same + 4 } else { 4 };
        assert_eq!(row(&pool, &t, id).await, Some((want, 6)));
    }
    common::exec(&pool, &format!("DROP TABLE `{t}`")).await;
}

#[tokio::test]
async fn a_lease_token_fences_out_the_previous_holder() {
    let pool = common::pool().await;
    let t = accounts(&pool).await;
    let store = common::store_on(&pool, &common::unique_table("lh_fence_leases")).await;
    let (a, b) = (LeaseClient::new(store.clone()), LeaseClient::new(store));
    let set = RowFence::<MySql>::update(&builder(&t, false, false)).expect("stmt");
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
    assert_eq!(row(&pool, &t, 1).await, Some((2, lb.token().to_i64().expect("fits"))));
    lb.release().await.expect("release");
    common::exec(&pool, &format!("DROP TABLE `{t}`")).await;
}

#[tokio::test]
async fn bad_fenced_writes_are_typed_errors() {
    let pool = common::pool().await;
    let t = accounts(&pool).await;
    let set = RowFence::<MySql>::update(&builder(&t, false, false)).expect("stmt");
    let incomplete = set.write(FencingToken::new(1)).key("id", 1_i64);
    assert!(matches!(
        incomplete.execute(&pool).await,
        Err(Error::InvalidInput { .. })
    ));
    let missing = FencedUpdate::new("no_such_table", "last_token")
        .and_then(|f| f.set("balance"))
        .and_then(|f| f.key("id"))
        .and_then(|f| RowFence::<MySql>::update(&f))
        .expect("stmt");
    let w = missing
        .write(FencingToken::new(1))
        .value("balance", 1_i64)
        .key("id", 1_i64);
    assert!(matches!(w.execute(&pool).await, Err(Error::Misconfigured { .. })));
    // Identifiers are validated before anything is generated: no quoting tricks.
    for bad in ["acc`ounts", "accounts; DROP TABLE x", "a.b.c", "1accounts"] {
        assert!(
            matches!(FencedUpdate::new(bad, "last_token"), Err(Error::InvalidInput { .. })),
            "{bad:?} accepted"
        );
    }
    // A NOT NULL column given NULL: the database refuses the input.
    let w = set
        .write(FencingToken::new(1))
        .value("balance", None::<i64>)
        .key("id", 1_i64);
    assert!(matches!(w.execute(&pool).await, Err(Error::InvalidInput { .. })));
    let mut tx = pool.begin().await.expect("begin");
    let w = set
        .write(FencingToken::new(7))
        .value("balance", 999_i64)
        .key("id", 1_i64);
    assert_eq!(w.execute(&mut *tx).await.expect("in tx"), FencedOutcome::Applied(1));
    tx.rollback().await.expect("rollback");
    assert_eq!(row(&pool, &t, 1).await, Some((100, 0)), "nothing changed");
    common::exec(&pool, &format!("DROP TABLE `{t}`")).await;
}

/// A refused fenced write says why: a newer mark (named), no row, a `NULL` mark; for
/// the plain update and the upsert alike, and nothing changes.
#[tokio::test]
async fn refused_fenced_writes_say_why() {
    let pool = common::pool().await;
    let t = common::unique_table("accounts_why");
    common::exec(
        &pool,
        &format!(
            "CREATE TABLE `{t}` (id BIGINT PRIMARY KEY, balance BIGINT NOT NULL, last_token BIGINT NULL) ENGINE=InnoDB"
        ),
    )
    .await;
    common::exec(
        &pool,
        &format!("INSERT INTO `{t}` (id, balance, last_token) VALUES (0, 100, 5), (1, 100, NULL)"),
    )
    .await;
    for upsert in [false, true] {
        let f = builder(&t, false, false);
        let fence = if upsert {
            RowFence::<MySql>::upsert(&f)
        } else {
            RowFence::<MySql>::update(&f)
        }
        .expect("fence");
        match write(&pool, &fence, 3, 0, 0).await {
            Err(Error::FenceRejected { token, mark }) => {
                assert_eq!((token.get(), mark), (3, Some(FencingToken::new(5))), "upsert {upsert}");
            }
            other => panic!("a stale token (upsert {upsert}): {other:?}"),
        }
        match write(&pool, &fence, 9, 1, 0).await {
            Err(Error::FenceMarkInvalid { resource, reason }) => {
                assert!(resource.contains("id = 1"), "{resource}");
                assert!(!reason.is_empty());
            }
            other => panic!("a NULL mark (upsert {upsert}): {other:?}"),
        }
        if !upsert {
            match write(&pool, &fence, 9, 404, 0).await {
                Err(Error::FenceTargetMissing { resource }) => assert!(resource.contains("id = 404"), "{resource}"),
                other => panic!("a missing row: {other:?}"),
            }
        }
    }
    let sum: i64 = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT CAST(SUM(balance) AS SIGNED) FROM `{t}`"
    )))
    .fetch_one(&pool)
    .await
    .expect("sum")
    .get(0);
    assert_eq!(sum, 200, "a refused write changed a row");
    common::exec(&pool, &format!("DROP TABLE `{t}`")).await;
}
