//! Fenced transactions on the lease record itself: the user's operations in a
//! transaction guarded by a compare on the lease record's mod revision (the mitigation
//! Jepsen recommended for etcd locks). For a key that carries its own token mark, see
//! [`KeyFence`](crate::KeyFence).

use etcd_client::{Compare, CompareOp, Txn, TxnOp, TxnResponse};
use leasehold_core::fence::{FencedOutcome, rejected};
use leasehold_core::{FencingToken, Lease, LeaseName, Result};

use crate::error::Effect;
use crate::store::EtcdStore;

/// The guard of one tenure: the lease record's key and the mod revision it had when the
/// lease was granted, with the grant's fencing token.
///
/// Take it once, right after the grant ([`EtcdStore::fence`]), and use it for every
/// write of the tenure, like the token: re-taking it later could pick up a newer grant.
/// The record's revision changes exactly when the tenure ends (release, expiry, takeover:
/// renewals do not rewrite it), so a transaction comparing it applies only while the
/// tenure is still current, on etcd itself, in the same atomic step as the write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnFence {
    name: LeaseName,
    key: Vec<u8>,
    revision: i64,
    token: FencingToken,
}

impl TxnFence {
    /// A guard from its parts (for writers that learned them another way).
    pub fn new(name: LeaseName, key: Vec<u8>, revision: i64, token: FencingToken) -> Self {
        Self {
            name,
            key,
            revision,
            token,
        }
    }

    /// The lease name.
    pub fn name(&self) -> &LeaseName {
        &self.name
    }

    /// The grant's fencing token, for writes outside etcd.
    pub fn token(&self) -> FencingToken {
        self.token
    }

    /// The lease record's mod revision during this tenure.
    pub fn revision(&self) -> i64 {
        self.revision
    }

    /// The lease record's key.
    pub fn lease_key(&self) -> &[u8] {
        &self.key
    }

    /// The compare to put in your own transaction: the lease record still has this
    /// tenure's revision.
    pub fn compare(&self) -> Compare {
        Compare::mod_revision(self.key.clone(), CompareOp::Equal, self.revision)
    }
}

impl EtcdStore {
    /// The guard of `lease`, granted by a [`leasehold_core::LeaseClient`] over any
    /// store on the same etcd and prefix (this one or another instance, in this process
    /// or another): the guard is the lease record's revision as the grant wrote it
    /// ([`Lease::version`]), which etcd compares; no state of this store is needed.
    ///
    /// # Errors
    /// [`leasehold_core::Error::FenceRejected`] (through [`rejected`]) if the lease is no
    /// longer valid (released, expired, taken over: a later [`EtcdStore::fenced_txn`]
    /// would be refused anyway). [`leasehold_core::Error::InvalidInput`] for a lease
    /// whose version is not an etcd revision (granted on another kind of store).
    pub fn fence(&self, lease: &Lease) -> Result<TxnFence> {
        if !lease.is_valid() {
            return Err(rejected(lease.token()));
        }
        let version = lease.version();
        let revision = version.as_str().parse::<i64>().ok().filter(|r| *r > 0).ok_or_else(|| {
            leasehold_core::Error::invalid("lease", "its version is not an etcd revision: granted on another store")
        })?;
        Ok(TxnFence::new(
            lease.name().clone(),
            self.record_key(lease.name()),
            revision,
            lease.token(),
        ))
    }

    /// Runs `ops` in one transaction that applies only if `fence`'s tenure is still
    /// current (the lease record still has its revision). One round trip: guard and
    /// effect are one etcd transaction.
    ///
    /// The outcome is [`FencedOutcome::Applied`] with etcd's answer (the responses of
    /// `ops`, in order); it is never [`FencedOutcome::ConditionFailed`] (the guard is the
    /// only condition).
    ///
    /// ```no_run
    /// # async fn demo(store: leasehold_etcd::EtcdStore, lease: leasehold_core::Lease) -> leasehold_core::Result<()> {
    /// use etcd_client::TxnOp;
    /// use leasehold_core::fence::FencedOutcome;
    /// let fence = store.fence(&lease)?;
    /// let outcome = store.fenced_txn(&fence, [TxnOp::put("ledger/balance", "42", None)]).await?;
    /// assert!(matches!(outcome, FencedOutcome::Applied(_)));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`leasehold_core::Error::FenceRejected`] (through [`rejected`]) when the tenure is
    /// over: nothing was written, the caller has lost the lease and must stop.
    /// [`leasehold_core::Error::Indeterminate`] when no answer came (the writes may have
    /// applied); [`leasehold_core::Error::Unavailable`] when it was not sent.
    pub async fn fenced_txn(&self, fence: &TxnFence, ops: impl Into<Vec<TxnOp>>) -> Result<FencedOutcome<TxnResponse>> {
        let txn = Txn::new().when([fence.compare()]).and_then(ops);
        let resp = self
            .inner
            .send_txn(txn)
            .await
            .map_err(|f| self.inner.failure("fenced transaction", Effect::Write, f))?;
        if !resp.succeeded() {
            return Err(rejected(fence.token()));
        }
        Ok(FencedOutcome::Applied(resp))
    }
}
