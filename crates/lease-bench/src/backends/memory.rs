//! `MemoryStore`: the library's own cost with no network. Its floor is the store's own
//! `CasStore` call, so the ratio is what the lease client adds around one store call.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use leasehold_core::{
    FencingToken, HolderId, LeaseName, MemoryStore, Ttl,
    store::{CasOutcome, CasStore, LeaseRecord, Precondition},
};

use super::{Backend, Floor, OpTexts, RawLock, StoreInfo, StoreKind, lost};
use crate::Result;

/// The in-process store.
#[derive(Debug)]
pub(crate) struct MemoryBackend {
    store: MemoryStore,
}

impl MemoryBackend {
    pub(crate) fn new() -> Self {
        Self {
            store: MemoryStore::new(),
        }
    }
}

#[async_trait]
impl Backend for MemoryBackend {
    async fn store(&self) -> Result<Arc<dyn CasStore>> {
        Ok(Arc::new(self.store.clone()))
    }

    async fn floor(&self) -> Result<Box<dyn Floor>> {
        Ok(Box::new(MemoryFloor {
            store: self.store.clone(),
        }))
    }

    async fn describe(&self) -> Result<StoreInfo> {
        Ok(StoreInfo {
            kind: StoreKind::Memory,
            version: format!("leasehold-core {}", env!("CARGO_PKG_VERSION")),
            settings: vec!["in process; records kept encoded, expiry on Tokio's clock".into()],
            library_ops: OpTexts {
                acquire: "`LeaseClient::try_acquire` (decision, one `write(Claimable)`, registration with the renewal driver)".into(),
                renew: "`CasStore::renew` with the record the renewal driver builds".into(),
                release: "`Lease::release` (one `write(Version)` of the vacant record in the caller's task; the lease is left on the renewal driver's board)".into(),
                takeover: "`LeaseClient::try_acquire` on an expired lease (one `write(Claimable)`)".into(),
            },
            floor_ops: OpTexts {
                acquire: "`MemoryStore::write(Claimable)` called directly".into(),
                renew: "`MemoryStore::write(Version)` called directly".into(),
                release: "`MemoryStore::write(Version)` of the vacant record, called directly".into(),
                takeover: "`MemoryStore::write(Claimable)` on the expired record, called directly".into(),
            },
        })
    }

    async fn cleanup(&self) -> Result<()> {
        Ok(())
    }
}

struct MemoryFloor {
    store: MemoryStore,
}

fn record(holder: &str, ttl: Duration) -> Result<LeaseRecord> {
    Ok(LeaseRecord::held(
        HolderId::new(holder)?,
        FencingToken::FIRST,
        Ttl::new(ttl)?,
    ))
}

impl MemoryFloor {
    async fn on_version(&self, lock: &RawLock, rec: LeaseRecord) -> Result<String> {
        let name = LeaseName::new(&lock.key)?;
        let expect = Precondition::Version(leasehold_core::store::Version::new(lock.version.as_str()));
        match self.store.write(&name, &expect, &rec).await? {
            CasOutcome::Written(s) => Ok(s.version.as_str().to_owned()),
            CasOutcome::Conflict(_) => Err(lost(self.label(), &lock.key)),
        }
    }
}

#[async_trait]
impl Floor for MemoryFloor {
    fn label(&self) -> &'static str {
        "memory"
    }

    async fn take(&self, key: &str, holder: &str, ttl: Duration) -> Result<Option<RawLock>> {
        let name = LeaseName::new(key)?;
        match self
            .store
            .write(&name, &Precondition::Claimable, &record(holder, ttl)?)
            .await?
        {
            CasOutcome::Written(s) => Ok(Some(RawLock::new(key, holder, s.version.as_str()))),
            CasOutcome::Conflict(_) => Ok(None),
        }
    }

    async fn renew(&self, lock: &mut RawLock, ttl: Duration) -> Result<()> {
        lock.version = self.on_version(lock, record(&lock.holder, ttl)?).await?;
        Ok(())
    }

    async fn release(&self, lock: RawLock) -> Result<()> {
        let rec = record(&lock.holder, Duration::from_secs(1))?.vacated();
        self.on_version(&lock, rec).await.map(drop)
    }
}
