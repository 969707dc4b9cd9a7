//! An election observer's loop, for wake-up tests: read the record, count the read,
//! wait for any change, again.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::task::JoinHandle;

use crate::LeaseName;
use crate::store::{CasStore, Wait};

/// Spawns a loop that reads `name` through `store`, adds one to `reads` per read, and
/// waits for any change of the record it saw (a minute at most), until aborted. A read
/// that fails panics the task.
pub fn read_loop<S: CasStore + 'static>(store: S, name: LeaseName, reads: Arc<AtomicU64>) -> JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let seen = store.read(&name).await.expect("observer read").map(|c| c.version);
            reads.fetch_add(1, Ordering::SeqCst);
            let _ = store
                .wait_for_change(&name, seen.as_ref(), Wait::Change(Duration::from_secs(60)))
                .await;
        }
    })
}
