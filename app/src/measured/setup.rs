//! What a file says about its own benchmark: the tool and server, the model, how many
//! prompts and warm-ups, the arrival rate and burstiness, the client's concurrency cap and
//! the server's flags where the file records them.
//!
//! Two sources: the top-level fields of a vLLM `bench serve --save-result` JSON
//! (`backend`/`endpoint_type`, `model_id`, `num_prompts`, `num_warmups`, `request_rate`,
//! `burstiness`, `max_concurrency`, plus any `--metadata KEY=VALUE` pairs), and the
//! `metadata.json` that `bench-native run` writes next to its CSVs (`server_kind`,
//! `model`, `kv`, `run.requests_scheduled`, `run.warmup_requests`, `run.workload`, …).

use engine::benchmark::BenchmarkRun;
use serde_json::{Map, Value};

/// A benchmark's setup as its file records it; `None` where the file does not say.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Setup {
    /// The load generator ("vllm bench serve", "bench-native 0.1.0").
    pub tool: Option<String>,
    /// The server ("vLLM", "llama.cpp").
    pub server: Option<String>,
    /// The served model, as the file names it.
    pub model: Option<String>,
    /// Requests measured.
    pub prompts: Option<u64>,
    /// Warm-up requests sent first and not measured.
    pub warmups: Option<u64>,
    /// Intended arrival rate [req/s]; `None` for all-at-once ("inf") or unknown.
    pub rate: Option<f64>,
    /// Gamma shape of the arrival gaps (1 = Poisson); `None` when unknown.
    pub burstiness: Option<f64>,
    /// The client's cap on requests in flight; `None` = no cap or unknown.
    pub max_concurrency: Option<u64>,
    /// The server's settings the file records, as (flag, value), sorted by flag.
    pub flags: Vec<(String, String)>,
    /// A label the run was given (`vllm bench serve --label`).
    pub label: Option<String>,
    /// The folder the file came from, when it came in one.
    pub folder: Option<String>,
    /// The benchmark as it was run, when the file records enough to simulate it.
    pub run: Option<Box<FileRun>>,
}

/// A file's benchmark as it was run ([`engine::benchmark`]), and what its reader had to
/// assume (one note per field the file lacks).
#[derive(Clone, Debug, PartialEq)]
pub struct FileRun {
    pub run: BenchmarkRun,
    pub notes: Vec<String>,
}

/// Top-level vLLM result fields that are server settings when a run records them
/// (`--metadata max_num_seqs=8 …`).
const SERVER_FLAGS: [&str; 8] = [
    "max_num_seqs",
    "max_num_batched_tokens",
    "block_size",
    "gpu_memory_utilization",
    "tensor_parallel_size",
    "max_model_len",
    "kv_cache_tokens",
    "enable_chunked_prefill",
];

fn text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) if !s.trim().is_empty() => Some(s.trim().to_string()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn count(v: Option<&Value>) -> Option<u64> {
    match v? {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

fn number(v: Option<&Value>) -> Option<f64> {
    match v? {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    }
    .filter(|x| x.is_finite())
}

/// The server's name as people write it.
fn server_name(kind: &str) -> String {
    match kind.to_ascii_lowercase().as_str() {
        "vllm" | "openai" | "openai-chat" | "openai-comp" => "vLLM".into(),
        "llama" | "llama.cpp" | "llama-server" | "llamacpp" => "llama.cpp".into(),
        "sglang" => "SGLang".into(),
        "tgi" => "TGI".into(),
        _ => kind.to_string(),
    }
}

impl Setup {
    /// The setup recorded in a vLLM `bench serve` result object.
    pub fn from_vllm(obj: &Map<String, Value>) -> Setup {
        let s = |k: &str| obj.get(k).and_then(text);
        // `backend` (older) or `endpoint_type` (newer) names the API the client spoke;
        // both are vLLM's own benchmark, whose server is vLLM unless it says otherwise.
        let server = s("backend")
            .or_else(|| s("endpoint_type"))
            .map(|k| server_name(&k))
            .or_else(|| Some("vLLM".into()));
        let mut flags: Vec<(String, String)> = SERVER_FLAGS
            .iter()
            .filter_map(|k| Some((k.to_string(), s(k)?)))
            .collect();
        flags.sort();
        Setup {
            tool: Some("vllm bench serve".into()),
            server,
            model: s("model_id").or_else(|| s("model")),
            prompts: count(obj.get("num_prompts")),
            warmups: count(obj.get("num_warmups")),
            rate: number(obj.get("request_rate")).filter(|r| *r > 0.0),
            burstiness: number(obj.get("burstiness")).filter(|b| *b > 0.0),
            max_concurrency: count(obj.get("max_concurrency")),
            flags,
            label: s("label"),
            folder: None,
            // The engine's reader, the one `bench-native simulate --like` uses.
            run: engine::benchmark::vllm::read(obj)
                .ok()
                .map(|(run, notes)| Box::new(FileRun { run, notes })),
        }
    }

    /// The setup recorded in a `bench-native run` `metadata.json`.
    pub fn from_bench_native(meta: &Value) -> Setup {
        let run = &meta["run"];
        let arrivals = &run["workload"]["arrivals"];
        let burstiness = match arrivals["kind"].as_str() {
            Some("poisson") => Some(1.0),
            Some("gamma") => number(arrivals.get("burstiness")),
            _ => None,
        };
        let mut flags = Vec::new();
        if let Some(t) = count(meta.pointer("/kv/tokens")) {
            flags.push(("kv_tokens".to_string(), t.to_string()));
        }
        if let Some(b) = count(meta.pointer("/kv/block_size")) {
            flags.push(("block_size".to_string(), b.to_string()));
        }
        if let Some(s) = count(meta.pointer("/kv/slots")) {
            flags.push(("slots".to_string(), s.to_string()));
        }
        if let Some(c) = count(meta.get("context_tokens_per_sequence")) {
            flags.push(("context_per_sequence".to_string(), c.to_string()));
        }
        flags.sort();
        let version = meta
            .pointer("/version/version")
            .and_then(text)
            .map(|v| format!(" {v}"))
            .unwrap_or_default();
        Setup {
            tool: run.get("tool").and_then(text),
            server: meta
                .get("server_kind")
                .and_then(text)
                .map(|k| format!("{}{version}", server_name(&k))),
            model: meta.get("model").and_then(text),
            prompts: count(run.get("requests_scheduled")),
            warmups: count(run.get("warmup_requests")),
            rate: number(run.get("arrival_rate_rps")).filter(|r| *r > 0.0),
            burstiness,
            max_concurrency: count(run.get("max_concurrency")),
            flags,
            label: None,
            folder: None,
            run: None,
        }
    }

    /// Whether the file said anything about its setup.
    pub fn is_known(&self) -> bool {
        *self != Setup::default()
    }

    /// The model's short name: the last part of a path or hub id.
    pub fn model_short(&self) -> Option<&str> {
        self.model
            .as_deref()
            .map(|m| m.trim_end_matches('/').rsplit('/').next().unwrap_or(m))
    }

    /// What makes two files the same run of a sweep: everything but the rate (and the
    /// requests' own lengths).
    pub fn series_key(&self) -> Setup {
        Setup {
            rate: None,
            run: None,
            ..self.clone()
        }
    }

    /// One line for people: "300 prompts · 1 warm-up · 2 req/s · Poisson · no
    /// concurrency cap · max_num_seqs = 8".
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(s) = &self.server {
            parts.push(s.clone());
        }
        if let Some(m) = &self.model {
            parts.push(m.clone());
        }
        if let Some(n) = self.prompts {
            parts.push(format!("{n} prompt{}", if n == 1 { "" } else { "s" }));
        }
        if let Some(n) = self.warmups {
            parts.push(format!("{n} warm-up{}", if n == 1 { "" } else { "s" }));
        }
        parts.push(match self.rate {
            Some(r) => crate::format::req_per_s(r),
            None => "rate: all at once or not recorded".into(),
        });
        match self.burstiness {
            Some(b) if (b - 1.0).abs() < 1e-9 => parts.push("Poisson arrivals".into()),
            Some(b) => parts.push(format!("burstiness {b} (gamma arrivals)")),
            None => {}
        }
        parts.push(match self.max_concurrency {
            Some(c) => format!("at most {c} in flight"),
            None => "no concurrency cap".into(),
        });
        for (k, v) in &self.flags {
            parts.push(format!("{k} = {v}"));
        }
        if let Some(t) = &self.tool {
            parts.push(format!("by {t}"));
        }
        parts.join(" · ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_vllm_result_names_its_benchmark() {
        let v = json!({"date": "20261201-120000", "endpoint_type": "openai", "label": null,
            "model_id": "Qwen/Qwen2.5-1.5B-Instruct", "num_prompts": 300, "request_rate": 2.0,
            "burstiness": 1.0, "max_concurrency": null, "max_num_seqs": "8", "mean_ttft_ms": 31.7});
        let s = Setup::from_vllm(v.as_object().unwrap());
        assert_eq!(s.server.as_deref(), Some("vLLM"));
        assert_eq!(s.model_short(), Some("Qwen2.5-1.5B-Instruct"));
        assert_eq!(
            (s.prompts, s.rate, s.burstiness),
            (Some(300), Some(2.0), Some(1.0))
        );
        assert_eq!(s.max_concurrency, None);
        assert_eq!(s.flags, vec![("max_num_seqs".into(), "8".into())]);
        // No lengths at all: nothing to simulate the benchmark with.
        assert_eq!(s.run, None);
        let d = s.describe();
        assert!(d.contains("300 prompts") && d.contains("2 req/s"), "{d}");
        assert!(
            d.contains("Poisson arrivals") && d.contains("no concurrency cap"),
            "{d}"
        );
    }

    #[test]
    fn an_open_loop_vllm_result_has_no_rate() {
        let v = json!({"backend": "vllm", "request_rate": "inf", "max_concurrency": 16,
            "num_prompts": 4, "num_warmups": 1, "completed": 4, "total_input_tokens": 40,
            "total_output_tokens": 80});
        let s = Setup::from_vllm(v.as_object().unwrap());
        assert_eq!((s.rate, s.max_concurrency), (None, Some(16)));
        // The benchmark as run: every request at once behind a gate of 16, mean lengths.
        let r = &s.run.as_ref().unwrap().run;
        assert_eq!((r.requests, r.warmups, r.max_concurrency), (4, 1, Some(16)));
        assert!(r.rate.is_infinite());
        assert_eq!(r.lengths, vec![(10, 20); 4]);
        assert!(s.run.as_ref().unwrap().notes[0].contains("mean lengths"));
    }

    #[test]
    fn bench_native_metadata_names_server_workload_and_kv() {
        let m = json!({"server_kind": "vllm", "model": "tiny", "version": {"version": "0.32.0"},
            "kv": {"block_size": 128, "tokens": 65536}, "context_tokens_per_sequence": 1024,
            "run": {"tool": "bench-native 0.1.0", "requests_scheduled": 40, "warmup_requests": 1,
                "arrival_rate_rps": 0.25, "max_concurrency": null,
                "workload": {"arrivals": {"kind": "gamma", "rate": 0.25, "burstiness": 0.5}}}});
        let s = Setup::from_bench_native(&m);
        assert_eq!(s.server.as_deref(), Some("vLLM 0.32.0"));
        assert_eq!(
            (s.prompts, s.warmups, s.burstiness),
            (Some(40), Some(1), Some(0.5))
        );
        assert!(s.flags.contains(&("kv_tokens".into(), "65536".into())));
        // The rate is not part of what makes a series.
        let mut other = s.clone();
        other.rate = Some(0.5);
        assert_eq!(s.series_key(), other.series_key());
        assert!(!Setup::default().is_known() && s.is_known());
    }
}
