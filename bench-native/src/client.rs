//! HTTP side of measurement: one OpenAI-compatible endpoint, pre-flight checks (server
//! reachable, model served, context size), exact-length prompts, and one streamed
//! request timed chunk by chunk.
//!
//! Token counts come from the server's `usage` (final chunk, `stream_options.include_usage`),
//! never from counting chunks: a chunk may carry several tokens, or none (partial UTF-8).

use crate::sse::SseParser;
use futures_util::StreamExt;
use serde_json::{json, Value};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::time::Instant;

/// Which OpenAI route is driven.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Api {
    /// `/v1/completions` (`prompt`, `choices[0].text`).
    #[default]
    Completions,
    /// `/v1/chat/completions` (`messages`, `choices[0].delta.content`).
    Chat,
}

/// What kind of server answered (decides which extra request fields are sent).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerKind {
    /// llama.cpp `llama-server` (has `/props`).
    LlamaCpp,
    /// vLLM (has `/version`).
    Vllm,
    #[default]
    Unknown,
}

/// Errors of the HTTP side, each saying what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Nothing answers at the URL.
    #[error("cannot reach the server at {url}: {why} — is it running, and is --url right?")]
    Unreachable { url: String, why: String },
    /// Something answers at the URL, but not as an OpenAI-compatible server would: check
    /// that `--url` is the server's base URL (not another service on that port).
    #[error("the server at {url} answered GET /v1/models {answer}, which is not how an OpenAI-compatible server answers (a JSON object with a `data` list of models) — is --url the base URL of llama-server or vLLM?")]
    NotOpenAi { url: String, answer: String },
    /// The requested model is not in `/v1/models`.
    #[error("the server does not serve model '{model}'; it serves: {available:?} (pass one with --model)")]
    UnknownModel {
        model: String,
        available: Vec<String>,
    },
    /// `/v1/models` lists nothing.
    #[error("the server at {0} lists no models under /v1/models")]
    NoModels(String),
    /// A request would not fit the server's context.
    #[error("prompt + output = {need} tokens does not fit the server's per-sequence context of {ctx} tokens (llama.cpp: -c is split over -np slots; vLLM: --max-model-len); use shorter requests")]
    ContextTooSmall { need: u64, ctx: u64 },
    /// Non-success HTTP status on a pre-flight call.
    #[error("{what}: HTTP {status}: {body}")]
    Http {
        what: String,
        status: u16,
        body: String,
    },
    /// Anything else.
    #[error("{0}")]
    Other(String),
}

/// Connection options.
#[derive(Clone, Debug)]
pub struct EndpointConfig {
    /// Base URL, e.g. `http://127.0.0.1:8080` (a trailing `/v1` is accepted).
    pub url: String,
    pub api: Api,
    /// Model name; `None` = the first model of `/v1/models`.
    pub model: Option<String>,
    /// Bearer token (never printed or written).
    pub api_key: Option<String>,
    /// Send `ignore_eos: true` (force the output length).
    pub ignore_eos: bool,
    /// Also send `min_tokens = max_tokens` (vLLM; llama.cpp ignores it).
    pub min_tokens: bool,
    /// Timeout of the control requests (`/v1/models`, `/props`, `/metrics`, …): the
    /// user's `--timeout`, 10 s by default.
    pub control_timeout: Duration,
}

impl Default for EndpointConfig {
    fn default() -> Self {
        EndpointConfig {
            url: "http://127.0.0.1:8080".into(),
            api: Api::Completions,
            model: None,
            api_key: None,
            ignore_eos: true,
            min_tokens: false,
            control_timeout: Duration::from_secs(10),
        }
    }
}

/// A checked endpoint: reachable, model resolved, server kind known.
#[derive(Clone, Debug)]
pub struct Endpoint {
    pub base: String,
    pub api: Api,
    pub model: String,
    pub kind: ServerKind,
    /// Per-sequence context [tokens], if the server says.
    pub context_tokens: Option<u64>,
    api_key: Option<String>,
    ignore_eos: bool,
    min_tokens: bool,
    control_timeout: Duration,
    http: reqwest::Client,
}

/// Usage reported by the server [tokens].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Usage {
    pub prompt_tokens: u32,
    pub completion_tokens: u32,
}

/// llama.cpp's own `timings` of a request [ms].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ServerTimings {
    pub prompt_ms: f64,
    pub predicted_ms: f64,
}

/// What one streamed request produced. Times are [s] on the run clock.
#[derive(Clone, Debug, Default)]
pub struct StreamResult {
    /// When the request was handed to the HTTP client [s] (its connection writes it next).
    pub sent_s: f64,
    /// Arrival time of each chunk that carried text [s].
    pub token_chunk_s: Vec<f64>,
    pub usage: Option<Usage>,
    pub finish_reason: Option<String>,
    pub timings: Option<ServerTimings>,
    /// Why the last `usage` seen is not a valid count (then [`StreamResult::usage`] is
    /// `None`).
    pub usage_problem: Option<String>,
    /// `data:` events that were JSON [count].
    pub events: u32,
    /// `data:` events that were not JSON (`[DONE]` aside) [count].
    pub bad_events: u32,
    /// The first event that was not JSON, shortened.
    pub first_bad_event: Option<String>,
    /// `None` = completed normally.
    pub error: Option<String>,
}

/// A streamed generation request built ahead of its send time (URL, headers, serialised
/// JSON body), so that sending it is only the hand-over to the HTTP client. A request
/// that could not be built carries the reason, reported as the request's error.
#[derive(Debug)]
pub struct PreparedRequest {
    req: Result<reqwest::Request, String>,
    /// The body's `max_tokens`, what `usage.completion_tokens` may not exceed.
    max_tokens: Option<u32>,
}

/// The longest `data:` line accepted without a newline [bytes]: a server's event is a
/// few hundred bytes; a "line" this long means the stream is not SSE.
pub const MAX_EVENT_BYTES: usize = 8 << 20;

fn short(s: &str) -> String {
    short_to(s, 300)
}

/// `s` trimmed, cut to at most `max` bytes (at a character boundary) with an ellipsis.
fn short_to(s: &str, max: usize) -> String {
    let s = s.trim();
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}…", &s[..end])
    } else {
        s.to_string()
    }
}

/// The first bytes of a body, quoted and escaped, for an error message.
fn first_bytes(bytes: &[u8]) -> String {
    const SHOWN: usize = 80;
    if bytes.is_empty() {
        return "an empty body".into();
    }
    let head = String::from_utf8_lossy(&bytes[..bytes.len().min(SHOWN)]);
    let more = if bytes.len() > SHOWN { "…" } else { "" };
    format!("a {}-byte body starting {:?}{more}", bytes.len(), head)
}

/// The readable part of an error body (`{"error":{"message":…}}` in both servers).
pub fn error_message(body: &str) -> String {
    serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| {
            v.pointer("/error/message")
                .or_else(|| v.get("message"))
                .or_else(|| v.get("detail"))
                .and_then(|m| m.as_str().map(str::to_string))
        })
        .unwrap_or_else(|| short(body))
}

/// Formats a reqwest error with its causes, flagging connection failures.
/// The HTTP client: keeps up to `idle_per_host` idle connections for reuse (0: none).
fn http_client(idle_per_host: usize) -> Result<reqwest::Client, ClientError> {
    reqwest::Client::builder()
        .tcp_nodelay(true)
        .pool_max_idle_per_host(idle_per_host)
        // llama-server (cpp-httplib) and uvicorn close a keep-alive connection after 5 s
        // idle; reusing one at that moment fails. Dropping idle connections sooner avoids
        // that race (see also `Endpoint::without_connection_reuse`).
        .pool_idle_timeout(Duration::from_secs(3))
        .connect_timeout(Duration::from_secs(5))
        .build()
        .map_err(|e| ClientError::Other(describe(&e)))
}

pub fn describe(e: &reqwest::Error) -> String {
    let mut s = if e.is_connect() {
        "connection failed".to_string()
    } else if e.is_timeout() {
        "timed out".to_string()
    } else if e.is_body() || e.is_decode() {
        "response body broken".to_string()
    } else {
        "request failed".to_string()
    };
    let mut src: Option<&dyn std::error::Error> = std::error::Error::source(e);
    while let Some(c) = src {
        s.push_str(": ");
        s.push_str(&c.to_string());
        src = c.source();
    }
    s
}

impl Endpoint {
    /// This endpoint with a client that opens a new connection for every request.
    ///
    /// A server may close a kept-alive connection just as the client reuses it (the
    /// request then fails with "connection closed before message completed"). In a load
    /// test that is measured like any other error; a microbenchmark, where one failed
    /// request spoils the whole table, uses fresh connections instead (≈ 0.1 ms each on
    /// loopback).
    ///
    /// # Errors
    /// [`ClientError::Other`] if the HTTP client cannot be built.
    pub fn without_connection_reuse(mut self) -> Result<Endpoint, ClientError> {
        self.http = http_client(0)?;
        Ok(self)
    }

    /// Connects, lists models, resolves the model name, identifies the server.
    ///
    /// # Errors
    /// [`ClientError::Unreachable`], [`ClientError::NotOpenAi`], [`ClientError::Http`],
    /// [`ClientError::UnknownModel`], [`ClientError::NoModels`].
    pub async fn connect(cfg: &EndpointConfig) -> Result<Endpoint, ClientError> {
        let base = cfg
            .url
            .trim_end_matches('/')
            .trim_end_matches("/v1")
            .trim_end_matches('/')
            .to_string();
        let http = http_client(1024)?;
        let mut ep = Endpoint {
            base: base.clone(),
            api: cfg.api,
            model: String::new(),
            kind: ServerKind::Unknown,
            context_tokens: None,
            api_key: cfg.api_key.clone(),
            ignore_eos: cfg.ignore_eos,
            min_tokens: cfg.min_tokens,
            control_timeout: cfg.control_timeout,
            http,
        };
        let data = ep.list_models().await?;
        let ids: Vec<String> = data
            .iter()
            .filter_map(|m| m.get("id")?.as_str().map(str::to_string))
            .collect();
        ep.model = match &cfg.model {
            Some(m) if ids.contains(m) => m.clone(),
            Some(m) => {
                return Err(ClientError::UnknownModel {
                    model: m.clone(),
                    available: ids,
                })
            }
            None => ids
                .first()
                .cloned()
                .ok_or_else(|| ClientError::NoModels(base.clone()))?,
        };
        let max_model_len = data
            .iter()
            .find(|m| m.get("id").and_then(Value::as_str) == Some(&ep.model))
            .and_then(|m| m.get("max_model_len")?.as_u64());
        if let Ok(props) = ep.get_json("/props").await {
            ep.kind = ServerKind::LlamaCpp;
            ep.context_tokens = props
                .pointer("/default_generation_settings/n_ctx")
                .and_then(Value::as_u64);
        } else if ep.get_json("/version").await.is_ok() {
            ep.kind = ServerKind::Vllm;
            ep.context_tokens = max_model_len;
        } else {
            ep.context_tokens = max_model_len;
        }
        Ok(ep)
    }

    /// `GET /v1/models`: the `data` list, or why the answer is not an OpenAI model list.
    async fn list_models(&self) -> Result<Vec<Value>, ClientError> {
        let not_openai = |answer: String| ClientError::NotOpenAi {
            url: self.base.clone(),
            answer,
        };
        let resp = match self
            .auth(self.http.get(format!("{}/v1/models", self.base)))
            .timeout(self.control_timeout)
            .send()
            .await
        {
            Ok(r) => r,
            // nothing answered (refused, no route, or silence until the timeout)
            Err(e) if e.is_connect() || e.is_timeout() => {
                return Err(ClientError::Unreachable {
                    url: self.base.clone(),
                    why: describe(&e),
                })
            }
            // something answered, but not in HTTP
            Err(e) => {
                return Err(not_openai(format!(
                    "with something that is not HTTP ({})",
                    describe(&e)
                )))
            }
        };
        let status = resp.status().as_u16();
        let bytes = resp.bytes().await.map_err(|e| {
            not_openai(format!(
                "with HTTP {status} and then a broken body ({})",
                describe(&e)
            ))
        })?;
        if !(200..300).contains(&status) {
            return Err(ClientError::Http {
                what: "GET /v1/models".into(),
                status,
                body: error_message(&String::from_utf8_lossy(&bytes)),
            });
        }
        let data = serde_json::from_slice::<Value>(&bytes)
            .ok()
            .and_then(|v| v.get("data")?.as_array().cloned());
        data.ok_or_else(|| not_openai(format!("with HTTP {status} and {}", first_bytes(&bytes))))
    }

    fn auth(&self, rb: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.api_key {
            Some(k) => rb.bearer_auth(k),
            None => rb,
        }
    }

    /// GET a JSON document.
    ///
    /// # Errors
    /// [`ClientError::Other`] on transport errors, [`ClientError::Http`] on a bad status.
    pub async fn get_json(&self, path: &str) -> Result<Value, ClientError> {
        let text = self.get_text(path).await?;
        serde_json::from_str(&text)
            .map_err(|e| ClientError::Other(format!("{path}: not JSON: {e}")))
    }

    /// GET a text document (e.g. `/metrics`).
    ///
    /// # Errors
    /// As [`Endpoint::get_json`].
    pub async fn get_text(&self, path: &str) -> Result<String, ClientError> {
        let resp = self
            .auth(self.http.get(format!("{}{path}", self.base)))
            .timeout(self.control_timeout)
            .send()
            .await
            .map_err(|e| ClientError::Other(describe(&e)))?;
        let status = resp.status();
        let body = resp
            .text()
            .await
            .map_err(|e| ClientError::Other(describe(&e)))?;
        if !status.is_success() {
            return Err(ClientError::Http {
                what: format!("GET {path}"),
                status: status.as_u16(),
                body: error_message(&body),
            });
        }
        Ok(body)
    }

    /// Checks that `need` = prompt + output tokens fits the server's per-sequence context.
    ///
    /// # Errors
    /// [`ClientError::ContextTooSmall`].
    pub fn check_fits(&self, need: u64) -> Result<(), ClientError> {
        match self.context_tokens {
            Some(ctx) if need > ctx => Err(ClientError::ContextTooSmall { need, ctx }),
            _ => Ok(()),
        }
    }

    /// Tokenizes with the server's `/tokenize` (llama.cpp, vLLM), counting the special
    /// tokens a completion adds (BOS). `None` if the server has no such route.
    pub async fn tokenize_count(&self, text: &str) -> Option<usize> {
        let body =
            json!({"content": text, "prompt": text, "model": self.model, "add_special": true});
        let resp = self
            .auth(self.http.post(format!("{}/tokenize", self.base)))
            .json(&body)
            .send()
            .await
            .ok()?;
        if !resp.status().is_success() {
            return None;
        }
        let v: Value = resp.json().await.ok()?;
        v.get("tokens")
            .and_then(Value::as_array)
            .map(Vec::len)
            .or_else(|| v.get("count")?.as_u64().map(|c| c as usize))
    }

    /// The JSON body of a streamed generation request.
    pub fn body(&self, prompt: &str, max_tokens: u32) -> Value {
        let mut b = match self.api {
            Api::Completions => json!({"model": self.model, "prompt": prompt}),
            Api::Chat => {
                json!({"model": self.model, "messages": [{"role": "user", "content": prompt}]})
            }
        };
        b["max_tokens"] = json!(max_tokens);
        b["stream"] = json!(true);
        b["stream_options"] = json!({"include_usage": true});
        if self.ignore_eos {
            b["ignore_eos"] = json!(true);
        }
        if self.min_tokens {
            b["min_tokens"] = json!(max_tokens);
        }
        if self.kind == ServerKind::LlamaCpp {
            b["cache_prompt"] = json!(false);
        }
        b
    }

    fn route(&self) -> &'static str {
        match self.api {
            Api::Completions => "/v1/completions",
            Api::Chat => "/v1/chat/completions",
        }
    }

    /// Builds the streamed request for `body` (see [`Endpoint::stream_prepared`]).
    pub fn prepare(&self, body: &Value) -> PreparedRequest {
        PreparedRequest {
            req: self
                .auth(self.http.post(format!("{}{}", self.base, self.route())))
                .json(body)
                .build()
                .map_err(|e| describe(&e)),
            max_tokens: body
                .get("max_tokens")
                .and_then(Value::as_u64)
                .and_then(|m| u32::try_from(m).ok()),
        }
    }

    /// Sends one streamed request and timestamps every text-carrying chunk on the run
    /// clock `t0`. Never fails: transport errors, bad statuses, cut streams and the
    /// `timeout` (whole request) end up in [`StreamResult::error`], with whatever arrived.
    pub async fn stream(&self, t0: Instant, body: &Value, timeout: Duration) -> StreamResult {
        self.stream_prepared(t0, self.prepare(body), timeout).await
    }

    /// As [`Endpoint::stream`], for a request built beforehand with [`Endpoint::prepare`].
    /// [`StreamResult::sent_s`] is stamped on the first poll, right before the request is
    /// handed to the HTTP client.
    pub async fn stream_prepared(
        &self,
        t0: Instant,
        req: PreparedRequest,
        timeout: Duration,
    ) -> StreamResult {
        let mut st = StreamResult::default();
        let deadline = Instant::now() + timeout;
        let max_tokens = req.max_tokens;
        let fut = self.stream_inner(t0, req, &mut st);
        if tokio::time::timeout_at(deadline, fut).await.is_err() {
            st.error = Some(format!(
                "timed out after {:.1} s ({} chunks received)",
                timeout.as_secs_f64(),
                st.token_chunk_s.len()
            ));
        }
        st.judge(max_tokens, self.context_tokens);
        st
    }

    async fn stream_inner(&self, t0: Instant, req: PreparedRequest, st: &mut StreamResult) {
        st.sent_s = t0.elapsed().as_secs_f64();
        let resp = match req.req {
            Ok(req) => self.http.execute(req).await,
            Err(why) => {
                st.error = Some(why);
                return;
            }
        };
        let resp = match resp {
            Ok(r) => r,
            Err(e) => {
                st.error = Some(describe(&e));
                return;
            }
        };
        let status = resp.status();
        if !status.is_success() {
            let text = resp.text().await.unwrap_or_default();
            st.error = Some(format!(
                "HTTP {}: {}",
                status.as_u16(),
                error_message(&text)
            ));
            return;
        }
        let mut reader = EventReader::new(self.api == Api::Chat);
        let mut bytes = resp.bytes_stream();
        while let Some(item) = bytes.next().await {
            let chunk = match item {
                Ok(c) => c,
                Err(e) => {
                    st.error = Some(format!("stream cut: {}", describe(&e)));
                    return;
                }
            };
            if reader.push(&chunk, t0.elapsed().as_secs_f64(), st) {
                break;
            }
            if reader.pending() > MAX_EVENT_BYTES {
                st.error = Some(format!(
                    "stream is not SSE: over {} MiB without a line end",
                    MAX_EVENT_BYTES >> 20
                ));
                return;
            }
        }
        if !reader.done && st.error.is_none() {
            st.error = Some(format!(
                "stream cut: ended before [DONE] after {} chunks",
                st.token_chunk_s.len()
            ));
        }
    }
}

/// The fields of one streamed event that are read, borrowed from the line: no map is
/// built and ordinary text is not copied. An event of any other shape is read as a
/// generic JSON value instead, with the same meaning ([`StreamResult::apply_value`]).
#[derive(serde::Deserialize)]
struct Event<'a> {
    #[serde(default, borrow)]
    choices: Vec<EventChoice<'a>>,
    #[serde(default)]
    usage: Option<EventUsage>,
    #[serde(default)]
    timings: Option<EventTimings>,
    /// Present (even as `null`) = the server reports an error.
    #[serde(default, deserialize_with = "present")]
    error: Option<Value>,
}

#[derive(serde::Deserialize)]
struct EventChoice<'a> {
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    delta: Option<EventDelta<'a>>,
    #[serde(default, borrow)]
    finish_reason: Option<Cow<'a, str>>,
}

#[derive(serde::Deserialize)]
struct EventDelta<'a> {
    #[serde(default, borrow)]
    content: Option<Cow<'a, str>>,
}

#[derive(serde::Deserialize)]
struct EventUsage {
    #[serde(default)]
    prompt_tokens: Option<Value>,
    #[serde(default)]
    completion_tokens: Option<Value>,
}

#[derive(serde::Deserialize)]
struct EventTimings {
    #[serde(default)]
    prompt_ms: Option<f64>,
    #[serde(default)]
    predicted_ms: Option<f64>,
}

fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    <Value as serde::Deserialize>::deserialize(d).map(Some)
}

impl StreamResult {
    /// Applies one `data:` event (not `[DONE]`) that arrived at `now` [s]: a text-carrying
    /// event is a token chunk; `usage`, `timings`, `finish_reason` and `error` are kept.
    /// Returns whether the line was JSON (a line that is not changes nothing here;
    /// [`EventReader`] counts it).
    pub fn apply_event(&mut self, data: &str, chat: bool, now: f64) -> bool {
        let Ok(ev) = serde_json::from_str::<Event>(data) else {
            return match serde_json::from_str::<Value>(data) {
                Ok(v) => {
                    self.apply_value(&v, chat, now);
                    true
                }
                Err(_) => false,
            };
        };
        if let Some(e) = ev.error {
            self.error = Some(format!(
                "server error in stream: {}",
                error_message(&e.to_string())
            ));
        }
        if let Some(c) = ev.choices.first() {
            let text = if chat {
                c.delta.as_ref().and_then(|d| d.content.as_deref())
            } else {
                c.text.as_deref()
            };
            if text.is_some_and(|t| !t.is_empty()) {
                self.token_chunk_s.push(now);
            }
            if let Some(f) = &c.finish_reason {
                self.finish_reason = Some(f.to_string());
            }
        }
        if let Some(u) = ev.usage {
            self.set_usage(u.prompt_tokens.as_ref(), u.completion_tokens.as_ref());
        }
        if let Some(t) = ev.timings {
            self.timings = Some(ServerTimings {
                prompt_ms: t.prompt_ms.unwrap_or(f64::NAN),
                predicted_ms: t.predicted_ms.unwrap_or(f64::NAN),
            });
        }
        true
    }

    /// Keeps a `usage` event: the counts if both are token counts, else why not. The last
    /// `usage` of a stream is the one that counts.
    fn set_usage(&mut self, prompt: Option<&Value>, completion: Option<&Value>) {
        let count = |name: &str, v: Option<&Value>| -> Result<u32, String> {
            let v = v.ok_or_else(|| format!("usage has no {name}"))?;
            match v.as_u64() {
                Some(n) => u32::try_from(n)
                    .map_err(|_| format!("usage.{name} = {n} is beyond any context")),
                None => Err(format!(
                    "usage.{name} = {} is not a count",
                    short(&v.to_string())
                )),
            }
        };
        match (
            count("prompt_tokens", prompt),
            count("completion_tokens", completion),
        ) {
            (Ok(prompt_tokens), Ok(completion_tokens)) => {
                self.usage = Some(Usage {
                    prompt_tokens,
                    completion_tokens,
                });
                self.usage_problem = None;
            }
            (p, c) => {
                self.usage = None;
                let why: Vec<String> = [p.err(), c.err()].into_iter().flatten().collect();
                self.usage_problem = Some(why.join("; "));
            }
        }
    }

    /// Decides whether a stream that ended without a transport error really completed:
    /// it must have parsed (every event JSON, at least one), tokens must have arrived
    /// (text chunks, or a `usage` that says so), and `usage` must be consistent (counts,
    /// within `max_tokens` and the server's per-sequence `context`, and at least one
    /// token per text chunk: a chunk may carry several tokens, never none). Otherwise
    /// [`StreamResult::error`] says why. An earlier error is kept.
    pub fn judge(&mut self, max_tokens: Option<u32>, context: Option<u64>) {
        if self.error.is_some() {
            return;
        }
        let chunks = self.token_chunk_s.len() as u64;
        let first_bad = self.first_bad_event.as_deref().unwrap_or("");
        self.error = if self.events == 0 && self.bad_events > 0 {
            Some(format!(
                "stream had no valid JSON event ({} data lines, the first: {first_bad:?})",
                self.bad_events
            ))
        } else if self.events == 0 {
            Some("stream had no event before [DONE]".into())
        } else if self.bad_events > 0 {
            Some(format!(
                "stream had {} data lines that are not JSON (the first: {first_bad:?})",
                self.bad_events
            ))
        } else if let Some(why) = &self.usage_problem {
            Some(why.clone())
        } else if let Some(u) = self.usage {
            let (p, c) = (u64::from(u.prompt_tokens), u64::from(u.completion_tokens));
            if let Some(ctx) = context.filter(|&ctx| p + c > ctx) {
                Some(format!("usage says {p} prompt + {c} output tokens, more than the server's context of {ctx}"))
            } else if let Some(m) = max_tokens.filter(|&m| c > u64::from(m)) {
                Some(format!(
                    "usage.completion_tokens = {c} exceeds max_tokens = {m}"
                ))
            } else if c < chunks {
                Some(format!(
                    "usage.completion_tokens = {c} but {chunks} text chunks arrived"
                ))
            } else if c == 0 && max_tokens != Some(0) {
                Some("no tokens: usage.completion_tokens = 0 and no text chunk".into())
            } else {
                None
            }
        } else if chunks == 0 && max_tokens != Some(0) {
            Some("no tokens: no text chunk and no usage".into())
        } else {
            None
        };
    }

    /// [`StreamResult::apply_event`] for an event already read as a generic JSON value.
    fn apply_value(&mut self, v: &Value, chat: bool, now: f64) {
        if let Some(e) = v.get("error") {
            self.error = Some(format!(
                "server error in stream: {}",
                error_message(&e.to_string())
            ));
        }
        if let Some(c) = v.pointer("/choices/0") {
            let text = if chat {
                c.pointer("/delta/content")
            } else {
                c.get("text")
            };
            if text.and_then(Value::as_str).is_some_and(|t| !t.is_empty()) {
                self.token_chunk_s.push(now);
            }
            if let Some(f) = c.get("finish_reason").and_then(Value::as_str) {
                self.finish_reason = Some(f.to_string());
            }
        }
        if let Some(u) = v.get("usage").filter(|u| !u.is_null()) {
            let field = |k| u.get(k).filter(|x| !x.is_null());
            self.set_usage(field("prompt_tokens"), field("completion_tokens"));
        }
        if let Some(t) = v.get("timings").filter(|t| t.is_object()) {
            self.timings = Some(ServerTimings {
                prompt_ms: t
                    .get("prompt_ms")
                    .and_then(Value::as_f64)
                    .unwrap_or(f64::NAN),
                predicted_ms: t
                    .get("predicted_ms")
                    .and_then(Value::as_f64)
                    .unwrap_or(f64::NAN),
            });
        }
    }
}

/// Reads a response body's SSE events into a [`StreamResult`]: JSON events applied, the
/// others counted, `[DONE]` noted (what follows it is not read).
#[derive(Debug)]
pub struct EventReader {
    parser: SseParser,
    chat: bool,
    /// `data: [DONE]` was seen.
    pub done: bool,
}

impl EventReader {
    /// A reader for the chat route (`delta.content`) or the completions route (`text`).
    pub fn new(chat: bool) -> EventReader {
        EventReader {
            parser: SseParser::new(),
            chat,
            done: false,
        }
    }

    /// Feeds bytes that arrived at `now` [s]; returns whether `[DONE]` has been seen.
    pub fn push(&mut self, bytes: &[u8], now: f64, st: &mut StreamResult) -> bool {
        let (chat, done) = (self.chat, &mut self.done);
        if *done {
            return true;
        }
        self.parser.push(bytes, |data| {
            if *done {
                return;
            }
            if data == "[DONE]" {
                *done = true;
            } else if st.apply_event(data, chat, now) {
                st.events += 1;
            } else {
                st.bad_events += 1;
                if st.first_bad_event.is_none() {
                    st.first_bad_event = Some(short_to(data, 80));
                }
            }
        });
        self.done
    }

    /// Bytes of an incomplete trailing line.
    pub fn pending(&self) -> usize {
        self.parser.pending()
    }
}

/// The longest prompt built [characters]: far above any context a server offers at any
/// plausible characters-per-token ratio, far below what would strain memory.
pub const MAX_PROMPT_CHARS: usize = 4 << 20;

/// Checks `--chars-per-token` against the prompt lengths to build [tokens]: a finite
/// ratio > 0, no prompt of `shortest` tokens empty, none of `longest` tokens over
/// [`MAX_PROMPT_CHARS`].
///
/// # Errors
/// A message naming the flag.
pub fn check_chars_per_token(cpt: f64, shortest: u32, longest: u32) -> Result<(), String> {
    if !(cpt.is_finite() && cpt > 0.0) {
        return Err(format!(
            "--chars-per-token must be a finite number > 0 (got {cpt})"
        ));
    }
    let chars = |tokens: u32| (f64::from(tokens) * cpt).round();
    if shortest > 0 && chars(shortest) < 1.0 {
        return Err(format!(
            "--chars-per-token {cpt} makes a {shortest}-token prompt empty; use a ratio near the model's (about 4 for English text)"
        ));
    }
    if chars(longest) > MAX_PROMPT_CHARS as f64 {
        return Err(format!(
            "--chars-per-token {cpt} would build a {longest}-token prompt of {} characters, over the limit of {} MiB; use a ratio near the model's (about 4 for English text)",
            chars(longest),
            MAX_PROMPT_CHARS >> 20
        ));
    }
    Ok(())
}

/// Builds prompts of an exact token length.
///
/// With a `/tokenize` route the prompt is calibrated once per length against the server's
/// tokenizer (special tokens such as BOS included, as `usage.prompt_tokens` counts them);
/// without it, `chars_per_token` characters per token are used. The text is a rotation of
/// a fixed word list so prompts differ between requests (no prefix-cache hits).
#[derive(Debug)]
pub struct PromptBuilder {
    corpus: Vec<char>,
    /// Characters per token when there is no tokenizer.
    pub chars_per_token: f64,
    /// Calibrated character count per target token count.
    cache: BTreeMap<u32, usize>,
    /// Whether lengths were calibrated with the server's tokenizer.
    pub tokenized: bool,
}

const WORDS: &[&str] = &[
    "the", "queue", "server", "batch", "token", "cache", "block", "prefill", "decode", "stream",
    "arrival", "rate", "latency", "model", "memory", "request", "slot", "kernel", "page", "step",
    "load", "time", "first", "output",
];

impl PromptBuilder {
    pub fn new(chars_per_token: f64) -> PromptBuilder {
        let mut corpus = String::new();
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        while corpus.len() < 200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            corpus.push_str(WORDS[(x % WORDS.len() as u64) as usize]);
            corpus.push(' ');
        }
        PromptBuilder {
            corpus: corpus.chars().collect(),
            chars_per_token,
            cache: BTreeMap::new(),
            tokenized: false,
        }
    }

    /// `tokens × ratio` characters, within `0..=MAX_PROMPT_CHARS` whatever the ratio (a
    /// NaN ratio gives 0; [`check_chars_per_token`] is what reports a bad one).
    fn chars_for(&self, tokens: f64, ratio: f64) -> usize {
        (tokens * ratio).round().clamp(0.0, MAX_PROMPT_CHARS as f64) as usize
    }

    fn text(&self, offset: usize, chars: usize) -> String {
        let n = self.corpus.len();
        (0..chars).map(|i| self.corpus[(offset + i) % n]).collect()
    }

    /// Calibrates every length in `tokens` with the server's tokenizer (if it has one).
    /// Returns whether a tokenizer was used.
    pub async fn calibrate(
        &mut self,
        ep: &Endpoint,
        tokens: impl IntoIterator<Item = u32>,
    ) -> bool {
        let Some(empty) = ep.tokenize_count("").await else {
            return false;
        };
        self.tokenized = true;
        for n in tokens {
            if self.cache.contains_key(&n) {
                continue;
            }
            let want = n as usize;
            let body_tokens = want.saturating_sub(empty);
            let mut chars = self.chars_for(body_tokens as f64, self.chars_per_token);
            let mut best = (usize::MAX, chars);
            for _ in 0..12 {
                let Some(got) = ep.tokenize_count(&self.text(0, chars)).await else {
                    break;
                };
                let miss = got.abs_diff(want);
                if miss < best.0 {
                    best = (miss, chars);
                }
                if miss == 0 {
                    break;
                }
                // chars per token as measured so far, then ±1 steps once close
                let ratio = if got > empty {
                    chars as f64 / (got - empty) as f64
                } else {
                    self.chars_per_token
                };
                let next = self.chars_for(body_tokens as f64, ratio);
                chars = if next == chars || miss <= 2 {
                    if got < want {
                        chars + 1
                    } else {
                        chars.saturating_sub(1)
                    }
                } else {
                    next
                };
            }
            let chars = best.1;
            self.cache.insert(n, chars);
        }
        true
    }

    /// The prompt for request `id` with `tokens` tokens.
    pub fn prompt(&self, id: u64, tokens: u32) -> String {
        let chars = self
            .cache
            .get(&tokens)
            .copied()
            .unwrap_or_else(|| self.chars_for(f64::from(tokens), self.chars_per_token));
        let offset = (id as usize).wrapping_mul(7919) % self.corpus.len();
        // start at a word boundary so the tokenisation matches the calibration closely
        let start = (offset..offset + 64)
            .find(|&i| self.corpus[i % self.corpus.len()] == ' ')
            .map_or(offset, |i| i + 1);
        // calibration used offset 0; the rotation only changes which words appear
        self.text(start, chars)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The borrowed fast path and the generic JSON path agree on every event shape.
    #[test]
    fn typed_and_generic_events_agree() {
        let events = [
            r#"{"id":"x","object":"text_completion","choices":[{"text":" tok","index":0,"finish_reason":null}]}"#,
            r#"{"choices":[{"text":"a\nb\u00e9","index":0}]}"#,
            r#"{"choices":[{"text":"","index":0,"finish_reason":"length"}],"usage":{"prompt_tokens":64,"completion_tokens":512}}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}"#,
            r#"{"choices":[{"delta":{"role":"assistant","content":"hi"},"index":0}]}"#,
            r#"{"choices":[{"delta":{"content":null},"finish_reason":"stop"}],"usage":null}"#,
            r#"{"choices":[{"text":"x"}],"timings":{"prompt_ms":1.5,"predicted_ms":20}}"#,
            r#"{"timings":{"prompt_ms":"?"},"usage":{"prompt_tokens":-1,"completion_tokens":2.0}}"#,
            r#"{"timings":null,"choices":[{"text":3,"finish_reason":7}]}"#,
            r#"{"choices":[{"text":"ok"},{"text":5}]}"#,
            r#"{"error":{"message":"out of memory","code":500}}"#,
            r#"{"error":null}"#,
            r#"{"choices":{"0":{"text":"odd"}}}"#,
            r#"[1,2]"#,
            r#"not json"#,
        ];
        for chat in [false, true] {
            for (i, e) in events.iter().enumerate() {
                let mut typed = StreamResult::default();
                typed.apply_event(e, chat, i as f64);
                let mut generic = StreamResult::default();
                if let Ok(v) = serde_json::from_str::<Value>(e) {
                    generic.apply_value(&v, chat, i as f64);
                }
                assert_eq!(
                    format!("{typed:?}"),
                    format!("{generic:?}"),
                    "{e} (chat {chat})"
                );
            }
        }
    }

    /// A stream fed whole to a fresh reader, judged for `max_tokens` 4, no context.
    fn read(stream: &str) -> StreamResult {
        let mut st = StreamResult::default();
        EventReader::new(false).push(stream.as_bytes(), 0.0, &mut st);
        st.judge(Some(4), None);
        st
    }

    fn stream_of(events: &[&str]) -> String {
        let mut s: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
        s.push_str("data: [DONE]\n\n");
        s
    }

    const TOK: &str = r#"{"choices":[{"text":" t"}]}"#;

    #[test]
    fn a_stream_completes_only_when_it_parsed_and_tokens_arrived() {
        let ok = read(&stream_of(&[
            TOK,
            TOK,
            r#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3}}"#,
        ]));
        assert_eq!(ok.error, None, "{ok:?}");
        assert_eq!(
            (ok.events, ok.bad_events, ok.token_chunk_s.len()),
            (3, 0, 2)
        );
        // tokens without usage still count (the row notes it)
        assert_eq!(read(&stream_of(&[TOK])).error, None);
        // usage alone may say tokens came (empty-text tokens)
        let st = read(&stream_of(&[
            r#"{"usage":{"prompt_tokens":5,"completion_tokens":1}}"#,
        ]));
        assert_eq!(st.error, None);

        let err = |events: &[&str]| read(&stream_of(events)).error.unwrap_or_default();
        assert_eq!(err(&[]), "stream had no event before [DONE]");
        assert_eq!(
            err(&["nope", "nah"]),
            r#"stream had no valid JSON event (2 data lines, the first: "nope")"#
        );
        assert!(err(&[TOK, "{"]).starts_with("stream had 1 data lines that are not JSON"));
        assert_eq!(err(&["{}"]), "no tokens: no text chunk and no usage");
        assert_eq!(
            err(&[r#"{"usage":{"prompt_tokens":5,"completion_tokens":0}}"#]),
            "no tokens: usage.completion_tokens = 0 and no text chunk"
        );
        assert_eq!(
            err(&[TOK, r#"{"usage":{"prompt_tokens":5}}"#]),
            "usage has no completion_tokens"
        );
        assert_eq!(
            err(&[
                TOK,
                r#"{"usage":{"prompt_tokens":"5","completion_tokens":1.5}}"#
            ]),
            r#"usage.prompt_tokens = "5" is not a count; usage.completion_tokens = 1.5 is not a count"#
        );
        assert_eq!(
            err(&[
                TOK,
                r#"{"usage":{"prompt_tokens":5000000000,"completion_tokens":1}}"#
            ]),
            "usage.prompt_tokens = 5000000000 is beyond any context"
        );
        assert_eq!(
            err(&[
                TOK,
                r#"{"usage":{"prompt_tokens":5,"completion_tokens":9}}"#
            ]),
            "usage.completion_tokens = 9 exceeds max_tokens = 4"
        );
        // the last usage is the one that counts
        assert_eq!(
            err(&[
                TOK,
                r#"{"usage":{"prompt_tokens":-1,"completion_tokens":1}}"#,
                r#"{"usage":{"prompt_tokens":5,"completion_tokens":1}}"#
            ]),
            ""
        );
        // an earlier error is kept
        let mut st = read(&stream_of(&["nope"]));
        st.error = Some("stream cut".into());
        st.judge(Some(4), None);
        assert_eq!(st.error.as_deref(), Some("stream cut"));
    }

    #[test]
    fn usage_beyond_the_servers_context_is_flagged() {
        let mut st = StreamResult::default();
        let stream = stream_of(&[
            TOK,
            r#"{"usage":{"prompt_tokens":1000,"completion_tokens":4}}"#,
        ]);
        EventReader::new(false).push(stream.as_bytes(), 0.0, &mut st);
        let mut fits = st.clone();
        fits.judge(Some(4), Some(1004));
        assert_eq!(fits.error, None);
        st.judge(Some(4), Some(512));
        assert_eq!(
            st.error.as_deref(),
            Some("usage says 1000 prompt + 4 output tokens, more than the server's context of 512")
        );
    }

    #[test]
    fn what_follows_done_is_not_read() {
        let mut st = StreamResult::default();
        let mut r = EventReader::new(false);
        assert!(r.push(
            format!("data: {TOK}\ndata: [DONE]\ndata: {TOK}\n").as_bytes(),
            0.0,
            &mut st
        ));
        assert!(r.push(format!("data: {TOK}\n").as_bytes(), 0.0, &mut st));
        assert_eq!(st.token_chunk_s.len(), 1);
    }

    #[test]
    fn chars_per_token_is_checked_against_the_prompts_to_build() {
        for bad in [f64::NAN, 0.0, -4.0, f64::INFINITY, f64::NEG_INFINITY] {
            let e = check_chars_per_token(bad, 8, 8).unwrap_err();
            assert!(
                e.starts_with("--chars-per-token must be a finite number > 0"),
                "{e}"
            );
        }
        assert!(check_chars_per_token(0.01, 8, 8)
            .unwrap_err()
            .contains("makes a 8-token prompt empty"));
        assert!(check_chars_per_token(1e9, 8, 8).unwrap_err().contains(
            "would build a 8-token prompt of 8000000000 characters, over the limit of 4 MiB"
        ));
        check_chars_per_token(4.0, 1, 131_072).unwrap();
        check_chars_per_token(0.3, 4, 8).unwrap();
        // whatever the ratio, a prompt is never longer than the limit
        let p = PromptBuilder::new(1e12);
        assert_eq!(p.prompt(0, 1000).len(), MAX_PROMPT_CHARS);
        assert!(PromptBuilder::new(f64::NAN).prompt(0, 10).is_empty());
    }

    /// `bytes` fed to a fresh reader in pieces cut at `cuts` (positions, any order), all
    /// at time 0, then judged.
    fn read_cut(bytes: &[u8], cuts: &[usize], chat: bool) -> (StreamResult, bool) {
        let mut at: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
        at.extend([0, bytes.len()]);
        at.sort_unstable();
        let mut st = StreamResult::default();
        let mut r = EventReader::new(chat);
        for w in at.windows(2) {
            r.push(&bytes[w[0]..w[1]], 0.0, &mut st);
        }
        st.judge(Some(64), Some(4096));
        (st, r.done)
    }

    /// One generated event: its text (empty = no token) and whether it is a chat delta.
    fn event_json(text: &str, chat: bool) -> String {
        if chat {
            json!({"choices": [{"delta": {"content": text}, "index": 0}]}).to_string()
        } else {
            json!({"choices": [{"text": text, "index": 0, "finish_reason": null}]}).to_string()
        }
    }

    /// Bytes that look like an SSE stream of JSON events, often broken.
    fn stream_like() -> impl Strategy<Value = Vec<u8>> {
        let piece = proptest::prop_oneof![
            Just(b"data: ".to_vec()),
            Just(b"\n\n".to_vec()),
            Just(b"\r\n".to_vec()),
            Just(b"data: [DONE]\n".to_vec()),
            Just(TOK.as_bytes().to_vec()),
            Just(br#"{"usage":{"prompt_tokens":3,"completion_tokens":2}}"#.to_vec()),
            Just(br#"{"usage":{"prompt_tokens":1e300,"completion_tokens":-1}}"#.to_vec()),
            Just(br#"{"error":{"message":"x"}}"#.to_vec()),
            Just(br#"{"choices":[{"delta":{"content":"d"}}]}"#.to_vec()),
            Just(br#"{"timings":{"prompt_ms":1}}"#.to_vec()),
            r#"[{}\[\]\\":,0-9a-z \u{e9}\u{1F600}]{0,16}"#.prop_map(String::into_bytes),
            proptest::collection::vec(any::<u8>(), 0..8),
        ];
        proptest::collection::vec(piece, 0..40).prop_map(|v| v.concat())
    }

    proptest::proptest! {
        #![proptest_config(ProptestConfig::with_cases(crate::sse::proptest_cases()))]

        /// Arbitrary (mostly SSE-looking) bytes, cut anywhere: no panic, and the same
        /// result (chunks, usage, events, verdict) as when fed whole.
        #[test]
        fn reading_is_invariant_under_chunking(
            bytes in proptest::prop_oneof![stream_like(), proptest::collection::vec(proptest::prelude::any::<u8>(), 0..400)],
            cuts in proptest::collection::vec(proptest::prelude::any::<usize>(), 0..24),
            chat in proptest::prelude::any::<bool>(),
        ) {
            let whole = read_cut(&bytes, &[], chat);
            let cut = read_cut(&bytes, &cuts, chat);
            proptest::prop_assert_eq!(format!("{:?}", cut), format!("{:?}", whole));
            let every: Vec<usize> = (0..bytes.len()).collect();
            let bytewise = read_cut(&bytes, &every, chat);
            proptest::prop_assert_eq!(format!("{:?}", bytewise), format!("{:?}", whole));
        }

        /// A well-formed stream (any texts, CRLF or LF, then usage and `[DONE]`) reads to
        /// exactly what was sent, however it is cut, and completes.
        #[test]
        fn a_valid_stream_reads_the_same_however_it_is_cut(
            texts in proptest::collection::vec("(\\PC|\n|\r|\t|\"){0,6}", 0..30),
            prompt in 1u32..2000,
            crlf in proptest::prelude::any::<bool>(),
            chat in proptest::prelude::any::<bool>(),
            cuts in proptest::collection::vec(proptest::prelude::any::<usize>(), 0..24),
        ) {
            let end = if crlf { "\r\n" } else { "\n" };
            let tokens = texts.iter().filter(|t| !t.is_empty()).count() as u32;
            let mut text: String = texts
                .iter()
                .map(|t| format!("data: {}{end}{end}", event_json(t, chat)))
                .collect();
            let usage = json!({"choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": tokens.max(1)}});
            text.push_str(&format!("data: {usage}{end}{end}data: [DONE]{end}{end}"));
            let (st, done) = read_cut(text.as_bytes(), &cuts, chat);
            proptest::prop_assert!(done);
            proptest::prop_assert_eq!(st.token_chunk_s.len() as u32, tokens);
            proptest::prop_assert_eq!(st.events as usize, texts.len() + 1);
            proptest::prop_assert_eq!(st.bad_events, 0);
            proptest::prop_assert_eq!(st.usage, Some(Usage { prompt_tokens: prompt, completion_tokens: tokens.max(1) }));
            proptest::prop_assert_eq!(st.error, None);
        }
    }

    /// A server that accepts the connection and never answers: connecting gives up after
    /// the configured control timeout, not a fixed 10 s.
    #[test]
    fn the_pre_flight_check_honours_the_configured_timeout() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let cfg = EndpointConfig {
            url,
            control_timeout: Duration::from_millis(300),
            ..EndpointConfig::default()
        };
        let t = std::time::Instant::now();
        let e = rt.block_on(Endpoint::connect(&cfg)).unwrap_err();
        let took = t.elapsed();
        assert!(matches!(e, ClientError::Unreachable { .. }), "{e}");
        assert!(took < Duration::from_secs(5), "{took:?}");
        drop(listener);
    }
}
