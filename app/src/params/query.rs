//! The parameters as a URL query string, and the field-by-field edits the page makes.

use super::kinds::{from_keys, kv_key, policy_from, policy_key, prefix_cache_key};
use super::*;

impl Params {
    /// Sets the field `key` from the text the user typed: the new parameters, or a
    /// message naming the field by its label when the text is not a value of that field.
    /// Whether the parameters as a whole are valid is [`Params::validate`]'s business.
    ///
    /// # Errors
    /// "chosen λ [req/s]: 'abc' is not a valid value".
    pub fn edited(&self, key: &str, text: &str) -> Result<Params, String> {
        let mut p = self.clone();
        if p.set(key, text.trim()) {
            Ok(p)
        } else {
            Err(format!("{}: '{text}' is not a valid value", label(key)))
        }
    }

    /// The URL query string (without `?`) that reproduces this view.
    pub fn to_query(&self) -> String {
        let mut q: Vec<(&str, String)> = vec![
            ("preset", self.preset.clone()),
            ("arr", self.arrivals.key().into()),
            ("k", fmt_num(self.burstiness)),
            ("rates", format_rates(&self.rates)),
            ("rate", fmt_num(self.rate)),
            ("len", self.lengths.key().into()),
            ("pm", fmt_num(self.prompt_median)),
            ("ps", fmt_num(self.prompt_sigma)),
            ("om", fmt_num(self.output_median)),
            ("os", fmt_num(self.output_sigma)),
            ("fp", self.fixed_prompt.to_string()),
            ("fo", self.fixed_output.to_string()),
            ("policy", policy_key(self.policy).into()),
            ("B", self.max_batch.to_string()),
            ("K", self.kv_tokens.to_string()),
            ("block", self.block_size.to_string()),
            ("budget", self.token_budget.to_string()),
            ("kv", kv_key(self.kv_mode).into()),
            ("adm", self.admission.key().into()),
            ("nsys", self.max_in_system.to_string()),
            ("oh", fmt_num(self.overhead_ms)),
            ("cost", self.cost.key().into()),
            ("b0", fmt_num(self.beta0)),
            ("bp", fmt_num(self.beta_prefill)),
            ("bd", fmt_num(self.beta_decode)),
            ("gpu", self.gpu.clone()),
            ("llm", self.llm.clone()),
            ("T", fmt_num(self.horizon_s)),
            ("seeds", self.seeds.to_string()),
            ("refrules", (self.reference_rules as u8).to_string()),
            ("slo_ttft", fmt_num(self.slo_ttft_s)),
            ("slo_tpot", fmt_num(self.slo_tpot_s)),
            ("metric", self.metric.key().into()),
            ("sp", (self.shared.system as u8).to_string()),
            ("spg", self.shared.groups.to_string()),
            ("sps", fmt_num(self.shared.share)),
            ("spt", self.shared.tokens.to_string()),
            ("spz", fmt_num(self.shared.zipf)),
            ("conv", (self.shared.conversations as u8).to_string()),
            ("cvm", fmt_num(self.shared.mean_turns)),
            ("cvx", self.shared.max_turns.to_string()),
            ("cvt", fmt_num(self.shared.think_s)),
            ("pc", prefix_cache_key(self.prefix_cache).into()),
        ];
        q.extend(self.trace_query());
        // The preset is written even when empty, so that it reads back as it is.
        q.retain(|(k, v)| *k == "preset" || !v.is_empty());
        q.iter()
            .map(|(k, v)| format!("{k}={}", v.replace(',', "%2C")))
            .collect::<Vec<_>>()
            .join("&")
    }

    /// Reads a query string (with or without `?`). Starts from the named preset (or the
    /// default), then applies every recognised key.
    ///
    /// Returns the parameters and a list of problems (bad values are skipped, not fatal).
    pub fn from_query(query: &str) -> (Params, Vec<String>) {
        let (p, bad) = Params::read_query(query);
        (p, bad.iter().map(BadValue::message).collect())
    }

    /// [`Params::from_query`], with each value it could not read: its key and text as
    /// the URL has them, so the page can show them where the user fixes them.
    pub fn read_query(query: &str) -> (Params, Vec<BadValue>) {
        let query = query.trim_start_matches('?');
        let pairs: Vec<(String, String)> = query
            .split('&')
            .filter(|s| !s.is_empty())
            .map(|kv| {
                let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
                (k.to_string(), v.replace("%2C", ",").replace("%2c", ","))
            })
            .collect();
        let mut p = pairs
            .iter()
            .find(|(k, _)| k == "preset")
            .and_then(|(_, v)| Preset::from_key(v))
            .map(Preset::params)
            .unwrap_or_default();
        let mut bad = Vec::new();
        for (k, v) in &pairs {
            if !p.set(k, v) {
                bad.push(BadValue {
                    known: is_key(k),
                    key: k.clone(),
                    text: v.clone(),
                });
            }
        }
        (p, bad)
    }

    /// One parameter's value by its URL key, as text (empty if unknown).
    pub fn get(&self, key: &str) -> String {
        self.to_query()
            .split('&')
            .find_map(|kv| {
                kv.split_once('=')
                    .filter(|(k, _)| *k == key)
                    .map(|(_, v)| v.replace("%2C", ","))
            })
            .unwrap_or_default()
    }

    /// Sets one parameter by its URL key; false if the key or value is not understood.
    pub fn set(&mut self, key: &str, v: &str) -> bool {
        fn f(v: &str) -> Option<f64> {
            v.parse::<f64>().ok().filter(|x| x.is_finite())
        }
        fn u<T: std::str::FromStr>(v: &str) -> Option<T> {
            v.parse::<T>().ok()
        }
        fn flag(v: &str) -> Option<bool> {
            matches!(v, "0" | "1").then_some(v == "1")
        }
        macro_rules! put {
            ($field:expr, $val:expr) => {
                match $val {
                    Some(x) => {
                        $field = x;
                        true
                    }
                    None => false,
                }
            };
        }
        match key {
            "preset" => {
                self.preset = v.to_string();
                true
            }
            "arr" => put!(self.arrivals, from_keys(&Arrivals::ALL, Arrivals::key, v)),
            "k" => put!(self.burstiness, f(v)),
            "rates" => put!(self.rates, parse_rates(v).ok()),
            "rate" => put!(self.rate, f(v).filter(|x| *x > 0.0)),
            "len" => put!(self.lengths, from_keys(&Lengths::ALL, Lengths::key, v)),
            "pm" => put!(self.prompt_median, f(v)),
            "ps" => put!(self.prompt_sigma, f(v)),
            "om" => put!(self.output_median, f(v)),
            "os" => put!(self.output_sigma, f(v)),
            "fp" => put!(self.fixed_prompt, u(v)),
            "fo" => put!(self.fixed_output, u(v)),
            "policy" => put!(self.policy, policy_from(v)),
            "B" => put!(self.max_batch, u(v)),
            "K" => put!(self.kv_tokens, u(v)),
            "block" => put!(self.block_size, u(v)),
            "budget" => put!(self.token_budget, u(v)),
            "oh" => put!(self.overhead_ms, f(v).filter(|x| *x >= 0.0)),
            "kv" => put!(
                self.kv_mode,
                from_keys(&[KvMode::Reserve, KvMode::Paged], kv_key, v)
            ),
            "adm" => put!(
                self.admission,
                from_keys(&AdmissionRule::ALL, AdmissionRule::key, v)
            ),
            "nsys" => put!(self.max_in_system, u(v)),
            "cost" => put!(self.cost, from_keys(&Cost::ALL, Cost::key, v)),
            "b0" => put!(self.beta0, f(v)),
            "bp" => put!(self.beta_prefill, f(v)),
            "bd" => put!(self.beta_decode, f(v)),
            "gpu" => put!(
                self.gpu,
                engine::cost::roofline::GPUS
                    .iter()
                    .find(|g| g.name == v)
                    .map(|g| g.name.to_string())
            ),
            "llm" => put!(
                self.llm,
                engine::cost::roofline::MODELS
                    .iter()
                    .find(|m| m.name == v)
                    .map(|m| m.name.to_string())
            ),
            "T" => put!(self.horizon_s, f(v)),
            "seeds" => put!(self.seeds, u(v)),
            "refrules" => put!(self.reference_rules, flag(v)),
            "slo_ttft" => put!(self.slo_ttft_s, f(v)),
            "slo_tpot" => put!(self.slo_tpot_s, f(v)),
            "metric" => put!(self.metric, Metric::from_key(v)),
            "sp" => put!(self.shared.system, flag(v)),
            "spg" => put!(self.shared.groups, u(v)),
            "sps" => put!(self.shared.share, f(v)),
            "spt" => put!(self.shared.tokens, u(v)),
            "spz" => put!(self.shared.zipf, f(v)),
            "conv" => put!(self.shared.conversations, flag(v)),
            "cvm" => put!(self.shared.mean_turns, f(v)),
            "cvx" => put!(self.shared.max_turns, u(v)),
            "cvt" => put!(self.shared.think_s, f(v)),
            "pc" => put!(
                self.prefix_cache,
                from_keys(&[PrefixCache::Off, PrefixCache::Apc], prefix_cache_key, v)
            ),
            "trace" | "trace_id" => self.set_trace_key(key, v),
            _ => false,
        }
    }
}
