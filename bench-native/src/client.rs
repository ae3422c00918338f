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
    /// `None` = completed normally.
    pub error: Option<String>,
}

/// A streamed generation request built ahead of its send time (URL, headers, serialised
/// JSON body), so that sending it is only the hand-over to the HTTP client. A request
/// that could not be built carries the reason, reported as the request's error.
#[derive(Debug)]
pub struct PreparedRequest(Result<reqwest::Request, String>);

fn short(s: &str) -> String {
    let s = s.trim();
    if s.len() > 300 {
        let mut end = 300;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}…", &s[..end])
    } else {
        s.to_string()
    }
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
    /// [`ClientError::Unreachable`], [`ClientError::UnknownModel`], [`ClientError::NoModels`].
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
        let models = match ep.get_json("/v1/models").await {
            Ok(v) => v,
            Err(ClientError::Other(why)) => {
                return Err(ClientError::Unreachable { url: base, why })
            }
            Err(e) => return Err(e),
        };
        let data = models
            .get("data")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
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
        PreparedRequest(
            self.auth(self.http.post(format!("{}{}", self.base, self.route())))
                .json(body)
                .build()
                .map_err(|e| describe(&e)),
        )
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
        let fut = self.stream_inner(t0, req, &mut st);
        if tokio::time::timeout_at(deadline, fut).await.is_err() {
            st.error = Some(format!(
                "timed out after {:.1} s ({} chunks received)",
                timeout.as_secs_f64(),
                st.token_chunk_s.len()
            ));
        }
        st
    }

    async fn stream_inner(&self, t0: Instant, req: PreparedRequest, st: &mut StreamResult) {
        st.sent_s = t0.elapsed().as_secs_f64();
        let resp = match req.0 {
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
        let chat = self.api == Api::Chat;
        let mut parser = SseParser::new();
        let mut done = false;
        let mut bytes = resp.bytes_stream();
        while let Some(item) = bytes.next().await {
            let chunk = match item {
                Ok(c) => c,
                Err(e) => {
                    st.error = Some(format!("stream cut: {}", describe(&e)));
                    return;
                }
            };
            let now = t0.elapsed().as_secs_f64();
            parser.push(&chunk, |data| {
                if data == "[DONE]" {
                    done = true;
                } else {
                    st.apply_event(data, chat, now);
                }
            });
            if done {
                break;
            }
        }
        if !done && st.error.is_none() {
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
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
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
    /// Lines that are not JSON are ignored.
    pub fn apply_event(&mut self, data: &str, chat: bool, now: f64) {
        let Ok(ev) = serde_json::from_str::<Event>(data) else {
            if let Ok(v) = serde_json::from_str::<Value>(data) {
                self.apply_value(&v, chat, now);
            }
            return;
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
            self.usage = Some(Usage {
                prompt_tokens: u.prompt_tokens.unwrap_or(0) as u32,
                completion_tokens: u.completion_tokens.unwrap_or(0) as u32,
            });
        }
        if let Some(t) = ev.timings {
            self.timings = Some(ServerTimings {
                prompt_ms: t.prompt_ms.unwrap_or(f64::NAN),
                predicted_ms: t.predicted_ms.unwrap_or(f64::NAN),
            });
        }
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
            self.usage = Some(Usage {
                prompt_tokens: u.get("prompt_tokens").and_then(Value::as_u64).unwrap_or(0) as u32,
                completion_tokens: u
                    .get("completion_tokens")
                    .and_then(Value::as_u64)
                    .unwrap_or(0) as u32,
            });
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
            let mut chars = (body_tokens as f64 * self.chars_per_token).round() as usize;
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
                let next = (body_tokens as f64 * ratio).round() as usize;
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
            .unwrap_or_else(|| (tokens as f64 * self.chars_per_token).round() as usize);
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
