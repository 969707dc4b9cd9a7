//! The election: one lease name that candidates campaign for.

use std::time::Duration;

use futures::Stream;
use leasehold_core::{AcquireOutcome, LeaseClient, LeaseName, Result};

use crate::observe::{self, Judge};
use crate::{ElectionConfig, Leader, LeaderState, Leadership};

/// An election over one lease name on any store.
///
/// Candidates are [`LeaseClient`]s (one per process) that [`campaign`](Election::campaign)
/// for the same name. Exactly one of them holds the lease at a time; its fencing token
/// grows with every change of leader.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use std::time::Duration;
/// use leasehold_core::{LeaseClient, MemoryStore};
/// use leasehold_election::Election;
///
/// let store = MemoryStore::new();
/// let a = Election::new(LeaseClient::new(store.clone()), "scheduler-leader", Duration::from_secs(5))?;
/// let b = Election::new(LeaseClient::new(store), "scheduler-leader", Duration::from_secs(5))?;
///
/// let leadership = a.campaign().await?;              // waits until a leads
/// assert!(b.try_campaign().await?.is_none());        // b does not
/// assert_eq!(b.leader().await?.map(|l| l.token), Some(leadership.token()));
/// leadership.resign().await?;                        // b may now win, with token 2
/// assert_eq!(b.try_campaign().await?.map(|l| l.token().get()), Some(2));
/// # Ok::<(), leasehold_core::Error>(()) }).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct Election {
    client: LeaseClient,
    name: LeaseName,
    config: ElectionConfig,
}

impl Election {
    /// An election for `name` with a leader lease of `ttl` and default options.
    ///
    /// # Errors
    /// [`leasehold_core::Error::InvalidInput`] for a bad name or TTL.
    pub fn new(client: LeaseClient, name: impl AsRef<str>, ttl: Duration) -> Result<Self> {
        Self::with_config(client, name, ElectionConfig::new(ttl))
    }

    /// An election with options.
    ///
    /// # Errors
    /// [`leasehold_core::Error::InvalidInput`] for a bad name or option.
    pub fn with_config(client: LeaseClient, name: impl AsRef<str>, config: ElectionConfig) -> Result<Self> {
        config.validate()?;
        Ok(Self {
            client,
            name: LeaseName::new(name)?,
            config,
        })
    }

    /// The election's lease name.
    pub fn name(&self) -> &LeaseName {
        &self.name
    }

    /// The options.
    pub fn config(&self) -> &ElectionConfig {
        &self.config
    }

    /// The candidate's client.
    pub fn client(&self) -> &LeaseClient {
        &self.client
    }

    /// Waits until this candidate leads (cancel by dropping the future).
    ///
    /// Waits on the store's change notification where it has one, otherwise retries
    /// when the current leader's lease can have run out.
    ///
    /// A candidate whose client leads already is told so at once, with
    /// [`leasehold_core::Error::AlreadyHeld`] (the tenure's token): it never waits on its
    /// own leadership. Resign (or let the tenure end) before campaigning again.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// use std::time::Duration;
    /// use leasehold_core::{Error, LeaseClient, MemoryStore};
    /// use leasehold_election::Election;
    ///
    /// let election = Election::new(LeaseClient::new(MemoryStore::new()), "compactor", Duration::from_secs(10))?;
    /// let leadership = election.campaign().await?;
    /// assert!(matches!(election.campaign().await, Err(Error::AlreadyHeld { token, .. }) if token == leadership.token()));
    /// leadership.resign().await?;
    /// assert_eq!(election.campaign().await?.token().get(), 2);
    /// # Ok::<(), Error>(()) }).unwrap();
    /// ```
    ///
    /// # Errors
    /// [`leasehold_core::Error::AlreadyHeld`] while this candidate's client leads; store
    /// errors that retrying cannot fix (misconfiguration, a corrupt record).
    pub async fn campaign(&self) -> Result<Leadership> {
        let lease = self.client.acquire(&self.name, self.config.ttl).await?;
        Ok(Leadership::new(lease))
    }

    /// Like [`Election::campaign`], giving up with [`leasehold_core::Error::Timeout`].
    ///
    /// # Errors
    /// As [`Election::campaign`], plus the timeout.
    pub async fn campaign_timeout(&self, timeout: Duration) -> Result<Leadership> {
        let lease = self
            .client
            .acquire_timeout(&self.name, self.config.ttl, timeout)
            .await?;
        Ok(Leadership::new(lease))
    }

    /// One attempt: leadership if nobody leads now, `None` otherwise.
    ///
    /// # Errors
    /// Store errors.
    pub async fn try_campaign(&self) -> Result<Option<Leadership>> {
        Ok(match self.client.try_acquire(&self.name, self.config.ttl).await? {
            AcquireOutcome::Granted(lease) => Some(Leadership::new(lease)),
            AcquireOutcome::Held { .. } => None,
        })
    }

    /// Who leads now, from one read of the store: `None` when the lease is free,
    /// released, or (on stores with a clock) expired.
    ///
    /// On stores without a clock a single read cannot tell a live leader from a dead
    /// one; [`Election::observe`] can (it watches the record for a whole TTL).
    ///
    /// # Errors
    /// Store errors.
    pub async fn leader(&self) -> Result<Option<Leader>> {
        let current = self.client.store().read(&self.name).await?;
        let mut judge = Judge::new(self.client.policy());
        Ok(judge.leader(current.as_ref(), tokio::time::Instant::now()))
    }

    /// A stream of who leads, yielding only changes: the first item is the leader at
    /// the time of the first read, then one item each time the leader (holder or token)
    /// changes, `None` while nobody leads.
    ///
    /// It waits on the store's change notification where the store has one, otherwise
    /// it reads every [`ElectionConfig::observe_interval`] (and when the leader's lease
    /// can have run out). Transient store errors are retried with backoff; an error
    /// retrying cannot fix is yielded and ends the stream.
    pub fn observe(&self) -> impl Stream<Item = Result<Option<Leader>>> + Send + 'static {
        observe::stream(
            self.client.store().clone(),
            self.client.policy(),
            self.name.clone(),
            self.config.observe_interval,
        )
    }

    /// [`Election::observe`], which also says when who leads is not known: the first
    /// read that fails after a success (or before any) yields [`LeaderState::Unknown`]
    /// with the store's error, and the next read that succeeds yields
    /// [`LeaderState::Known`] again, even if the leader did not change. A display of
    /// the leader uses this one, so that it never goes on showing an old answer while
    /// the store cannot be read.
    ///
    /// ```
    /// use futures::StreamExt as _;
    /// use leasehold_core::testing::{FaultPlan, FaultStore};
    /// use leasehold_core::{LeaseClient, MemoryStore};
    /// use leasehold_election::{Election, LeaderState};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> leasehold_core::Result<()> {
    /// let store = FaultStore::new(MemoryStore::new(), 1);
    /// let watcher = Election::new(LeaseClient::new(store.clone()), "svc/leader", std::time::Duration::from_secs(3))?;
    /// let mut states = std::pin::pin!(watcher.observe_states());
    /// assert!(matches!(states.next().await, Some(Ok(LeaderState::Known(None)))));
    /// store.set_plan(FaultPlan::down());
    /// match states.next().await {
    ///     Some(Ok(LeaderState::Unknown(e))) => assert!(e.is_retryable() || e.is_indeterminate()),
    ///     other => panic!("{other:?}"),
    /// }
    /// store.set_plan(FaultPlan::none());
    /// assert!(matches!(states.next().await, Some(Ok(LeaderState::Known(None)))));
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// As [`Election::observe`]: an error retrying cannot fix is yielded and ends the
    /// stream.
    pub fn observe_states(&self) -> impl Stream<Item = Result<LeaderState>> + Send + 'static {
        observe::states(
            self.client.store().clone(),
            self.client.policy(),
            self.name.clone(),
            self.config.observe_interval,
            true,
        )
    }
}
