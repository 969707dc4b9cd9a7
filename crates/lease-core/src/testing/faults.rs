//! A seeded fault-injecting store wrapper.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::{
    Error, LeaseName, NamePrefix, Result,
    store::{
        Capabilities, CasOutcome, CasStore, DeleteOutcome, ExpireOutcome, LeaseRecord, Precondition, Stored, Version,
        Wait,
    },
};

/// What a [`FaultStore`] does to each call. Probabilities are in `0.0..=1.0`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FaultPlan {
    /// Fail with [`Error::Unavailable`] without sending.
    pub fail_before_send: f64,
    /// Send (the call applies), then fail with [`Error::Indeterminate`].
    pub apply_then_fail: f64,
    /// Wait this long before sending each call.
    pub delay: Option<Duration>,
    /// Never answer (the call is not sent).
    pub hang: bool,
}

impl FaultPlan {
    /// No faults.
    pub fn none() -> Self {
        Self::default()
    }

    /// Every call hangs: the store stopped answering.
    pub fn hang() -> Self {
        Self {
            hang: true,
            ..Self::default()
        }
    }

    /// Every call fails before it is sent.
    pub fn down() -> Self {
        Self {
            fail_before_send: 1.0,
            ..Self::default()
        }
    }
}

/// Wraps a store and injects faults from a seeded generator, so a failing run replays.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use leasehold_core::{LeaseName, MemoryStore, testing::{FaultPlan, FaultStore}, store::CasStore};
/// let store = FaultStore::new(MemoryStore::new(), 7);
/// store.set_plan(FaultPlan::down());
/// assert!(store.read(&LeaseName::new("a")?).await.unwrap_err().is_retryable());
/// # Ok::<(), leasehold_core::Error>(()) }).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct FaultStore<S> {
    inner: S,
    plan: Arc<Mutex<FaultPlan>>,
    rng: Arc<Mutex<StdRng>>,
    injected: Arc<std::sync::atomic::AtomicU64>,
}

enum Fate {
    Normal,
    FailBefore,
    ApplyThenFail,
}

impl<S: CasStore> FaultStore<S> {
    /// Wraps `inner` with no faults; `seed` fixes the sequence of random choices.
    pub fn new(inner: S, seed: u64) -> Self {
        Self {
            inner,
            plan: Arc::new(Mutex::new(FaultPlan::none())),
            rng: Arc::new(Mutex::new(StdRng::seed_from_u64(seed))),
            injected: Arc::default(),
        }
    }

    /// How many calls failed by injection so far (hangs and delays not counted).
    pub fn injected(&self) -> u64 {
        self.injected.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Replaces the plan (takes effect on the next call).
    pub fn set_plan(&self, plan: FaultPlan) {
        *self.plan.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = plan;
    }

    /// The wrapped store.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    async fn fate(&self) -> Fate {
        let plan = self
            .plan
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        if plan.hang {
            std::future::pending::<()>().await;
        }
        if let Some(d) = plan.delay {
            tokio::time::sleep(d).await;
        }
        let mut rng = self.rng.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if rng.random_bool(plan.fail_before_send.clamp(0.0, 1.0)) {
            Fate::FailBefore
        } else if rng.random_bool(plan.apply_then_fail.clamp(0.0, 1.0)) {
            Fate::ApplyThenFail
        } else {
            Fate::Normal
        }
    }

    async fn run<T>(&self, call: impl std::future::Future<Output = Result<T>>) -> Result<T> {
        match self.fate().await {
            Fate::Normal => call.await,
            Fate::FailBefore => {
                self.injected.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                Err(Error::Unavailable {
                    message: "injected: failed before send".into(),
                    source: None,
                })
            }
            Fate::ApplyThenFail => {
                let _ = call.await;
                self.injected.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                Err(Error::Indeterminate {
                    message: "injected: reply lost after the call applied".into(),
                    source: None,
                })
            }
        }
    }
}

#[async_trait]
impl<S: CasStore> CasStore for FaultStore<S> {
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    async fn read(&self, name: &LeaseName) -> Result<Option<Stored>> {
        self.run(self.inner.read(name)).await
    }
    async fn write(&self, name: &LeaseName, expect: &Precondition, record: &LeaseRecord) -> Result<CasOutcome> {
        self.run(self.inner.write(name, expect, record)).await
    }
    async fn delete(&self, name: &LeaseName, version: &Version) -> Result<DeleteOutcome> {
        self.run(self.inner.delete(name, version)).await
    }
    async fn purge(&self, name: &LeaseName, version: &Version) -> Result<DeleteOutcome> {
        self.run(self.inner.purge(name, version)).await
    }
    async fn expire(&self, name: &LeaseName, version: &Version, after: Duration) -> Result<ExpireOutcome> {
        self.run(self.inner.expire(name, version, after)).await
    }
    async fn renew(&self, name: &LeaseName, version: &Version, record: &LeaseRecord) -> Result<CasOutcome> {
        self.run(self.inner.renew(name, version, record)).await
    }
    async fn release(&self, name: &LeaseName, version: &Version, held: &LeaseRecord) -> Result<CasOutcome> {
        self.run(self.inner.release(name, version, held)).await
    }
    async fn list(&self, prefix: &NamePrefix) -> Result<Vec<LeaseName>> {
        self.inner.list(prefix).await
    }
    async fn wait_for_change(&self, name: &LeaseName, seen: Option<&Version>, wait: Wait) -> Result<()> {
        self.inner.wait_for_change(name, seen, wait).await
    }
    async fn store_now_ms(&self) -> Result<Option<u64>> {
        self.inner.store_now_ms().await
    }
}

impl<S: crate::store::Linearizable> crate::store::Linearizable for FaultStore<S> {}
