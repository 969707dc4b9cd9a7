//! The grace of a command run under a tenure, and the safety margin it takes off the
//! lease.
//!
//! Once the lease is lost, the command is sent SIGTERM and, `grace` later, SIGKILL. For
//! it to be gone before the store can grant the lease to anyone else, the lease must
//! count as lost at least `grace` before the store could expire it: the client's safety
//! margin (the part of each TTL a holder does not trust, [`leasehold::Policy`]) is
//! widened by the grace. A grace the margin cannot hold is refused.

use std::time::Duration;

use leasehold::Policy;

use crate::cli::HeldArgs;
use crate::error::CliError;

/// The grace when `--grace` is not given, unless a sixth of the TTL is shorter.
pub(crate) const DEFAULT_GRACE: Duration = Duration::from_secs(5);

/// The widest safety margin a client takes, in thousandths of the TTL
/// (`ClientConfig` refuses half the TTL).
const MAX_MARGIN_PERMILLE: u32 = 499;

/// The grace of `held` and the safety margin (thousandths of its TTL) its client needs.
///
/// # Errors
/// [`CliError::Usage`] when the grace is too long for the TTL (over 44.9% of it).
pub(crate) fn grace_and_margin(held: &HeldArgs) -> Result<(Duration, u32), CliError> {
    let ttl = held.ttl;
    let grace = held.grace.unwrap_or_else(|| DEFAULT_GRACE.min(ttl / 6));
    let room = MAX_MARGIN_PERMILLE - Policy::DEFAULT_MARGIN_PERMILLE;
    let (grace_ns, ttl_ns) = (grace.as_nanos(), ttl.as_nanos().max(1));
    let share = (grace_ns * 1000).div_ceil(ttl_ns);
    match u32::try_from(share) {
        Ok(share) if share <= room => Ok((grace, Policy::DEFAULT_MARGIN_PERMILLE + share)),
        _ => Err(CliError::Usage(format!(
            "--grace {} does not fit in --ttl {}: the command of a lost lease must be stopped \
             before the lease can expire and go to someone else, so the grace is at most {} \
             ({:.1}% of the TTL); give a shorter --grace or a longer --ttl",
            humantime::format_duration(grace),
            humantime::format_duration(ttl),
            humantime::format_duration(max_grace(ttl)),
            f64::from(room) / 10.0,
        ))),
    }
}

/// The longest grace `ttl` holds, to the millisecond.
fn max_grace(ttl: Duration) -> Duration {
    let ms = ttl.as_millis() * u128::from(MAX_MARGIN_PERMILLE - Policy::DEFAULT_MARGIN_PERMILLE) / 1000;
    Duration::from_millis(u64::try_from(ms).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(ttl: &str, grace: Option<&str>) -> HeldArgs {
        HeldArgs {
            ttl: humantime::parse_duration(ttl).unwrap(),
            grace: grace.map(|g| humantime::parse_duration(g).unwrap()),
            command: vec!["true".into()],
        }
    }

    #[test]
    fn the_default_grace_is_five_seconds_or_a_sixth_of_the_ttl() {
        assert_eq!(grace_and_margin(&held("30s", None)).unwrap(), (DEFAULT_GRACE, 50 + 167));
        assert_eq!(grace_and_margin(&held("1m", None)).unwrap(), (DEFAULT_GRACE, 50 + 84));
        assert_eq!(
            grace_and_margin(&held("3s", None)).unwrap(),
            (Duration::from_millis(500), 50 + 167)
        );
    }

    #[test]
    fn the_margin_covers_the_grace() {
        for (ttl, grace) in [("10s", "2s"), ("1s", "300ms"), ("40s", "15s"), ("1s", "449ms")] {
            let h = held(ttl, Some(grace));
            let (g, margin) = grace_and_margin(&h).unwrap();
            assert_eq!(Some(g), h.grace);
            // What the holder does not trust of each TTL holds the whole grace.
            assert!(
                h.ttl * (margin - Policy::DEFAULT_MARGIN_PERMILLE) / 1000 >= g,
                "{ttl} {grace}: {margin}"
            );
            assert!(margin <= MAX_MARGIN_PERMILLE);
        }
    }

    #[test]
    fn a_grace_the_ttl_cannot_hold_is_refused_and_says_the_most_it_may_be() {
        for (ttl, grace) in [
            ("1s", "450ms"),
            ("1s", "449ms 900us"),
            ("30s", "15s"),
            ("1s", "5s"),
            ("1s", "300000000000y"),
        ] {
            let Err(CliError::Usage(message)) = grace_and_margin(&held(ttl, Some(grace))) else {
                panic!("{ttl} {grace} accepted");
            };
            assert!(message.contains("--grace") && message.contains("at most"), "{message}");
        }
        let Err(CliError::Usage(message)) = grace_and_margin(&held("30s", Some("15s"))) else {
            panic!("accepted");
        };
        assert!(message.contains("at most 13s 470ms"), "{message}");
    }
}
