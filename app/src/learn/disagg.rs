//! Lesson 10, "Disaggregation": the same traffic on the same four GPUs, aggregated (four
//! replicas that each prefill and decode, behind a least-outstanding router) against
//! disaggregated (P prefill replicas, a KV transfer, 4 − P decode replicas). The tandem
//! model ([`engine::analytic::predict_disagg`]) is checked against the simulation
//! ([`engine::disagg`]) on screen; the aggregated fleet's model is
//! [`engine::analytic::predict_fleet`] (docs/model.md, Disaggregated prefill and decode).

use super::ci::{ms, Check};
use super::{fmt_num, reading, series, Control, LessonOutput};
use crate::chart::{Corner, Series, XyPanel};
use crate::params::{Cost, Lengths, Params};
use engine::analytic::{capacity_bounds, predict_disagg, predict_fleet, ModelKind};
use engine::config::{KvMode, Policy, SimConfig};
use engine::disagg::{simulate_disagg, DisaggConfig, FirstTokenFrom, KvGeometry, Link};
use engine::fleet::{simulate_fleet, FleetConfig, RouterKind};
use engine::metrics::Aggregate;

pub(super) const TEXT: &str = "A request's prefill is one large compute-bound step and its decode many small memory-bound ones, and a server that does both puts them in the same iterations: every prompt chunk it prefills makes the decodes beside it wait, so the time per output token (TPOT) grows with the prompts and the load. A disaggregated deployment splits the GPUs into a prefill pool and a decode pool and sends each prompt's KV from one to the other over a link, so a decode never shares an iteration with a prompt. It is a tandem queue, and the tandem model adds its stages up: TTFT = prefill pool (wait + prefill) + transfer (link wait + bytes ÷ bandwidth + latency) + decode pool (wait + first step). Here four A10G GPUs serve Qwen2.5-1.5B (chunked prefill, B = 32, lognormal prompts around the chosen median, outputs around 128 tokens, a 25 Gb/s link), aggregated as four replicas or split P:(4 − P) at the split the tandem model gives the most capacity.";

pub(super) const TRY: &str = "At 2048-token prompts and load 0.5 the aggregated fleet's TPOT is about a quarter above the decode pool's; push the load to 0.8 and it doubles, while the decode pool's grows only with its own batch. The price is TTFT: the transfer, and pools that cannot lend each other capacity — a 3:1 split has less room than four replicas that each do both, its prefill queue cannot borrow the decode GPU, and at 0.8 the disaggregated TTFT climbs well above the aggregated one. Now shorten the prompts to 256 tokens: the interference almost vanishes, the best split reaches only 70 % of the aggregated capacity, and at load 0.8 it is overloaded. Disaggregation pays for long prompts and a strict TPOT target, not for everything.";

/// Load of the aggregated fleet: λ over its capacity (four replicas' compute bound).
const LOADS: &[f64] = &[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8];
/// Prompt length [tokens].
const PROMPTS: &[f64] = &[256.0, 512.0, 1024.0, 2048.0, 4096.0];

pub(super) const CONTROLS: &[Control] = &[
    Control {
        key: "load",
        label: "load: λ over the aggregated fleet's capacity",
        steps: LOADS,
        default: 0.5,
    },
    Control {
        key: "prompt",
        label: "prompt length [tokens] (outputs: 128)",
        steps: PROMPTS,
        default: 2048.0,
    },
];

/// GPUs, in either deployment.
const GPUS: u32 = 4;
const OUTPUT: u32 = 128;
/// Chunked prefill's token budget per iteration [tokens].
const BUDGET: u32 = 2048;
/// Requests in each run (the horizon is this many mean gaps).
const REQUESTS: f64 = 500.0;
const CURVE_SEEDS: u64 = 3;
const CHECK_SEEDS: u64 = 10;
/// The link from each prefill replica [B/s] (25 Gb/s) and its latency [s].
const LINK_BPS: f64 = 25e9 / 8.0;
const LINK_LATENCY_S: f64 = 1e-3;

/// One GPU's server: A10G × Qwen2.5-1.5B roofline, chunked prefill (512-token budget),
/// B = 32, paged KV (the GPU's memory), fixed lengths `prompt` → 128, drained runs.
pub(super) fn disagg_params(prompt: u32) -> Params {
    let mut p = Params {
        lengths: Lengths::Lognormal,
        prompt_median: f64::from(prompt),
        prompt_sigma: 0.55,
        output_median: f64::from(OUTPUT),
        output_sigma: 0.7,
        policy: Policy::Chunked,
        max_batch: 32,
        token_budget: BUDGET,
        kv_mode: KvMode::Paged,
        block_size: 16,
        cost: Cost::Roofline,
        gpu: "A10G".into(),
        llm: "Qwen2.5-1.5B".into(),
        reference_rules: false,
        ..Params::default()
    };
    p.apply_roofline_kv();
    p
}

/// One replica's capacity [req/s] (its compute bound).
fn replica_capacity(p: &Params) -> Result<f64, String> {
    capacity_bounds(&p.sim_config(1.0, 0))
        .map(|b| b.compute_rps)
        .map_err(|e| e.to_string())
}

/// The arrival rate at `load` of the aggregated fleet's capacity [req/s] (0 if the
/// server has none).
pub(super) fn fleet_rate(p: &Params, load: f64) -> f64 {
    load * f64::from(GPUS) * replica_capacity(p).unwrap_or(0.0)
}

/// The server's configuration at `rate` over about [`REQUESTS`] requests.
fn one(p: &Params, rate: f64, seed: u64) -> SimConfig {
    let mut cfg = p.sim_config(rate, seed);
    cfg.horizon_s = REQUESTS / rate;
    cfg
}

fn aggregated(p: &Params, rate: f64, seed: u64) -> FleetConfig {
    FleetConfig::uniform(one(p, rate, seed), GPUS, RouterKind::LeastOutstanding)
}

fn link(cfg: &SimConfig) -> Result<Link, String> {
    Ok(Link {
        bandwidth_bytes_per_s: LINK_BPS,
        latency_s: LINK_LATENCY_S,
        geometry: KvGeometry::of_cost(&cfg.cost).ok_or("the lesson's cost is not a roofline")?,
    })
}

fn disaggregated(p: &Params, prefill: u32, rate: f64, seed: u64) -> Result<DisaggConfig, String> {
    let cfg = one(p, rate, seed);
    let l = link(&cfg)?;
    Ok(DisaggConfig::uniform(
        cfg,
        prefill,
        GPUS - prefill,
        RouterKind::LeastOutstanding,
        l,
        FirstTokenFrom::Decode,
    ))
}

/// The split with the largest capacity by the tandem model (its prefill replicas) and
/// that capacity [req/s]: the rate at which its busiest pool or link reaches ρ = 1.
fn best_split(p: &Params) -> Result<(u32, f64), String> {
    let mut best = None;
    for pf in 1..GPUS {
        let m = predict_disagg(&disaggregated(p, pf, 1.0, 0)?).map_err(|e| e.to_string())?;
        let rho_p = m.prefill.metrics().map_or(f64::INFINITY, |x| x.utilisation);
        let rho = rho_p.max(m.decode.rho).max(m.link_utilisation);
        let cap = 1.0 / rho;
        if best.is_none_or(|(_, c)| cap > c) {
            best = Some((pf, cap));
        }
    }
    best.ok_or_else(|| "no split".into())
}

/// Mean TTFT and mean TPOT [s] of one seed, aggregated or disaggregated.
type Pair = (Option<f64>, Option<f64>);

fn run_aggregated(p: &Params, rate: f64, seed: u64, runs: &mut u32) -> Result<Pair, String> {
    *runs += 1;
    let r = simulate_fleet(&aggregated(p, rate, seed)).map_err(|e| e.to_string())?;
    Ok((r.summary.ttft.mean, r.summary.tpot.mean))
}

fn run_disaggregated(
    p: &Params,
    prefill: u32,
    rate: f64,
    seed: u64,
    runs: &mut u32,
) -> Result<Pair, String> {
    *runs += 1;
    let r = simulate_disagg(&disaggregated(p, prefill, rate, seed)?).map_err(|e| e.to_string())?;
    Ok((r.summary.ttft.mean, r.summary.tpot.mean))
}

/// A simulated series with its intervals: (x, aggregate) → dots with whiskers.
fn dots(name: &str, color: u8, pts: &[(f64, Aggregate)], scale: f64) -> Series {
    let kept: Vec<&(f64, Aggregate)> = pts.iter().filter(|(_, a)| a.mean.is_some()).collect();
    Series {
        ci: kept
            .iter()
            .map(|(_, a)| a.ci95.unwrap_or(0.0) * scale)
            .collect(),
        ..series(
            name,
            color,
            kept.iter()
                .map(|(x, a)| (*x, a.mean.unwrap_or(0.0) * scale))
                .collect(),
            false,
            true,
        )
    }
}

pub(super) fn run(load: f64, prompt: f64) -> Result<LessonOutput, String> {
    let p = disagg_params(prompt.round() as u32);
    let mut runs = 0;
    let agg_cap = f64::from(GPUS) * replica_capacity(&p)?;
    let (pf, dis_cap) = best_split(&p)?;
    let dec = GPUS - pf;
    let (mut a_ttft, mut a_tpot, mut d_ttft, mut d_tpot) = (vec![], vec![], vec![], vec![]);
    let (mut m_a_ttft, mut m_a_tpot, mut m_d_ttft, mut m_d_tpot) = (vec![], vec![], vec![], vec![]);
    let mut chosen = None;
    for &l in LOADS {
        let rate = l * agg_cap;
        let seeds = if l == load { CHECK_SEEDS } else { CURVE_SEEDS };
        let (mut at, mut ap, mut dt, mut dp) = (vec![], vec![], vec![], vec![]);
        for seed in 0..seeds {
            let (t, q) = run_aggregated(&p, rate, seed, &mut runs)?;
            at.push(t);
            ap.push(q);
            let (t, q) = run_disaggregated(&p, pf, rate, seed, &mut runs)?;
            dt.push(t);
            dp.push(q);
        }
        let agg = (Aggregate::of(at), Aggregate::of(ap));
        let dis = (Aggregate::of(dt), Aggregate::of(dp));
        a_ttft.push((l, agg.0));
        a_tpot.push((l, agg.1));
        d_ttft.push((l, dis.0));
        d_tpot.push((l, dis.1));
        let fleet_model = predict_fleet(ModelKind::Batching, &aggregated(&p, rate, 0))
            .ok()
            .and_then(|m| m.fleet.metrics().copied());
        if let Some(m) = fleet_model {
            m_a_ttft.push((l, m.ttft_mean_s));
            m_a_tpot.push((l, m.tpot_mean_s * 1e3));
        }
        let tandem = predict_disagg(&disaggregated(&p, pf, rate, 0)?).ok();
        if let Some(m) = tandem.as_ref().and_then(|m| m.overall.metrics()) {
            m_d_ttft.push((l, m.ttft_mean_s));
            m_d_tpot.push((l, m.tpot_mean_s * 1e3));
        }
        if l == load {
            chosen = Some((rate, agg, dis, fleet_model, tandem));
        }
    }
    let (rate, agg, dis, fleet_model, tandem) =
        chosen.ok_or_else(|| format!("load {load} is not one of the lesson's steps"))?;
    let split = format!("{pf}:{dec}");
    let lf = fmt_num(load);
    let or_dash = |x: Option<f64>| x.map(ms).unwrap_or_else(|| "—".into());
    // The tandem model's stages at the chosen load.
    let stages = tandem.as_ref().and_then(|m| {
        m.overall.metrics()?;
        let pre = m.prefill.metrics()?.ttft_mean_s;
        Some((pre, m.transfer_mean_s, m.decode.first_step_mean_s))
    });
    let mut readings = vec![
        reading(
            "capacity: aggregated (4 × one replica) · disaggregated",
            format!(
                "{agg_cap:.2} req/s · {dis_cap:.2} req/s at the best split {split} ({:.0} % of it)",
                100.0 * dis_cap / agg_cap
            ),
        ),
        reading(
            format!("λ at load {lf}"),
            format!(
                "{rate:.2} req/s ({:.2} of the split's capacity)",
                rate / dis_cap
            ),
        ),
        reading(
            "mean TTFT: aggregated · disaggregated (simulation)",
            format!("{} · {}", or_dash(agg.0.mean), or_dash(dis.0.mean)),
        ),
        reading(
            "mean TPOT: aggregated · disaggregated (simulation)",
            format!("{} · {}", or_dash(agg.1.mean), or_dash(dis.1.mean)),
        ),
        reading(
            "models: fleet TTFT · TPOT; tandem TTFT · TPOT",
            format!(
                "{} · {}; {} · {}",
                or_dash(fleet_model.map(|m| m.ttft_mean_s)),
                or_dash(fleet_model.map(|m| m.tpot_mean_s)),
                or_dash(
                    tandem
                        .as_ref()
                        .and_then(|m| m.overall.metrics())
                        .map(|m| m.ttft_mean_s)
                ),
                or_dash(
                    tandem
                        .as_ref()
                        .and_then(|m| m.overall.metrics())
                        .map(|m| m.tpot_mean_s)
                ),
            ),
        ),
    ];
    readings.push(reading(
        "tandem stages: prefill pool + transfer + decode pool's first step",
        match stages {
            Some((a, b, c)) => format!("{} + {} + {}", ms(a), ms(b), ms(c)),
            None => "— (a pool or the link is overloaded: the tandem model is unstable)".into(),
        },
    ));
    let check = match (tandem.as_ref().and_then(|m| m.overall.metrics()), stages) {
        (Some(m), Some(_)) => Some(
            Check {
                what: format!("disaggregated {split}, mean TTFT at load {lf}"),
                sim: dis.0,
                formula: (
                    "tandem model (prefill + transfer + decode wait, summed)".into(),
                    m.ttft_mean_s,
                ),
                fmt: ms,
                why_not: Some(
                    "the tandem model takes the stages as independent queues, its prefill wait comes out a few per cent long for prompts of several chunks, and near a pool's capacity its decode queue is longer than the simulation's (docs/accuracy.md); one check in twenty also misses by chance",
                ),
            }
            .verdict(),
        ),
        _ => Some((
            false,
            format!(
                "disaggregated {split} at load {lf}: λ = {rate:.2} req/s is past the split's capacity of {dis_cap:.2} req/s, so the tandem model has no stable answer; the simulation's TTFT grows with the run's length"
            ),
        )),
    };
    let vline = vec![(format!("load {lf}"), load)];
    let agg_name = format!("aggregated: {GPUS} replicas");
    let dis_name = format!("disaggregated {split}");
    let cap_ttft = {
        let stable_max = a_ttft
            .iter()
            .chain(d_ttft.iter().filter(|(l, _)| l * agg_cap < 0.9 * dis_cap))
            .filter_map(|(_, a)| a.mean)
            .fold(0.0, f64::max);
        Some(2.0 * stable_max.max(1e-3))
    };
    let ms_scale = 1e3;
    Ok(LessonOutput {
        panels: vec![
            XyPanel {
                x_desc: "load: λ over the aggregated fleet's capacity".into(),
                y_desc: "mean TTFT [s]".into(),
                series: vec![
                    dots(
                        &format!("{agg_name} (simulation, 95 % interval)"),
                        0,
                        &a_ttft,
                        1.0,
                    ),
                    dots(
                        &format!("{dis_name} (simulation, 95 % interval)"),
                        6,
                        &d_ttft,
                        1.0,
                    ),
                    series("aggregated: fleet model", 1, m_a_ttft, true, false),
                    series(
                        "disaggregated: tandem model (sum of the stages)",
                        2,
                        m_d_ttft,
                        true,
                        false,
                    ),
                ],
                vlines: vline.clone(),
                y_cap: cap_ttft,
                legend: Corner::UpperLeft,
                ..XyPanel::default()
            },
            XyPanel {
                x_desc: "load: λ over the aggregated fleet's capacity".into(),
                y_desc: "mean TPOT [ms]".into(),
                series: vec![
                    dots(&format!("{agg_name} (simulation)"), 0, &a_tpot, ms_scale),
                    dots(&format!("{dis_name} (simulation)"), 6, &d_tpot, ms_scale),
                    series("aggregated: fleet model", 1, m_a_tpot, true, false),
                    series("disaggregated: tandem model", 2, m_d_tpot, true, false),
                ],
                vlines: vline,
                legend: Corner::UpperLeft,
                ..XyPanel::default()
            },
        ],
        readings,
        check,
        runs,
        ..LessonOutput::default()
    })
}

#[cfg(test)]
mod tests {
    use super::super::{run, Lesson, LessonState};

    #[test]
    fn disaggregation_lesson_checks_the_tandem_model_and_flattens_tpot() {
        let out = run(&LessonState::new(Lesson::Disagg)).unwrap();
        let (ok, text) = out.check.clone().unwrap();
        assert!(ok, "{text}");
        assert!(
            text.contains("tandem model") && text.contains("± "),
            "{text}"
        );
        let tpot = &out.panels[1].series;
        let at = |i: usize, x: f64| tpot[i].points.iter().find(|p| p.0 == x).map(|p| p.1);
        // Aggregated TPOT climbs with the load, the decode pool's far less.
        let (a_lo, a_hi) = (at(0, 0.1).unwrap(), at(0, 0.8).unwrap());
        let (d_lo, d_hi) = (at(1, 0.1).unwrap(), at(1, 0.8).unwrap());
        assert!(a_hi > 2.0 * a_lo, "aggregated TPOT {a_lo} → {a_hi} ms");
        assert!(
            a_hi - a_lo > 2.5 * (d_hi - d_lo),
            "aggregated TPOT {a_lo} → {a_hi} ms, disaggregated {d_lo} → {d_hi} ms"
        );
        // The tandem model follows the simulated TPOT within 3 %.
        let (sim, model) = (at(1, 0.5).unwrap(), at(3, 0.5).unwrap());
        assert!((model - sim).abs() < 0.03 * sim, "{sim} vs {model} ms");
        // The simulated dots carry their intervals.
        assert_eq!(tpot[0].ci.len(), tpot[0].points.len());
        assert!(tpot[0].ci.iter().all(|h| *h >= 0.0));
        // Short prompts: the interference and the gain shrink.
        let mut short = LessonState::new(Lesson::Disagg);
        assert!(short.set("prompt", "256"));
        let s = run(&short).unwrap();
        let st = &s.panels[1].series;
        let gap = |ser: &[crate::chart::Series]| {
            let f = |i: usize| ser[i].points.iter().find(|p| p.0 == 0.5).unwrap().1;
            f(0) - f(1)
        };
        assert!(gap(st) < 0.5 * gap(tpot), "{} vs {}", gap(st), gap(tpot));
    }
}
