//! The store URL: one string naming the store, the same form on every store, as the
//! `leasehold` command and the example programs take it (`--store`).
//!
//! | form | store |
//! |---|---|
//! | `sqlite:PATH` | a SQLite file on this host (created with its table if missing, unless [`OpenOptions::create_sqlite_file`] is off); a leading `~/` is the home directory (`$HOME`), a relative path is the working directory's |
//! | `postgres://USER@HOST:PORT/DB?…` (or `postgresql://`) | Postgres, libpq-style URL |
//! | `mysql://USER@HOST:PORT/DB?…` (or `mariadb://`) | MySQL or MariaDB (the table in DB) |
//! | `etcd://HOST:PORT[,HOST:PORT…]` | etcd |
//! | `zookeeper://HOST:PORT[,HOST:PORT…][/ROOT]` | ZooKeeper (lease znodes under ROOT, default `/leasehold`) |
//! | `redis://…` (or `rediss://`) | Redis (efficiency-only leases) |
//! | `dynamodb://TABLE?region=…&endpoint=…` | DynamoDB |
//! | `s3://BUCKET/PREFIX?region=…&endpoint=…` | S3 conditional writes |
//!
//! Without one, [`default_sqlite_path`]: `$XDG_DATA_HOME/leasehold/leases.db`, or
//! `~/.local/share/leasehold/leases.db`. The [`std::fmt::Display`] form of a parsed URL
//! has its password replaced by `***`, and [`StoreUrl::secrets`] lists what to scrub
//! from driver messages.

use std::fmt;
use std::path::PathBuf;

pub use crate::open::OpenOptions;

/// A parsed store URL.
#[derive(Clone, PartialEq, Eq)]
pub enum StoreUrl {
    /// `sqlite:PATH`.
    Sqlite {
        /// The database file.
        path: PathBuf,
    },
    /// `postgres://…`: handed to the Postgres driver as written.
    Postgres {
        /// The URL as given.
        url: String,
    },
    /// `mysql://…` (or `mariadb://…`): handed to the MySQL driver as written.
    MySql {
        /// The URL as given.
        url: String,
    },
    /// `etcd://HOST:PORT[,HOST:PORT…]`.
    Etcd {
        /// `http://HOST:PORT` for each member.
        endpoints: Vec<String>,
    },
    /// `zookeeper://HOST:PORT[,HOST:PORT…][/ROOT]`.
    ZooKeeper {
        /// The connect string: `HOST:PORT[,HOST:PORT…]`.
        servers: String,
        /// The root znode (`None`: the store's default).
        root: Option<String>,
    },
    /// `redis://…`: handed to the Redis client as written.
    Redis {
        /// The URL as given.
        url: String,
    },
    /// `dynamodb://TABLE?region=…&endpoint=…`.
    DynamoDb {
        /// The lease table.
        table: String,
        /// The region (default: the AWS configuration's).
        region: Option<String>,
        /// Another endpoint (a local emulator).
        endpoint: Option<String>,
    },
    /// `s3://BUCKET/PREFIX?region=…&endpoint=…`.
    S3 {
        /// The bucket.
        bucket: String,
        /// The key prefix of the lease records ([`DEFAULT_S3_PREFIX`] when none is given).
        prefix: String,
        /// The region (default: the AWS configuration's).
        region: Option<String>,
        /// Another endpoint (a local emulator, MinIO).
        endpoint: Option<String>,
    },
}

/// The key prefix of `s3://BUCKET` without one.
pub const DEFAULT_S3_PREFIX: &str = "leasehold";

/// The forms accepted, for error messages.
const FORMS: &str = "expected sqlite:PATH, postgres://…, mysql://…, etcd://HOST:PORT[,HOST:PORT], \
                     zookeeper://HOST:PORT[,HOST:PORT][/ROOT], redis://…, \
                     dynamodb://TABLE?region=…&endpoint=…, or s3://BUCKET/PREFIX?region=…&endpoint=…";

/// Why a store URL was refused: one line, without the URL's password.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad store URL {shown}: {reason}")]
pub struct UrlError {
    /// The URL, redacted.
    shown: String,
    /// What is wrong.
    reason: String,
}

impl UrlError {
    fn new(raw: &str, reason: impl Into<String>) -> Self {
        // A URL too malformed for its userinfo to be found shows only its scheme, so
        // that a password in it is never printed.
        let shown = if raw.contains('@') && userinfo(raw).is_none() {
            format!("'{}:…'", raw.split(':').next().unwrap_or_default())
        } else {
            format!("'{}'", redact(raw))
        };
        Self {
            shown,
            reason: reason.into(),
        }
    }
}

impl StoreUrl {
    /// Parses a store URL.
    ///
    /// # Errors
    /// [`UrlError`] naming what is wrong.
    pub fn parse(raw: &str) -> Result<Self, UrlError> {
        let raw_trimmed = raw.trim();
        if raw_trimmed.is_empty() {
            return Err(UrlError::new(raw, format!("it is empty; {FORMS}")));
        }
        let Some((scheme, rest)) = raw_trimmed.split_once(':') else {
            return Err(UrlError::new(raw, format!("no scheme; {FORMS}")));
        };
        match scheme.to_ascii_lowercase().as_str() {
            "sqlite" => {
                let path = rest.strip_prefix("//").unwrap_or(rest);
                if path.is_empty() {
                    return Err(UrlError::new(raw, "no file path (sqlite:PATH)"));
                }
                // An in-memory database lives and dies with one connection of one
                // process: no other process could see its leases.
                if path == ":memory:" || path.starts_with("file::memory:") {
                    return Err(UrlError::new(
                        raw,
                        "an in-memory database is private to one process; name a file (sqlite:PATH)",
                    ));
                }
                // The driver opens with SQLITE_OPEN_URI, so a `file:` path would name
                // another file than the one this URL's checks look at.
                if path.starts_with("file:") {
                    return Err(UrlError::new(raw, "sqlite:PATH takes a path, not a file: URI"));
                }
                // sqlx-style options (`?mode=ro`) are not read: refuse them rather than
                // make a file whose name ends in them.
                if path.contains('?') {
                    return Err(UrlError::new(
                        raw,
                        "sqlite:PATH takes no options ('?…'); name the file alone",
                    ));
                }
                Ok(Self::Sqlite {
                    path: home_expanded(raw, path)?,
                })
            }
            "postgres" | "postgresql" => Ok(Self::Postgres {
                url: sql_url(raw, rest, "postgres://USER@HOST:PORT/DB")?,
            }),
            "mysql" | "mariadb" => Ok(Self::MySql {
                url: sql_url(raw, rest, "mysql://USER@HOST:PORT/DB")?,
            }),
            "redis" | "rediss" => {
                let after = authority_part(raw, rest)?;
                if after.is_empty() || empty_host_after_user(raw) {
                    return Err(UrlError::new(raw, "no host (redis://HOST:PORT)"));
                }
                Ok(Self::Redis {
                    url: raw_trimmed.to_owned(),
                })
            }
            "etcd" => {
                let after = authority_part(raw, rest)?;
                let hosts = after.strip_suffix('/').unwrap_or(after);
                if hosts.contains(['/', '?', '#', '@']) {
                    return Err(UrlError::new(
                        raw,
                        "etcd://HOST:PORT[,HOST:PORT] takes no path, query or user",
                    ));
                }
                let endpoints = hosts
                    .split(',')
                    .map(|hp| {
                        host_port(hp)
                            .map(|()| format!("http://{hp}"))
                            .map_err(|r| UrlError::new(raw, r))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(Self::Etcd { endpoints })
            }
            "zookeeper" => {
                let after = authority_part(raw, rest)?;
                let (hosts, root) = match after.find('/') {
                    Some(i) => (&after[..i], Some(&after[i..])),
                    None => (after, None),
                };
                if after.contains(['?', '#', '@']) {
                    return Err(UrlError::new(
                        raw,
                        "zookeeper://HOST:PORT[,HOST:PORT][/ROOT] takes no query or user",
                    ));
                }
                for hp in hosts.split(',') {
                    host_port(hp).map_err(|r| UrlError::new(raw, r))?;
                }
                let root = root.filter(|r| *r != "/").map(|r| r.strip_suffix('/').unwrap_or(r));
                Ok(Self::ZooKeeper {
                    servers: hosts.to_owned(),
                    root: root.map(str::to_owned),
                })
            }
            "dynamodb" => {
                let after = authority_part(raw, rest)?;
                let (table, query) = split_query(after);
                let table = table.strip_suffix('/').unwrap_or(table);
                if table.is_empty() || table.contains('/') {
                    return Err(UrlError::new(raw, "expected dynamodb://TABLE?region=…&endpoint=…"));
                }
                let (region, endpoint) = aws_query(raw, query)?;
                Ok(Self::DynamoDb {
                    table: table.to_owned(),
                    region,
                    endpoint,
                })
            }
            "s3" => {
                let after = authority_part(raw, rest)?;
                let (location, query) = split_query(after);
                let (bucket, prefix) = location.split_once('/').unwrap_or((location, ""));
                if bucket.is_empty() {
                    return Err(UrlError::new(raw, "no bucket (s3://BUCKET/PREFIX)"));
                }
                let prefix = prefix.strip_suffix('/').unwrap_or(prefix);
                let (region, endpoint) = aws_query(raw, query)?;
                Ok(Self::S3 {
                    bucket: bucket.to_owned(),
                    prefix: if prefix.is_empty() {
                        DEFAULT_S3_PREFIX.to_owned()
                    } else {
                        prefix.to_owned()
                    },
                    region,
                    endpoint,
                })
            }
            other => Err(UrlError::new(raw, format!("unknown scheme '{other}'; {FORMS}"))),
        }
    }

    /// The store's kind, for messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Sqlite { .. } => "sqlite",
            Self::Postgres { .. } => "postgres",
            Self::MySql { .. } => "mysql",
            Self::Etcd { .. } => "etcd",
            Self::ZooKeeper { .. } => "zookeeper",
            Self::Redis { .. } => "redis",
            Self::DynamoDb { .. } => "dynamodb",
            Self::S3 { .. } => "s3",
        }
    }

    /// The passwords in the URL (raw and percent-decoded), which no message may show.
    pub fn secrets(&self) -> Vec<String> {
        match self {
            Self::Postgres { url } | Self::MySql { url } | Self::Redis { url } => secrets_of(url),
            _ => Vec::new(),
        }
    }
}

impl fmt::Display for StoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Sqlite { path } => write!(f, "sqlite:{}", path.display()),
            Self::Postgres { url } | Self::MySql { url } | Self::Redis { url } => f.write_str(&redact(url)),
            Self::Etcd { endpoints } => {
                let hosts: Vec<&str> = endpoints.iter().map(|e| e.trim_start_matches("http://")).collect();
                write!(f, "etcd://{}", hosts.join(","))
            }
            Self::ZooKeeper { servers, root } => write!(f, "zookeeper://{servers}{}", root.as_deref().unwrap_or("")),
            Self::DynamoDb { table, .. } => {
                write!(f, "dynamodb://{table}")?;
                self.write_aws_query(f)
            }
            Self::S3 { bucket, prefix, .. } => {
                write!(f, "s3://{bucket}/{prefix}")?;
                self.write_aws_query(f)
            }
        }
    }
}

impl fmt::Debug for StoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "StoreUrl({self})")
    }
}

impl StoreUrl {
    /// The `region` and `endpoint` of a DynamoDB or S3 URL; `(None, None)` for the other
    /// stores.
    pub(crate) fn aws_query(&self) -> (Option<&str>, Option<&str>) {
        match self {
            Self::DynamoDb { region, endpoint, .. } | Self::S3 { region, endpoint, .. } => {
                (region.as_deref(), endpoint.as_deref())
            }
            _ => (None, None),
        }
    }

    /// Writes the `?region=…&endpoint=…` of [`StoreUrl::aws_query`], the parameters given.
    fn write_aws_query(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (region, endpoint) = self.aws_query();
        let mut sep = '?';
        for (k, v) in [("region", region), ("endpoint", endpoint)] {
            if let Some(v) = v {
                write!(f, "{sep}{k}={v}")?;
                sep = '&';
            }
        }
        Ok(())
    }
}

/// What follows `scheme://`, or an error if `//` is missing.
fn authority_part<'a>(raw: &str, rest: &'a str) -> Result<&'a str, UrlError> {
    rest.strip_prefix("//")
        .ok_or_else(|| UrlError::new(raw, "expected '//' after the scheme (for example postgres://HOST/DB)"))
}

/// A SQL server's URL (`raw`, `rest` after its scheme), trimmed, to hand to its driver as
/// written once it names a host; `form` shows the expected form when it does not.
fn sql_url(raw: &str, rest: &str, form: &str) -> Result<String, UrlError> {
    let after = authority_part(raw, rest)?;
    if after.is_empty() || after.starts_with('?') || empty_host_after_user(raw) {
        return Err(UrlError::new(raw, format!("no host ({form})")));
    }
    Ok(raw.trim().to_owned())
}

fn split_query(s: &str) -> (&str, &str) {
    s.split_once('?').unwrap_or((s, ""))
}

/// Checks one `HOST:PORT`.
fn host_port(hp: &str) -> Result<(), String> {
    let Some((host, port)) = hp.rsplit_once(':') else {
        return Err(format!("'{hp}' is not HOST:PORT"));
    };
    if host.is_empty() {
        return Err(format!("'{hp}' has no host"));
    }
    match port.parse::<u16>() {
        Ok(p) if p > 0 => Ok(()),
        _ => Err(format!("'{port}' is not a port number (in '{hp}')")),
    }
}

/// The `region` and `endpoint` parameters of a DynamoDB or S3 URL; anything else is an
/// error.
fn aws_query(raw: &str, query: &str) -> Result<(Option<String>, Option<String>), UrlError> {
    let (mut region, mut endpoint) = (None, None);
    for (k, v) in form_urlencoded::parse(query.as_bytes()) {
        let slot = match &*k {
            "region" => &mut region,
            "endpoint" => &mut endpoint,
            other => {
                return Err(UrlError::new(
                    raw,
                    format!("unknown parameter '{other}' (region and endpoint are known)"),
                ));
            }
        };
        if v.is_empty() {
            return Err(UrlError::new(raw, format!("parameter '{k}' is empty")));
        }
        if slot.replace(v.into_owned()).is_some() {
            return Err(UrlError::new(raw, format!("parameter '{k}' given twice")));
        }
    }
    if endpoint
        .as_deref()
        .is_some_and(|e| !(e.starts_with("http://") || e.starts_with("https://")))
    {
        return Err(UrlError::new(raw, "endpoint must start with http:// or https://"));
    }
    Ok((region, endpoint))
}

/// The userinfo of `scheme://userinfo@host…`, if any.
fn userinfo(url: &str) -> Option<(usize, &str)> {
    let start = url.find("://")? + 3;
    let authority_end = url[start..].find(['/', '?', '#']).map_or(url.len(), |i| start + i);
    let at = url[start..authority_end].rfind('@')? + start;
    Some((start, &url[start..at]))
}

/// True when `url` has a userinfo but nothing after its `@` in the authority.
fn empty_host_after_user(url: &str) -> bool {
    userinfo(url).is_some_and(|(start, info)| {
        let host_start = start + info.len() + 1;
        url[host_start..]
            .split(['/', '?', '#'])
            .next()
            .unwrap_or_default()
            .is_empty()
    })
}

/// The password of the userinfo, and of `password=` / `sslpassword=` query parameters.
fn passwords(url: &str) -> Vec<String> {
    let mut out = Vec::new();
    if let Some((_, pw)) = userinfo(url).and_then(|(_, info)| info.split_once(':')) {
        out.push(pw.to_owned());
    }
    if let Some((_, query)) = url.split_once('?') {
        for (k, v) in form_urlencoded::parse(query.as_bytes()) {
            if k.ends_with("password") {
                out.push(v.into_owned());
            }
        }
        for pair in query.split('&') {
            match pair.split_once('=') {
                Some((k, v)) if k.ends_with("password") => out.push(v.to_owned()),
                _ => {}
            }
        }
    }
    out.retain(|p| !p.is_empty());
    out
}

fn secrets_of(url: &str) -> Vec<String> {
    let mut out = passwords(url);
    let decoded: Vec<String> = out
        .iter()
        .map(|p| {
            form_urlencoded::parse(format!("x={p}").as_bytes())
                .map(|(_, v)| v.into_owned())
                .collect()
        })
        .collect();
    out.extend(decoded);
    out.sort_by_key(|s| std::cmp::Reverse(s.len()));
    out.dedup();
    out.retain(|p| !p.is_empty());
    out
}

/// `url` with the password of its userinfo and of its `…password=` parameters replaced by
/// `***`.
pub fn redact(url: &str) -> String {
    let mut out = url.to_owned();
    if let Some((start, info)) = userinfo(url) {
        match info.split_once(':') {
            Some((user, pw)) if !pw.is_empty() => {
                out = format!("{}{user}:***{}", &url[..start], &url[start + info.len()..]);
            }
            _ => {}
        }
    }
    if let Some((head, query)) = out.clone().split_once('?') {
        let pairs: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((k, _)) if k.ends_with("password") => format!("{k}=***"),
                _ => pair.to_owned(),
            })
            .collect();
        out = format!("{head}?{}", pairs.join("&"));
    }
    out
}

/// `path` with a leading `~` or `~/` (the shell's notation for the home directory,
/// which no shell expands after `sqlite:`, nor cron in a crontab's variables) replaced
/// by `$HOME`. `~user` is left as written.
fn home_expanded(raw: &str, path: &str) -> Result<PathBuf, UrlError> {
    let rest = match path.strip_prefix('~') {
        Some("") => "",
        Some(rest) if rest.starts_with('/') => &rest[1..],
        _ => return Ok(PathBuf::from(path)),
    };
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|h| h.is_absolute())
        .ok_or_else(|| UrlError::new(raw, "'~' names the home directory, but HOME is not an absolute path"))?;
    Ok(if rest.is_empty() { home } else { home.join(rest) })
}

/// The default store's file: `$XDG_DATA_HOME/leasehold/leases.db` when
/// `XDG_DATA_HOME` is an absolute path, otherwise `$HOME/.local/share/leasehold/leases.db`;
/// `None` without either.
pub fn default_sqlite_path() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| {
            std::env::var_os("HOME")
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
                .map(|h| h.join(".local/share"))
        })?;
    Some(base.join("leasehold").join("leases.db"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str) -> StoreUrl {
        StoreUrl::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn every_form_parses() {
        assert_eq!(
            ok("sqlite:/tmp/x.db"),
            StoreUrl::Sqlite {
                path: "/tmp/x.db".into()
            }
        );
        assert_eq!(
            ok("sqlite:///tmp/x.db"),
            StoreUrl::Sqlite {
                path: "/tmp/x.db".into()
            }
        );
        assert_eq!(ok("sqlite:rel.db"), StoreUrl::Sqlite { path: "rel.db".into() });
        let home = PathBuf::from(std::env::var_os("HOME").expect("HOME is set in tests"));
        assert_eq!(
            ok("sqlite:~/leases/x.db"),
            StoreUrl::Sqlite {
                path: home.join("leases/x.db")
            }
        );
        assert_eq!(
            ok("sqlite://~/x.db"),
            StoreUrl::Sqlite {
                path: home.join("x.db")
            }
        );
        assert_eq!(
            ok("sqlite:~other/x.db"),
            StoreUrl::Sqlite {
                path: "~other/x.db".into()
            }
        );
        assert_eq!(ok("sqlite:x~/y.db"), StoreUrl::Sqlite { path: "x~/y.db".into() });
        assert_eq!(ok("postgres://u:p@h:5432/db?sslmode=disable").kind(), "postgres");
        assert_eq!(ok("postgresql://h/db").kind(), "postgres");
        assert_eq!(
            ok("etcd://a:2379,b.example:2380"),
            StoreUrl::Etcd {
                endpoints: vec!["http://a:2379".into(), "http://b.example:2380".into()]
            }
        );
        assert_eq!(
            ok("zookeeper://a:2181,b:2182/app/leases"),
            StoreUrl::ZooKeeper {
                servers: "a:2181,b:2182".into(),
                root: Some("/app/leases".into())
            }
        );
        assert_eq!(
            ok("zookeeper://a:2181"),
            StoreUrl::ZooKeeper {
                servers: "a:2181".into(),
                root: None
            }
        );
        assert_eq!(ok("zookeeper://a:2181/x/").to_string(), "zookeeper://a:2181/x");
        assert_eq!(ok("redis://127.0.0.1:6379/0").kind(), "redis");
        assert_eq!(
            ok("dynamodb://Leases_1?region=eu-west-1&endpoint=http://127.0.0.1:8000"),
            StoreUrl::DynamoDb {
                table: "Leases_1".into(),
                region: Some("eu-west-1".into()),
                endpoint: Some("http://127.0.0.1:8000".into()),
            }
        );
        assert_eq!(
            ok("s3://my-bucket/a/b?region=us-east-1"),
            StoreUrl::S3 {
                bucket: "my-bucket".into(),
                prefix: "a/b".into(),
                region: Some("us-east-1".into()),
                endpoint: None,
            }
        );
        assert_eq!(
            ok("s3://my-bucket"),
            StoreUrl::S3 {
                bucket: "my-bucket".into(),
                prefix: DEFAULT_S3_PREFIX.into(),
                region: None,
                endpoint: None,
            }
        );
    }

    #[test]
    fn bad_urls_say_why_in_one_line() {
        for bad in [
            "",
            "nonsense",
            "ftp://x",
            "sqlite:",
            "sqlite::memory:",
            "sqlite://:memory:",
            "sqlite:file::memory:?cache=shared",
            "sqlite:/tmp/x.db?mode=ro",
            "sqlite:file:/tmp/x.db",
            "postgres:h/db",
            "postgres://",
            "etcd://",
            "etcd://host",
            "etcd://host:notaport",
            "etcd://host:0",
            "etcd://a:1/path",
            "zookeeper://",
            "zookeeper://host",
            "zookeeper://host:0/x",
            "zookeeper://a:1/x?y=1",
            "zookeeper://u@a:1",
            "redis://",
            "dynamodb://",
            "dynamodb://t?colour=red",
            "dynamodb://t?region=a&region=b",
            "dynamodb://t?endpoint=localhost:8000",
            "s3://",
            "s3://b?region=",
            "mysql://",
            "mysql:h/db",
        ] {
            let e = StoreUrl::parse(bad).expect_err(bad).to_string();
            assert!(!e.contains('\n'), "{e}");
            assert!(e.starts_with("bad store URL"), "{e}");
        }
    }

    #[test]
    fn passwords_never_show() {
        let raw = "postgres://app:s3cr%40t@db.example:5432/leases?sslpassword=hush&sslmode=require";
        let url = ok(raw);
        let shown = url.to_string();
        assert!(!shown.contains("s3cr"), "{shown}");
        assert!(!shown.contains("hush"), "{shown}");
        assert!(shown.contains("app:***@db.example"), "{shown}");
        let secrets = url.secrets();
        assert!(secrets.contains(&"s3cr%40t".to_owned()), "{secrets:?}");
        assert!(secrets.contains(&"s3cr@t".to_owned()), "{secrets:?}");
        assert!(secrets.contains(&"hush".to_owned()), "{secrets:?}");
        let bad = StoreUrl::parse("postgresql:/app:hunter2@h/db")
            .expect_err("no //")
            .to_string();
        assert!(!bad.contains("hunter2"), "{bad}");
        let bad = StoreUrl::parse("postgres://app:hunter2@")
            .expect_err("no host")
            .to_string();
        assert!(!bad.contains("hunter2"), "{bad}");
        assert_eq!(redact("redis://:pw@h:1/0"), "redis://:***@h:1/0");
        assert_eq!(redact("redis://h:1/0"), "redis://h:1/0");
    }

    #[test]
    fn mysql_urls_parse_and_never_show_their_password() {
        let raw = "mysql://app:s3cr%40t@db.example:3306/leases?ssl-mode=required";
        let url = ok(raw);
        assert_eq!(url.kind(), "mysql");
        assert_eq!(url, StoreUrl::MySql { url: raw.to_owned() });
        assert!(!url.to_string().contains("s3cr"), "{url}");
        assert!(url.secrets().iter().any(|s| s.contains("s3cr")), "{:?}", url.secrets());
        assert_eq!(ok("mariadb://root@127.0.0.1:55306/leasehold").kind(), "mysql");
        for bad in ["mysql://", "mysql:h/db", "mysql://?x=1", "mariadb://app:pw@"] {
            let err = StoreUrl::parse(bad).expect_err(bad).to_string();
            assert!(!err.contains('\n') && !err.contains("pw@"), "{bad}: {err}");
        }
    }

    #[test]
    fn default_path_is_under_the_data_dir() {
        let p = default_sqlite_path().expect("HOME is set in tests");
        assert!(p.ends_with("leasehold/leases.db"), "{}", p.display());
    }
}
