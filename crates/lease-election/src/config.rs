//! Options of an [`crate::Election`].

use std::time::Duration;

use leasehold_core::{Error, Result, Ttl};

/// How an election runs; [`ElectionConfig::new`] picks sensible values from the TTL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElectionConfig {
    /// The leader's lease TTL. A crashed or frozen leader is replaced at most about one
    /// TTL (plus one round trip) after its last successful renewal.
    pub ttl: Duration,
    /// The longest pause between two reads of [`crate::Election::observe`] (and of the
    /// new-leader callback) when the store does not push changes, or (Postgres, Redis)
    /// pushes only releases and deletes. Default: a quarter of the TTL.
    pub observe_interval: Duration,
    /// How long [`crate::Election::run`] waits, after leadership ended, for the
    /// started-leading work to return before it aborts the task. Default: the TTL.
    pub stop_grace: Duration,
}

impl ElectionConfig {
    /// Options for a leader lease of `ttl`.
    pub fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            observe_interval: (ttl / 4).max(Duration::from_millis(5)),
            stop_grace: ttl,
        }
    }

    /// Checks the values.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a TTL outside [`Ttl::MIN`]..=[`Ttl::MAX`] or a zero
    /// observe interval.
    pub fn validate(&self) -> Result<()> {
        Ttl::new(self.ttl)?;
        if self.observe_interval.is_zero() {
            return Err(Error::invalid("observe_interval", "must be above zero"));
        }
        Ok(())
    }
}
