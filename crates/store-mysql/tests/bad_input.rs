//! Bad input and a bad table fail loudly with a typed error, grant nothing and change
//! nothing: the shared SQL cases (`shared/bad_input.rs`) on the real MariaDB, and
//! MySQL's own: a table that is not InnoDB.
#![allow(missing_docs)]

mod common;

use common::shared::db::TestDb;
use leasehold_core::Error;
use leasehold_mysql::{MySqlConfig, MySqlStore};

common::shared::sql_tests!(bad_input, common::My);

/// MyISAM has no row locks and no transactions: a lease table in it is refused at open,
/// and a table switched to it under a running store fails `verify`, naming the engine.
#[tokio::test]
async fn a_table_that_is_not_innodb_is_refused() {
    let pool = common::pool().await;
    let columns = common::My::GOOD_COLUMNS;
    for engine in ["MyISAM", "MEMORY", "Aria"] {
        let table = common::unique_table("lh_engine");
        common::exec(&pool, &format!("CREATE TABLE `{table}` ({columns}) ENGINE={engine}")).await;
        let config = MySqlConfig::new().with_table(&table).expect("table");
        let err = MySqlStore::new(pool.clone(), config)
            .await
            .expect_err("opened a table that is not InnoDB");
        assert!(matches!(err, Error::Misconfigured { .. }), "{engine}: {err:?}");
        let text = err.to_string();
        assert!(text.contains(engine) && text.contains("InnoDB"), "{engine}: {text}");
        common::exec(&pool, &format!("DROP TABLE `{table}`")).await;
    }
    let table = common::unique_table("lh_engine");
    let store = common::store_on(&pool, &table).await;
    store.verify().await.expect("an InnoDB table verifies");
    common::exec(&pool, &format!("ALTER TABLE `{table}` ENGINE=MyISAM")).await;
    let err = store.verify().await.expect_err("verify passed a MyISAM table");
    assert!(
        matches!(err, Error::Misconfigured { .. }) && err.to_string().contains("MyISAM"),
        "{err:?}"
    );
    common::exec(&pool, &format!("DROP TABLE `{table}`")).await;
}

/// A lease table the user has no privilege on is hidden from `information_schema`, but
/// it is there: opening it is `Misconfigured` (access denied), never `NotProvisioned`,
/// which would send the operator to `provision`, which cannot fix it.
#[tokio::test]
async fn a_table_the_user_may_not_read_is_not_reported_missing() {
    let root = common::pool().await;
    let table = common::unique_table("lh_hidden");
    let config = MySqlConfig::new().with_table(&table).expect("table");
    MySqlStore::provision(&root, &config).await.expect("provision");
    // A user who may read another table of the database, not the lease table.
    let other = common::unique_table("lh_visible");
    common::exec(&root, &format!("CREATE TABLE `{other}` (id INT PRIMARY KEY)")).await;
    let user = format!("lh_blind_{}", &other[other.len() - 8..]);
    common::exec(&root, &format!("CREATE USER '{user}'@'%' IDENTIFIED BY 'pw'")).await;
    common::exec(&root, &format!("GRANT SELECT ON `leasehold`.`{other}` TO '{user}'@'%'")).await;
    let url = common::mysql_url();
    let rest = url.split_once('@').map_or(url.as_str(), |(_, r)| r);
    let blind = sqlx::mysql::MySqlPoolOptions::new()
        .max_connections(1)
        .connect(&format!("mysql://{user}:pw@{rest}"))
        .await
        .expect("connect as the user without privileges on the lease table");
    let err = MySqlStore::new(blind.clone(), config)
        .await
        .expect_err("opened a table the user may not read");
    assert!(matches!(err, Error::Misconfigured { .. }), "{err:?}");
    assert!(err.to_string().contains("denied"), "{err}");
    blind.close().await;
    common::exec(&root, &format!("DROP USER '{user}'@'%'")).await;
    common::exec(&root, &format!("DROP TABLE `{table}`, `{other}`")).await;
}
