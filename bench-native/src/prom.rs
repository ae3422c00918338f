//! Prometheus text-format scraping of a server's `/metrics` during a run: vLLM's `vllm:*`
//! and llama.cpp's `llamacpp:*` names mapped onto one set of columns.

use std::collections::BTreeMap;

/// One sample: metric name, raw label set (without braces), value.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: String,
    pub value: f64,
}

/// Parses the Prometheus text exposition format (comments and malformed lines skipped).
pub fn parse(text: &str) -> Vec<Sample> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (name, labels, rest) = match line.find('{') {
            Some(i) => match line.rfind('}') {
                Some(j) if j > i => (&line[..i], &line[i + 1..j], &line[j + 1..]),
                _ => continue,
            },
            None => match line.split_once(char::is_whitespace) {
                Some((n, r)) => (n, "", r),
                None => continue,
            },
        };
        let Some(v) = rest.split_whitespace().next() else {
            continue;
        };
        let value = match v {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            _ => match v.parse::<f64>() {
                Ok(x) => x,
                Err(_) => continue,
            },
        };
        out.push(Sample {
            name: name.trim().to_string(),
            labels: labels.to_string(),
            value,
        });
    }
    out
}

/// vLLM's own time for its requests so far, from its histograms: (requests counted, the
/// summed queue + prefill time [s]) — `vllm:request_queue_time_seconds` (engine-core
/// enqueue to first scheduling) and `vllm:request_prefill_time_seconds` (first scheduling
/// to the first token's engine step), summed over label sets. `None` without them.
pub fn vllm_prompt_time(samples: &[Sample]) -> Option<(f64, f64)> {
    let sum = |name: &str| {
        let v: Vec<f64> = samples
            .iter()
            .filter(|s| s.name == name)
            .map(|s| s.value)
            .collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>())
    };
    let count = sum("vllm:request_prefill_time_seconds_count")?;
    let prefill = sum("vllm:request_prefill_time_seconds_sum")?;
    let queue = sum("vllm:request_queue_time_seconds_sum").unwrap_or(0.0);
    Some((count, prefill + queue))
}

/// Reads one label's value from a raw label set (`a="1",b="x"`).
pub fn label<'a>(labels: &'a str, key: &str) -> Option<&'a str> {
    let mut rest = labels;
    while let Some(eq) = rest.find("=\"") {
        let k = rest[..eq].trim().trim_start_matches(',').trim();
        let after = &rest[eq + 2..];
        let end = after.find('"')?;
        if k == key {
            return Some(&after[..end]);
        }
        rest = &after[end + 1..];
    }
    None
}

/// The columns of the metrics time series CSV, after `t_s`.
pub const COLUMNS: [&str; 7] = [
    "running",
    "waiting",
    "kv_usage_frac",
    "preemptions_total",
    "prompt_tokens_total",
    "generation_tokens_total",
    "decode_iterations_total",
];

/// Server metric names (vLLM, llama.cpp) feeding each column of [`COLUMNS`].
const SOURCES: [&[&str]; 7] = [
    &["vllm:num_requests_running", "llamacpp:requests_processing"],
    &["vllm:num_requests_waiting", "llamacpp:requests_deferred"],
    &[
        "vllm:kv_cache_usage_perc",
        "vllm:gpu_cache_usage_perc",
        "llamacpp:kv_cache_usage_ratio",
    ],
    &["vllm:num_preemptions_total"],
    &["vllm:prompt_tokens_total", "llamacpp:prompt_tokens_total"],
    &[
        "vllm:generation_tokens_total",
        "llamacpp:tokens_predicted_total",
    ],
    &["llamacpp:n_decode_total"],
];

/// Maps samples onto [`COLUMNS`] (summing over label sets; the first source name present
/// wins). `None` = the server does not export it.
pub fn columns(samples: &[Sample]) -> [Option<f64>; 7] {
    let mut by_name: BTreeMap<&str, f64> = BTreeMap::new();
    for s in samples {
        *by_name.entry(s.name.as_str()).or_insert(0.0) += s.value;
    }
    let mut out = [None; 7];
    for (o, names) in out.iter_mut().zip(SOURCES) {
        *o = names.iter().find_map(|n| by_name.get(n).copied());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_both_servers() {
        let text = "# HELP x\nllamacpp:requests_processing 3\nllamacpp:n_decode_total 120\n\
                    vllm:num_requests_waiting{model_name=\"tiny\"} 2.0\n\
                    vllm:cache_config_info{block_size=\"16\",num_gpu_blocks=\"4096\"} 1.0\nbad line here\n";
        let s = parse(text);
        assert_eq!(s.len(), 4);
        let c = columns(&s);
        assert_eq!(c[0], Some(3.0));
        assert_eq!(c[1], Some(2.0));
        assert_eq!(c[2], None);
        assert_eq!(c[6], Some(120.0));
        assert_eq!(label(&s[3].labels, "num_gpu_blocks"), Some("4096"));
        assert_eq!(label(&s[3].labels, "block_size"), Some("16"));
    }
}
