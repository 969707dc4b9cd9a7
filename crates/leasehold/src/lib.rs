#![doc = include_str!("../README.md")]
//!
//! ## Features
//!
//! | feature | module | what |
//! |---|---|---|
//! | `postgres` | [`postgres`] | a lease table on the Postgres primary |
//! | `sqlite` | [`sqlite`] | a SQLite file, the embedded default for one host |
//! | `mysql` | [`mysql`] | a lease table in InnoDB on the MySQL / MariaDB primary |
//! | `etcd` | [`etcd`] | etcd session leases |
//! | `zookeeper` | [`zookeeper`] | ZooKeeper ephemeral znodes on sessions |
//! | `dynamodb` | [`dynamodb`] | DynamoDB conditional writes |
//! | `s3` | [`s3`] | S3 conditional writes |
//! | `redis` | [`redis`] | Redis, efficiency-only by type |
//! | `election` | [`election`] | leader election: campaign, resign, observe |
//! | `jobs` | [`jobs`] | singleton scheduled jobs (ShedLock's model) |
//! | `shedlock-postgres` | [`jobs::shedlock`] | ShedLock's own table, shared with Java instances |
//! | `shedlock-mysql` | [`jobs::shedlock`] | the same in MySQL or MariaDB |
//! | `testing` | [`testing`] | counting and fault-injecting store wrappers |
//! | `conformance` | [`conformance`] | the suite a store implementation runs |
//! | `full` | all of the above but `conformance` | |
#![cfg_attr(docsrs, feature(doc_cfg))]

#[doc(inline)]
pub use leasehold_core::*;

mod open;
pub mod url;

/// Postgres: leases in a table on the primary, judged on the database clock
/// (the `leasehold-postgres` crate).
#[cfg(feature = "postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
pub use leasehold_postgres as postgres;

/// SQLite: the embedded default for the processes of one host
/// (the `leasehold-sqlite` crate).
#[cfg(feature = "sqlite")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqlite")))]
pub use leasehold_sqlite as sqlite;

/// MySQL and MariaDB: leases in an InnoDB table on the primary, judged on the server's
/// clock (the `leasehold-mysql` crate).
#[cfg(feature = "mysql")]
#[cfg_attr(docsrs, doc(cfg(feature = "mysql")))]
pub use leasehold_mysql as mysql;

/// etcd: session leases, revision-guarded transactions, watches
/// (the `leasehold-etcd` crate).
#[cfg(feature = "etcd")]
#[cfg_attr(docsrs, doc(cfg(feature = "etcd")))]
pub use leasehold_etcd as etcd;

/// ZooKeeper: leases as ephemeral znodes of sessions, tokens from a versioned counter
/// znode, `multi` fences, watches (the `leasehold-zookeeper` crate).
#[cfg(feature = "zookeeper")]
#[cfg_attr(docsrs, doc(cfg(feature = "zookeeper")))]
pub use leasehold_zookeeper as zookeeper;

/// DynamoDB: one conditional `UpdateItem` per operation, expiry by observation
/// (the `leasehold-dynamodb` crate).
#[cfg(feature = "dynamodb")]
#[cfg_attr(docsrs, doc(cfg(feature = "dynamodb")))]
pub use leasehold_dynamodb as dynamodb;

/// S3 conditional writes, expiry by observation (the `leasehold-s3` crate).
#[cfg(feature = "s3")]
#[cfg_attr(docsrs, doc(cfg(feature = "s3")))]
pub use leasehold_s3 as s3;

/// Redis: efficiency-only leases, by type (the `leasehold-redis` crate).
#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub use leasehold_redis as redis;

/// Leader election on leases: campaign, resign, observe (the `leasehold-election` crate).
#[cfg(feature = "election")]
#[cfg_attr(docsrs, doc(cfg(feature = "election")))]
pub use leasehold_election as election;

/// Singleton scheduled jobs, exactly once per slot (the `leasehold-jobs` crate).
#[cfg(feature = "jobs")]
#[cfg_attr(docsrs, doc(cfg(feature = "jobs")))]
pub use leasehold_jobs as jobs;
