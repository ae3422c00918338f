//! `bench-native simulate`: one configuration through the engine's simulator, printed as a
//! table (or JSON), optionally with the per-request CSV. Also the model flags shared with
//! `sweep`.

use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use engine::config::{EndRule, FirstToken, KvMode, Policy, ServerConfig, SimConfig};
use engine::cost::{CostModel, TableCost};
use engine::metrics::{Dist, Summary};
use engine::workload::{ArrivalProcess, LengthDist};
use std::path::PathBuf;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PolicyArg {
    Serial,
    Static,
    Continuous,
    Chunked,
    Sjf,
    /// llama.cpp's slots: chunked, prompts in slot order
    LlamaCpp,
}

impl From<PolicyArg> for Policy {
    fn from(p: PolicyArg) -> Policy {
        match p {
            PolicyArg::Serial => Policy::Serial,
            PolicyArg::Static => Policy::Static,
            PolicyArg::Continuous => Policy::Continuous,
            PolicyArg::Chunked => Policy::Chunked,
            PolicyArg::Sjf => Policy::Sjf,
            PolicyArg::LlamaCpp => Policy::LlamaCpp,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum KvModeArg {
    Reserve,
    Paged,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LengthsArg {
    /// Lognormal prompt median 256 σ 0.55, output median 128 σ 0.70 (the reference study).
    Reference,
    /// The 5,000 embedded ShareGPT pairs.
    Sharegpt,
    /// Every request --prompt → --output tokens.
    Fixed,
    /// 50 % short 32→64, 50 % long 512→32.
    Mix,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ArrivalArg {
    Poisson,
    Gamma,
    Deterministic,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Preset {
    /// The reference study's simulator: continuous, token-exact reserve (loss), reference
    /// cost, first token after the first decode, everything stops at the horizon.
    Reference,
    /// vLLM-like: chunked prefill, paged KV (16-token blocks), ShareGPT, A10G table cost, drain.
    Vllm,
    /// The `llama_cpp` server model: `llama-server -np B -c K -b BUDGET` (slots own K/B
    /// tokens of KV each; requests capped at a slot; decodes first, then prompt chunks in
    /// slot order, slots taken least recently used first).
    LlamaCpp,
    /// The `vllm_v1` server model: vLLM V1 with `--max-num-seqs B`, K tokens of paged KV in
    /// --block-size blocks (16 unless given), `--max-num-batched-tokens BUDGET`; recompute
    /// preemption, no watermark; ShareGPT, A10G table cost, drain.
    VllmV1,
}

/// Model flags shared by `simulate` and `sweep`. Unset flags keep the preset's values.
#[derive(Clone, Debug, Args)]
pub struct ModelArgs {
    /// Starting point for every other flag.
    #[arg(long, value_enum, default_value = "reference")]
    pub preset: Preset,
    /// Scheduling policy.
    #[arg(long, value_enum)]
    pub policy: Option<PolicyArg>,
    /// KV mode: reserve (loss system) or paged (queueing + preemption).
    #[arg(long, value_enum)]
    pub kv_mode: Option<KvModeArg>,
    /// KV block size [tokens].
    #[arg(long)]
    pub block_size: Option<u32>,
    /// Per-iteration token budget (chunked) [tokens].
    #[arg(long)]
    pub budget: Option<u32>,
    /// Request lengths.
    #[arg(long, value_enum)]
    pub lengths: Option<LengthsArg>,
    /// Prompt tokens for --lengths fixed.
    #[arg(long, default_value_t = 256)]
    pub prompt: u32,
    /// Output tokens for --lengths fixed.
    #[arg(long, default_value_t = 128)]
    pub output: u32,
    /// Arrival process.
    #[arg(long, value_enum)]
    pub arrivals: Option<ArrivalArg>,
    /// Gamma shape k (c_a² = 1/k) for --arrivals gamma.
    #[arg(long, default_value_t = 1.0)]
    pub burstiness: f64,
    /// Cost model: `reference`, `a10g` (the measured vLLM/A10G table),
    /// `roofline:GPU:MODEL[:MEM_UTIL[:TP]]` (e.g. `roofline:H100:Llama-3.1-8B:0.9:1`; sets the KV
    /// capacity too unless --kv is given), or a JSON file of a CostModel (from `bench-native fit`:
    /// its `ubatch` model, or `fit.json#linear` / `#table`; with its measured overhead).
    #[arg(long)]
    pub cost: Option<String>,
    /// Per-request front-end overhead [ms] (HTTP, tokenization, the server's task queue):
    /// each request reaches the scheduler this long after it arrives, and TTFT and E2E
    /// include it. Default: a `fit` file's `overhead_s`, else 0.
    #[arg(long)]
    pub overhead_ms: Option<f64>,
    /// Arrivals stop at this time [s].
    #[arg(long)]
    pub horizon: Option<f64>,
    /// With a roofline cost: take the KV capacity from the GPU's memory (set by the caller
    /// when no explicit KV capacity was given).
    #[arg(skip)]
    pub roofline_kv: bool,
    /// Let accepted requests finish after the horizon (default for --preset vllm).
    #[arg(long, conflicts_with = "cut")]
    pub drain: bool,
    /// Stop everything at the horizon (default for --preset reference).
    #[arg(long)]
    pub cut: bool,
    /// Cap prompt + output at this many tokens.
    #[arg(long)]
    pub max_model_len: Option<u32>,
    /// TTFT SLO for SLO goodput [s].
    #[arg(long)]
    pub slo_ttft: Option<f64>,
    /// TPOT SLO for SLO goodput [s].
    #[arg(long)]
    pub slo_tpot: Option<f64>,
}

impl ModelArgs {
    /// The configuration at one (rate, B, K, seed).
    pub fn config(
        &self,
        rate: f64,
        max_batch: u32,
        kv_tokens: u64,
        seed: u64,
    ) -> anyhow::Result<SimConfig> {
        let mut c = match self.preset {
            Preset::Reference => SimConfig::reference(rate, max_batch, kv_tokens),
            Preset::Vllm => SimConfig::vllm_like(rate),
            Preset::LlamaCpp => {
                SimConfig::llama_cpp(rate, max_batch, kv_tokens, self.budget.unwrap_or(2048))
            }
            Preset::VllmV1 => {
                let bs = self.block_size.unwrap_or(16).max(1);
                SimConfig {
                    server: ServerConfig::vllm_v1(
                        max_batch,
                        kv_tokens / bs as u64,
                        bs,
                        self.budget.unwrap_or(2048),
                    ),
                    ..SimConfig::vllm_like(rate)
                }
            }
        };
        c.server.max_batch = max_batch;
        c.server.kv_tokens = kv_tokens;
        c.seed = seed;
        if let Some(p) = self.policy {
            c.server.policy = p.into();
        }
        if let Some(m) = self.kv_mode {
            c.server.kv_mode = match m {
                KvModeArg::Reserve => KvMode::Reserve,
                KvModeArg::Paged => KvMode::Paged,
            };
        }
        if let Some(b) = self.block_size {
            c.server.block_size = b;
        }
        if let Some(b) = self.budget {
            c.server.token_budget = b;
        }
        if let Some(l) = self.lengths {
            c.workload.lengths = match l {
                LengthsArg::Reference => LengthDist::reference(),
                LengthsArg::Sharegpt => LengthDist::sharegpt(),
                LengthsArg::Fixed => LengthDist::Fixed {
                    prompt: self.prompt,
                    output: self.output,
                },
                LengthsArg::Mix => LengthDist::short_long_mix(),
            };
        }
        if let Some(a) = self.arrivals {
            c.workload.arrivals = match a {
                ArrivalArg::Poisson => ArrivalProcess::Poisson { rate },
                ArrivalArg::Gamma => ArrivalProcess::Gamma {
                    rate,
                    burstiness: self.burstiness,
                },
                ArrivalArg::Deterministic => ArrivalProcess::Deterministic { rate },
            };
        }
        if let Some(cost) = &self.cost {
            if let Some(spec) = cost.strip_prefix("roofline:") {
                let (model, kv) = roofline(spec)?;
                c.cost = model;
                if self.roofline_kv {
                    c.server.kv_tokens = kv;
                }
            } else {
                (c.cost, c.server.overhead_s) = load_cost(cost)?;
            }
        }
        if let Some(ms) = self.overhead_ms {
            if !(ms.is_finite() && ms >= 0.0) {
                bail!("--overhead-ms must be a finite number >= 0, got {ms}");
            }
            c.server.overhead_s = ms / 1e3;
        }
        if let Some(h) = self.horizon {
            c.horizon_s = h;
        }
        if self.drain {
            c.end = EndRule::Drain;
        }
        if self.cut {
            c.end = EndRule::Cut;
        }
        if self.preset == Preset::Reference
            && self.policy.is_some_and(|p| p != PolicyArg::Continuous)
        {
            // Outside reference mode proper, vLLM's convention: prefill emits token 1.
            c.first_token = FirstToken::AfterPrefill;
        }
        c.workload.max_model_len = self.max_model_len.or(c.workload.max_model_len);
        if let Some(x) = self.slo_ttft {
            c.metrics.slo_ttft_s = x;
        }
        if let Some(x) = self.slo_tpot {
            c.metrics.slo_tpot_s = x;
        }
        c.validate().context("invalid configuration")?;
        Ok(c)
    }
}

/// `GPU:MODEL[:MEM_UTIL[:TP]]` → the roofline cost model and the KV capacity [tokens].
pub fn roofline(spec: &str) -> anyhow::Result<(CostModel, u64)> {
    let parts: Vec<&str> = spec.split(':').collect();
    if parts.len() < 2 || parts.len() > 4 {
        let gpus: Vec<&str> = engine::cost::roofline::GPUS
            .iter()
            .map(|g| g.name)
            .collect();
        let models: Vec<&str> = engine::cost::roofline::MODELS
            .iter()
            .map(|m| m.name)
            .collect();
        bail!(
            "--cost roofline:GPU:MODEL[:MEM_UTIL[:TP]]; GPUs: {}; models: {}",
            gpus.join(", "),
            models.join(", ")
        );
    }
    let util = parts
        .get(2)
        .map_or(Ok(0.9), |x| x.parse::<f64>())
        .context("MEM_UTIL must be a number")?;
    let tp = parts
        .get(3)
        .map_or(Ok(1), |x| x.parse::<u32>())
        .context("TP must be an integer")?;
    Ok(engine::cost::RooflineCost::preset(
        parts[0], parts[1], util, tp,
    )?)
}

/// `reference`, `a10g`, or a JSON file holding a CostModel, or an object of them as `fit`
/// writes (`{"ubatch": …, "table": …, "linear": …, "overhead_s": …}`): its `ubatch` model
/// (the one `validate` predicts with), else `table`, else `linear`; `FILE#linear` (or
/// `#table`, `#ubatch`) picks one. Returns the model and the per-request overhead [s] the
/// file gives (`fit`'s `overhead_s`; 0 otherwise).
pub fn load_cost(spec: &str) -> anyhow::Result<(CostModel, f64)> {
    match spec {
        "reference" => Ok((CostModel::default(), 0.0)),
        "a10g" => Ok((CostModel::Table(TableCost::a10g_qwen_1_5b()), 0.0)),
        spec => {
            let (path, kind) = match spec.rsplit_once('#') {
                Some((p, k)) => (p, Some(k)),
                None => (spec, None),
            };
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading cost model {path}"))?;
            let v: serde_json::Value =
                serde_json::from_str(&text).with_context(|| format!("{path} is not JSON"))?;
            let overhead = v
                .get("overhead_s")
                .and_then(serde_json::Value::as_f64)
                .filter(|x| x.is_finite() && *x >= 0.0)
                .unwrap_or(0.0);
            let pick = match kind {
                Some(k) => v
                    .get(k)
                    .cloned()
                    .with_context(|| format!("{path} has no \"{k}\" model"))?,
                None if v.get("kind").is_some() => v,
                None => ["ubatch", "table", "linear"]
                    .iter()
                    .find_map(|k| v.get(*k).cloned())
                    .with_context(|| {
                        format!("{path}: expected a CostModel (with \"kind\") or an object with \"ubatch\"/\"table\"/\"linear\"")
                    })?,
            };
            let m: CostModel = serde_json::from_value(pick)
                .with_context(|| format!("{path}: not a cost model"))?;
            m.validate()?;
            Ok((m, overhead))
        }
    }
}

/// Arguments of `simulate`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    bench-native simulate --rate 2 --batch 8 --kv 8192\n  \
    bench-native simulate --preset vllm --rate 6 --batch 128 --kv 565904\n  \
    bench-native simulate --preset vllm --rate 20 --batch 256 --cost roofline:H100:Llama-3.1-8B:0.9:1\n  \
    bench-native simulate --preset llama-cpp --batch 4 --kv 8192 --budget 512 --cost fit.json --rate 1   # llama-server -np 4 -c 8192 -b 512\n  \
    bench-native simulate --preset vllm-v1 --batch 8 --kv 768 --block-size 128 --budget 512 --lengths fixed --prompt 128 --output 128 --rate 8\n  \
    bench-native simulate --rate 4 --policy chunked --kv-mode paged --block-size 16 --budget 512 --lengths sharegpt --drain --records run.csv")]
pub struct SimulateArgs {
    /// Arrival rate [req/s].
    #[arg(long, default_value_t = 1.0)]
    pub rate: f64,
    /// Batch width B (max_num_seqs).
    #[arg(long, default_value_t = 8)]
    pub batch: u32,
    /// KV capacity [tokens] (default 8192, or the GPU's with a roofline cost).
    #[arg(long)]
    pub kv: Option<u64>,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    #[command(flatten)]
    pub model: ModelArgs,
    /// Write every request's record to this CSV.
    #[arg(long)]
    pub records: Option<PathBuf>,
    /// Print the summary as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

pub fn execute(a: SimulateArgs) -> anyhow::Result<()> {
    let mut model = a.model.clone();
    model.roofline_kv = a.kv.is_none();
    let mut cfg = model.config(a.rate, a.batch, a.kv.unwrap_or(8192), a.seed)?;
    cfg.keep_records = a.records.is_some();
    let t = std::time::Instant::now();
    let rep = engine::sim::simulate(&cfg)?;
    let took = t.elapsed();
    if let Some(path) = &a.records {
        let mut s = String::from(engine::sweep::RECORD_COLUMNS);
        s.push('\n');
        s.push_str(&engine::sweep::records_csv(&rep.records, ""));
        std::fs::write(path, s).with_context(|| format!("writing {}", path.display()))?;
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&rep.summary)?);
    } else {
        print!("{}", summary_table(&rep.summary));
        eprintln!(
            "simulated {} requests, {} iterations in {} loop steps, {:.1} ms",
            rep.stats.arrivals,
            rep.stats.iterations,
            rep.stats.steps,
            took.as_secs_f64() * 1e3
        );
    }
    for w in warnings(&cfg, &rep.summary)? {
        eprintln!("{w}");
    }
    Ok(())
}

/// The command-line flag of an engine configuration field, where one sets it.
fn flag_of(field: &str) -> Option<&'static str> {
    Some(match field {
        "max_batch" => "--batch (--batches)",
        "kv_tokens" => "--kv",
        "token_budget" => "--budget",
        "block_size" => "--block-size",
        "horizon_s" => "--horizon",
        "slo_ttft_s" => "--slo-ttft",
        "slo_tpot_s" => "--slo-tpot",
        "arrival rate" => "--rate (--rates)",
        _ => return None,
    })
}

/// An error as the user should read it (`{e:#}`), an engine [`ConfigError`] naming the
/// command-line flag instead of the configuration field (`--batch (--batches) must be at
/// least 1`, not `max_batch …`; `simulate` takes the singular, `sweep`/`compare` the list).
pub fn with_flag_names(e: &anyhow::Error) -> String {
    use engine::error::ConfigError as E;
    let text = format!("{e:#}");
    let Some(ce) = e.chain().find_map(|c| c.downcast_ref::<E>()) else {
        return text;
    };
    // each of these messages starts with the field's name
    let msg = ce.to_string();
    let fixed = match ce {
        E::NotPositive { name, .. }
        | E::Negative { name, .. }
        | E::Zero { name, .. }
        | E::OutOfRange { name, .. } => flag_of(name).map(|f| msg.replacen(name, f, 1)),
        E::KvTooSmall { .. } => Some(msg.replace("raise kv_tokens", "raise --kv")),
        _ => None,
    };
    match fixed {
        Some(f) => text.replace(&msg, &f),
        None => text,
    }
}

/// What a user should know about a run that the table does not say: requests cut to the
/// maximum length (a slot's context with `--preset llama-cpp`), and a KV cache too small
/// for most requests.
pub fn warnings(cfg: &SimConfig, s: &Summary) -> anyhow::Result<Vec<String>> {
    let mut out = Vec::new();
    if let Some(cap) = cfg.workload.max_model_len {
        let mut uncapped = cfg.workload.clone();
        uncapped.max_model_len = None;
        let reqs = uncapped.generate(cfg.seed, cfg.horizon_s)?;
        let cut = reqs
            .iter()
            .filter(|r| r.total_tokens() > cap as u64)
            .count();
        if cut > 0 {
            out.push(format!(
                "note: {cut} of {} requests ({:.1} %) were cut to the {cap}-token maximum length \
                 (prompt + output; with --preset llama-cpp a slot's share of the KV, K/B): \
                 the latencies are for the shorter requests",
                reqs.len(),
                100.0 * cut as f64 / reqs.len().max(1) as f64
            ));
        }
    }
    if cfg.server.overhead_s > 0.0 {
        out.push(format!(
            "note: TTFT and E2E include a per-request front-end overhead of {:.2} ms \
             (--overhead-ms, or the cost file's overhead_s)",
            cfg.server.overhead_s * 1e3
        ));
    }
    if s.arrivals > 0 && s.blocking_probability >= 0.5 {
        out.push(format!(
            "warning: {:.1} % of requests were rejected: K = {} tokens holds few of them \
             (each needs its prompt + output in KV); raise --kv",
            100.0 * s.blocking_probability,
            cfg.server.kv_tokens
        ));
    }
    Ok(out)
}

/// A human-readable table of a summary.
pub fn summary_table(s: &Summary) -> String {
    let ms = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{:.1}", v * 1e3));
    let row = |name: &str, d: &Dist| {
        format!(
            "{name:<9}{:>10}{:>10}{:>10}{:>10}{:>10}\n",
            ms(d.mean),
            ms(d.p50),
            ms(d.p95),
            ms(d.p99),
            ms(d.max)
        )
    };
    let mut out = format!(
        "{:<9}{:>10}{:>10}{:>10}{:>10}{:>10}\n",
        "[ms]", "mean", "p50", "p95", "p99", "max"
    );
    out += &row("TTFT", &s.ttft);
    out += &row("TPOT", &s.tpot);
    out += &row("E2E", &s.e2e);
    out += &row("ITL max", &s.itl_max);
    out += &format!(
        "arrivals {}  completed {}  rejected {}  unfinished {}  window {:.1} s\n\
         goodput (completed) {:.3} req/s  output {:.1} tok/s  SLO goodput {:.3} req/s  blocking {:.4}  preemptions {}  stalls {}\n",
        s.arrivals,
        s.completed,
        s.rejected,
        s.unfinished,
        s.window_s,
        s.throughput_rps,
        s.output_tokens_per_s,
        s.slo_goodput_rps,
        s.blocking_probability,
        s.preemptions,
        s.stalls
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fit_file_gives_its_ubatch_model_and_overhead_unless_told_otherwise() {
        let fit = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/llama_server_fit.json"
        );
        let (m, overhead) = load_cost(fit).unwrap();
        assert!(matches!(m, CostModel::Ubatch(_)), "{m:?}");
        assert!(overhead > 0.0 && overhead < 0.01, "{overhead}");
        let (l, o) = load_cost(&format!("{fit}#linear")).unwrap();
        assert!(matches!(l, CostModel::Linear(_)) && o == overhead);
        assert!(matches!(
            load_cost(&format!("{fit}#table")).unwrap().0,
            CostModel::Table(_)
        ));
        let e = load_cost(&format!("{fit}#nope")).unwrap_err();
        assert!(format!("{e:#}").contains("no \"nope\" model"), "{e:#}");
        // a bare model file has no overhead
        let bare = fit.replace("fit.json", "fit.linear.json");
        assert_eq!(load_cost(&bare).unwrap().1, 0.0);
    }

    #[test]
    fn engine_errors_name_the_flags() {
        let args = |extra: &[&str]| {
            let mut v = vec!["bench-native", "simulate"];
            v.extend_from_slice(extra);
            let crate::cli::Command::Simulate(a) =
                <crate::cli::Cli as clap::Parser>::try_parse_from(v)
                    .unwrap()
                    .command
            else {
                panic!()
            };
            a
        };
        let msg = |extra: &[&str]| {
            let a = args(extra);
            let r = a
                .model
                .config(a.rate, a.batch, a.kv.unwrap_or(8192), 0)
                .and_then(|c| Ok(engine::sim::simulate(&c)?));
            with_flag_names(&r.unwrap_err())
        };
        assert_eq!(
            msg(&["--batch", "0"]),
            "invalid configuration: --batch (--batches) must be at least 1, got 0"
        );
        assert!(msg(&["--horizon", "0"]).contains("--horizon must be"));
        assert!(msg(&["--kv", "10", "--lengths", "fixed"]).contains("raise --kv"));
        assert!(msg(&["--overhead-ms=-1"]).contains("--overhead-ms must be"));
        // anything else is left as it was
        let other = anyhow::anyhow!("reading cost model x.json");
        assert_eq!(with_flag_names(&other), "reading cost model x.json");
    }

    #[test]
    fn warns_about_cut_requests_and_a_too_small_kv_cache() {
        let mut cfg = SimConfig::reference(2.0, 4, 100);
        cfg.horizon_s = 50.0;
        cfg.workload.max_model_len = Some(300);
        let rep = engine::sim::simulate(&cfg).unwrap();
        let w = warnings(&cfg, &rep.summary).unwrap();
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(
            w[0].contains("were cut to the 300-token maximum length"),
            "{}",
            w[0]
        );
        assert!(w[1].contains("raise --kv"), "{}", w[1]);
        // A roomy cache and no cap: nothing to say.
        let ok = SimConfig::reference(1.0, 8, 8192);
        let rep = engine::sim::simulate(&ok).unwrap();
        assert!(warnings(&ok, &rep.summary).unwrap().is_empty());
    }
}
