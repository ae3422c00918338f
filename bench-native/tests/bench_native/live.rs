//! What the live tests share: a llama-server started on a free loopback port and stopped
//! by PID, and a fault-injecting proxy in front of it (HTTP 500s, cut and stalled
//! streams). Moved here from `real_server.rs` so the soak test uses the same ones.

use super::common::{free_port, installed};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A running llama-server, killed on drop.
pub(super) struct Server {
    pub child: Child,
    pub port: u16,
}

impl Server {
    /// `slots` sequences, `ctx` total KV tokens (split over the slots), 1 thread.
    pub fn start(slots: u32, ctx: u32, log: &Path) -> Server {
        let (bin, model) = installed();
        let port = free_port();
        let log = std::fs::File::create(log).unwrap();
        let child = Command::new(bin)
            .args([
                "-m",
                model.to_str().unwrap(),
                "--host",
                "127.0.0.1",
                "--port",
                &port.to_string(),
            ])
            .args([
                "-c",
                &ctx.to_string(),
                "-np",
                &slots.to_string(),
                "-t",
                "1",
                "-b",
                "2048",
                "-ub",
                "512",
            ])
            .args(["--metrics", "--no-webui", "-cram", "0"])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn llama-server");
        let mut s = Server { child, port };
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(60) {
            if let Some(st) = s.child.try_wait().unwrap() {
                panic!("llama-server exited during start-up: {st}");
            }
            if http_status(port, "/health") == Some(200) {
                return s;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        s.kill();
        panic!("llama-server did not become healthy in 60 s");
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

pub(super) fn http_status(port: u16, path: &str) -> Option<u16> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut buf = [0u8; 64];
    let n = s.read(&mut buf).ok()?;
    std::str::from_utf8(&buf[..n])
        .ok()?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// What the proxy does to the n-th generation request.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Fault {
    Pass,
    Http500,
    /// Forward this many response bytes, then close.
    Cut(usize),
    /// Forward this many response bytes, then hold the connection silently.
    Stall(usize),
}

/// A fault-injecting HTTP/1.1 proxy: one request per connection (`Connection: close`).
pub(super) async fn proxy(
    listener: tokio::net::TcpListener,
    upstream: SocketAddr,
    plan: fn(usize) -> Fault,
) {
    let counter = Arc::new(AtomicUsize::new(0));
    loop {
        let Ok((client, _)) = listener.accept().await else {
            return;
        };
        let counter = counter.clone();
        tokio::spawn(async move {
            let _ = proxy_one(client, upstream, plan, &counter).await;
        });
    }
}

async fn proxy_one(
    mut client: tokio::net::TcpStream,
    upstream: SocketAddr,
    plan: fn(usize) -> Fault,
    counter: &AtomicUsize,
) -> std::io::Result<()> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = Vec::new();
    let mut tmp = [0u8; 8192];
    let head_end = loop {
        let n = client.read(&mut tmp).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&tmp[..n]);
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let len = super::common::content_length(&head);
    while buf.len() < head_end + len {
        let n = client.read(&mut tmp).await?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&tmp[..n]);
    }
    let fault = if head.starts_with("POST /v1/completions") {
        plan(counter.fetch_add(1, Ordering::SeqCst))
    } else {
        Fault::Pass
    };
    if fault == Fault::Http500 {
        let body = r#"{"error":{"code":500,"message":"injected fault","type":"server_error"}}"#;
        let resp = format!(
            "HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        client.write_all(resp.as_bytes()).await?;
        return client.shutdown().await;
    }
    let mut new_head: String = head
        .lines()
        .filter(|l| !l.is_empty() && !l.to_ascii_lowercase().starts_with("connection:"))
        .map(|l| format!("{l}\r\n"))
        .collect();
    new_head.push_str("Connection: close\r\n\r\n");
    let mut up = tokio::net::TcpStream::connect(upstream).await?;
    up.write_all(new_head.as_bytes()).await?;
    up.write_all(&buf[head_end..]).await?;
    let limit = match fault {
        Fault::Cut(n) | Fault::Stall(n) => n,
        _ => usize::MAX,
    };
    // The client sends nothing after its request, so a read on its side ends only when
    // it hangs up (a client timeout): then the upstream request is dropped too, as a real
    // proxy does, instead of waiting on a server that may not answer for minutes.
    let (mut from_client, mut to_client) = client.split();
    let mut probe = [0u8; 1];
    let mut sent = 0;
    loop {
        let n = tokio::select! {
            n = up.read(&mut tmp) => n?,
            _ = from_client.read(&mut probe) => return Ok(()),
        };
        if n == 0 {
            break;
        }
        let take = n.min(limit - sent);
        to_client.write_all(&tmp[..take]).await?;
        sent += take;
        if sent >= limit {
            break;
        }
    }
    if let Fault::Stall(_) = fault {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(30)) => {}
            _ = from_client.read(&mut probe) => {}
        }
    }
    drop(up);
    to_client.shutdown().await
}
