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
