//! The lease table: the shipped `sql/leasehold_leases.sql` is what `provision` runs, it
//! runs on the real server with the `mariadb` client, several processes may provision at
//! once, and the table it makes opens.
#![allow(missing_docs)]

mod common;

use leasehold_mysql::{MySqlConfig, MySqlStore};

#[test]
fn the_shipped_sql_is_what_provision_runs() {
    let generated = MySqlStore::schema_sql(&MySqlConfig::new()).expect("schema");
    common::shared::assert_shipped_sql_is(env!("CARGO_MANIFEST_DIR"), &generated);
    assert!(generated.contains("ENGINE=InnoDB"), "{generated}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shipped_sql_runs_in_the_cli_and_opens() {
    let pool = common::pool().await;
    let table = common::unique_table("lh_shipped");
    let config = MySqlConfig::new().with_table(&table).expect("table");
    let sql = MySqlStore::schema_sql(&config).expect("schema");
    // Twice: it is idempotent.
    for _ in 0..2 {
        common::operator_in_mode("@@sql_mode", &sql);
    }
    MySqlStore::new(pool.clone(), config)
        .await
        .expect("the shipped table opens");
    common::exec(&pool, &format!("DROP TABLE `{table}`")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_provisions_all_succeed() {
    let pool = common::pool_of(12).await;
    let table = common::unique_table("lh_race");
    let config = MySqlConfig::new().with_table(&table).expect("table");
    let mut tasks = Vec::new();
    for _ in 0..10 {
        let (pool, config) = (pool.clone(), config.clone());
        tasks.push(tokio::spawn(async move {
            MySqlStore::provision(&pool, &config).await?;
            MySqlStore::new(pool, config).await.map(|_| ())
        }));
    }
    for t in tasks {
        t.await.expect("task").expect("provision and open");
    }
    common::exec(&pool, &format!("DROP TABLE `{table}`")).await;
}

/// A lease table in another database (`database.table`), quoted part by part.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_in_another_database_opens() {
    let pool = common::pool().await;
    common::exec(&pool, "CREATE DATABASE IF NOT EXISTS leasehold_other").await;
    let table = format!("leasehold_other.{}", common::unique_table("lh_qualified"));
    let store = common::store_on(&pool, &table).await;
    let client = leasehold_core::LeaseClient::new(store);
    let lease = client
        .acquire("qualified", std::time::Duration::from_secs(5))
        .await
        .expect("acquire");
    lease.release().await.expect("release");
    let (db, name) = table.split_once('.').expect("qualified");
    common::exec(&pool, &format!("DROP TABLE `{db}`.`{name}`")).await;
}
