//! A scripted HTTP responder on a loopback port, for the error paths moto cannot
//! produce (throttling, 500/503, access denied, hung or dropped connections). It does
//! not emulate DynamoDB: it answers every request the same scripted way and counts them.
#![allow(dead_code, unreachable_pub, missing_docs)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What the responder does with each request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Script {
    /// Answers with this status and DynamoDB error code.
    Error { status: u16, code: String },
    /// Answers with this status and an empty body (no service's error code).
    Status(u16),
    /// Reads the request and never answers (keeps the connection open).
    Hang,
    /// Reads the request and closes the connection without answering.
    Drop,
}

#[derive(Debug)]
pub struct FakeHttp {
    pub endpoint: String,
    requests: Arc<AtomicU64>,
    script: Arc<Mutex<Script>>,
    task: tokio::task::JoinHandle<()>,
}

impl FakeHttp {
    pub async fn start(script: Script) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind fake http");
        let endpoint = format!("http://{}", listener.local_addr().expect("addr"));
        let requests = Arc::new(AtomicU64::new(0));
        let script = Arc::new(Mutex::new(script));
        let (r, s) = (requests.clone(), script.clone());
        let task = tokio::spawn(async move {
            loop {
                let Ok((sock, _)) = listener.accept().await else { return };
                let (r, s) = (r.clone(), s.clone());
                tokio::spawn(async move { serve(sock, r, s).await });
            }
        });
        Self {
            endpoint,
            requests,
            script,
            task,
        }
    }

    pub fn set(&self, script: Script) {
        *self.script.lock().expect("script lock") = script;
    }

    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::SeqCst)
    }

    pub fn reset(&self) {
        self.requests.store(0, Ordering::SeqCst);
    }
}

impl Drop for FakeHttp {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(mut sock: TcpStream, requests: Arc<AtomicU64>, script: Arc<Mutex<Script>>) {
    loop {
        // Read one request: headers, then Content-Length bytes of body.
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        let header_end = loop {
            if let Some(i) = find(&buf, b"\r\n\r\n") {
                break i + 4;
            }
            match sock.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        let headers = String::from_utf8_lossy(&buf[..header_end]).to_ascii_lowercase();
        let len = headers
            .lines()
            .find_map(|l| {
                l.strip_prefix("content-length:")
                    .map(|v| v.trim().parse::<usize>().unwrap_or(0))
            })
            .unwrap_or(0);
        while buf.len() < header_end + len {
            match sock.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        requests.fetch_add(1, Ordering::SeqCst);
        let action = script.lock().expect("script lock").clone();
        match action {
            Script::Hang => {
                // Keep the socket open until the client gives up.
                let _ = sock.read(&mut chunk).await;
                return;
            }
            Script::Drop => return,
            Script::Status(status) => {
                let response = format!("HTTP/1.1 {status} Scripted\r\ncontent-length: 0\r\n\r\n");
                if sock.write_all(response.as_bytes()).await.is_err() {
                    return;
                }
            }
            Script::Error { status, code } => {
                let body =
                    format!(r#"{{"__type":"com.amazonaws.dynamodb.v20120810#{code}","message":"scripted {code}"}}"#);
                let response = format!(
                    "HTTP/1.1 {status} Scripted\r\ncontent-type: application/x-amz-json-1.0\r\n\
                     x-amzn-requestid: fake\r\ncontent-length: {}\r\n\r\n{body}",
                    body.len()
                );
                if sock.write_all(response.as_bytes()).await.is_err() {
                    return;
                }
            }
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}
