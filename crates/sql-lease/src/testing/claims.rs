//! Concurrent claims: the store issues every token exactly once.

use std::sync::Arc;
use std::time::Duration;

use leasehold_core::{
    FencingToken, HolderId, LeaseName, Ttl,
    store::{CasOutcome, CasStore, Current, LeaseRecord, Precondition},
};

/// `tasks` concurrent claimers each take a free lease `rounds` times (a `Claimable`
/// write, then a release on the version they got). Every grant must carry a token the
/// store never issued before, the tokens of all grants must be exactly
/// `1..=tasks * rounds` (each claim of a vacant record is the previous token + 1), and a
/// refused claim must report a held record (or say it does not know).
pub async fn concurrent_claims_issue_each_token_once(
    store: Arc<dyn CasStore>,
    name: &LeaseName,
    tasks: u64,
    rounds: u64,
) {
    let mut handles = Vec::new();
    for task in 0..tasks {
        let store = store.clone();
        let name = name.clone();
        handles.push(tokio::spawn(async move {
            let me = HolderId::new(format!("claimer-{task}")).unwrap_or_else(|e| panic!("{e}"));
            let ttl = Ttl::from_millis(10_000).unwrap_or_else(|e| panic!("{e}"));
            let mut tokens = Vec::new();
            let mut refusals = 0u64;
            while u64::try_from(tokens.len()).unwrap_or(u64::MAX) < rounds {
                let rec = LeaseRecord::held(me.clone(), FencingToken::ZERO, ttl);
                match store.write(&name, &Precondition::Claimable, &rec).await {
                    Ok(CasOutcome::Written(s)) => {
                        assert_eq!(
                            s.record.holder.as_ref(),
                            Some(&me),
                            "granted record names another holder"
                        );
                        tokens.push(s.record.token.get());
                        let release = s.record.vacated();
                        match store.write(&name, &Precondition::Version(s.version), &release).await {
                            Ok(CasOutcome::Written(_)) => {}
                            other => panic!("release of a held lease failed: {other:?}"),
                        }
                    }
                    Ok(CasOutcome::Conflict(Current::Present(s))) => {
                        assert!(s.record.holder.is_some(), "a vacant record refused a claim: {s:?}");
                        refusals += 1;
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    }
                    Ok(CasOutcome::Conflict(Current::Unknown)) => refusals += 1,
                    Ok(CasOutcome::Conflict(Current::Absent)) => panic!("a claim conflicted with an absent record"),
                    Err(e) => panic!("claim failed: {e}"),
                }
                assert!(refusals < 100_000, "livelock");
            }
            tokens
        }));
    }
    let mut all = Vec::new();
    for h in handles {
        all.extend(h.await.unwrap_or_else(|e| panic!("task: {e}")));
    }
    all.sort_unstable();
    let expected: Vec<u64> = (1..=tasks * rounds).collect();
    assert_eq!(all, expected, "tokens issued twice or skipped");
}
