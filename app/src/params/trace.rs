//! A trace file as the page's workload (docs/model.md, Workload): parsed by the engine's
//! [`parse_trace`], the same parser as `bench-native --trace`, and replayed at every rate
//! of the sweep time-scaled to that rate ([`Trace::at_rate`]).
//!
//! The trace itself is too large for the URL: the URL records only that a trace is in use,
//! its file name and a digest of its text (`trace=NAME&trace_id=HEX`). A URL naming a
//! trace this page has not loaded is refused with that message instead of silently
//! sweeping something else.

use super::{fmt_num, Invalid, Params};
use engine::limits::LimitError;
use engine::workload::{read_any_trace, Trace, Workload};
use engine::ConfigError;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// URL keys of a trace in use.
pub const TRACE_KEYS: [&str; 2] = ["trace", "trace_id"];

/// The trace the page's workload comes from.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TraceInUse {
    /// The file's name, reduced to URL-safe characters.
    pub name: String,
    /// FNV-1a 64 of the file's text, 16 hex digits ([`digest`]).
    pub id: String,
    /// The trace; `None` when the URL names a trace this page has not loaded.
    #[serde(default, with = "shared")]
    pub data: Option<Arc<Trace>>,
    /// For a Mooncake, BurstGPT or Azure export: its format and what its import skipped,
    /// as the page says it.
    #[serde(default)]
    pub imported: Option<String>,
}

impl PartialEq for TraceInUse {
    /// The same file (by name and digest), loaded or not: the digest stands for the data.
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
            && self.id == other.id
            && self.data.is_some() == other.data.is_some()
    }
}

/// Serde for the shared trace (sent to the workers inside [`Params`]).
mod shared {
    use super::{Arc, Trace};
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(v: &Option<Arc<Trace>>, s: S) -> Result<S::Ok, S::Error> {
        v.as_deref().serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Arc<Trace>>, D::Error> {
        Ok(Option::<Trace>::deserialize(d)?.map(Arc::new))
    }
}

/// FNV-1a 64 of `text`, as 16 hex digits: the trace's identity in the URL.
pub fn digest(text: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// A file name as the URL keeps it: letters, digits, `.`, `_` and `-` (others become `_`),
/// at most 64 characters.
pub fn url_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect()
}

/// Reads a trace file's text (`name`: the file's name) into the trace the page uses: one
/// of kvqueue's JSON forms, or a Mooncake, BurstGPT or Azure export (recognised by its
/// first line, imported by its documented columns; the engine's [`read_any_trace`], as
/// `bench-native --trace` reads it).
///
/// # Errors
/// The parser's or the import's message (with the line, and the column where there is
/// one), or a trace whose arrivals are all at 0 s (no time scale to stretch to a rate).
pub fn load(name: &str, text: &str) -> Result<TraceInUse, String> {
    let read = read_any_trace(text)?;
    let trace = read.trace;
    if trace.rate().is_nan() || trace.rate() <= 0.0 {
        return Err(format!(
            "every arrival is at {} s: the trace has no time scale to stretch to a rate",
            fmt_num(trace.last_arrival())
        ));
    }
    let imported = read
        .imported
        .map(|(format, skipped)| format!("a {} trace, {}", format.title(), skipped.describe()));
    Ok(TraceInUse {
        name: url_name(name),
        id: digest(text),
        data: Some(Arc::new(trace)),
        imported,
    })
}

/// Three significant digits (a trace's own rate, as the chosen rate is set to it).
pub fn round3(x: f64) -> f64 {
    if !(x.is_finite() && x > 0.0) {
        return x;
    }
    let scale = 10f64.powi(2 - x.log10().floor() as i32);
    (x * scale).round() / scale
}

impl TraceInUse {
    /// What the page says about the trace beside its control.
    pub fn describe(&self) -> String {
        let Some(t) = &self.data else {
            return format!("{}: named by the URL, not loaded", self.name);
        };
        let lengths = if t.has_lengths() {
            "each request with its own lengths"
        } else if t.lengths.is_some() {
            "lengths from the file's workload"
        } else {
            "lengths from the Lengths control"
        };
        let source = self
            .imported
            .as_ref()
            .map_or(String::new(), |i| format!(" ({i})"));
        let blocks = if t.blocks.is_some() {
            " Its hash_ids mark the prompt blocks requests share, which a prefix cache (paged KV) can hit."
        } else {
            ""
        };
        format!(
            "{}{source}: {} requests over {} s ({} req/s recorded), {lengths}. Each run replays it time-scaled to its rate λ.{blocks}",
            self.name,
            t.len(),
            fmt_num(round3(t.last_arrival())),
            fmt_num(round3(t.rate())),
        )
    }
}

impl Params {
    /// Uses `trace` as the workload's arrivals, and its own rate (to three significant
    /// digits) as the chosen rate, so the detail views start from the trace as recorded.
    pub fn use_trace(&mut self, trace: TraceInUse) {
        if let Some(t) = &trace.data {
            self.rate = round3(t.rate());
        }
        self.trace = Some(trace);
    }

    /// The workload at `rate` when a loaded trace is in use: its arrivals time-scaled to
    /// `rate` ([`Trace::at_rate`]); lengths the requests' own, else the file's workload's,
    /// else the page's length distribution.
    pub(super) fn trace_workload(&self, rate: f64, page: Workload) -> Workload {
        let Some(t) = self.trace.as_ref().and_then(|t| t.data.as_deref()) else {
            return page;
        };
        let arrivals = t
            .at_rate(rate)
            .map_or_else(|| t.arrivals.clone(), |(a, _)| a);
        Workload {
            arrivals,
            lengths: t
                .own_lengths()
                .or_else(|| t.lengths.clone())
                .unwrap_or(page.lengths),
            max_model_len: t.max_model_len,
            shared: t.shared().or(page.shared),
        }
    }

    /// Whether a loaded trace brings shared prompt blocks (a Mooncake trace's hash_ids).
    pub fn trace_shares(&self) -> bool {
        self.trace
            .as_ref()
            .and_then(|t| t.data.as_deref())
            .is_some_and(|t| t.blocks.is_some())
    }

    /// Each run's horizon [s] at `rate`: with a loaded trace, its last arrival time-scaled
    /// to `rate` (the whole trace, once); else the horizon field.
    pub fn run_horizon(&self, rate: f64) -> f64 {
        self.trace
            .as_ref()
            .and_then(|t| t.data.as_deref())
            .and_then(|t| t.at_rate(rate))
            .map_or(self.horizon_s, |(_, h)| h)
    }

    /// The URL keys and values of the trace in use (none without one).
    pub(super) fn trace_query(&self) -> Vec<(&'static str, String)> {
        match &self.trace {
            Some(t) => vec![("trace", t.name.clone()), ("trace_id", t.id.clone())],
            None => Vec::new(),
        }
    }

    /// Sets a trace key from the URL; false for a digest that is not 16 hex digits. A name
    /// or digest alone makes a trace "in use, not loaded" until the file is dropped.
    pub(super) fn set_trace_key(&mut self, key: &str, v: &str) -> bool {
        let blank = || TraceInUse {
            name: String::new(),
            id: String::new(),
            data: None,
            imported: None,
        };
        match key {
            "trace" if v.is_empty() => {
                self.trace = None;
                true
            }
            "trace" => {
                let t = self.trace.get_or_insert_with(blank);
                t.name = url_name(v);
                t.data = None;
                true
            }
            "trace_id" if v.len() == 16 && v.chars().all(|c| c.is_ascii_hexdigit()) => {
                let t = self.trace.get_or_insert_with(blank);
                t.id = v.to_ascii_lowercase();
                t.data = None;
                true
            }
            _ => false,
        }
    }

    /// Whether the trace in use can run: loaded, and at every rate within the engine's
    /// bounds for its length and span (docs/model.md, Limits). Problems of the trace are
    /// placed beside its control (URL key `trace`).
    ///
    /// # Errors
    /// The trace is named by the URL but not loaded; at some rate it is too long a run
    /// or spans too long a horizon.
    pub(super) fn check_trace(&self) -> Result<(), Invalid> {
        let Some(t) = &self.trace else {
            return Ok(());
        };
        let at = |message: String| Invalid {
            key: Some("trace"),
            message,
        };
        if t.data.is_none() {
            return Err(at(format!(
                "the URL names the trace file '{}' (digest {}), which is not loaded in this page: drop that file on the trace control or choose it to sweep it, or remove the trace",
                t.name,
                if t.id.is_empty() { "none" } else { &t.id },
            )));
        }
        for &r in self.rates.iter().chain([&self.rate]) {
            match self.admit_all_config(r, 0).validate() {
                Err(
                    e @ ConfigError::Limit(
                        LimitError::TooManyRequests { .. } | LimitError::AboveMax { .. },
                    ),
                ) => {
                    return Err(at(format!(
                        "trace {} time-scaled to λ = {} req/s: {e}",
                        t.name,
                        fmt_num(r)
                    )))
                }
                _ => continue,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::workload::ArrivalProcess;
    use engine::{KvMode, PrefixCache};

    const REQUESTS: &str = r#"[{"arrival": 0.0, "prompt": 100, "output": 20},
 {"arrival": 1.0, "prompt": 300, "output": 40},
 {"arrival": 4.0, "prompt": 200, "output": 60},
 {"arrival": 5.0, "prompt": 50, "output": 10}]"#;

    fn with_trace() -> Params {
        let mut p = Params {
            rates: vec![0.5, 1.0, 4.0],
            ..Params::default()
        };
        p.use_trace(load("my trace.json", REQUESTS).unwrap());
        p
    }

    const MOONCAKE: &str = include_str!("../../../data/traces/mooncake-sample.jsonl");
    const BURSTGPT: &str = include_str!("../../../data/traces/burstgpt-sample.csv");
    const AZURE: &str = include_str!("../../../data/traces/azure-sample.csv");

    /// The shipped exports load as the CLI reads them, each request with its lengths;
    /// a Mooncake trace's hash_ids become the blocks its requests share, so a prefix cache
    /// hits on them, and without the cache nothing is looked up.
    #[test]
    fn real_trace_exports_load_and_a_mooncake_trace_shares_its_blocks() {
        for (name, text, format) in [
            ("m.jsonl", MOONCAKE, "Mooncake"),
            ("b.csv", BURSTGPT, "BurstGPT"),
            ("a.csv", AZURE, "Azure"),
        ] {
            let t = load(name, text).unwrap_or_else(|e| panic!("{name}: {e}"));
            let data = t.data.as_deref().unwrap();
            let lines = text.lines().filter(|l| !l.trim().is_empty()).count();
            let header = usize::from(format != "Mooncake");
            // The BurstGPT sample records 18 failed requests (0 response tokens).
            let failed = if format == "BurstGPT" { 18 } else { 0 };
            assert_eq!(data.len(), lines - header - failed, "{name}");
            assert!(data.has_lengths(), "{name}");
            assert_eq!(data.blocks.is_some(), format == "Mooncake", "{name}");
            assert_eq!(
                Params {
                    trace: Some(t.clone()),
                    ..Params::default()
                }
                .trace_shares(),
                format == "Mooncake"
            );
            let said = t.describe();
            let skipped = match failed {
                0 => "no lines skipped".to_string(),
                n => format!("skipped {n} failed requests (0 response tokens)"),
            };
            assert!(
                said.contains(&format!("a {format} trace, {skipped}")),
                "{said}"
            );
            assert_eq!(said.contains("hash_ids"), format == "Mooncake", "{said}");
        }
        let mut p = Params {
            kv_mode: KvMode::Paged,
            block_size: 16,
            ..Params::default()
        };
        p.use_trace(load("m.jsonl", MOONCAKE).unwrap());
        let rate = p.rate;
        for (cache, hits) in [(PrefixCache::Apc, true), (PrefixCache::Off, false)] {
            p.prefix_cache = cache;
            assert_eq!(p.check_shared(), Ok(()));
            let cfg = p.sim_config(rate, 0);
            assert!(matches!(
                cfg.workload.shared,
                Some(engine::workload::SharedTokens::Blocks { .. })
            ));
            let r = engine::sim::simulate(&cfg).unwrap();
            let hit = r
                .stats
                .prefix
                .map_or(0.0, |x| x.block_hit_rate.unwrap_or(0.0));
            assert_eq!(hit > 0.1, hits, "{cache:?}: block hit rate {hit}");
        }
    }

    /// A malformed export is refused with its line; nothing is loaded.
    #[test]
    fn a_malformed_export_is_refused_with_its_line() {
        let bad = MOONCAKE.replacen("\"output_length\": 154", "\"output_length\": -3", 1);
        let e = load("m.jsonl", &bad).unwrap_err();
        assert!(e.starts_with("mooncake trace: line 1"), "{e}");
        let bad = BURSTGPT.replacen("0,GPT-4,415", "0,GPT-4,abc", 1);
        let e = load("b.csv", &bad).unwrap_err();
        assert!(e.starts_with("burstgpt trace: line 2"), "{e}");
    }

    #[test]
    fn a_trace_is_replayed_time_scaled_at_every_rate() {
        let p = with_trace();
        assert_eq!(
            p.rate, 0.8,
            "the chosen rate is the trace's own: 4 requests over 5 s"
        );
        for r in [0.5, 1.0, 4.0] {
            let cfg = p.sim_config(r, 0);
            assert_eq!(cfg.workload.rate(), r);
            assert_eq!(cfg.horizon_s, 4.0 / r, "the whole trace, once");
            let reqs = cfg.workload.generate(0, cfg.horizon_s).unwrap();
            assert_eq!(
                reqs.iter()
                    .map(|q| (q.prompt, q.output))
                    .collect::<Vec<_>>(),
                vec![(100, 20), (300, 40), (200, 60), (50, 10)]
            );
            assert_eq!(reqs[2].arrival, 4.0 * 0.8 / r);
        }
        // The models see the trace's own lengths.
        assert_eq!(
            p.sim_config(1.0, 0).workload.lengths,
            engine::workload::LengthDist::Empirical {
                pairs: vec![(100, 20), (300, 40), (200, 60), (50, 10)]
            }
        );
        p.check().unwrap();
    }

    #[test]
    fn the_url_records_the_trace_by_name_and_digest() {
        let p = with_trace();
        let q = p.to_query();
        let id = digest(REQUESTS);
        assert!(
            q.ends_with(&format!("&trace=my_trace.json&trace_id={id}")),
            "{q}"
        );
        // Read back in a page that has not loaded it: named, refused, and said so.
        let (back, bad) = Params::read_query(&q);
        assert!(bad.is_empty(), "{bad:?}");
        let t = back.trace.as_ref().unwrap();
        assert_eq!(
            (t.name.as_str(), t.id.as_str(), t.data.is_none()),
            ("my_trace.json", id.as_str(), true)
        );
        let e = back.check().unwrap_err();
        assert_eq!(e.key, Some("trace"));
        assert!(
            e.message.contains("'my_trace.json'") && e.message.contains("not loaded"),
            "{}",
            e.message
        );
        // Without a trace the URL has no trace keys.
        assert!(!Params::default().to_query().contains("trace"));
        assert!(!Params::read_query("trace_id=xyz").1.is_empty());
    }

    #[test]
    fn bad_files_are_refused_with_their_place() {
        assert_eq!(
            load("t.json", "[0.5,\n 0.25]").unwrap_err(),
            "line 2, column 2: entry 2 arrives at 0.25 s, before entry 1 (0.5 s): arrivals must be in time order"
        );
        assert!(load("t.json", "[0, 0]")
            .unwrap_err()
            .contains("no time scale"));
        assert!(load("t.json", "hello")
            .unwrap_err()
            .starts_with("line 1, column 1"));
    }

    /// Not a trace's business, but the same engine policy: a drained sweep whose drain
    /// would pass the cap is refused beside the rates (docs/model.md, Limits).
    #[test]
    fn a_drain_past_the_cap_is_refused_beside_the_rates() {
        let p = Params {
            reference_rules: false,
            rates: vec![1.0, 20_000.0],
            horizon_s: 1.0,
            kv_tokens: 1 << 30,
            ..Params::default()
        };
        let e = p.check().unwrap_err();
        assert_eq!(e.key, Some("rates"));
        assert!(e.message.contains("(max_drain_horizons)"), "{}", e.message);
    }

    #[test]
    fn bounds_are_the_engines_and_are_said_beside_the_trace() {
        // 10 arrivals in 1e-3 s: at 1e-6 req/s the trace spans 1e7 s, within bounds;
        // at 1e-9 req/s 1e10 s, past the longest horizon.
        let times: Vec<String> = (1..=10).map(|i| format!("{}", i as f64 * 1e-4)).collect();
        let mut p = Params::default();
        p.use_trace(load("t.json", &format!("[{}]", times.join(","))).unwrap());
        p.rates = vec![1e-6];
        p.rate = 1e-6;
        p.check().unwrap();
        p.rates = vec![1e-9];
        let e = p.check().unwrap_err();
        assert_eq!(e.key, Some("trace"));
        assert!(e.message.contains("horizon_s"), "{}", e.message);
        assert!(matches!(
            p.sim_config(1.0, 0).workload.arrivals,
            ArrivalProcess::Timestamps { .. }
        ));
    }
}
