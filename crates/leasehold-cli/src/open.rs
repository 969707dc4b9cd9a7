//! Opening the store a [`StoreUrl`] names ([`StoreUrl::open`]), within a bound, with the
//! command's errors.

use std::time::Duration;

use leasehold::url::{OpenOptions, StoreUrl};
use leasehold::{ClientConfig, LeaseClient};

use crate::error::CliError;

/// The longest opening a store may take (connecting, checking its table or bucket).
pub(crate) const OPEN_TIMEOUT: Duration = Duration::from_secs(10);

/// Opens the store at `url` and a lease client on it, whose holder ids start with
/// `label`. Redis gives an efficiency-only client (by its grade).
///
/// # Errors
/// [`CliError::Usage`] for a URL the store's driver refuses, [`CliError::Store`] when
/// the store cannot be reached within [`OPEN_TIMEOUT`] or is not set up (a missing
/// table, bucket or root znode: the message says to run `stores check --create`).
pub(crate) async fn open(url: &StoreUrl, label: &str) -> Result<LeaseClient, CliError> {
    let config = ClientConfig::builder()
        .label(label)
        .build()
        .map_err(|e| CliError::from_lease("holder label", &e))?;
    let opened = tokio::time::timeout(OPEN_TIMEOUT, url.open(&OpenOptions::with_client(config))).await;
    match opened {
        Ok(Ok(client)) => Ok(client),
        Ok(Err(leasehold::Error::InvalidInput {
            what: "store URL",
            reason,
        })) => Err(CliError::Usage(format!("bad store URL '{url}': {reason}"))),
        Ok(Err(e @ leasehold::Error::Unavailable { .. })) => Err(CliError::Store(e.to_string())),
        Ok(Err(e)) if setup_missing(&e) => Err(CliError::Store(format!(
            "{} store {url}: {e}; run 'leasehold stores check --create {}' to create it",
            url.kind(),
            shell_word(&url.to_string())
        ))),
        Ok(Err(e)) => Err(CliError::from_lease(&format!("{} store {url}", url.kind()), &e)),
        Err(_) => Err(CliError::Store(format!(
            "{} store {url}: no answer within {}",
            url.kind(),
            humantime::format_duration(OPEN_TIMEOUT)
        ))),
    }
}

/// True when opening a store failed because what it needs is missing (a SQL or
/// DynamoDB table, an S3 bucket, a ZooKeeper root znode, a column an earlier table
/// lacks): what `stores check --create` makes. The one test `open` and `stores check`
/// share: an [`leasehold::Error::Misconfigured`] whose message says something does not
/// exist or names the library's `provision`, not one refusing credentials, naming no
/// region or a wrong table engine, which creating cannot fix.
pub(crate) fn setup_missing(e: &leasehold::Error) -> bool {
    /// What the stores' messages say when their setup is missing.
    const MISSING: [&str; 4] = ["does not exist", "not found", "NotFound", "provision"];
    match e {
        leasehold::Error::Misconfigured { message, .. } => MISSING.iter().any(|m| message.contains(m)),
        _ => false,
    }
}

/// `word` as one word of a POSIX shell command: as it is when it has nothing the shell
/// reads specially, in double quotes otherwise (a URL's `&` and `?`, a redacted
/// password's `***`).
fn shell_word(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "@%+=:,./_-".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        return word.to_owned();
    }
    let mut quoted = String::with_capacity(word.len() + 2);
    quoted.push('"');
    for c in word.chars() {
        if matches!(c, '"' | '\\' | '$' | '`') {
            quoted.push('\\');
        }
        quoted.push(c);
    }
    quoted.push('"');
    quoted
}

#[cfg(test)]
mod tests {
    use super::*;

    fn misconfigured(message: &str) -> leasehold::Error {
        leasehold::Error::Misconfigured {
            message: message.into(),
            source: None,
        }
    }

    #[test]
    fn missing_setup_is_told_from_other_misconfiguration() {
        for missing in [
            "lease table leasehold_leases: does not exist (create it with provision() or the shipped .sql file)",
            "the root znode /x does not exist (create it with ZooKeeperStore::provision)",
            "PutObject l/~probe: the bucket does not exist: HTTP 404 NoSuchBucket",
            "DynamoDB DescribeTable on table t: HTTP 400 ResourceNotFoundException (Requested resource not found: Table: t not found)",
            "lease table t: has no column \"ttl_ms\" (a table of an earlier version: provision() adds it)",
        ] {
            assert!(setup_missing(&misconfigured(missing)), "{missing}");
        }
        for other in [
            "DynamoDB GetItem on table t: HTTP 403 AccessDeniedException (refused: credentials, signature or clock)",
            "dynamodb store dynamodb://t: no AWS region: add ?region=… to the URL or set AWS_REGION",
            "lease table t: column \"token\" has type \"text\", expected BIGINT",
        ] {
            assert!(!setup_missing(&misconfigured(other)), "{other}");
        }
        let unavailable = leasehold::Error::Unavailable {
            message: "the table does not exist".into(),
            source: None,
        };
        assert!(!setup_missing(&unavailable), "only a misconfigured store");
    }

    #[test]
    fn shell_words_are_quoted_only_when_needed() {
        assert_eq!(shell_word("postgres://app@db:5432/ops"), "postgres://app@db:5432/ops");
        assert_eq!(
            shell_word("s3://b/l?region=r&endpoint=http://h:1"),
            "\"s3://b/l?region=r&endpoint=http://h:1\""
        );
        assert_eq!(shell_word("postgres://app:***@db/ops"), "\"postgres://app:***@db/ops\"");
        assert_eq!(shell_word("sqlite:/a b/$x\"y"), "\"sqlite:/a b/\\$x\\\"y\"");
    }
}
