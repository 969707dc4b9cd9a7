//! Metric names and the events the client reports.
//!
//! Metrics go through the `metrics` facade (install any recorder); events and spans go
//! through `tracing`. Every metric carries the lease name as label `lease` only where
//! the number of names is bounded by the caller; counters are per client otherwise.

/// Acquire attempts (one per write sent).
pub const ACQUIRE_ATTEMPTS: &str = "leasehold_acquire_attempts_total";
/// Grants of a lease to this client.
pub const GRANTS: &str = "leasehold_grants_total";
/// Grants that took a lease over from another holder.
pub const TAKEOVERS: &str = "leasehold_takeovers_total";
/// Successful renewals.
pub const RENEWALS: &str = "leasehold_renewals_total";
/// Time left of a lease's validity when a renewal landed, in seconds.
pub const RENEWAL_SLACK: &str = "leasehold_renewal_slack_seconds";
/// Leases lost, labelled by `cause`.
pub const LOSSES: &str = "leasehold_losses_total";
/// Fenced writes refused by the resource.
pub const FENCE_REJECTIONS: &str = "leasehold_fence_rejections_total";
/// Leases currently held by all clients of the process.
pub const HELD: &str = "leasehold_leases_held";
