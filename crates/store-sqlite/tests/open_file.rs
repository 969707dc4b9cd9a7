//! Several processes opening one new database file at once, as the processes of one
//! host do at start-up: every one must succeed, and all see one lease table.
//!
//! A plain `main` (harness = false): the binary re-executes itself as the child
//! processes, which open the file given in `LEASEHOLD_OPEN_FILE` and try one lease.
#![allow(missing_docs)]

use std::process::Command;
use std::time::Duration;

use leasehold_core::LeaseClient;
use leasehold_sqlite::{SqliteConfig, SqliteStore};

const CHILDREN: usize = 8;
const ROUNDS: usize = 5;

fn main() {
    let rt = leasehold_testkit::runtime();
    if let Ok(path) = std::env::var("LEASEHOLD_OPEN_FILE") {
        // Child: open the file, try the lease once, report by exit code and stdout. A
        // grant is held until the process exits: dropping it would have the renewal
        // driver release it, and a child started later could then be granted it too.
        let code = rt.block_on(async {
            let store = match SqliteStore::open_file(&path, SqliteConfig::default()).await {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("open_file failed: {e}");
                    return 2;
                }
            };
            match LeaseClient::new(store)
                .try_acquire("open/once", Duration::from_secs(60))
                .await
            {
                Ok(o) => {
                    let lease = o.granted();
                    println!("granted={}", lease.is_some());
                    std::mem::forget(lease);
                    0
                }
                Err(e) => {
                    eprintln!("acquire failed: {e}");
                    3
                }
            }
        });
        std::process::exit(code);
    }
    let exe = std::env::current_exe().expect("current exe");
    for round in 0..ROUNDS {
        let dir = std::env::temp_dir().join(format!("leasehold-open-{}-{round}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("leases.db");
        let children: Vec<_> = (0..CHILDREN)
            .map(|_| {
                Command::new(&exe)
                    .env("LEASEHOLD_OPEN_FILE", &path)
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .expect("spawn child")
            })
            .collect();
        let mut granted = 0;
        for c in children {
            let out = c.wait_with_output().expect("child");
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "round {round}: a child failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
            if stdout.contains("granted=true") {
                granted += 1;
            }
        }
        assert_eq!(granted, 1, "round {round}: {granted} processes were granted one lease");
        let _ = std::fs::remove_dir_all(&dir);
    }
    println!("open_file: {ROUNDS} rounds x {CHILDREN} processes opened one new file; 1 grant each round");
}
