//! etcd: `leasehold-etcd` (claim Txn, session keep-alives) against the bare Txn a
//! hand-written etcd lock sends, and against etcd's own lock RPC.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, DeleteOptions, LeaseKeepAliveStream, LeaseKeeper, LockOptions,
    PutOptions, Txn, TxnOp,
};
use leasehold_core::store::CasStore;
use leasehold_etcd::{EtcdConfig, EtcdStore};
use tokio::sync::Mutex;

use super::{Backend, CRASHED, Floor, Observed, OpTexts, RawLock, StoreInfo, StoreKind, env, lost, planted};
use crate::peers::{Cycle, LibraryCycle, POOL, PeerResult, compare};
use crate::stats::time;
use crate::{Plan, Result, fail};

/// The shared single-member etcd, under a prefix of this run.
pub(crate) struct EtcdBackend {
    endpoints: Vec<String>,
    prefix: String,
    admin: Client,
}

async fn connect(endpoints: &[String]) -> Result<Client> {
    let opts = ConnectOptions::new().with_connect_timeout(Duration::from_secs(2));
    let mut c = Client::connect(endpoints, Some(opts))
        .await
        .map_err(|e| fail(format!("cannot connect to etcd at {endpoints:?}: {e}")))?;
    c.status()
        .await
        .map_err(|e| fail(format!("etcd at {endpoints:?} does not answer: {e}")))?;
    Ok(c)
}

/// Whole seconds for an etcd lease of at least `ttl`.
fn lease_secs(ttl: Duration) -> i64 {
    i64::try_from(ttl.as_millis().div_ceil(1000)).unwrap_or(i64::MAX).max(1)
}

impl EtcdBackend {
    pub(crate) async fn open(tag: &str) -> Result<Self> {
        let endpoints: Vec<String> = env("LEASEHOLD_ETCD_ENDPOINTS")?.split(',').map(str::to_owned).collect();
        let admin = connect(&endpoints).await?;
        Ok(Self {
            endpoints,
            prefix: format!("lhbench/{tag}/"),
            admin,
        })
    }
}

#[async_trait]
impl Backend for EtcdBackend {
    async fn store(&self) -> Result<Arc<dyn CasStore>> {
        let client = connect(&self.endpoints).await?;
        Ok(Arc::new(EtcdStore::new(
            client,
            EtcdConfig::new(format!("{}lib/", self.prefix))?,
        )))
    }

    async fn floor(&self) -> Result<Box<dyn Floor>> {
        let mut client = connect(&self.endpoints).await?;
        let lease = client.lease_grant(60, None).await?.id();
        let (keeper, stream) = client.lease_keep_alive(lease).await?;
        Ok(Box::new(EtcdFloor {
            client,
            prefix: format!("{}raw/", self.prefix),
            lease,
            keep: Mutex::new((keeper, stream)),
            victim: Mutex::new(None),
        }))
    }

    async fn describe(&self) -> Result<StoreInfo> {
        let mut c = self.admin.clone();
        let status = c.status().await?;
        let members = c.member_list().await?.members().len();
        Ok(StoreInfo {
            kind: StoreKind::Etcd,
            version: format!("etcd {}", status.version()),
            settings: vec![
                format!("{members} member(s), loopback, default heartbeat 100 ms / election 1000 ms; fsync'd WAL (etcd's default)"),
                "library: one `EtcdStore` (one gRPC channel); floor and peer: their own channel each".into(),
            ],
            library_ops: OpTexts {
                acquire: "one claim Txn (`If(create_revision == 0 or mod_revision == v) AND If(fence counter == n) Then(put record with session lease, put counter + 1) Else(range of both)`), no keep-alive while the session's last answered one leaves it half the TTL (the grant is then trusted for what the session surely has left, and renewed within a third of that)".into(),
                renew: "no Txn: one `LeaseKeepAlive` message, sent by the renewing task itself on the session's stream, when the last answered one does not cover the TTL (always, for whole-second TTLs equal to the session's)".into(),
                release: "one Txn (`If(mod_revision == v) Then(put vacant record without lease) Else(range)`)".into(),
                takeover: "the claim Txn alone (a record this store saw held is claimed as gone, and a refusal's else-branch would answer the current state), once the crashed holder's record was deleted at its TTL (by its store, which lives on and stopped renewing it)".into(),
            },
            floor_ops: OpTexts {
                acquire: "one Txn `If(create_revision(key) == 0) Then(put key holder lease=L) Else(get key)`".into(),
                renew: "one `LeaseKeepAlive` message on the lease's stream (the way etcd locks stay alive)".into(),
                release: "one Txn `If(mod_revision(key) == rev) Then(delete key)`".into(),
                takeover: "the acquire Txn once etcd has expired the old holder's lease (and deleted its key)".into(),
            },
        })
    }

    async fn cleanup(&self) -> Result<()> {
        let mut c = self.admin.clone();
        c.delete(self.prefix.as_str(), Some(DeleteOptions::new().with_prefix()))
            .await?;
        Ok(())
    }

    async fn peer(&self, plan: &Plan) -> Result<Option<PeerResult>> {
        let lib = LibraryCycle::on(self, plan).await?;
        let mut client = connect(&self.endpoints).await?;
        let session = client
            .lease_grant(lease_secs(plan.latency_ttl).max(60), None)
            .await?
            .id();
        let peer = EtcdLockCycle {
            client,
            session,
            names: (0..POOL).map(|i| format!("{}peer/lock/{i}", self.prefix)).collect(),
        };
        let result = compare(
            plan,
            StoreKind::Etcd,
            "etcd-client 0.21 `LockClient` (`lock` with an explicit lease, `unlock`)",
            &lib,
            &peer,
        )
        .await;
        let mut c = peer.client.clone();
        let _ = c.lease_revoke(peer.session).await;
        Ok(Some(result?))
    }
}

struct EtcdFloor {
    client: Client,
    prefix: String,
    lease: i64,
    keep: Mutex<(LeaseKeeper, LeaseKeepAliveStream)>,
    victim: Mutex<Option<(i64, i64)>>,
}

impl EtcdFloor {
    async fn create(&self, key: &str, holder: &str, lease: i64) -> Result<Option<RawLock>> {
        let k = format!("{}{key}", self.prefix);
        let txn = Txn::new()
            .when([Compare::create_revision(k.as_str(), CompareOp::Equal, 0)])
            .and_then([TxnOp::put(
                k.as_str(),
                holder,
                Some(PutOptions::new().with_lease(lease)),
            )])
            .or_else([TxnOp::get(k.as_str(), None)]);
        let mut c = self.client.clone();
        let resp = c.txn(txn).await?;
        if !resp.succeeded() {
            return Ok(None);
        }
        let rev = resp
            .header()
            .map(|h| h.revision())
            .ok_or_else(|| fail("etcd: no header"))?;
        Ok(Some(RawLock::new(k, holder, rev.to_string())))
    }
}

#[async_trait]
impl Floor for EtcdFloor {
    fn label(&self) -> &'static str {
        "etcd"
    }

    async fn take(&self, key: &str, holder: &str, _ttl: Duration) -> Result<Option<RawLock>> {
        self.create(key, holder, self.lease).await
    }

    async fn renew(&self, lock: &mut RawLock, _ttl: Duration) -> Result<()> {
        let mut keep = self.keep.lock().await;
        let (keeper, stream) = &mut *keep;
        keeper.keep_alive().await?;
        match stream.message().await? {
            Some(r) if r.ttl() > 0 => Ok(()),
            _ => Err(fail(format!("etcd floor: lease of {} is gone", lock.key))),
        }
    }

    async fn release(&self, lock: RawLock) -> Result<()> {
        let rev: i64 = lock.version.parse()?;
        let txn = Txn::new()
            .when([Compare::mod_revision(lock.key.as_str(), CompareOp::Equal, rev)])
            .and_then([TxnOp::delete(lock.key.as_str(), None)]);
        let mut c = self.client.clone();
        if c.txn(txn).await?.succeeded() {
            Ok(())
        } else {
            Err(lost(self.label(), &lock.key))
        }
    }

    async fn plant(&self, key: &str, ttl: Duration) -> Result<()> {
        let secs = lease_secs(ttl);
        let lease = {
            let mut v = self.victim.lock().await;
            match *v {
                Some((s, id)) if s == secs => id,
                _ => {
                    let mut c = self.client.clone();
                    let id = c.lease_grant(secs, None).await?.id();
                    *v = Some((secs, id));
                    id
                }
            }
        };
        planted(self.label(), key, self.create(key, CRASHED, lease).await?)
    }

    async fn takeover(&self, key: &str, _seen: &Observed, holder: &str, _ttl: Duration) -> Result<Option<RawLock>> {
        // The next batch of planted locks gets a lease of its own (this one has run out).
        *self.victim.lock().await = None;
        self.create(key, holder, self.lease).await
    }
}

/// etcd's lock RPC with one explicit lease.
struct EtcdLockCycle {
    client: Client,
    session: i64,
    names: Vec<String>,
}

#[async_trait]
impl Cycle for EtcdLockCycle {
    async fn cycle(&self, i: usize) -> Result<(Duration, Duration)> {
        let name = &self.names[i % self.names.len()];
        let mut c = self.client.clone();
        let (acq, resp) = time(c.lock(name.as_str(), Some(LockOptions::new().with_lease(self.session)))).await;
        let key = resp?.key().to_vec();
        let (rel, resp) = time(c.unlock(key)).await;
        resp?;
        Ok((acq, rel))
    }
}
