//! The Learn view's lessons: short explanations, each with one or two controls and a live
//! experiment on the real engine (simulations and analytical models), plus its URL state.
//!
//! Everything here is plain Rust: [`LessonState`] (which lesson, its control values, the
//! URL query) and [`run`] (the experiment, returning chart panels and numbers) are tested
//! natively; the page only renders them (`learn_ui`). Runs are kept small (≈ 10–30 short
//! simulations) so a lesson updates in well under a second; the page runs them in a Web
//! Worker.

mod burstiness;
mod caches;
mod ci;
mod disagg;
mod links;
mod loss_delay;
mod routing;
mod variance;

pub use links::{watch_links, WatchLink};

use crate::chart::{Corner, Series, XyPanel};
use crate::params::{fmt_num, Params};
use engine::analytic::{capacity_bounds, erlang_b, predict, ModelKind};
use engine::config::{KvMode, Policy, SimConfig};
use engine::record::{Outcome, RequestRecord};
use engine::sim::{simulate, SimReport};
use serde::{Deserialize, Serialize};

/// The lessons, in teaching order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Lesson {
    /// Utilisation, the hockey stick and Little's law.
    #[default]
    Utilisation,
    /// Batch width: throughput versus time per token.
    Batching,
    /// KV memory: reserve (loss) versus paged (queueing, preemption).
    KvMemory,
    /// Head-of-line blocking: whole-prompt prefill versus chunked prefill.
    HeadOfLine,
    /// Variance matters: fixed versus variable lengths at the same mean (P–K).
    Variance,
    /// Loss or delay: refuse (Erlang B) or queue (Erlang C, M/M/c/K) on the same traffic.
    LossDelay,
    /// Burstiness: gamma arrivals, Kingman's formula, and the tail.
    Burstiness,
    /// Routing: random, round-robin, power of two choices and least outstanding over N
    /// replicas.
    Routing,
    /// Caches: a prefix cache's hit rate, Che's approximation, and TTFT.
    Caches,
    /// Disaggregation: prefill and decode pools in tandem against an aggregated fleet.
    Disagg,
}

/// One slider of a lesson: the value snaps to one of `steps`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Control {
    /// URL key.
    pub key: &'static str,
    pub label: &'static str,
    pub steps: &'static [f64],
    pub default: f64,
}

impl Control {
    /// Index of the step nearest to `v`.
    pub fn nearest(&self, v: f64) -> usize {
        self.steps
            .iter()
            .enumerate()
            .min_by(|a, b| (a.1 - v).abs().total_cmp(&(b.1 - v).abs()))
            .map(|(i, _)| i)
            .unwrap_or(0)
    }
}

const RATES_1: &[f64] = &[
    0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.25, 4.5, 4.75, 5.0, 5.25, 5.5,
];
const BATCHES: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0];
const KVS: &[f64] = &[4096.0, 6144.0, 8192.0, 12288.0, 16384.0, 24576.0, 32768.0];
const RATES_3: &[f64] = &[2.0, 4.0, 6.0, 8.0];
/// Seeds behind lesson 3's check.
const KV_CHECK_SEEDS: u64 = 8;
const BUDGETS: &[f64] = &[32.0, 64.0, 128.0, 256.0, 512.0, 1024.0];
const RATES_4: &[f64] = &[2.0, 4.0, 6.0, 8.0, 10.0];
const SIGMAS: &[f64] = &[0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5];
const RHOS: &[f64] = &[0.3, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95];

impl Lesson {
    pub const ALL: [Lesson; 10] = [
        Lesson::Utilisation,
        Lesson::Batching,
        Lesson::KvMemory,
        Lesson::HeadOfLine,
        Lesson::Variance,
        Lesson::LossDelay,
        Lesson::Burstiness,
        Lesson::Routing,
        Lesson::Caches,
        Lesson::Disagg,
    ];

    /// 1-based number, as in the URL (`lesson=2`).
    pub fn number(self) -> usize {
        Lesson::ALL.iter().position(|l| *l == self).unwrap_or(0) + 1
    }

    pub fn from_number(n: usize) -> Option<Lesson> {
        n.checked_sub(1).and_then(|i| Lesson::ALL.get(i).copied())
    }

    pub fn title(self) -> &'static str {
        match self {
            Lesson::Utilisation => "Utilisation and the hockey stick",
            Lesson::Batching => "Batching: more throughput, slower tokens",
            Lesson::KvMemory => "KV memory: say no, or make them wait",
            Lesson::HeadOfLine => "Head-of-line blocking and chunked prefill",
            Lesson::Variance => "Variance matters",
            Lesson::LossDelay => "Loss or delay",
            Lesson::Burstiness => "Burstiness",
            Lesson::Routing => "Routing over replicas",
            Lesson::Caches => "Caches: prefix hits and TTFT",
            Lesson::Disagg => "Disaggregation: a tandem queue",
        }
    }

    /// The explanation (2–4 sentences).
    pub fn text(self) -> &'static str {
        match self {
            Lesson::Utilisation => "A server that can finish μ requests per second is busy a fraction ρ = λ/μ of the time when λ requests arrive per second. Waiting time does not grow in proportion: in the textbook M/M/1 queue it scales like 1/(1 − ρ), flat at first and then shooting up as ρ approaches 1 — the hockey stick. Little's law L = λW ties the average number of requests in the server (L) to the arrival rate (λ) and the average time each one spends there (W); it holds for any stable system, whatever its policy.",
            Lesson::Batching => "A continuous-batching server decodes up to B requests in one iteration, and one iteration of B sequences costs much less than B iterations of one: the weights are read once per step. So throughput grows with B — but every request in the batch now waits for the whole step, so the time per output token (TPOT) grows too. Here each B is driven just past its own capacity, so the measured throughput is the most that B can deliver.",
            Lesson::KvMemory => "Every running request keeps its keys and values (KV) in GPU memory, and that memory (K tokens) is finite. A server can reserve a request's whole KV (prompt + output) when it arrives and refuse it if that does not fit — a loss system, whose blocking probability behaves like Erlang B — or allocate blocks as tokens are produced (paged, like vLLM), accepting everyone, queueing them, and preempting a request when memory runs out. Same memory, two very different failure modes.",
            Lesson::HeadOfLine => "With whole-prompt prefill (vLLM v0, Orca) a newly admitted long prompt takes over an iteration, and every request already decoding waits for it: its next token is late. That is head-of-line blocking, and it shows up as a long worst gap between tokens. Chunked prefill (vLLM v1, Sarathi) caps the tokens per iteration, runs the decodes first and feeds prompts in chunks, so gaps stay short — at the price of slower first tokens for long prompts.",
            Lesson::Variance => "Two workloads with the same mean service time do not wait the same. For a single server with Poisson arrivals the Pollaczek–Khinchine formula says the mean wait is W_q = ρ/(1 − ρ) · E[S] · (1 + c_s²)/2, where c_s² is the squared coefficient of variation of the service time: variability alone multiplies the wait. Here one request is served at a time (B = 1) with a 256-token prompt and an output whose mean stays at 128 tokens while its spread (lognormal σ) changes.",
            Lesson::LossDelay => loss_delay::TEXT,
            Lesson::Burstiness => burstiness::TEXT,
            Lesson::Routing => routing::TEXT,
            Lesson::Caches => caches::TEXT,
            Lesson::Disagg => disagg::TEXT,
        }
    }

    /// What to change and what to look for.
    pub fn try_this(self) -> &'static str {
        match self {
            Lesson::Utilisation => "Move λ from 1 to 3 req/s: the mean TTFT does not even double. Now go from 4 to 5, a smaller step: it grows about sixfold, and the p99 line climbs faster still. Then set λ = 5.5, past the capacity line: the queue grows for as long as requests keep coming, so TTFT depends on how long the run was. Watch L and λW agree at every rate.",
            Lesson::Batching => "Step B from 1 to 8: throughput rises almost sixfold while TPOT grows by about a third. Go on to 32: the gain shrinks and TPOT triples; at 64 throughput even falls, because every newcomer's prefill now stalls a bigger batch (compare TPOT with the bare decode step). Pick B for the TPOT you can afford.",
            Lesson::KvMemory => "Start at K = 8192: the reserve server refuses about one request in ten but answers the rest fast; the paged server accepts all of them and makes them wait over a second, with preemptions. Shrink K to 4096 and both failures grow; grow K to 16384 and both disappear. The Erlang B line, which treats every request as the same size, underestimates refusals: large requests are refused more often.",
            Lesson::HeadOfLine => "At 256-token chunks the worst gaps stay under the 50 ms stall line, while whole-prompt prefill gives most requests one gap of about 60 ms. Raise the chunk to 512 or 1024: a whole 512-token prompt fits in one iteration again and the long gaps come back (decoding first still shortens the p99). Lower it to 32: the gaps are a few ms — but the long prompts' TTFT more than doubles. Raise λ and watch the whole-prompt server's tail grow.",
            Lesson::Variance => "Set σ = 0 (every output exactly 128 tokens) and compare with σ = 1: at ρ = 0.8 the wait grows by the factor (1 + c_s²) the formula predicts. Each dot is the mean of 3 seeds, so it wanders around the line; the check at the chosen ρ uses 16 seeds and shows their 95 % interval, which the formula falls in. Move ρ to 0.95: the gap widens in absolute terms, and so does the interval — near saturation a run's mean wait depends much on its luck.",
            Lesson::LossDelay => loss_delay::TRY,
            Lesson::Burstiness => burstiness::TRY,
            Lesson::Routing => routing::TRY,
            Lesson::Caches => caches::TRY,
            Lesson::Disagg => disagg::TRY,
        }
    }

    /// The lesson's controls.
    pub fn controls(self) -> &'static [Control] {
        const C1: &[Control] = &[Control {
            key: "rate",
            label: "arrival rate λ [req/s]",
            steps: RATES_1,
            default: 3.0,
        }];
        const C2: &[Control] = &[Control {
            key: "B",
            label: "max batch B [requests]",
            steps: BATCHES,
            default: 8.0,
        }];
        const C3: &[Control] = &[
            Control {
                key: "K",
                label: "KV capacity K [tokens]",
                steps: KVS,
                default: 8192.0,
            },
            Control {
                key: "rate",
                label: "arrival rate λ [req/s]",
                steps: RATES_3,
                default: 6.0,
            },
        ];
        const C4: &[Control] = &[
            Control {
                key: "budget",
                label: "chunk (token budget) [tokens]",
                steps: BUDGETS,
                default: 256.0,
            },
            Control {
                key: "rate",
                label: "arrival rate λ [req/s]",
                steps: RATES_4,
                default: 6.0,
            },
        ];
        const C5: &[Control] = &[
            Control {
                key: "sigma",
                label: "output spread σ (0 = fixed)",
                steps: SIGMAS,
                default: 1.0,
            },
            Control {
                key: "rho",
                label: "utilisation ρ",
                steps: RHOS,
                default: 0.8,
            },
        ];
        match self {
            Lesson::Utilisation => C1,
            Lesson::Batching => C2,
            Lesson::KvMemory => C3,
            Lesson::HeadOfLine => C4,
            Lesson::Variance => C5,
            Lesson::LossDelay => loss_delay::CONTROLS,
            Lesson::Burstiness => burstiness::CONTROLS,
            Lesson::Routing => routing::CONTROLS,
            Lesson::Caches => caches::CONTROLS,
            Lesson::Disagg => disagg::CONTROLS,
        }
    }
}

/// Which lesson is open and its control values (`values[i]` belongs to `controls()[i]`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LessonState {
    pub lesson: Lesson,
    pub values: Vec<f64>,
}

impl Default for LessonState {
    fn default() -> Self {
        LessonState::new(Lesson::default())
    }
}

impl LessonState {
    /// A lesson at its default control values.
    pub fn new(lesson: Lesson) -> LessonState {
        LessonState {
            lesson,
            values: lesson.controls().iter().map(|c| c.default).collect(),
        }
    }

    /// A control's value by its URL key.
    pub fn get(&self, key: &str) -> Option<f64> {
        self.lesson
            .controls()
            .iter()
            .position(|c| c.key == key)
            .and_then(|i| self.values.get(i).copied())
    }

    /// Sets a control by its URL key, snapped to the nearest step; false if the key is
    /// not this lesson's or the value is not a number.
    pub fn set(&mut self, key: &str, v: &str) -> bool {
        let Some(i) = self.lesson.controls().iter().position(|c| c.key == key) else {
            return false;
        };
        match v.parse::<f64>().ok().filter(|x| x.is_finite()) {
            Some(x) => {
                let c = &self.lesson.controls()[i];
                self.values[i] = c.steps[c.nearest(x)];
                true
            }
            None => false,
        }
    }

    /// The URL query (without `?`): `view=learn&lesson=N` and this lesson's controls.
    pub fn to_query(&self) -> String {
        let mut q = format!("view=learn&lesson={}", self.lesson.number());
        for (c, v) in self.lesson.controls().iter().zip(&self.values) {
            q.push_str(&format!("&{}={}", c.key, fmt_num(*v)));
        }
        q
    }

    /// Reads `lesson=N` and the lesson's controls from a query (other keys, such as the
    /// calculator's, are ignored). Returns the state and the problems found.
    pub fn from_query(query: &str) -> (LessonState, Vec<String>) {
        let pairs: Vec<(&str, &str)> = query
            .trim_start_matches('?')
            .split('&')
            .filter(|s| !s.is_empty())
            .map(|kv| kv.split_once('=').unwrap_or((kv, "")))
            .collect();
        let mut errs = Vec::new();
        let lesson = match pairs.iter().find(|(k, _)| *k == "lesson") {
            Some((_, v)) => match v.parse::<usize>().ok().and_then(Lesson::from_number) {
                Some(l) => l,
                None => {
                    errs.push(format!("no lesson {v}; showing lesson 1"));
                    Lesson::default()
                }
            },
            None => Lesson::default(),
        };
        let mut s = LessonState::new(lesson);
        for (k, v) in pairs {
            if lesson.controls().iter().any(|c| c.key == k) && !s.set(k, v) {
                errs.push(format!("ignored URL parameter {k}={v}"));
            }
        }
        (s, errs)
    }
}

/// Whether a query asks for the Learn view (`view=learn`).
pub fn wants_learn(query: &str) -> bool {
    query
        .trim_start_matches('?')
        .split('&')
        .any(|kv| kv == "view=learn")
}

/// One number of a lesson's read-out.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Reading {
    pub label: String,
    pub value: String,
}

/// What a lesson's experiment produced.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LessonOutput {
    pub lesson: Lesson,
    pub panels: Vec<XyPanel>,
    pub readings: Vec<Reading>,
    /// A highlighted check (e.g. Little's law) and whether it passed.
    pub check: Option<(bool, String)>,
    /// Simulation runs done.
    pub runs: u32,
}

fn reading(label: impl Into<String>, value: impl Into<String>) -> Reading {
    Reading {
        label: label.into(),
        value: value.into(),
    }
}

fn series(name: &str, color: u8, points: Vec<(f64, f64)>, line: bool, dots: bool) -> Series {
    Series {
        name: name.into(),
        color,
        points,
        line,
        dots,
        ci: Vec::new(),
    }
}

pub(crate) fn sim(cfg: &SimConfig, runs: &mut u32) -> Result<SimReport, String> {
    *runs += 1;
    simulate(cfg).map_err(|e| e.to_string())
}

/// Seconds as ms text with 3 significant-ish digits.
fn ms(s: f64) -> String {
    let v = s * 1e3;
    if v >= 100.0 {
        format!("{v:.0} ms")
    } else {
        format!("{v:.1} ms")
    }
}

fn pct(x: f64) -> String {
    format!("{:.1} %", 100.0 * x)
}

/// Runs the open lesson's experiment.
///
/// # Errors
/// A readable message if the engine refuses a configuration.
pub fn run(state: &LessonState) -> Result<LessonOutput, String> {
    let v = |i: usize| state.values.get(i).copied().unwrap_or(0.0);
    let mut out = match state.lesson {
        Lesson::Utilisation => utilisation(v(0)),
        Lesson::Batching => batching(v(0) as u32),
        Lesson::KvMemory => kv_memory(v(0) as u64, v(1)),
        Lesson::HeadOfLine => head_of_line(v(0) as u32, v(1)),
        Lesson::Variance => variance::variance(v(0), v(1)),
        Lesson::LossDelay => loss_delay::run(v(0), v(1)),
        Lesson::Burstiness => burstiness::run(v(0), v(1)),
        Lesson::Routing => routing::run(v(0), v(1)),
        Lesson::Caches => caches::run(v(0), v(1)),
        Lesson::Disagg => disagg::run(v(0), v(1)),
    }?;
    out.lesson = state.lesson;
    Ok(out)
}

/// Lesson 1's server: the reference study's B = 8 continuous batching, paged KV large
/// enough never to bind (so the only limit is compute), vLLM run rules (drain).
fn utilisation_params() -> Params {
    Params {
        kv_mode: KvMode::Paged,
        kv_tokens: 65536,
        block_size: 16,
        reference_rules: false,
        horizon_s: 600.0,
        ..Params::default()
    }
}

/// Points of lesson 1's model curve.
const MODEL_POINTS: usize = 14;

fn utilisation(rate: f64) -> Result<LessonOutput, String> {
    let p = utilisation_params();
    let mut runs = 0;
    let mu = capacity_bounds(&p.sim_config(1.0, 0))
        .map_err(|e| e.to_string())?
        .compute_rps;
    let mut mean = Vec::new();
    let mut p99 = Vec::new();
    for &r in RATES_1.iter().filter(|r| **r < 0.985 * mu) {
        let rep = sim(&p.sim_config(r, 1), &mut runs)?;
        if let (Some(m), Some(q)) = (rep.summary.ttft.mean, rep.summary.ttft.p99) {
            mean.push((r, m));
            p99.push((r, q));
        }
    }
    let model: Vec<(f64, f64)> = (1..=MODEL_POINTS)
        .map(|i| mu * 0.96 * i as f64 / MODEL_POINTS as f64)
        .filter_map(|r| {
            predict(ModelKind::Batching, &p.sim_config(r, 0))
                .ok()
                .and_then(|x| x.metrics().map(|m| (r, m.ttft_mean_s)))
        })
        .collect();
    let chosen = sim(&p.sim_config(rate, 1), &mut runs)?;
    let st = &chosen.stats;
    let l = st.time_avg_in_system;
    let w = if st.departed > 0 {
        st.sojourn_sum_s / st.departed as f64
    } else {
        0.0
    };
    // The arrival rate this run actually saw (arrivals ÷ horizon), not the dial's λ: the
    // difference is Poisson noise, not a failure of the law.
    let lam = st.arrivals as f64 / p.horizon_s;
    let lw = lam * w;
    let gap = if l > 0.0 { (lw - l).abs() / l } else { 0.0 };
    let rho = rate / mu;
    let mut readings = vec![
        reading("capacity μ (compute bound)", format!("{mu:.2} req/s")),
        reading("utilisation ρ = λ/μ", format!("{rho:.2}")),
        reading(
            "mean TTFT",
            chosen
                .summary
                .ttft
                .mean
                .map(ms)
                .unwrap_or_else(|| "—".into()),
        ),
        reading(
            "p99 TTFT",
            chosen
                .summary
                .ttft
                .p99
                .map(ms)
                .unwrap_or_else(|| "—".into()),
        ),
        reading(
            "L: mean requests in the server (time average)",
            format!("{l:.2}"),
        ),
        reading("W: mean time in the server", format!("{w:.2} s")),
        reading(
            "λ measured (arrivals ÷ run length)",
            format!("{lam:.3} req/s"),
        ),
        reading("λW", format!("{lw:.2}")),
    ];
    if rho >= 1.0 {
        readings.push(reading(
            "note",
            "ρ ≥ 1: the queue grows for the whole run; W and L depend on how long it ran",
        ));
    }
    let check = Some((
        gap < 0.05,
        format!(
            "Little's law: L = {l:.2} and λW = {lam:.3} × {w:.2} s = {lw:.2} ({} apart){}. Both sides are measured on the same run and the law holds on every run, not on average, so the check needs no interval over seeds",
            pct(gap),
            if gap < 0.05 { " ✓" } else { "" }
        ),
    ));
    Ok(LessonOutput {
        panels: vec![XyPanel {
            x_desc: "arrival rate λ [req/s]".into(),
            y_desc: "TTFT [s]".into(),
            series: vec![
                series("mean TTFT (simulation)", 0, mean, true, true),
                series("p99 TTFT (simulation)", 6, p99, true, true),
                series("mean TTFT (kvqueue's model)", 1, model, true, false),
            ],
            vlines: vec![
                (format!("capacity μ = {mu:.2}"), mu),
                (format!("λ = {rate}"), rate),
            ],
            hlines: vec![],
            x_log2: false,
            y_cap: Some(3.0),
            x_from_zero: true,
            legend: Corner::UpperLeft,
        }],
        readings,
        check,
        runs,
        ..LessonOutput::default()
    })
}

/// Lesson 2's server: continuous batching, KV large enough never to bind, reference
/// run rules (cut at the horizon, which an overloaded run needs).
fn batching_params(b: u32) -> Params {
    Params {
        max_batch: b,
        kv_mode: KvMode::Paged,
        kv_tokens: 1 << 20,
        block_size: 16,
        reference_rules: true,
        horizon_s: 300.0,
        ..Params::default()
    }
}

fn batching(chosen_b: u32) -> Result<LessonOutput, String> {
    let mut runs = 0;
    let mut tput = Vec::new();
    let mut tpot = Vec::new();
    let mut step = Vec::new();
    let mut rows = Vec::new();
    for &b in BATCHES {
        let b = b as u32;
        let p = batching_params(b);
        let cfg0 = p.sim_config(1.0, 0);
        let mu = capacity_bounds(&cfg0)
            .map_err(|e| e.to_string())?
            .compute_rps;
        let rep = sim(&p.sim_config(1.25 * mu, 2), &mut runs)?;
        let tps = rep.summary.output_tokens_per_s;
        let tp = rep.summary.tpot.mean.unwrap_or(f64::NAN);
        tput.push((b as f64, tps));
        tpot.push((b as f64, tp * 1e3));
        step.push((b as f64, cfg0.cost.decode_step(b, 0) * 1e3));
        rows.push((b, tps, tp, rep.summary.throughput_rps));
    }
    let base = rows[0];
    let Some(&(b, tps, tp, rps)) = rows.iter().find(|r| r.0 == chosen_b) else {
        return Err(format!("B = {chosen_b} is not one of the lesson's steps"));
    };
    let readings = vec![
        reading(
            format!("throughput at B = {b}"),
            format!("{tps:.0} tokens/s ({rps:.2} req/s)"),
        ),
        reading("vs B = 1", format!("{:.1}× the throughput", tps / base.1)),
        reading(format!("mean TPOT at B = {b}"), ms(tp)),
        reading("vs B = 1", format!("{:.2}× the TPOT", tp / base.2)),
    ];
    Ok(LessonOutput {
        panels: vec![
            XyPanel {
                x_desc: "max batch B".into(),
                y_desc: "output tokens/s".into(),
                series: vec![series(
                    "throughput just past capacity (simulation)",
                    0,
                    tput,
                    true,
                    true,
                )],
                vlines: vec![(format!("B = {b}"), b as f64)],
                x_log2: true,
                ..XyPanel::default()
            },
            XyPanel {
                x_desc: "max batch B".into(),
                y_desc: "TPOT [ms]".into(),
                series: vec![
                    series("mean TPOT (simulation)", 6, tpot, true, true),
                    series(
                        "one decode step of B (cost model, no prefill stalls)",
                        1,
                        step,
                        true,
                        false,
                    ),
                ],
                vlines: vec![(format!("B = {b}"), b as f64)],
                x_log2: true,
                ..XyPanel::default()
            },
        ],
        readings,
        check: None,
        runs,
        ..LessonOutput::default()
    })
}

/// Lesson 3's server: continuous batching with B = 32, 16-token blocks, drain rules.
fn kv_params(k: u64, mode: KvMode) -> Params {
    Params {
        max_batch: 32,
        kv_tokens: k,
        block_size: 16,
        kv_mode: mode,
        reference_rules: false,
        horizon_s: 300.0,
        ..Params::default()
    }
}

/// Mean prompt + output tokens of a length distribution, by sampling it (seeded).
fn mean_kv_tokens(p: &Params) -> f64 {
    let reqs = p.workload(1.0).generate(7, 20_000.0).unwrap_or_default();
    let n = reqs.len().max(1) as f64;
    reqs.iter()
        .map(|r| (r.prompt + r.output) as f64)
        .sum::<f64>()
        / n
}

fn kv_memory(chosen_k: u64, rate: f64) -> Result<LessonOutput, String> {
    let mut runs = 0;
    let ekv = mean_kv_tokens(&kv_params(8192, KvMode::Reserve));
    let mut block = Vec::new();
    let mut erl = Vec::new();
    let mut ttft_res = Vec::new();
    let mut ttft_pag = Vec::new();
    let mut at = None;
    for &k in KVS {
        let k = k as u64;
        let res = sim(
            &kv_params(k, KvMode::Reserve).sim_config(rate, 3),
            &mut runs,
        )?;
        let pag = sim(&kv_params(k, KvMode::Paged).sim_config(rate, 3), &mut runs)?;
        let b = res.summary.blocking_probability;
        block.push((k as f64, b));
        // Erlang B: c = requests whose average KV fits, a = λ × mean holding time (the
        // reserve run's mean E2E: a reservation is held from admission to finish).
        let c = ((k as f64 / ekv).floor() as u32).clamp(1, 32);
        if let Some(e2e) = res.summary.e2e.mean {
            if let Ok(pb) = erlang_b(c, rate * e2e) {
                erl.push((k as f64, pb));
            }
        }
        if let Some(m) = res.summary.ttft.mean {
            ttft_res.push((k as f64, m));
        }
        if let Some(m) = pag.summary.ttft.mean {
            ttft_pag.push((k as f64, m));
        }
        if k == chosen_k {
            at = Some((res, pag, c));
        }
    }
    let (res, pag, c) = at.ok_or_else(|| format!("K = {chosen_k} is not one of the steps"))?;
    // The check: Erlang B against the reserve server's refusals over seeds, at the chosen K.
    let mut blocked = vec![Some(res.summary.blocking_probability)];
    let mut holds = vec![res.summary.e2e.mean];
    for seed in 4..4 + KV_CHECK_SEEDS - 1 {
        let r = sim(
            &kv_params(chosen_k, KvMode::Reserve).sim_config(rate, seed),
            &mut runs,
        )?;
        blocked.push(Some(r.summary.blocking_probability));
        holds.push(r.summary.e2e.mean);
    }
    let hold = engine::metrics::Aggregate::of(holds).mean.unwrap_or(0.0);
    let check = erlang_b(c, rate * hold).ok().map(|pb| {
        ci::Check {
            what: format!("reserve: refused at K = {chosen_k}"),
            sim: engine::metrics::Aggregate::of(blocked),
            formula: (format!("Erlang B (c = {c})"), pb),
            fmt: ci::pct2,
            why_not: Some("Erlang B counts servers, not tokens: it treats every request as the average size, while a large request needs more free KV than an average one and is refused more often; c is also rounded down to whole requests"),
        }
        .verdict()
    });
    let per_100 =
        |r: &SimReport| 100.0 * r.summary.preemptions as f64 / r.summary.arrivals.max(1) as f64;
    let readings = vec![
        reading(
            "mean KV per request (prompt + output)",
            format!("{ekv:.0} tokens → about {c} fit in K"),
        ),
        reading("reserve: refused", pct(res.summary.blocking_probability)),
        reading(
            "reserve: mean / p99 TTFT of the accepted",
            format!(
                "{} / {}",
                res.summary.ttft.mean.map(ms).unwrap_or_default(),
                res.summary.ttft.p99.map(ms).unwrap_or_default()
            ),
        ),
        reading("paged: refused", pct(pag.summary.blocking_probability)),
        reading(
            "paged: mean / p99 TTFT",
            format!(
                "{} / {}",
                pag.summary.ttft.mean.map(ms).unwrap_or_default(),
                pag.summary.ttft.p99.map(ms).unwrap_or_default()
            ),
        ),
        reading(
            "paged: preemptions per 100 requests",
            format!("{:.1}", per_100(&pag)),
        ),
    ];
    let kx = chosen_k as f64;
    Ok(LessonOutput {
        panels: vec![
            XyPanel {
                x_desc: "KV capacity K [tokens]".into(),
                y_desc: "reserve: P(refused)".into(),
                series: vec![
                    series("reserve: refused (simulation)", 0, block, false, true),
                    series(
                        "Erlang B (c = K / mean KV, a = λ · mean holding time)",
                        1,
                        erl,
                        true,
                        false,
                    ),
                ],
                vlines: vec![(format!("K = {chosen_k}"), kx)],
                x_log2: true,
                legend: Corner::UpperRight,
                ..XyPanel::default()
            },
            XyPanel {
                x_desc: "KV capacity K [tokens]".into(),
                y_desc: "mean TTFT [s]".into(),
                series: vec![
                    series("paged: mean TTFT (simulation)", 6, ttft_pag, true, true),
                    series(
                        "reserve: mean TTFT of the accepted (simulation)",
                        0,
                        ttft_res,
                        true,
                        true,
                    ),
                ],
                vlines: vec![(format!("K = {chosen_k}"), kx)],
                x_log2: true,
                y_cap: Some(10.0),
                legend: Corner::UpperRight,
                ..XyPanel::default()
            },
        ],
        readings,
        check,
        runs,
        ..LessonOutput::default()
    })
}

/// Lesson 4's server: the profiler interference preset (50 % short 32→64, 50 % long
/// 512→32, B = 16, paged K = 16384).
fn hol_params(policy: Policy, budget: u32) -> Params {
    let mut p = crate::params::Preset::Interference.params();
    p.policy = policy;
    p.token_budget = budget;
    p.horizon_s = 150.0;
    p
}

/// The empirical CDF of `v`, thinned to at most `max` vertices.
pub fn ecdf(v: &[f64], max: usize) -> Vec<(f64, f64)> {
    let mut s: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    let step = n.div_ceil(max.max(1)).max(1);
    let mut out: Vec<(f64, f64)> = s
        .iter()
        .enumerate()
        .filter(|(i, _)| i % step == 0 || i + 1 == n)
        .map(|(i, x)| (*x, (i + 1) as f64 / n as f64))
        .collect();
    out.dedup_by(|a, b| a.0 == b.0 && a.1 == b.1);
    out
}

fn quantile(v: &[f64], q: f64) -> Option<f64> {
    let mut s: Vec<f64> = v.to_vec();
    s.sort_by(f64::total_cmp);
    engine::metrics::percentile_type7(&s, q)
}

pub(crate) fn mean_of(it: impl Iterator<Item = f64>) -> Option<f64> {
    let (s, n) = it.fold((0.0, 0u32), |(s, n), x| (s + x, n + 1));
    (n > 0).then(|| s / n as f64)
}

fn head_of_line(budget: u32, rate: f64) -> Result<LessonOutput, String> {
    let mut runs = 0;
    let mut panels_series = Vec::new();
    let mut readings = Vec::new();
    for (policy, name, color) in [
        (Policy::Continuous, "whole-prompt prefill (continuous)", 6u8),
        (Policy::Chunked, "chunked prefill", 0u8),
    ] {
        let p = hol_params(policy, budget);
        let mut cfg = p.sim_config(rate, 4);
        cfg.keep_records = true;
        let rep = sim(&cfg, &mut runs)?;
        let done: Vec<&RequestRecord> = rep
            .records
            .iter()
            .filter(|r| r.outcome == Outcome::Completed && r.output_tokens > 1)
            .collect();
        let gaps: Vec<f64> = done.iter().map(|r| r.max_gap_s * 1e3).collect();
        let short = |long: bool| {
            mean_of(
                rep.records
                    .iter()
                    .filter(|r| r.outcome == Outcome::Completed && (r.prompt_tokens >= 256) == long)
                    .filter_map(|r| r.ttft()),
            )
        };
        let label = if policy == Policy::Chunked {
            format!("chunked ({budget}-token chunks)")
        } else {
            name.to_string()
        };
        readings.push(reading(
            format!("{label}: worst gap p50 / p99"),
            format!(
                "{:.0} / {:.0} ms",
                quantile(&gaps, 0.5).unwrap_or(f64::NAN),
                quantile(&gaps, 0.99).unwrap_or(f64::NAN)
            ),
        ));
        readings.push(reading(
            format!("{label}: stalls > 50 ms per request"),
            format!(
                "{:.2}",
                rep.summary.stalls as f64 / done.len().max(1) as f64
            ),
        ));
        readings.push(reading(
            format!("{label}: mean TTFT short / long prompts"),
            format!(
                "{} / {}",
                short(false).map(ms).unwrap_or_else(|| "—".into()),
                short(true).map(ms).unwrap_or_else(|| "—".into())
            ),
        ));
        panels_series.push(series(&label, color, ecdf(&gaps, 400), true, false));
    }
    Ok(LessonOutput {
        panels: vec![XyPanel {
            x_desc: "worst gap between two tokens of a request [ms]".into(),
            y_desc: "fraction of requests ≤ x".into(),
            series: panels_series,
            vlines: vec![("stall: 50 ms".into(), 50.0)],
            x_from_zero: true,
            legend: Corner::LowerRight,
            ..XyPanel::default()
        }],
        readings,
        check: None,
        runs,
        ..LessonOutput::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lesson_query_round_trips() {
        for lesson in Lesson::ALL {
            let mut s = LessonState::new(lesson);
            // Move every control to its last step.
            for (i, c) in lesson.controls().iter().enumerate() {
                s.values[i] = *c.steps.last().unwrap();
            }
            let q = s.to_query();
            assert!(q.starts_with(&format!("view=learn&lesson={}", lesson.number())));
            assert!(wants_learn(&format!("?{q}")));
            let (back, errs) = LessonState::from_query(&format!("?{q}"));
            assert!(errs.is_empty(), "{errs:?}");
            assert_eq!(back, s);
        }
    }

    #[test]
    fn lesson_query_snaps_and_reports() {
        let (s, errs) = LessonState::from_query("view=learn&lesson=2&B=7&rates=1,2");
        assert!(
            errs.is_empty(),
            "calculator keys are not the lesson's business: {errs:?}"
        );
        assert_eq!(s.lesson, Lesson::Batching);
        assert_eq!(s.get("B"), Some(8.0), "snapped to the nearest step");
        let (s, errs) = LessonState::from_query("view=learn&lesson=11");
        assert_eq!(s.lesson, Lesson::Utilisation);
        assert_eq!(errs.len(), 1);
        let (s, errs) = LessonState::from_query("lesson=5&sigma=abc&rho=0.9");
        assert_eq!(errs.len(), 1);
        assert_eq!(s.get("sigma"), Some(1.0));
        assert_eq!(s.get("rho"), Some(0.9));
        assert!(!wants_learn("?B=8&preset=reference"));
        assert_eq!(Lesson::from_number(0), None);
    }

    #[test]
    fn every_lesson_has_text_controls_and_defaults_on_a_step() {
        for l in Lesson::ALL {
            let n = l.text().matches(". ").count() + 1;
            assert!((2..=5).contains(&n), "{l:?}: {n} sentences");
            assert!(!l.try_this().is_empty());
            assert!((1..=2).contains(&l.controls().len()));
            for c in l.controls() {
                assert!(c.steps.contains(&c.default), "{l:?} {}", c.key);
            }
        }
    }

    #[test]
    fn ecdf_is_monotone_and_ends_at_one() {
        let v: Vec<f64> = (0..1000).map(|i| ((i * 37) % 1000) as f64).collect();
        let c = ecdf(&v, 100);
        assert!(c.len() <= 101);
        assert!(c.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1));
        assert_eq!(c.last().unwrap().1, 1.0);
        assert!(ecdf(&[], 10).is_empty());
    }

    fn value(out: &LessonOutput, prefix: &str) -> String {
        out.readings
            .iter()
            .find(|r| r.label.starts_with(prefix))
            .unwrap_or_else(|| panic!("no reading {prefix}: {:?}", out.readings))
            .value
            .clone()
    }

    fn num(s: &str) -> f64 {
        s.split(|c: char| !(c.is_ascii_digit() || c == '.'))
            .find(|t| !t.is_empty())
            .unwrap()
            .parse()
            .unwrap()
    }

    #[test]
    fn utilisation_lesson_shows_the_hockey_stick_and_littles_law() {
        let lo = run(&LessonState::new(Lesson::Utilisation)).unwrap();
        let mut s = LessonState::new(Lesson::Utilisation);
        s.set("rate", "4");
        let hi = run(&s).unwrap();
        for o in [&lo, &hi] {
            let (ok, text) = o.check.clone().unwrap();
            assert!(ok, "{text}");
        }
        let mean = &lo.panels[0].series[0].points;
        assert!(mean.len() >= 8, "{mean:?}");
        let (first, last) = (mean[0].1, mean.last().unwrap().1);
        assert!(last > 4.0 * first, "hockey stick: {first} → {last}");
        assert!(num(&value(&hi, "mean TTFT")) > num(&value(&lo, "mean TTFT")));
        assert!(!lo.panels[0].series[2].points.is_empty(), "model curve");
    }

    #[test]
    fn batching_lesson_trades_tpot_for_throughput() {
        let out = run(&LessonState::new(Lesson::Batching)).unwrap();
        let t = &out.panels[0].series[0].points;
        let tp = &out.panels[1].series[0].points;
        assert_eq!(t.len(), BATCHES.len());
        assert!(t[3].1 > 3.0 * t[0].1, "B = 8 vs 1: {t:?}");
        assert!(tp[3].1 > tp[0].1, "TPOT grows: {tp:?}");
        assert!(tp.last().unwrap().1 > tp[3].1);
    }

    #[test]
    fn kv_lesson_reserve_refuses_paged_waits() {
        let mut s = LessonState::new(Lesson::KvMemory);
        s.set("K", "4096");
        let small = run(&s).unwrap();
        s.set("K", "32768");
        let big = run(&s).unwrap();
        let refused = |o: &LessonOutput| num(&value(o, "reserve: refused"));
        assert!(refused(&small) > 5.0, "{:?}", small.readings);
        assert!(refused(&big) < refused(&small));
        assert_eq!(num(&value(&small, "paged: refused")), 0.0);
        let erl = &small.panels[0].series[1].points;
        let sim = &small.panels[0].series[0].points;
        assert_eq!(erl.len(), sim.len());
        assert!(
            (erl[0].1 - sim[0].1).abs() < 0.15,
            "Erlang B near: {erl:?} {sim:?}"
        );
    }

    #[test]
    fn chunked_prefill_shortens_the_worst_gap() {
        let mut s = LessonState::new(Lesson::HeadOfLine);
        s.set("budget", "64");
        let out = run(&s).unwrap();
        let p99 = |prefix: &str| {
            let v = value(&out, prefix);
            let parts: Vec<f64> = v
                .split(" / ")
                .map(|x| x.trim_end_matches(" ms").parse().unwrap())
                .collect();
            parts[1]
        };
        let whole = p99("whole-prompt prefill (continuous): worst gap");
        let chunked = p99("chunked (64-token chunks): worst gap");
        assert!(chunked < whole, "{:?}", out.readings);
    }

    #[test]
    #[ignore = "prints each lesson's readings and run time"]
    fn print_lessons() {
        let only = std::env::var("LESSON").ok();
        for l in Lesson::ALL {
            if only.as_deref().is_some_and(|o| o != l.number().to_string()) {
                continue;
            }
            let c = l.controls()[0];
            for step in c.steps {
                let mut s = LessonState::new(l);
                s.values[0] = *step;
                let t = std::time::Instant::now();
                let out = run(&s).unwrap();
                println!(
                    "{l:?} {}={step}: {} runs in {:?}",
                    c.key,
                    out.runs,
                    t.elapsed()
                );
                for r in &out.readings {
                    println!("  {}: {}", r.label, r.value);
                }
                if let Some(c) = &out.check {
                    println!("  check: {c:?}");
                }
            }
        }
    }
}
