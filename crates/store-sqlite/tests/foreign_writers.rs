//! Records written by other programs (an operator with a SQL shell, a restore, a
//! script): the lease store never undoes them and never grants on an invalid record.
#![allow(missing_docs)]

mod common;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raised_token_is_never_written_back() {
    let (store, table, _keep) = common::foreign_store().await;
    common::shared::a_raised_token_is_never_written_back(store, &table).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupted_held_row_is_never_healed() {
    let (store, table, _keep) = common::foreign_store().await;
    common::shared::a_corrupted_held_row_is_never_healed(store, &table).await;
}
