//! `run` counts honestly: against a fake OpenAI-compatible server on loopback that answers
//! with broken streams, impossible `usage`, errors or junk, every such request is an error
//! row with its reason, never a completion; bad `--chars-per-token` values are refused
//! before anything is sent; a run whose every request failed exits non-zero and says why;
//! a closed stdout ends the output quietly.

use bench_native::client::{ClientError, Endpoint, EndpointConfig};
use bench_native::run::{run_to_end, RunConfig, RunError, RunReport};
use engine::workload::{ArrivalProcess, LengthDist, Workload};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The raw HTTP response to the `i`-th `POST /v1/completions`, given its `max_tokens`.
type Reply = fn(usize, u64) -> Vec<u8>;

/// A fake server on a loopback port: `GET /v1/models` gets `models` (raw bytes, so they
/// can be anything), `POST /v1/completions` gets `reply`, the rest 404. One request per
/// connection.
pub(super) struct FakeServer {
    pub url: String,
    /// `POST /v1/completions` received [count].
    pub posts: Arc<AtomicUsize>,
}

impl FakeServer {
    pub fn start(models: Vec<u8>, reply: Reply) -> FakeServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let posts = Arc::new(AtomicUsize::new(0));
        let counter = posts.clone();
        std::thread::spawn(move || {
            for s in listener.incoming().flatten() {
                let (models, counter) = (models.clone(), counter.clone());
                std::thread::spawn(move || serve(s, &models, reply, &counter));
            }
        });
        FakeServer { url, posts }
    }

    /// An OpenAI model list and `reply` to completions.
    pub fn openai(reply: Reply) -> FakeServer {
        FakeServer::start(http("200 OK", "application/json", MODELS.as_bytes()), reply)
    }
}

const MODELS: &str = r#"{"object":"list","data":[{"id":"fake","object":"model"}]}"#;

/// Reads one HTTP request from `s`: its head and its body (`Content-Length` bytes).
/// `None` if the connection ends first.
pub(super) fn read_request(s: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
    let mut buf = Vec::new();
    let mut tmp = [0u8; 8192];
    let head_end = loop {
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p + 4;
        }
        match s.read(&mut tmp) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&tmp[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let len = crate::common::content_length(&head);
    while buf.len() < head_end + len {
        match s.read(&mut tmp) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&tmp[..n]),
        }
    }
    Some((head, buf[head_end..head_end + len].to_vec()))
}

fn serve(mut s: TcpStream, models: &[u8], reply: Reply, posts: &AtomicUsize) {
    let Some((head, body)) = read_request(&mut s) else {
        return;
    };
    let body: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    let out = if head.starts_with("GET /v1/models") {
        models.to_vec()
    } else if head.starts_with("POST /v1/completions") {
        let i = posts.fetch_add(1, Ordering::SeqCst);
        reply(i, body["max_tokens"].as_u64().unwrap_or(16))
    } else {
        http("404 Not Found", "text/plain", b"")
    };
    let _ = s.write_all(&out);
    let _ = s.flush();
}

/// A complete HTTP response that closes the connection.
pub(super) fn http(status: &str, content_type: &str, body: &[u8]) -> Vec<u8> {
    let mut r = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    r.extend_from_slice(body);
    r
}

/// An SSE response of these `data:` events, then `data: [DONE]`.
pub(super) fn sse(events: &[String]) -> Vec<u8> {
    let mut text: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
    text.push_str("data: [DONE]\n\n");
    http("200 OK", "text/event-stream", text.as_bytes())
}

/// `n` one-token text events.
fn text_events(n: u64) -> Vec<String> {
    (0..n)
        .map(|_| r#"{"choices":[{"text":" tok","index":0,"finish_reason":null}]}"#.to_string())
        .collect()
}

/// The final event with this `usage` object.
fn usage_event(usage: &str) -> String {
    format!(r#"{{"choices":[{{"text":"","index":0,"finish_reason":"length"}}],"usage":{usage}}}"#)
}

/// A well-formed stream of `max_tokens` tokens with a matching `usage`.
fn good(_: usize, max_tokens: u64) -> Vec<u8> {
    let mut ev = text_events(max_tokens);
    ev.push(usage_event(&format!(
        r#"{{"prompt_tokens":8,"completion_tokens":{max_tokens}}}"#
    )));
    sse(&ev)
}

/// The output directory of the run called `name`.
fn out_dir(name: &str) -> PathBuf {
    crate::common::scratch_root().join(format!("kvqueue-honesty-{}-{name}", std::process::id()))
}

/// [`out_dir`], emptied.
fn scratch(name: &str) -> PathBuf {
    let d = out_dir(name);
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// `n` requests of 8 prompt and 4 output tokens, 100 req/s, no warm-up, no scraping.
fn config(url: &str, name: &str, n: usize) -> RunConfig {
    let mut cfg = RunConfig::new(url, scratch(name));
    cfg.workload = Workload {
        arrivals: ArrivalProcess::Deterministic { rate: 100.0 },
        lengths: LengthDist::Fixed {
            prompt: 8,
            output: 4,
        },
        max_model_len: None,
        shared: None,
    };
    cfg.max_requests = Some(n);
    cfg.warmup_requests = 0;
    cfg.metrics_interval = None;
    cfg.use_tokenizer = false;
    cfg.timeout = Duration::from_secs(10);
    cfg
}

fn run(server: &FakeServer, name: &str, n: usize) -> RunReport {
    let rt = bench_native::run::runtime().unwrap();
    run_to_end(&rt, &config(&server.url, name, n)).unwrap()
}

/// Every row is an error whose message starts with `why`; nothing counts as completed.
fn assert_all_errors(rep: &RunReport, why: &str) {
    assert_eq!(rep.rows.len(), rep.scheduled);
    for r in &rep.rows {
        assert_eq!(r.outcome, "error", "{r:?}");
        assert!(
            r.error.starts_with(why),
            "{:?} does not start with {why:?}",
            r.error
        );
    }
    assert_eq!(
        (rep.summary.completed, rep.summary.errors),
        (0, rep.rows.len() as u64)
    );
}

#[test]
fn the_fake_server_streams_completions_that_count() {
    let server = FakeServer::openai(good);
    let rep = run(&server, "good", 4);
    assert_eq!(rep.summary.completed, 4, "{:#?}", rep.rows);
    assert!(rep.rows.iter().all(|r| r.error.is_empty()
        && r.completion_tokens == Some(4)
        && r.prompt_tokens == Some(8)
        && r.chunks == 4));
}

#[test]
fn a_stream_of_invalid_json_is_an_error_not_a_completion() {
    fn junk(_: usize, _: u64) -> Vec<u8> {
        sse(&["{not json".into(), "garbage".into(), "{\"choices\":".into()])
    }
    let rep = run(&FakeServer::openai(junk), "junk", 4);
    assert_all_errors(&rep, "stream had no valid JSON event");
    assert!(
        rep.rows[0].error.contains("{not json"),
        "{}",
        rep.rows[0].error
    );

    // tokens arrived, but one event among them is not JSON: the count cannot be trusted
    fn one_bad(_: usize, max_tokens: u64) -> Vec<u8> {
        let mut ev = text_events(max_tokens);
        ev.insert(1, r#"{"choices":[{"text":" t"#.into());
        sse(&ev)
    }
    let rep = run(&FakeServer::openai(one_bad), "one-bad", 2);
    assert_all_errors(&rep, "stream had 1 data lines that are not JSON");

    // JSON events, but not one token and no usage
    fn empty(_: usize, _: u64) -> Vec<u8> {
        sse(&["{}".into(), r#"{"choices":[]}"#.into()])
    }
    let rep = run(&FakeServer::openai(empty), "empty", 2);
    assert_all_errors(&rep, "no tokens");
}

#[test]
fn usage_that_is_not_a_count_is_flagged_and_not_stored() {
    fn absurd(_: usize, max_tokens: u64) -> Vec<u8> {
        let mut ev = text_events(max_tokens);
        ev.push(usage_event(
            r#"{"prompt_tokens":1e20,"completion_tokens":-5}"#,
        ));
        sse(&ev)
    }
    let rep = run(&FakeServer::openai(absurd), "absurd", 3);
    assert_all_errors(&rep, "usage.prompt_tokens = 1e+20 is not a count");
    for r in &rep.rows {
        assert!(
            r.error
                .contains("usage.completion_tokens = -5 is not a count"),
            "{}",
            r.error
        );
        assert_eq!(
            (r.prompt_tokens, r.completion_tokens),
            (None, None),
            "{r:?}"
        );
    }
    let csv = std::fs::read_to_string(out_dir("absurd").join("requests.csv")).unwrap();
    assert!(csv.lines().skip(1).all(|l| l.contains(",error,")), "{csv}");
}

#[test]
fn usage_that_disagrees_with_the_stream_is_flagged() {
    fn fewer(_: usize, max_tokens: u64) -> Vec<u8> {
        let mut ev = text_events(max_tokens);
        ev.push(usage_event(r#"{"prompt_tokens":8,"completion_tokens":2}"#));
        sse(&ev)
    }
    let rep = run(&FakeServer::openai(fewer), "fewer", 2);
    assert_all_errors(
        &rep,
        "usage.completion_tokens = 2 but 4 text chunks arrived",
    );

    fn more(_: usize, max_tokens: u64) -> Vec<u8> {
        let mut ev = text_events(max_tokens);
        ev.push(usage_event(
            r#"{"prompt_tokens":8,"completion_tokens":500}"#,
        ));
        sse(&ev)
    }
    let rep = run(&FakeServer::openai(more), "more", 2);
    assert_all_errors(&rep, "usage.completion_tokens = 500 exceeds max_tokens = 4");
}

#[test]
fn chars_per_token_must_be_finite_positive_and_keep_prompts_sane() {
    let server = FakeServer::openai(good);
    let rt = bench_native::run::runtime().unwrap();
    for cpt in [f64::NAN, 0.0, -4.0, f64::INFINITY, 1e-9, 1e9] {
        let mut cfg = config(&server.url, "cpt", 2);
        cfg.chars_per_token = cpt;
        let e = match run_to_end(&rt, &cfg) {
            Ok(rep) => panic!("--chars-per-token {cpt} was accepted: {:?}", rep.rows[0]),
            Err(e) => e,
        };
        assert!(matches!(e, RunError::Invalid(_)), "{e}");
        assert!(e.to_string().contains("--chars-per-token"), "{e}");
    }
    assert_eq!(server.posts.load(Ordering::SeqCst), 0, "nothing is sent");

    // from the command line: a message, not an abort allocating gigabytes
    let out = cli_run(&server.url, "cpt-cli", &["--chars-per-token", "1e9"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("--chars-per-token 1000000000 would build a 8-token prompt"),
        "{stderr}"
    );
    let out = cli_run(&server.url, "cpt-nan", &["--chars-per-token", "NaN"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("--chars-per-token must be"), "{stderr}");
    assert_eq!(server.posts.load(Ordering::SeqCst), 0, "nothing is sent");
}

/// `bench-native run` against `url`: 4 requests, 8 → 4 tokens, quiet, plus `extra`.
fn cli_run(url: &str, name: &str, extra: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_bench-native"));
    c.args([
        "run",
        "--url",
        url,
        "--rate",
        "100",
        "--arrivals",
        "deterministic",
    ])
    .args([
        "--lengths",
        "fixed",
        "--prompt-tokens",
        "8",
        "--output-tokens",
        "4",
    ])
    .args([
        "--num-requests",
        "4",
        "--duration",
        "10",
        "--warmup-requests",
        "0",
    ])
    .args([
        "--metrics-interval",
        "0",
        "--no-tokenize",
        "--quiet",
        "--timeout",
        "10",
    ])
    .arg("--out")
    .arg(scratch(name))
    .args(extra)
    .stdin(Stdio::null());
    c
}

#[test]
fn a_run_whose_every_request_failed_exits_non_zero_and_says_why() {
    fn fail(i: usize, _: u64) -> Vec<u8> {
        let body = if i % 4 == 3 {
            r#"{"error":{"code":503,"message":"loading model"}}"#
        } else {
            r#"{"error":{"code":500,"message":"injected fault"}}"#
        };
        let status = if i % 4 == 3 {
            "503 Service Unavailable"
        } else {
            "500 Internal Server Error"
        };
        http(status, "application/json", body.as_bytes())
    }
    let server = FakeServer::openai(fail);
    let out = cli_run(&server.url, "all-fail", &[]).output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stdout.contains(
            "failed: 4 of 4 requests: 3× HTTP 500: injected fault; 1× HTTP 503: loading model"
        ),
        "{stdout}"
    );
    assert!(
        stderr.contains("all 4 requests failed: 3× HTTP 500: injected fault"),
        "{stderr}"
    );
    // the files are written all the same
    let summary: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out_dir("all-fail").join("summary.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(summary["failures"][0]["reason"], "HTTP 500: injected fault");
    assert_eq!(summary["failures"][0]["count"], 3);

    // one failure of four: said, but the run succeeded
    fn one_fails(i: usize, max_tokens: u64) -> Vec<u8> {
        if i == 2 {
            fail(0, max_tokens)
        } else {
            good(i, max_tokens)
        }
    }
    let server = FakeServer::openai(one_fails);
    let out = cli_run(&server.url, "one-fails", &[]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains("failed: 1 of 4 requests: 1× HTTP 500: injected fault"),
        "{stdout}"
    );
}

#[test]
fn a_closed_stdout_ends_the_output_quietly() {
    let server = FakeServer::openai(good);
    // the reader is gone before the first line is written: every write gets EPIPE
    let mut child = cli_run(&server.url, "epipe", &[])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let csv = std::fs::read_to_string(out_dir("epipe").join("requests.csv")).unwrap();
    assert_eq!(csv.lines().count(), 5, "{csv}");

    // `run … | head -1`: the first line is read, then the reader goes
    let mut child = cli_run(&server.url, "head", &[])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 1];
    stdout.read_exact(&mut first).unwrap();
    drop(stdout);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.code(), Some(0), "{stderr}");
}

fn connect(url: &str) -> ClientError {
    let rt = bench_native::run::runtime().unwrap();
    let cfg = EndpointConfig {
        url: url.into(),
        control_timeout: Duration::from_secs(5),
        ..EndpointConfig::default()
    };
    rt.block_on(Endpoint::connect(&cfg)).unwrap_err()
}

#[test]
fn junk_at_v1_models_says_the_server_answered_but_not_as_openai() {
    fn never(_: usize, _: u64) -> Vec<u8> {
        unreachable!()
    }
    let html = FakeServer::start(
        http(
            "200 OK",
            "text/html",
            b"<html><body>It works!</body></html>",
        ),
        never,
    );
    let e = connect(&html.url);
    let msg = e.to_string();
    assert!(matches!(e, ClientError::NotOpenAi { .. }), "{msg}");
    assert!(!msg.contains("cannot reach"), "{msg}");
    assert!(
        msg.contains("answered GET /v1/models with HTTP 200")
            && msg.contains("<html><body>It works!")
            && msg.contains("not how an OpenAI-compatible server answers"),
        "{msg}"
    );

    let json = FakeServer::start(
        http("200 OK", "application/json", br#"{"status":"ok"}"#),
        never,
    );
    let msg = connect(&json.url).to_string();
    assert!(msg.contains(r#"{\"status\":\"ok\"}"#), "{msg}");
    assert!(
        msg.contains("not how an OpenAI-compatible server answers"),
        "{msg}"
    );

    // not HTTP at all (another protocol on the port)
    let ssh = FakeServer::start(b"SSH-2.0-OpenSSH_9.6\r\n".to_vec(), never);
    let msg = connect(&ssh.url).to_string();
    assert!(!msg.contains("cannot reach"), "{msg}");
    assert!(msg.contains("with something that is not HTTP"), "{msg}");

    // and nothing listening is still "cannot reach"
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let msg = connect(&format!("http://127.0.0.1:{port}")).to_string();
    assert!(msg.contains("cannot reach the server"), "{msg}");
}

#[test]
fn the_servers_cached_tokens_reach_requests_csv_and_the_summary() {
    // every other request finds 6 of its 8 prompt tokens cached (vLLM's usage detail)
    fn cached(i: usize, max_tokens: u64) -> Vec<u8> {
        let mut ev = text_events(max_tokens);
        ev.push(usage_event(&format!(
            r#"{{"prompt_tokens":8,"completion_tokens":{max_tokens},"prompt_tokens_details":{{"cached_tokens":{}}}}}"#,
            if i.is_multiple_of(2) { 6 } else { 0 }
        )));
        sse(&ev)
    }
    let server = FakeServer::openai(cached);
    let rep = run(&server, "cached", 6);
    assert_eq!(rep.summary.completed, 6);
    let mut counts: Vec<u32> = rep.rows.iter().map(|r| r.cached_tokens.unwrap()).collect();
    counts.sort_unstable();
    assert_eq!(counts, [0, 0, 0, 6, 6, 6]);
    let p = rep
        .prefix
        .as_ref()
        .expect("the server reported cached tokens");
    assert_eq!((p.lookups, p.hit_lookups), (6, 3));
    assert_eq!((p.query_tokens, p.saved_tokens), (48, 18));
    assert_eq!(p.token_hit_rate, Some(0.375));
    assert_eq!((p.ttft_hit.n, p.ttft_miss.n), (3, 3));
    // on disk: the column, and the summary's prefix_cache
    let csv = std::fs::read_to_string(out_dir("cached").join("requests.csv")).unwrap();
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let col = header.iter().position(|h| *h == "cached_tokens").unwrap();
    let mut on_disk: Vec<&str> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(col).unwrap())
        .collect();
    on_disk.sort_unstable();
    assert_eq!(on_disk, ["0", "0", "0", "6", "6", "6"]);
    let summary: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out_dir("cached").join("summary.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(summary["prefix_cache"]["saved_tokens"], 18);

    // a server that reports nothing: an empty column, no prefix_cache
    let rep = run(&FakeServer::openai(good), "uncached", 2);
    assert!(rep.rows.iter().all(|r| r.cached_tokens.is_none()));
    assert!(rep.prefix.is_none());
    let summary: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out_dir("uncached").join("summary.json")).unwrap(),
    )
    .unwrap();
    assert!(summary["prefix_cache"].is_null());
}
