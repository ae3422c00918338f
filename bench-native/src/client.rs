//! HTTP side of measurement: one OpenAI-compatible endpoint, pre-flight checks (server
//! reachable, model served, context size), exact-length prompts, and one streamed
//! request timed chunk by chunk (read and judged by [`stream`]).

mod stream;

use engine::workload::Request;
use futures_util::StreamExt;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::Duration;
pub use stream::{error_message, EventReader, ServerTimings, StreamResult, Usage, MAX_EVENT_BYTES};
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
    /// llama.cpp: send `cache_prompt: true`, so the server reuses the prefix its slot
    /// still holds (its slot cache); by default `false`, every prompt prefilled in full.
    pub cache_prompt: bool,
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
            cache_prompt: false,
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
    cache_prompt: bool,
    control_timeout: Duration,
    http: reqwest::Client,
}

/// A streamed generation request built ahead of its send time (URL, headers, serialised
/// JSON body), so that sending it is only the hand-over to the HTTP client. A request
/// that could not be built carries the reason, reported as the request's error.
#[derive(Debug)]
pub struct PreparedRequest {
    req: Result<reqwest::Request, String>,
    /// The body's `max_tokens`, what `usage.completion_tokens` may not exceed.
    max_tokens: Option<u32>,
    /// Whether the answer's text is kept ([`StreamResult::text`]).
    keep_text: bool,
}

impl PreparedRequest {
    /// The same request, its answer's text kept in [`StreamResult::text`].
    pub fn keeping_text(self) -> PreparedRequest {
        PreparedRequest {
            keep_text: true,
            ..self
        }
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

/// Formats a reqwest error with its causes, flagging connection failures.
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
    /// The same endpoint sending `cache_prompt: on` to llama.cpp (its slot cache).
    pub fn with_cache_prompt(mut self, on: bool) -> Endpoint {
        self.cache_prompt = on;
        self
    }

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
            cache_prompt: cfg.cache_prompt,
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
        self.conversation_body(&[prompt], max_tokens)
    }

    /// The body of a conversation's next turn: `turns` are the user's messages and the
    /// answers, alternating, the new message last. The completions API gets their
    /// concatenation as its prompt; the chat API gets them as `user` and `assistant`
    /// messages.
    pub fn conversation_body(&self, turns: &[&str], max_tokens: u32) -> Value {
        let mut b = match self.api {
            Api::Completions => json!({"model": self.model, "prompt": turns.concat()}),
            Api::Chat => {
                let messages: Vec<Value> = turns
                    .iter()
                    .enumerate()
                    .map(|(i, t)| {
                        let role = if i % 2 == 0 { "user" } else { "assistant" };
                        json!({"role": role, "content": t})
                    })
                    .collect();
                json!({"model": self.model, "messages": messages})
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
            b["cache_prompt"] = json!(self.cache_prompt);
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
            keep_text: false,
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
        let mut st = if req.keep_text {
            StreamResult::keeping_text()
        } else {
            StreamResult::default()
        };
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
    /// Tokens the server adds to any prompt (its tokenization of "": a BOS token).
    added: u32,
    /// Length of the system prompts [tokens] (0 for none) and the seed that picks their
    /// text.
    system: u32,
    system_seed: u64,
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
            added: 0,
            system: 0,
            system_seed: 0,
        }
    }

    /// Requests of a group begin with the group's system prompt of `tokens` tokens: a
    /// text of the corpus picked by the group and `seed`, the same for every request of
    /// the group, so a prefix cache can hit on it.
    pub fn set_system(&mut self, tokens: u32, seed: u64) {
        self.system = tokens;
        self.system_seed = seed;
    }

    /// The lengths [tokens] that [`PromptBuilder::request_prompt`] sizes for `r`: its
    /// prompt, or its system prompt and its own part (which counts the tokens the server
    /// adds: list them after a [`PromptBuilder::calibrate`] has learned those).
    pub fn lengths_of(&self, r: &Request) -> Vec<u32> {
        if r.group == 0 || self.system == 0 {
            vec![r.prompt]
        } else {
            vec![self.system, self.own_tokens(r)]
        }
    }

    /// The own part of a grouped request, sized as a whole prompt is (so its added
    /// tokens count once, in the system prompt).
    fn own_tokens(&self, r: &Request) -> u32 {
        r.prompt.saturating_sub(self.system).max(1) + self.added
    }

    /// The length [tokens] to size for a conversation's new message of `tokens` tokens: it
    /// follows the history, so none of its tokens is one the server adds to a prompt.
    pub fn message_len(&self, tokens: u32) -> u32 {
        tokens.max(1) + self.added
    }

    /// The text of request `id`'s new message of `tokens` tokens in a conversation
    /// (sized as [`PromptBuilder::message_len`]).
    pub fn message(&self, id: u64, tokens: u32) -> String {
        self.prompt(id, self.message_len(tokens))
    }

    /// The prompt of `r`: its group's system prompt, if it has one, then its own text.
    pub fn request_prompt(&self, r: &Request) -> String {
        if r.group == 0 || self.system == 0 {
            return self.prompt(r.id, r.prompt);
        }
        let n = self.corpus.len() as u64;
        let pick = (u64::from(r.group))
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .wrapping_add(self.system_seed.wrapping_mul(0xbf58_476d_1ce4_e5b9));
        let mut text = self.text_at((pick % n) as usize, self.system);
        text.push_str(&self.prompt(r.id, self.own_tokens(r)));
        text
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
        self.added = empty as u32;
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
        let offset = (id as usize).wrapping_mul(7919) % self.corpus.len();
        self.text_at(offset, tokens)
    }

    /// A text of `tokens` tokens from the first word boundary at or after `offset`.
    fn text_at(&self, offset: usize, tokens: u32) -> String {
        let chars = self
            .cache
            .get(&tokens)
            .copied()
            .unwrap_or_else(|| self.chars_for(f64::from(tokens), self.chars_per_token));
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

    #[test]
    fn a_groups_requests_begin_with_the_same_system_prompt() {
        let req = |id, group| Request {
            id,
            arrival: 0.0,
            prompt: 300,
            output: 8,
            class: 0,
            group,
            conv: 0,
        };
        let mut p = PromptBuilder::new(1.0);
        p.set_system(256, 7);
        let (a, b, c) = (
            p.request_prompt(&req(1, 1)),
            p.request_prompt(&req(2, 1)),
            p.request_prompt(&req(3, 2)),
        );
        assert_eq!([a.len(), b.len(), c.len()], [300, 300, 300]);
        assert_eq!(a[..256], b[..256], "one group, one system prompt");
        assert_ne!(a[256..], b[256..], "each request's own part is its own");
        assert_ne!(a[..256], c[..256], "another group, another system prompt");
        // Ungrouped requests are the plain prompts; another seed, other system texts.
        assert_eq!(p.request_prompt(&req(4, 0)), p.prompt(4, 300));
        let mut q = PromptBuilder::new(1.0);
        q.set_system(256, 8);
        assert_ne!(q.request_prompt(&req(1, 1))[..256], a[..256]);
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
