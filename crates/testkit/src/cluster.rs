//! A replicated store's cluster as its tests drive it (etcd's members, ZooKeeper's
//! ensemble): stores on some of its members, which member leads, a member killed. The
//! [`leader_kill`](crate::leader_kill) scenario runs on one.

use std::time::Duration;

use async_trait::async_trait;
use leasehold_core::LeaseName;
use leasehold_core::store::Linearizable;
use tokio::time::Instant;

/// A cluster of a replicated store, its members numbered from 0, and one test run's
/// place for records on it.
#[async_trait]
pub trait Cluster: Send + Sync {
    /// The lease store on the cluster.
    type Store: Linearizable + Clone + 'static;

    /// What a member is called before its number, in messages (`m` for etcd's `m0`, `s`
    /// for ZooKeeper's `s0`).
    const MEMBER: &'static str;

    /// How long the members may take to elect a leader (after the old one is killed).
    const ELECTION: Duration;

    /// How many members it has.
    fn size(&self) -> usize;

    /// A store with connections of its own to the members `live`, on this run's records.
    async fn store(&self, live: &[usize]) -> Self::Store;

    /// The member that leads now, asked of `live`; `None` if none says it does.
    async fn leader(&self, live: &[usize]) -> Option<usize>;

    /// Kills member `member` outright (SIGKILL).
    fn kill(&self, member: usize);

    /// The fence counter of `name` as `store` keeps it (the last token issued, as 20
    /// decimal digits), if there is one.
    async fn fence_counter(&self, store: &Self::Store, name: &LeaseName) -> Option<Vec<u8>>;

    /// What another process needs to open [`Cluster::store`] of `live` for itself: the
    /// command-line arguments it is started with.
    fn process_args(&self, live: &[usize]) -> Vec<String>;
}

/// The leader among `live`, asked every 100 ms for up to `within`; `None` if none leads by
/// then.
pub async fn poll_leader<C: Cluster + ?Sized>(cluster: &C, live: &[usize], within: Duration) -> Option<usize> {
    let deadline = Instant::now() + within;
    loop {
        if let Some(l) = cluster.leader(live).await {
            return Some(l);
        }
        if Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
