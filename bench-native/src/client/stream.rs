//! One streamed response read as OpenAI-compatible SSE events: text chunks timestamped,
//! `usage`, `timings`, `finish_reason` and server errors kept, and the verdict on whether
//! the request really completed ([`StreamResult::judge`]).
//!
//! Token counts come from the server's `usage` (final chunk, `stream_options.include_usage`),
//! never from counting chunks: a chunk may carry several tokens, or none (partial UTF-8).

use crate::sse::SseParser;
use serde_json::Value;
use std::borrow::Cow;

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
    /// Prompt tokens the server found in its prefix cache, as it reports them
    /// (`usage.prompt_tokens_details.cached_tokens`, or llama.cpp's `timings.cache_n`).
    pub cached_tokens: Option<u32>,
    /// `data:` events that were JSON [count].
    pub events: u32,
    /// `data:` events that were not JSON (`[DONE]` aside) [count].
    pub bad_events: u32,
    /// The first event that was not JSON, shortened.
    pub first_bad_event: Option<String>,
    /// `None` = completed normally.
    pub error: Option<String>,
    /// The answer's text, kept only when asked for ([`StreamResult::keeping_text`]): a
    /// conversation's next turn resends it.
    pub text: Option<String>,
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
    #[serde(default)]
    prompt_tokens_details: Option<Value>,
}

#[derive(serde::Deserialize)]
struct EventTimings {
    #[serde(default)]
    prompt_ms: Option<f64>,
    #[serde(default)]
    predicted_ms: Option<f64>,
    #[serde(default)]
    cache_n: Option<Value>,
}

/// A cached-token count as a server reports it, if it is one.
fn cached_count(v: Option<&Value>) -> Option<u32> {
    v?.as_u64().and_then(|n| u32::try_from(n).ok())
}

fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    <Value as serde::Deserialize>::deserialize(d).map(Some)
}

impl StreamResult {
    /// An empty result that keeps the answer's text in [`StreamResult::text`].
    pub fn keeping_text() -> StreamResult {
        StreamResult {
            text: Some(String::new()),
            ..StreamResult::default()
        }
    }

    /// Counts a text-carrying chunk that arrived at `now` [s], and keeps its text if asked.
    fn chunk(&mut self, text: Option<&str>, now: f64) {
        let Some(t) = text.filter(|t| !t.is_empty()) else {
            return;
        };
        self.token_chunk_s.push(now);
        if let Some(kept) = &mut self.text {
            kept.push_str(t);
        }
    }

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
            self.chunk(text, now);
            if let Some(f) = &c.finish_reason {
                self.finish_reason = Some(f.to_string());
            }
        }
        if let Some(u) = ev.usage {
            self.set_usage(u.prompt_tokens.as_ref(), u.completion_tokens.as_ref());
            if let Some(n) = cached_count(
                u.prompt_tokens_details
                    .as_ref()
                    .and_then(|d| d.get("cached_tokens")),
            ) {
                self.cached_tokens = Some(n);
            }
        }
        if let Some(t) = ev.timings {
            if let Some(n) = cached_count(t.cache_n.as_ref()) {
                self.cached_tokens = Some(n);
            }
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
        // a cached count beyond the prompt is no count (the request stands on its own)
        if let (Some(n), Some(u)) = (self.cached_tokens, self.usage) {
            if n > u.prompt_tokens {
                self.cached_tokens = None;
            }
        }
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
            self.chunk(text.and_then(Value::as_str), now);
            if let Some(f) = c.get("finish_reason").and_then(Value::as_str) {
                self.finish_reason = Some(f.to_string());
            }
        }
        if let Some(u) = v.get("usage").filter(|u| !u.is_null()) {
            let field = |k| u.get(k).filter(|x| !x.is_null());
            self.set_usage(field("prompt_tokens"), field("completion_tokens"));
            if let Some(n) = cached_count(u.pointer("/prompt_tokens_details/cached_tokens")) {
                self.cached_tokens = Some(n);
            }
        }
        if let Some(t) = v.get("timings").filter(|t| t.is_object()) {
            if let Some(n) = cached_count(t.get("cache_n")) {
                self.cached_tokens = Some(n);
            }
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

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
    fn the_servers_cached_tokens_are_kept_when_they_are_a_count_within_the_prompt() {
        // vLLM and llama.cpp's usage detail, llama.cpp's timings, both in the typed and
        // the generic reading
        for (last, want) in [
            (
                r#"{"choices":[],"usage":{"prompt_tokens":300,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":256}}}"#,
                Some(256),
            ),
            (
                r#"{"choices":[{"text":"","index":0,"finish_reason":"length"}],"usage":{"prompt_tokens":300,"completion_tokens":1},"timings":{"prompt_ms":3.5,"predicted_ms":1.0,"cache_n":299}}"#,
                Some(299),
            ),
            (
                r#"{"choices":[],"usage":{"prompt_tokens":300,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":301}}}"#,
                None,
            ),
            (
                r#"{"choices":[],"usage":{"prompt_tokens":300,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":-4}}}"#,
                None,
            ),
            (
                r#"{"choices":[],"usage":{"prompt_tokens":300,"completion_tokens":1}}"#,
                None,
            ),
        ] {
            let mut st = read(&stream_of(&[TOK, last]));
            st.judge(Some(1), None);
            assert_eq!(st.error, None, "{last}");
            assert_eq!(st.cached_tokens, want, "{last}");
            let mut generic = StreamResult::default();
            for e in [TOK, last] {
                generic.apply_value(&serde_json::from_str(e).unwrap(), false, 0.0);
            }
            generic.judge(Some(1), None);
            assert_eq!(generic.cached_tokens, want, "{last}");
        }
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
}
