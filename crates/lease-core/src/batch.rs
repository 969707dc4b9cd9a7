//! Renewals sent together ([`crate::store::CasStore::renew_many`]): the bookkeeping
//! every store that batches them shares.

use std::future::Future;

use crate::Error;
use crate::failure::ErrorClass;
use crate::store::{CasOutcome, Renewal};

/// The error of each call that a batch carried when its one request failed with `e`
/// ([`crate::store::CasStore::renew_many`]): of `e`'s class (may it have applied, may
/// it be retried), with `e`'s message.
pub fn batch_failure(e: &Error) -> Error {
    let class = if e.is_indeterminate() {
        ErrorClass::Indeterminate
    } else if e.is_retryable() {
        ErrorClass::Unavailable
    } else if matches!(e, Error::NotProvisioned { .. }) {
        ErrorClass::NotProvisioned
    } else {
        ErrorClass::Misconfigured
    };
    let message = match e {
        Error::Unavailable { message, .. }
        | Error::Indeterminate { message, .. }
        | Error::Misconfigured { message, .. }
        | Error::NotProvisioned { message, .. } => message.clone(),
        other => other.to_string(),
    };
    class.error(message, std::io::Error::other("the batch's one request failed"))
}

/// Answers `batch` with one request, for a store that batches renewals
/// ([`crate::store::CasStore::renew_many`]): `prepare` readies each renewal (an error
/// answers that renewal alone, and it is not sent); `send` sends the ready ones in one
/// request and answers each, in order. A failed request answers each renewal it carried
/// with [`batch_failure`] of its error; an answer missing from `send`'s reply is
/// [`Error::Indeterminate`] (the renewal may have applied).
pub async fn send_batch<'a, P, Fut>(
    batch: &'a [Renewal],
    mut prepare: impl FnMut(&'a Renewal) -> crate::Result<P>,
    send: impl FnOnce(Vec<(&'a Renewal, P)>) -> Fut,
) -> Vec<crate::Result<CasOutcome>>
where
    Fut: Future<Output = crate::Result<Vec<crate::Result<CasOutcome>>>>,
{
    let mut out: Vec<Option<crate::Result<CasOutcome>>> = Vec::with_capacity(batch.len());
    let mut ready = Vec::with_capacity(batch.len());
    let mut sent = Vec::with_capacity(batch.len());
    for (i, r) in batch.iter().enumerate() {
        match prepare(r) {
            Ok(p) => {
                ready.push((r, p));
                sent.push(i);
                out.push(None);
            }
            Err(e) => out.push(Some(Err(e))),
        }
    }
    if !ready.is_empty() {
        match send(ready).await {
            Ok(answers) => {
                let mut answers = answers.into_iter();
                for &i in &sent {
                    out[i] = Some(answers.next().unwrap_or_else(|| {
                        Err(Error::Indeterminate {
                            message: "the store answered fewer renewals than the batch sent".into(),
                            source: None,
                        })
                    }));
                }
            }
            Err(e) => {
                for &i in &sent {
                    out[i] = Some(Err(batch_failure(&e)));
                }
            }
        }
    }
    // Every renewal was answered above: refused before sending, or by the request.
    out.into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::failure::{Effect, no_answer};

    #[test]
    fn a_batch_failure_keeps_the_class_of_its_request() {
        let sent = no_answer(Effect::Write, "renewals", Duration::from_secs(1));
        assert!(batch_failure(&sent).is_indeterminate());
        let refused = Error::unavailable("down", std::io::Error::other("refused"));
        let each = batch_failure(&refused);
        assert!(each.is_retryable() && !each.is_indeterminate(), "{each:?}");
        let setup = Error::misconfigured("wrong table", std::io::Error::other("wrong"));
        assert!(matches!(batch_failure(&setup), Error::Misconfigured { ref message, .. } if message == "wrong table"));
        let missing = Error::not_provisioned("no table", std::io::Error::other("missing"));
        assert!(matches!(batch_failure(&missing), Error::NotProvisioned { ref message, .. } if message == "no table"));
    }

    fn renewals(n: usize) -> Vec<Renewal> {
        (0..n)
            .map(|i| Renewal {
                name: crate::LeaseName::new(format!("b/{i}")).expect("name"),
                version: crate::store::Version::from(i as u64 + 1),
                record: crate::store::LeaseRecord::held(
                    crate::HolderId::new("h").expect("holder"),
                    crate::FencingToken::new(1),
                    crate::Ttl::from_millis(1000).expect("ttl"),
                ),
            })
            .collect()
    }

    fn absent() -> crate::Result<CasOutcome> {
        Ok(CasOutcome::Conflict(crate::store::Current::Absent))
    }

    #[tokio::test]
    async fn each_renewal_is_answered_in_its_place() {
        let batch = renewals(4);
        // The second is refused before sending; the others go in one request.
        let prepare = |r: &Renewal| {
            if r.name.as_str() == "b/1" {
                Err(Error::invalid("renewal", "refused"))
            } else {
                Ok(r.name.as_str().to_owned())
            }
        };
        let out = send_batch(&batch, prepare, |ready| async move {
            assert_eq!(
                ready.iter().map(|(_, p)| p.as_str()).collect::<Vec<_>>(),
                ["b/0", "b/2", "b/3"]
            );
            Ok(vec![absent(), absent()])
        })
        .await;
        assert_eq!(out.len(), 4);
        assert!(matches!(out[0], Ok(CasOutcome::Conflict(_))));
        assert!(matches!(out[1], Err(Error::InvalidInput { .. })));
        assert!(matches!(out[2], Ok(CasOutcome::Conflict(_))));
        // The store answered two of three: the third may have applied.
        assert!(out[3].as_ref().is_err_and(Error::is_indeterminate), "{:?}", out[3]);

        let failed = send_batch(
            &batch,
            |_| Ok(()),
            |_| async {
                Err::<Vec<crate::Result<CasOutcome>>, _>(no_answer(Effect::Write, "renewals", Duration::from_secs(1)))
            },
        )
        .await;
        assert!(failed.iter().all(|o| o.as_ref().is_err_and(Error::is_indeterminate)));
    }
}
