//! Several leases held together: [`LeaseClient::acquire_all`](crate::LeaseClient::acquire_all).

use std::fmt;

use futures::future::select_all;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::{FencingToken, Lease, LeaseName, LossCause, Result};

/// Leases on several names, granted together by
/// [`LeaseClient::acquire_all`](crate::LeaseClient::acquire_all), in the names' canonical
/// (sorted) order, and reported lost together: the set is valid while every one of its
/// leases is, and its loss signal fires when the first of them is lost.
///
/// Each lease keeps its own fencing token ([`LeaseSet::token`], [`LeaseSet::tokens`]):
/// a write to the resource guarded by one name carries that name's token. Dropping the
/// set releases every lease in the background; [`LeaseSet::release`] does it and waits.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use std::time::Duration;
/// use leasehold_core::{LeaseClient, MemoryStore};
///
/// let client = LeaseClient::new(MemoryStore::new());
/// // A transfer between two accounts locks both, whatever order the caller names them.
/// let set = client.acquire_all(["account/42", "account/7"], Duration::from_secs(30)).await?;
/// let names: Vec<&str> = set.names().map(|n| n.as_str()).collect();
/// assert_eq!(names, ["account/42", "account/7"]); // sorted: the order every caller takes them in
/// let token_7 = set.token("account/7").expect("in the set");
/// tokio::select! {
///     _ = async { /* debit and credit, each write carrying its account's token */ } => {}
///     (name, cause) = set.lost() => eprintln!("lost {name}: {cause}"),
/// }
/// set.release().await?;
/// # let _ = token_7;
/// # Ok::<(), leasehold_core::Error>(()) }).unwrap();
/// ```
pub struct LeaseSet {
    /// In the names' sorted order.
    leases: Vec<Lease>,
    /// Cancelled when any lease of the set is lost (or released).
    lost: CancellationToken,
}

impl fmt::Debug for LeaseSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaseSet").field("leases", &self.leases).finish()
    }
}

impl LeaseSet {
    /// The set of `leases`, which are in sorted name order and not empty.
    pub(crate) fn new(leases: Vec<Lease>) -> Self {
        let lost = CancellationToken::new();
        // One small task per set (not per lease) joins the leases' loss signals; it ends
        // at the first loss, which at the latest is the set's release or drop.
        let members: Vec<_> = leases.iter().map(|l| l.cancellation().cancelled_owned()).collect();
        let combined = lost.clone();
        tokio::spawn(async move {
            let _ = select_all(members.into_iter().map(Box::pin)).await;
            combined.cancel();
        });
        Self { leases, lost }
    }

    /// The leases, in the names' sorted order.
    pub fn leases(&self) -> &[Lease] {
        &self.leases
    }

    /// The lease names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &LeaseName> {
        self.leases.iter().map(Lease::name)
    }

    /// Each name with its lease's fencing token, in sorted name order.
    pub fn tokens(&self) -> impl Iterator<Item = (&LeaseName, FencingToken)> {
        self.leases.iter().map(|l| (l.name(), l.token()))
    }

    /// The fencing token of the lease on `name`, if `name` is in the set.
    pub fn token(&self, name: impl AsRef<str>) -> Option<FencingToken> {
        self.lease(name).map(Lease::token)
    }

    /// The lease on `name`, if `name` is in the set.
    pub fn lease(&self, name: impl AsRef<str>) -> Option<&Lease> {
        let name = name.as_ref();
        self.leases
            .binary_search_by(|l| l.name().as_str().cmp(name))
            .ok()
            .map(|i| &self.leases[i])
    }

    /// True while every lease of the set is valid ([`Lease::is_valid`]).
    pub fn is_valid(&self) -> bool {
        !self.lost.is_cancelled() && self.leases.iter().all(Lease::is_valid)
    }

    /// The earliest [`Lease::valid_until`] of the set: until then, all of it may be trusted.
    pub fn valid_until(&self) -> Instant {
        self.leases
            .iter()
            .map(Lease::valid_until)
            .min()
            .unwrap_or_else(Instant::now)
    }

    /// Completes when the first lease of the set is lost (or released), with its name
    /// and cause. The other leases are still held (and renewed) until the set is
    /// released or dropped: release it when this fires.
    pub async fn lost(&self) -> (LeaseName, LossCause) {
        self.lost.cancelled().await;
        self.loss_cause().unwrap_or_else(|| {
            // The combined token fired: some lease has a cause by then.
            let first = &self.leases[0];
            (first.name().clone(), LossCause::Expired)
        })
    }

    /// The first lease of the set (in sorted order) that has ended, with its cause.
    pub fn loss_cause(&self) -> Option<(LeaseName, LossCause)> {
        self.leases
            .iter()
            .find_map(|l| l.loss_cause().map(|c| (l.name().clone(), c)))
    }

    /// A cancellation token cancelled when any lease of the set is lost: hand it to
    /// work that must stop then. Cancelling it yourself releases nothing.
    pub fn cancellation(&self) -> CancellationToken {
        self.lost.child_token()
    }

    /// The leases, to hold (and release) one by one.
    pub fn into_leases(self) -> Vec<Lease> {
        self.leases
    }

    /// Releases every lease of the set and waits for the store's answers.
    ///
    /// # Errors
    /// The first release that failed (the others were still released; a lease whose
    /// release failed expires on its own).
    pub async fn release(self) -> Result<()> {
        release_all(self.leases).await
    }
}

/// Releases `leases` in reverse order; the first error, after trying them all.
pub(crate) async fn release_all(leases: Vec<Lease>) -> Result<()> {
    let mut first_error = None;
    for lease in leases.into_iter().rev() {
        if let Err(e) = lease.release().await {
            first_error.get_or_insert(e);
        }
    }
    first_error.map_or(Ok(()), Err)
}
