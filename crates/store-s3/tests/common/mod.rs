//! Shared pieces of the leasehold-s3 integration tests: the moto endpoint, unique buckets,
//! an SDK interceptor that counts real HTTP requests, a scripted HTTP client that answers
//! like S3 does in cases moto never produces (409, 503 SlowDown), the manifest resource
//! of the shared fence and frozen-holder cases ([`fenced`]) and the store as the shared
//! suites drive it ([`fixture`]).
#![allow(dead_code, unreachable_pub, missing_docs)]

pub mod fenced;
pub mod fixture;

use std::collections::{HashMap, VecDeque};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use aws_sdk_s3::Client;
use aws_sdk_s3::config::timeout::TimeoutConfig;
use aws_sdk_s3::config::{BehaviorVersion, Credentials, Region, RuntimeComponents};
use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, HttpResponse};
use aws_smithy_runtime_api::client::result::ConnectorError;
use aws_smithy_runtime_api::http::StatusCode;
use aws_smithy_types::body::SdkBody;
pub use leasehold_aws::SentRequests;
use leasehold_s3::{S3Config, S3Store};

/// The shared moto server (`scripts/stores.sh start moto`).
pub fn endpoint() -> String {
    leasehold_testkit::moto_endpoint()
}

/// A bucket name no other test or run uses (the shared moto is never reset).
pub fn unique_bucket(tag: &str) -> String {
    let name = format!("lh-s3-{tag}-{}", leasehold_testkit::unique_suffix());
    assert!(name.len() <= 63, "bucket name too long: {name}");
    name
}

/// Creates `bucket`, failing the test with a clear message if the server is down.
pub async fn create_bucket(client: &Client, bucket: &str) {
    if let Err(e) = client.create_bucket().bucket(bucket).send().await {
        panic!(
            "creating bucket {bucket} at {}: {} (is moto running? `scripts/stores.sh start moto`)",
            endpoint(),
            aws_smithy_types::error::display::DisplayErrorContext(&e)
        );
    }
}

/// A lease store (prefix `leases`) in `bucket` on the moto at `endpoint`, the bucket
/// created if it is missing ([`S3Store::provision`]: whoever comes first creates it, the
/// others keep it).
pub async fn store_in(endpoint: &str, bucket: &str) -> S3Store {
    assert!(bucket.len() <= 63, "bucket name too long: {bucket}");
    let client = leasehold_s3::local_client(endpoint);
    let config = S3Config::new(bucket, "leases").expect("config");
    if let Err(e) = S3Store::provision(&client, &config).await {
        panic!("creating bucket {bucket} at {endpoint}: {e} (is moto running? `scripts/stores.sh start moto`)");
    }
    S3Store::new(client, config)
}

/// A client as `leasehold_s3::local_client` builds it, plus the given interceptor and
/// HTTP client.
pub fn client_with(endpoint: &str, counter: Option<SentRequests>, http: Option<ScriptedHttp>) -> Client {
    let mut b = aws_sdk_s3::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("leasehold", "leasehold", None, None, "test"))
        .endpoint_url(endpoint)
        .force_path_style(true)
        .timeout_config(
            TimeoutConfig::builder()
                .connect_timeout(Duration::from_secs(2))
                .operation_timeout(Duration::from_secs(10))
                .build(),
        );
    if let Some(c) = counter {
        b = b.interceptor(c);
    }
    if let Some(h) = http {
        b = b.http_client(h);
    }
    Client::from_conf(b.build())
}

/// One scripted answer.
#[derive(Debug, Clone, Copy)]
pub enum Reply {
    /// An S3 error document with this status and code.
    Error(u16, &'static str),
    /// 200 with this ETag (a PUT's answer).
    PutOk(&'static str),
    /// 204 (a DELETE's answer).
    NoContent,
}

/// What the scripted client saw of one request.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub uri: String,
    pub if_match: Option<String>,
    pub if_none_match: Option<String>,
}

/// An HTTP client that answers from a script, like S3 would, and records each request.
/// A request beyond the script gets a connector error, which fails the test's expectations.
#[derive(Debug, Clone, Default)]
pub struct ScriptedHttp {
    replies: Arc<Mutex<VecDeque<Reply>>>,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl ScriptedHttp {
    pub fn new(replies: impl IntoIterator<Item = Reply>) -> Self {
        Self {
            replies: Arc::new(Mutex::new(replies.into_iter().collect())),
            seen: Arc::default(),
        }
    }
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().expect("lock").clone()
    }
    pub fn remaining(&self) -> usize {
        self.replies.lock().expect("lock").len()
    }
}

impl HttpClient for ScriptedHttp {
    fn http_connector(
        &self,
        _settings: &HttpConnectorSettings,
        _components: &RuntimeComponents,
    ) -> SharedHttpConnector {
        SharedHttpConnector::new(self.clone())
    }
}

impl HttpConnector for ScriptedHttp {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        self.seen.lock().expect("lock").push(Seen {
            method: request.method().to_owned(),
            uri: request.uri().to_owned(),
            if_match: request.headers().get("if-match").map(str::to_owned),
            if_none_match: request.headers().get("if-none-match").map(str::to_owned),
        });
        let Some(reply) = self.replies.lock().expect("lock").pop_front() else {
            return HttpConnectorFuture::ready(Err(ConnectorError::other("script exhausted".into(), None)));
        };
        let status = |s: u16| StatusCode::try_from(s).expect("status");
        let response = match reply {
            Reply::Error(code, name) => {
                let xml = format!(
                    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{name}</Code>\
                     <Message>scripted {name}</Message><RequestId>test</RequestId></Error>"
                );
                let mut r = HttpResponse::new(status(code), SdkBody::from(xml));
                r.headers_mut().insert("content-type", "application/xml");
                r
            }
            Reply::PutOk(etag) => {
                let mut r = HttpResponse::new(status(200), SdkBody::empty());
                r.headers_mut().insert("etag", etag);
                r
            }
            Reply::NoContent => HttpResponse::new(status(204), SdkBody::empty()),
        };
        HttpConnectorFuture::ready(Ok(response))
    }
}

/// Polls `cond` every 5 ms until it holds, panicking with `what` after `timeout`.
pub async fn wait_until(what: &str, timeout: Duration, cond: impl FnMut() -> bool) {
    assert!(
        leasehold_core::testing::process::poll(timeout, cond).await,
        "timed out after {timeout:?} waiting for: {what}"
    );
}

/// Where this crate's own servers keep their logs.
pub fn own_dir() -> String {
    leasehold_testkit::stores_dir("store-s3").display().to_string()
}

/// This test binary's serialized moto on `port` (one of 55200-55209), started on first
/// use and ended by its watchdog when the test binary exits. Returns its endpoint.
pub fn serialized_moto(port: u16) -> String {
    static STARTED: OnceLock<Mutex<HashMap<u16, String>>> = OnceLock::new();
    let started = STARTED.get_or_init(Mutex::default);
    let mut started = started.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(endpoint) = started.get(&port) {
        return endpoint.clone();
    }
    let log = std::path::PathBuf::from(own_dir()).join(format!("moto-serialized-{port}.log"));
    let child = leasehold_testkit::start_serialized_moto(port, &log);
    // The watchdog ends it with this process; the handle is deliberately not waited on.
    std::mem::forget(child);
    let endpoint = format!("http://127.0.0.1:{port}");
    started.insert(port, endpoint.clone());
    endpoint
}

/// A moto of a test's own (threaded, as `moto_server`), stopped when dropped.
pub struct OwnMoto {
    child: Child,
    pub endpoint: String,
}

impl Drop for OwnMoto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `moto_server` on `port` with extra environment variables.
pub fn own_moto(port: u16, env: &[(&str, &str)]) -> OwnMoto {
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        "port {port} is already in use; a server left from an earlier run? (stop it by its pid)"
    );
    let bin = leasehold_testkit::venv().join("bin/moto_server");
    let log = std::fs::File::create(format!("{}/moto-{port}.log", own_dir())).expect("log file");
    let mut child = Command::new(&bin)
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| panic!("starting {}: {e} (run scripts/install-deps.sh)", bin.display()));
    leasehold_testkit::wait_listening(port, &mut child, "moto_server", Duration::from_secs(30));
    OwnMoto {
        child,
        endpoint: format!("http://127.0.0.1:{port}"),
    }
}
