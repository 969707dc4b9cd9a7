//! Where the leases live: the table, its key attribute, and the attribute names of a
//! lease item.

use std::fmt;
use std::time::Duration;

use leasehold_core::{Error, Result};

/// The default name of the table's partition key (a string attribute).
pub const DEFAULT_KEY_ATTRIBUTE: &str = "lease";

/// Attribute: the holder id (a string); absent while the lease is vacant.
pub const ATTR_HOLDER: &str = "holder";
/// Attribute: the fencing token of the current (or last) grant (a number).
pub const ATTR_FENCE: &str = "fence";
/// Attribute: the TTL of the last grant or renewal, in milliseconds (a number).
pub const ATTR_TTL_MS: &str = "ttl_ms";
/// Attribute: the holder's wall-clock expiry in Unix milliseconds (a number), read
/// only by challengers that opted into a [`leasehold_core::SkewBound`].
pub const ATTR_WALL_EXPIRES_AT_MS: &str = "wall_expires_at_ms";
/// Attribute: the item's version (a string, random per write, never reused).
pub const ATTR_VERSION: &str = "version";
/// Attribute: the item format number (a number, [`ITEM_FORMAT`]).
pub const ATTR_FORMAT: &str = "format";

/// Attribute: when DynamoDB's Time to Live may delete the item, in Unix seconds (a
/// number). Only [`CasStore::expire`](leasehold_core::store::CasStore::expire) sets it,
/// on names nobody takes again (a scheduled job's done slots);
/// [`DynamoStore::provision`](crate::DynamoStore::provision) enables the table's Time to
/// Live on it.
pub const ATTR_EXPIRES_AT: &str = "expires_at";

/// The format number written in every lease item.
pub const ITEM_FORMAT: u32 = 1;

/// Every attribute a lease item has besides its key.
pub const LEASE_ATTRIBUTES: [&str; 7] = [
    ATTR_HOLDER,
    ATTR_FENCE,
    ATTR_TTL_MS,
    ATTR_WALL_EXPIRES_AT_MS,
    ATTR_VERSION,
    ATTR_FORMAT,
    ATTR_EXPIRES_AT,
];

/// The longest attribute name DynamoDB accepts for a partition key, in bytes.
const MAX_KEY_ATTRIBUTE_LEN: usize = 255;

/// A DynamoDB table name: 3 to 255 characters of ASCII letters, digits, `_`, `-`, `.`.
///
/// ```
/// use leasehold_dynamodb::TableName;
/// assert!(TableName::new("leasehold-leases").is_ok());
/// assert!(TableName::new("ab").is_err());
/// assert!(TableName::new("has space").is_err());
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct TableName(String);

impl TableName {
    /// The shortest table name DynamoDB accepts.
    pub const MIN_LEN: usize = 3;
    /// The longest table name DynamoDB accepts.
    pub const MAX_LEN: usize = 255;

    /// Validates a table name.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a name DynamoDB would refuse.
    pub fn new(name: impl Into<String>) -> Result<Self> {
        let name = name.into();
        if name.len() < Self::MIN_LEN || name.len() > Self::MAX_LEN {
            return Err(Error::invalid(
                "table name",
                format!(
                    "{} characters; DynamoDB needs {} to {}",
                    name.len(),
                    Self::MIN_LEN,
                    Self::MAX_LEN
                ),
            ));
        }
        if let Some(c) = name
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')))
        {
            return Err(Error::invalid(
                "table name",
                format!("character {c:?} is not allowed (letters, digits, '_', '-', '.')"),
            ));
        }
        Ok(Self(name))
    }

    /// The name as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for TableName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for TableName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The default bound on one DynamoDB request (send and answer): the bound every AWS
/// store of leasehold puts on its requests.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = leasehold_aws::DEFAULT_REQUEST_TIMEOUT;

/// The default longest wait between two looks of a waiter in `acquire` (DynamoDB cannot
/// push a release): see [`DynamoConfig::with_poll_interval`].
pub const DEFAULT_POLL_INTERVAL: Duration = leasehold_aws::DEFAULT_POLL_INTERVAL;

/// How a [`crate::DynamoStore`] uses its table.
///
/// ```
/// use leasehold_dynamodb::DynamoConfig;
/// let config = DynamoConfig::new("leases")?.with_key_attribute("pk")?;
/// assert_eq!(config.table().as_str(), "leases");
/// assert_eq!(config.key(), "pk");
/// assert!(DynamoConfig::new("leases")?.with_key_attribute("fence").is_err());
/// # Ok::<(), leasehold_core::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DynamoConfig {
    table: TableName,
    key_attribute: String,
    conflict_returns_current: bool,
    request_timeout: Duration,
    poll_interval: Duration,
}

impl DynamoConfig {
    /// Leases in `table`, keyed by the string partition key [`DEFAULT_KEY_ATTRIBUTE`].
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for an invalid table name.
    pub fn new(table: impl Into<String>) -> Result<Self> {
        Ok(Self {
            table: TableName::new(table)?,
            key_attribute: DEFAULT_KEY_ATTRIBUTE.to_owned(),
            conflict_returns_current: true,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            poll_interval: DEFAULT_POLL_INTERVAL,
        })
    }

    /// Bounds every request the store sends (default [`DEFAULT_REQUEST_TIMEOUT`]). It
    /// replaces the client's operation and attempt timeouts for the store's requests; the
    /// client's connect timeout stays. A write that times out is
    /// [`Error::Indeterminate`] ("may have applied"), a read [`Error::Unavailable`]:
    /// keep it well below the lease TTL.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a zero timeout.
    pub fn with_request_timeout(mut self, timeout: Duration) -> Result<Self> {
        self.request_timeout = leasehold_aws::request_timeout(timeout)?;
        Ok(self)
    }

    /// The bound on one request.
    pub fn request_timeout(&self) -> Duration {
        self.request_timeout
    }

    /// The longest a waiter in [`leasehold_core::LeaseClient::acquire`] waits before it
    /// looks again (default [`DEFAULT_POLL_INTERVAL`], 1 s). DynamoDB cannot push a
    /// release, so this is how long a released lease may stay free before a waiter sees
    /// it, and each waiter costs one request per interval while the lease is held. A
    /// holder that dies without releasing is replaced after its observation window (the
    /// TTL) whatever the interval.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for zero.
    pub fn with_poll_interval(mut self, interval: Duration) -> Result<Self> {
        self.poll_interval = leasehold_aws::poll_interval(interval)?;
        Ok(self)
    }

    /// The longest wait between two looks of a waiter.
    pub fn poll_interval(&self) -> Duration {
        self.poll_interval
    }

    /// Uses `name` as the partition key attribute (a string key) instead of the default.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for an empty or too long name, or one of the lease
    /// item's own attribute names ([`LEASE_ATTRIBUTES`]).
    pub fn with_key_attribute(mut self, name: impl Into<String>) -> Result<Self> {
        let name = name.into();
        if name.is_empty() || name.len() > MAX_KEY_ATTRIBUTE_LEN {
            return Err(Error::invalid(
                "key attribute",
                format!("must be 1 to {MAX_KEY_ATTRIBUTE_LEN} bytes"),
            ));
        }
        if LEASE_ATTRIBUTES.contains(&name.as_str()) {
            return Err(Error::invalid(
                "key attribute",
                format!("{name:?} is one of the lease item's own attributes"),
            ));
        }
        self.key_attribute = name;
        Ok(self)
    }

    /// Whether a failed conditional write asks DynamoDB for the current item in the same
    /// round trip (`ReturnValuesOnConditionCheckFailure = ALL_OLD`, the default).
    ///
    /// Turn it off only for an emulator that does not support the parameter (dynalite):
    /// conflicts then report [`leasehold_core::store::Current::Unknown`] and the lease client
    /// reads the item, one more round trip.
    #[must_use]
    pub fn with_conflict_returns_current(mut self, yes: bool) -> Self {
        self.conflict_returns_current = yes;
        self
    }

    /// The table.
    pub fn table(&self) -> &TableName {
        &self.table
    }

    /// The partition key attribute.
    pub fn key(&self) -> &str {
        &self.key_attribute
    }

    /// Whether conflicts return the current item.
    pub fn returns_current(&self) -> bool {
        self.conflict_returns_current
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_names() {
        for ok in ["abc", "a.b-c_d", &"x".repeat(255)] {
            assert!(TableName::new(ok).is_ok(), "{ok}");
        }
        for bad in ["", "ab", "a/b", "ä-table", &"x".repeat(256), "tab le"] {
            assert!(matches!(TableName::new(bad), Err(Error::InvalidInput { .. })), "{bad}");
        }
    }

    #[test]
    fn key_attribute_rules() {
        let c = DynamoConfig::new("leases").expect("config");
        assert!(c.clone().with_key_attribute("").is_err());
        assert!(c.clone().with_key_attribute("x".repeat(256)).is_err());
        for own in LEASE_ATTRIBUTES {
            assert!(c.clone().with_key_attribute(own).is_err(), "{own}");
        }
        assert_eq!(
            c.with_key_attribute("name with space").expect("ok").key(),
            "name with space"
        );
    }
}
