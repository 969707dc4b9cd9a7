//! Setup verbs, the same on every store: `provision` loads the scripts (all Redis
//! needs) and `verify` checks that the server answers and accepts them, against the
//! real server.
#![allow(missing_docs)]

mod support;

use leasehold_redis::{RedisConfig, RedisStore};

#[tokio::test]
async fn provision_and_verify_on_the_real_server() {
    let conn = support::admin(&support::shared_url()).await;
    let config = RedisConfig::default();
    RedisStore::provision(&conn, &config).await.expect("provision");
    RedisStore::new(conn, config)
        .expect("store")
        .verify()
        .await
        .expect("verify");
}
