//! The page's text fields by URL key: their labels, the messages that name them, and the
//! errors that point at them (a bad URL value, parameters that cannot run).

use super::{fmt_num, Params, TRACE_KEYS};
use engine::limits::LimitError;
use engine::ConfigError;

/// Every text field of the page: URL key, the name the engine's messages use for it (if
/// they name it), and its label on the page.
pub const FIELDS: [(&str, Option<&str>, &str); 29] = [
    // Before "prompt tokens", which their engine names contain.
    (
        "spg",
        Some("system prompt groups"),
        "system-prompt groups G",
    ),
    (
        "sps",
        Some("system prompt share"),
        "share with a system prompt",
    ),
    (
        "spt",
        Some("system prompt tokens"),
        "system prompt P [tokens]",
    ),
    (
        "spz",
        Some("system prompt zipf exponent"),
        "group popularity (Zipf exponent)",
    ),
    ("cvm", Some("mean turns"), "mean turns per conversation"),
    ("cvx", Some("max turns"), "max turns per conversation"),
    ("cvt", Some("think time"), "think time between turns [s]"),
    ("k", Some("burstiness"), "burstiness k"),
    ("rates", None, "rates λ [req/s]"),
    ("rate", None, "chosen λ [req/s]"),
    ("pm", Some("prompt median"), "prompt median [tok]"),
    ("ps", Some("prompt sigma"), "prompt σ"),
    ("om", Some("output median"), "output median [tok]"),
    ("os", Some("output sigma"), "output σ"),
    ("fp", Some("prompt tokens"), "prompt [tok]"),
    ("fo", Some("output tokens"), "output [tok]"),
    ("B", Some("max_batch"), "max batch B [seqs]"),
    ("K", Some("kv_tokens"), "KV capacity K [tokens]"),
    ("block", Some("block_size"), "block size [tokens]"),
    ("budget", Some("token_budget"), "token budget [tokens]"),
    ("nsys", Some("max_in_system"), "max in system n [requests]"),
    ("oh", None, "front-end overhead [ms]"),
    ("b0", Some("beta0"), "β0 [s]"),
    ("bp", Some("beta_prefill"), "β prefill [s/token]"),
    ("bd", Some("beta_decode"), "β decode [s/seq]"),
    ("T", Some("horizon_s"), "horizon T [s]"),
    ("seeds", None, "seeds"),
    ("slo_ttft", Some("slo_ttft_s"), "SLO TTFT [s]"),
    ("slo_tpot", Some("slo_tpot_s"), "SLO TPOT [s]"),
];

/// The page label of the field with URL key `key` (the key itself if it has none).
pub fn label(key: &str) -> &str {
    FIELDS.iter().find(|f| f.0 == key).map_or(key, |f| f.2)
}

/// An engine validation message with the engine's parameter names replaced by the
/// page's labels ("max_batch must be at least 1, got 0" → "max batch B [seqs] must be at
/// least 1, got 0"), so every message names a field the user can find. The engine's
/// text is not changed otherwise.
pub fn page_message(msg: &str) -> String {
    let mut out = msg.to_string();
    for (_, engine, page) in FIELDS {
        let Some(engine) = engine else { continue };
        out = replace_word(&out, engine, page);
    }
    out
}

/// A URL value [`Params::read_query`] could not read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadValue {
    pub key: String,
    pub text: String,
    /// Whether `key` is a parameter of the page (else the key itself is unknown).
    pub known: bool,
}

impl BadValue {
    /// "ignored URL parameter B=abc".
    pub fn message(&self) -> String {
        format!("ignored URL parameter {}={}", self.key, self.text)
    }

    /// What the page says beside the field: "max batch B [seqs]: 'abc' from the URL is
    /// not a valid value".
    pub fn field_message(&self) -> String {
        format!(
            "{}: '{}' from the URL is not a valid value",
            label(&self.key),
            self.text
        )
    }
}

/// Whether `key` is a URL key of [`Params`].
pub fn is_key(key: &str) -> bool {
    TRACE_KEYS.contains(&key)
        || Params::default()
            .to_query()
            .split('&')
            .any(|kv| kv.split_once('=').is_some_and(|(k, _)| k == key))
}

/// Why the parameters cannot run: a message naming fields by their page labels, and the
/// URL key of the field it is about (None: no one field).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invalid {
    pub key: Option<&'static str>,
    pub message: String,
}

impl Invalid {
    /// An engine validation error of the run at `rate`, whose rate is the field `rate_key`
    /// ("rates" or "rate").
    pub(super) fn engine(e: &ConfigError, rate_key: &'static str, rate: f64) -> Invalid {
        let name = match e {
            ConfigError::NotPositive { name, .. }
            | ConfigError::Negative { name, .. }
            | ConfigError::Zero { name, .. }
            | ConfigError::OutOfRange { name, .. }
            | ConfigError::Limit(LimitError::AboveMax { name, .. })
            | ConfigError::Limit(LimitError::BelowMin { name, .. }) => Some(*name),
            ConfigError::Limit(
                LimitError::TooManyRequests { .. } | LimitError::DrainTooLong { .. },
            ) => Some("arrival rate"),
            ConfigError::KvTooSmall { .. } => Some("kv_tokens"),
            ConfigError::PrefixCache(_) => {
                return Invalid {
                    key: Some("pc"),
                    message: e.to_string(),
                }
            }
            _ => None,
        };
        let message = page_message(&e.to_string());
        match name {
            // The rate and the run's size are not named by a page label: say which field.
            Some("arrival rate" | "seeds" | "grid points") => Invalid {
                key: Some(rate_key),
                message: format!("{} = {}: {message}", label(rate_key), fmt_num(rate)),
            },
            Some("per-request overhead") => Invalid {
                key: Some("oh"),
                message,
            },
            Some(n) => Invalid {
                key: FIELDS.iter().find(|f| f.1 == Some(n)).map(|f| f.0),
                message,
            },
            None => Invalid { key: None, message },
        }
    }
}

/// Replaces `word` where it stands alone (not inside a longer identifier).
fn replace_word(s: &str, word: &str, with: &str) -> String {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find(word) {
        let before = rest[..i].chars().next_back();
        let after = rest[i + word.len()..].chars().next();
        out.push_str(&rest[..i]);
        if before.is_some_and(ident) || after.is_some_and(ident) {
            out.push_str(word);
        } else {
            out.push_str(with);
        }
        rest = &rest[i + word.len()..];
    }
    out.push_str(rest);
    out
}
