//! `bench-native plan`: the cheapest fleet that meets an SLO at a given traffic
//! (`engine::plan`; docs/model.md, "Planning"). The analytical fleet model screens every
//! GPU × tensor-parallel degree × router; the simulator confirms the cheapest few.

use crate::args::limits::Scope;
use crate::args::{ArgError, ModelArgs, Point, SINGLE};
use anyhow::Context;
use clap::{Args, ValueEnum};
use engine::fleet::RouterKind;
use engine::plan::{self, Confirmed, Offer, PlanSpec, Screen, Screened};
use engine::plan_profile;
use serde_json::json;
use std::fmt::Write as _;
use std::time::Instant;

mod disagg;

/// Arguments of `plan`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    bench-native plan --preset vllm-v1 --rate 40 --model Qwen2.5-7B --slo-ttft 1 --slo-tpot 0.05\n  \
    bench-native plan --preset vllm-v1 --rate 40 --model Llama-3.1-8B --gpus A10G=1.2,L4,H100=4.5 --tp 1,2\n  \
    bench-native plan --preset vllm-v1 --rate 200 --model Llama-3.1-70B --gpus A100-80GB,H100 --tp 2,4,8 --format json\n  \
    bench-native plan --preset vllm-v1 --profile 8:5,8:40,8:20 --model Qwen2.5-7B --slo-ttft 0.5   # a diurnal curve\n  \
    bench-native plan --preset vllm-v1 --rate 40 --lengths fixed --prompt 2048 --output 256 --routers random,lor,p2c\n  \
    bench-native plan --preset vllm-v1 --rate 40 --model Qwen2.5-7B --disagg --link-gbps 100 --first-token decode   # + disaggregated splits\n  \
    bench-native plan --preset vllm-v1 --rate 20 --model Qwen2.5-7B --gpus A10G --tp 1 --disagg --link-gbps 25 --link-latency-ms 2 --finalists 1 --format csv   # a split simulated\n\n\
GPUs are roofline presets (A10G, L4, A100-40GB, A100-80GB, H100, H200) with editable default\n\
prices [$ per GPU-hour]: A10G 1.0, L4 0.8, A100-40GB 3.0, A100-80GB 4.0, H100 6.0, H200 8.0.\n\
Models: Qwen2.5-1.5B, Qwen2.5-7B, Llama-3.1-8B, Llama-3.1-70B, Mistral-7B.")]
pub struct PlanArgs {
    /// Offered traffic, the whole fleet's [req/s] (or --profile).
    #[arg(long, required_unless_present = "profile", conflicts_with = "profile")]
    pub rate: Option<f64>,
    /// A piecewise rate profile, `HOURS:RATE,…` (a diurnal curve: `8:5,8:40,8:20`): the
    /// fleet is planned for its peak, and each segment's count of that fleet is given
    /// with the price per period of a fleet resized per segment.
    #[arg(long, value_delimiter = ',', value_name = "HOURS:RATE")]
    pub profile: Vec<String>,
    /// The model, a roofline preset.
    #[arg(long, default_value = "Qwen2.5-7B")]
    pub model: String,
    /// Candidate GPUs, `NAME[=USD]` each, the price per GPU-hour (default: the preset's).
    #[arg(long, value_delimiter = ',', default_value = "A10G,L4,A100-80GB,H100")]
    pub gpus: Vec<String>,
    /// Tensor-parallel degrees to consider.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4")]
    pub tp: Vec<u32>,
    /// Routers to consider (the names `simulate --router` takes).
    #[arg(long, value_delimiter = ',', default_value = "least_outstanding")]
    pub routers: Vec<String>,
    /// Fraction of requests that must meet TTFT ≤ --slo-ttft and TPOT ≤ --slo-tpot.
    #[arg(long, default_value_t = 0.9)]
    pub attainment: f64,
    /// Fraction of each GPU's memory the server uses for weights and KV.
    #[arg(long, default_value_t = 0.9)]
    pub mem_util: f64,
    /// Most replicas of one fleet.
    #[arg(long, default_value_t = 1024)]
    pub max_replicas: u32,
    /// Batch width B of every replica (max_num_seqs).
    #[arg(long, default_value_t = 128)]
    pub batch: u32,
    /// How many of the cheapest fleets the simulator confirms (0: the model's answer only).
    #[arg(long, default_value_t = 3)]
    pub finalists: usize,
    /// Seeds per simulated fleet.
    #[arg(long, default_value_t = 3)]
    pub seeds: u32,
    /// Replicas past each family's smallest count considered for the Pareto set.
    #[arg(long, default_value_t = 4)]
    pub pareto_extra: u32,
    #[command(flatten)]
    pub workload: ModelArgs,
    /// table, csv (the Pareto set and the confirmed fleets) or json.
    #[arg(long, value_enum, default_value = "table")]
    pub format: PlanFormat,
    /// Also plan disaggregated fleets: each family's cheapest split into a prefill and a
    /// decode pool by the tandem model, the cheapest --finalists of them confirmed by the
    /// disaggregated simulator over --seeds.
    #[arg(long)]
    pub disagg: bool,
    #[command(flatten)]
    pub link: crate::args::LinkArgs,
}

/// How `plan` prints.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum PlanFormat {
    #[default]
    Table,
    Csv,
    Json,
}

/// `HOURS:RATE` segments.
fn profile(items: &[String]) -> Result<Vec<(f64, f64)>, ArgError> {
    let bad = |s: &str| {
        ArgError::Conflict(format!(
            "--profile: '{s}' is not HOURS:RATE with finite hours > 0 and a finite rate > 0"
        ))
    };
    let segs = items
        .iter()
        .map(|s| {
            let (h, r) = s.split_once(':').ok_or_else(|| bad(s))?;
            let h: f64 = h.trim().parse().map_err(|_| bad(s))?;
            let r: f64 = r.trim().parse().map_err(|_| bad(s))?;
            Ok((h, r))
        })
        .collect::<Result<Vec<_>, ArgError>>()?;
    match segs
        .iter()
        .position(|seg| plan_profile::check(&[*seg]).is_err())
    {
        Some(i) => Err(bad(&items[i])),
        None => Ok(segs),
    }
}

fn offers(items: &[String]) -> Result<Vec<Offer>, ArgError> {
    items
        .iter()
        .map(|s| {
            let (name, price) = match s.split_once('=') {
                Some((n, p)) => {
                    let p: f64 = p.trim().parse().map_err(|_| {
                        ArgError::Conflict(format!(
                            "--gpus: '{s}': the price after '=' is not a number"
                        ))
                    })?;
                    (n.trim(), Some(p))
                }
                None => (s.trim(), None),
            };
            let price = match price.or_else(|| plan::default_price(name)) {
                Some(p) => p,
                None => {
                    return Err(ArgError::Conflict(format!(
                        "--gpus: '{name}' has no default price; give one as {name}=USD"
                    )))
                }
            };
            Ok(Offer {
                gpu: name.to_string(),
                usd_per_gpu_hour: price,
            })
        })
        .collect()
}

impl PlanArgs {
    /// The plan's inputs at `rate`.
    ///
    /// # Errors
    /// Any flag out of range, `--cost` (each candidate's cost is its GPU's), a router or
    /// GPU the planner does not know.
    pub fn spec(&self, rate: f64) -> anyhow::Result<PlanSpec> {
        if self.workload.cost.is_some() {
            return Err(ArgError::Conflict(
                "--cost does not apply to plan: each candidate's cost is the roofline of --model on its GPUs"
                    .into(),
            )
            .into());
        }
        if self.seeds == 0 && self.finalists > 0 {
            return Err(ArgError::range("--seeds", "at least 1 (or --finalists 0)", 0).into());
        }
        let point = Point {
            rate,
            batch: self.batch,
            kv: 1 << 20,
            seed: 0,
        };
        let base = self.workload.config(point, SINGLE, Scope::Run)?;
        let routers = self
            .routers
            .iter()
            .map(|r| {
                RouterKind::parse(r).ok_or_else(|| {
                    ArgError::Conflict(format!(
                        "--routers: unknown router '{r}': one of round_robin (rr), random, \
                         least_outstanding (lor), least_tokens (jsq), power_of_D (p2c), kv_aware"
                    ))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(PlanSpec {
            base,
            model: self.model.clone(),
            offers: offers(&self.gpus)?,
            tps: self.tp.clone(),
            routers,
            attainment: self.attainment,
            mem_util: self.mem_util,
            max_replicas: self.max_replicas,
        })
    }
}

/// Everything one plan found.
struct Answer {
    spec: PlanSpec,
    screen: Screen,
    front: Vec<Screened>,
    confirmed: Vec<Confirmed>,
    screen_s: f64,
    confirm_s: f64,
}

fn answer(a: &PlanArgs, rate: f64) -> anyhow::Result<Answer> {
    let spec = a.spec(rate)?;
    let t = Instant::now();
    let screen = plan::screen(&spec)?;
    let front = plan::pareto(&spec, &screen, a.pareto_extra)?;
    let screen_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let seeds: Vec<u64> = (1..=a.seeds as u64).collect();
    let mut confirmed = screen
        .feasible
        .iter()
        .take(a.finalists)
        .map(|s| plan::confirm(&spec, s, &seeds))
        .collect::<Result<Vec<_>, _>>()
        .context("confirming by simulation")?;
    // The simulator's prices decide: those that meet the SLO, cheapest first.
    plan::by_simulation(&mut confirmed);
    Ok(Answer {
        spec,
        screen,
        front,
        confirmed,
        screen_s,
        confirm_s: t.elapsed().as_secs_f64(),
    })
}

fn ms(x: f64) -> String {
    if x < 1.0 {
        format!("{:.0} ms", x * 1e3)
    } else {
        format!("{x:.2} s")
    }
}

fn agg_ms(a: &engine::metrics::Aggregate) -> String {
    match (a.mean, a.ci95) {
        (Some(m), Some(h)) => format!("{} ± {}", ms(m), ms(h)),
        (Some(m), None) => ms(m),
        _ => "–".into(),
    }
}

fn pct(a: &engine::metrics::Aggregate) -> String {
    a.mean.map_or("–".into(), |m| format!("{:.1} %", 100.0 * m))
}

fn fleet_name(s: &Screened) -> String {
    format!("{} × {}×{} ({})", s.replicas, s.tp, s.gpu, s.router.name())
}

/// The SLO asked for: "90 % of requests within TTFT 500 ms and TPOT 50 ms at 20 req/s".
fn goal(spec: &PlanSpec) -> String {
    let slo = &spec.base.metrics;
    format!(
        "{:.0} % of requests within TTFT {} and TPOT {} at {} req/s",
        100.0 * spec.attainment,
        ms(slo.slo_ttft_s),
        ms(slo.slo_tpot_s),
        crate::args::num(spec.base.workload.rate())
    )
}

/// The answer in one sentence.
fn sentence(ans: &Answer) -> String {
    let goal = goal(&ans.spec);
    match (ans.confirmed.first(), ans.screen.best()) {
        (Some(c), _) if c.meets => format!(
            "Cheapest fleet for {goal}: {} replicas of {}×{} ({}), ${:.2}/h, confirmed by simulation ({} met; {} replicas: {}).",
            c.replicas,
            c.screened.tp,
            c.screened.gpu,
            c.screened.router.name(),
            c.usd_per_hour,
            pct(&c.at.attainment),
            c.replicas.saturating_sub(1),
            c.below.as_ref().map_or("–".into(), |b| format!("{} met", pct(&b.attainment)))
        ),
        (Some(c), _) => format!(
            "No confirmed fleet for {goal}: the simulator gives {} at {} replicas of {}×{}.",
            pct(&c.at.attainment),
            c.replicas,
            c.screened.tp,
            c.screened.gpu
        ),
        (None, Some(s)) => format!(
            "Cheapest fleet for {goal} by the model: {}, ${:.2}/h (not simulated).",
            fleet_name(s),
            s.usd_per_hour
        ),
        (None, None) => {
            let why = ans
                .screen
                .infeasible
                .first()
                .map_or(String::new(), |i| format!(" The first candidate, {}×{}: {}.", i.tp, i.gpu, i.why));
            format!("No candidate meets {goal}.{why}")
        }
    }
}

fn table(ans: &Answer) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "{}\n", sentence(ans));
    let _ = writeln!(
        o,
        "Confirmed by simulation ({} seeds each; the model's count beside it):",
        ans.confirmed.first().map_or(0, |c| c.at.attainment.n)
    );
    let _ = writeln!(
        o,
        "{:<34} {:>9} {:>8} {:>10} {:>18} {:>18} {:>16} {:>22}",
        "fleet",
        "$/h",
        "model N",
        "sim N",
        "SLO met (sim)",
        "p99 TTFT (sim)",
        "p99 TTFT (model)",
        "N − 1 (sim)"
    );
    for c in &ans.confirmed {
        let name = format!(
            "{}×{} ({})",
            c.screened.tp,
            c.screened.gpu,
            c.screened.router.name()
        );
        let _ = writeln!(
            o,
            "{:<34} {:>9.2} {:>8} {:>10} {:>18} {:>18} {:>16} {:>22}",
            name,
            c.usd_per_hour,
            c.screened.replicas,
            format!("{}{}", c.replicas, if c.meets { "" } else { " (miss)" }),
            pct(&c.at.attainment),
            agg_ms(&c.at.ttft_p99_s),
            ms(c.screened.predicted.ttft_p99_s),
            c.below
                .as_ref()
                .map_or("–".into(), |b| format!("{} met", pct(&b.attainment)))
        );
    }
    let _ = writeln!(
        o,
        "\nScreened by the analytical fleet model ({} fleets evaluated, cheapest first):",
        ans.screen.evaluated
    );
    let _ = writeln!(
        o,
        "{:<34} {:>9} {:>9} {:>10} {:>10} {:>10} {:>15} {:>9} {:>14}",
        "fleet",
        "$/h",
        "SLO met",
        "mean TTFT",
        "p99 TTFT",
        "mean TPOT",
        "binding limit",
        "headroom",
        "N − 1 met"
    );
    for s in &ans.screen.feasible {
        let p = &s.predicted;
        let _ = writeln!(
            o,
            "{:<34} {:>9.2} {:>8.1}% {:>10} {:>10} {:>10} {:>15} {:>8.0}% {:>14}",
            fleet_name(s),
            s.usd_per_hour,
            100.0 * p.slo_attainment,
            ms(p.ttft_mean_s),
            ms(p.ttft_p99_s),
            ms(p.tpot_mean_s),
            s.binding.as_str(),
            100.0 * s.headroom,
            s.attainment_below.map_or(
                if s.replicas == 1 {
                    "–".to_string()
                } else {
                    "unstable".to_string()
                },
                |a| format!("{:.1} %", 100.0 * a)
            )
        );
    }
    if !ans.screen.infeasible.is_empty() {
        let _ = writeln!(o, "\nPassed over:");
        for i in &ans.screen.infeasible {
            let _ = writeln!(o, "  {}×{} ({}): {}", i.tp, i.gpu, i.router.name(), i.why);
        }
    }
    let _ = writeln!(o, "\nPareto set, price against p99 TTFT (model):");
    for s in &ans.front {
        let _ = writeln!(
            o,
            "  ${:>9.2}/h  p99 TTFT {:>8}  {}",
            s.usd_per_hour,
            ms(s.predicted.ttft_p99_s),
            fleet_name(s)
        );
    }
    o
}

/// One row of `plan`'s CSV, in the header's columns ([`csv`]); blank where unknown.
pub(super) struct CsvRow<'a> {
    pub kind: &'a str,
    pub gpu: &'a str,
    pub tp: u32,
    pub router: String,
    pub replicas: u32,
    pub usd_per_hour: f64,
    /// SLO attainment, mean TTFT, p99 TTFT, mean TPOT.
    pub figures: [Option<f64>; 4],
    pub binding: &'a str,
    pub headroom: Option<f64>,
    /// A disaggregated fleet's prefill and decode replicas.
    pub split: Option<(u32, u32)>,
}

/// A simulated fleet's mean attainment, mean TTFT, p99 TTFT and mean TPOT over the seeds,
/// as [`CsvRow::figures`].
pub(super) fn sim_means(at: &engine::plan::SimFigures) -> [Option<f64>; 4] {
    [at.attainment, at.ttft_mean_s, at.ttft_p99_s, at.tpot_mean_s].map(|x| x.mean)
}

impl CsvRow<'_> {
    pub(super) fn write(&self, o: &mut String) {
        let opt = |x: Option<f64>| x.map_or(String::new(), |v| v.to_string());
        let [a, tm, tp99, tpot] = self.figures.map(opt);
        let (prefill, decode) = self.split.map_or((String::new(), String::new()), |(p, d)| {
            (p.to_string(), d.to_string())
        });
        let _ = writeln!(
            o,
            "{},{},{},{},{},{},{a},{tm},{tp99},{tpot},{},{},{prefill},{decode}",
            self.kind,
            self.gpu,
            self.tp,
            self.router,
            self.replicas,
            self.usd_per_hour,
            self.binding,
            opt(self.headroom),
        );
    }
}

fn csv(ans: &Answer) -> String {
    let mut o = String::from("kind,gpu,tp,router,replicas,usd_per_hour,slo_attainment,ttft_mean_s,ttft_p99_s,tpot_mean_s,binding,headroom,prefill,decode\n");
    for s in &ans.front {
        let p = &s.predicted;
        CsvRow {
            kind: "pareto",
            gpu: &s.gpu,
            tp: s.tp,
            router: s.router.name(),
            replicas: s.replicas,
            usd_per_hour: s.usd_per_hour,
            figures: [p.slo_attainment, p.ttft_mean_s, p.ttft_p99_s, p.tpot_mean_s].map(Some),
            binding: s.binding.as_str(),
            headroom: Some(s.headroom),
            split: None,
        }
        .write(&mut o);
    }
    for c in &ans.confirmed {
        let s = &c.screened;
        CsvRow {
            kind: "simulated",
            gpu: &s.gpu,
            tp: s.tp,
            router: s.router.name(),
            replicas: c.replicas,
            usd_per_hour: c.usd_per_hour,
            figures: sim_means(&c.at),
            binding: s.binding.as_str(),
            headroom: None,
            split: None,
        }
        .write(&mut o);
    }
    o
}

fn json_of(ans: &Answer) -> serde_json::Value {
    json!({
        "answer": sentence(ans),
        "rate_rps": ans.spec.base.workload.rate(),
        "slo": {"ttft_s": ans.spec.base.metrics.slo_ttft_s, "tpot_s": ans.spec.base.metrics.slo_tpot_s, "attainment": ans.spec.attainment},
        "confirmed": ans.confirmed,
        "screened": ans.screen.feasible,
        "infeasible": ans.screen.infeasible,
        "pareto": ans.front,
        "evaluated": ans.screen.evaluated,
        "screen_s": ans.screen_s,
        "confirm_s": ans.confirm_s,
    })
}

/// Runs `plan`.
///
/// # Errors
/// Bad flags, a model error, or a fleet the simulator refuses.
pub fn execute(a: PlanArgs) -> anyhow::Result<()> {
    let segments = if a.profile.is_empty() {
        vec![(24.0, a.rate.unwrap_or(0.0))]
    } else {
        profile(&a.profile)?
    };
    let peak = plan_profile::peak(&segments);
    eprintln!(
        "planning for {} req/s: screening, then simulating the {} cheapest over {} seeds…",
        crate::args::num(peak),
        a.finalists,
        a.seeds
    );
    let settings = disagg::settings(&a)?;
    let ans = answer(&a, peak)?;
    let disagg = disagg::answer(settings, &ans.spec, &a)?;
    match a.format {
        PlanFormat::Table => {
            print!("{}", table(&ans));
            if let Some(d) = &disagg {
                print!("{}", d.table(&ans.spec));
            }
        }
        PlanFormat::Csv => {
            print!("{}", csv(&ans));
            if let Some(d) = &disagg {
                print!("{}", d.csv());
            }
        }
        PlanFormat::Json if a.profile.is_empty() => {
            let mut v = json_of(&ans);
            if let Some(d) = &disagg {
                v["disaggregated"] = d.json(&ans.spec);
            }
            println!("{}", serde_json::to_string_pretty(&v)?)
        }
        PlanFormat::Json => {}
    }
    if !a.profile.is_empty() {
        // The peak's cheapest family at each segment's rate.
        let Some(best) = ans.screen.best() else {
            return Ok(());
        };
        let per_replica = best.usd_per_hour / best.replicas as f64;
        let peak_n = ans
            .confirmed
            .first()
            .filter(|c| c.meets)
            .map_or(best.replicas, |c| c.replicas);
        let segs = plan_profile::segments(&ans.spec, best, &segments)?;
        let c = plan_profile::cost(&segs, per_replica, peak_n);
        match a.format {
            PlanFormat::Json => {
                let mut v = json_of(&ans);
                if let Some(d) = &disagg {
                    v["disaggregated"] = d.json(&ans.spec);
                }
                v["profile"] = json!({"segments": segs, "fixed_usd": c.fixed_usd, "resized_usd": c.resized_usd, "hours": c.hours});
                println!("{}", serde_json::to_string_pretty(&v)?);
            }
            _ => {
                println!(
                    "\nProfile, {} of the peak's fleet type per segment (model):",
                    fleet_name(best).split_once(" × ").map_or("", |x| x.1)
                );
                for seg in &segs {
                    println!(
                        "  {:>6} h at {:>8} req/s: {} replicas",
                        seg.hours,
                        seg.rate_rps,
                        seg.replicas.map_or("null".to_string(), |n| n.to_string())
                    );
                }
                println!(
                    "  over {} h: fixed at the peak's {peak_n} replicas ${:.2}; resized per segment ${:.2}",
                    c.hours, c.fixed_usd, c.resized_usd
                );
            }
        }
    }
    // The screen decides every replica count of every family (the attainment grows with
    // the count), evaluating only the counts its search visits.
    let families = ans.screen.feasible.len() + ans.screen.infeasible.len();
    eprintln!(
        "screened {families} families, {} candidate fleets of 1 to {} replicas, by evaluating {} fleets in {:.1} ms ({:.2} ms each); simulated {} finalists in {:.2} s",
        families as u64 * a.max_replicas as u64,
        a.max_replicas,
        ans.screen.evaluated,
        ans.screen_s * 1e3,
        ans.screen_s * 1e3 / ans.screen.evaluated.max(1) as f64,
        ans.confirmed.len(),
        ans.confirm_s
    );
    Ok(())
}
