//! What a worker computes for the Plan view — the screen (with the Pareto set, the
//! disaggregated splits and the profile's segments) and the simulated confirmation of
//! one finalist — and what the page makes of it: the answer in one sentence, the
//! candidates table and the Pareto chart's data (plain Rust, tested natively).
//!
//! The screen is cheap and deterministic, so every worker screens for itself and
//! confirms its own finalists: the finalist of rank `k` goes to worker `k mod n`.

use super::{PlanState, MAX_PLAN_REPLICAS, PARETO_EXTRA};
use crate::chart::{Series, XyPanel};
use crate::format::{latency, percent, req_per_s, sig3};
use crate::params::{page_message, Params};
use engine::analytic::{predict, ModelKind, Predicted};
use engine::cost::RooflineCost;
use engine::fleet::RouterKind;
use engine::metrics::Aggregate;
use engine::plan::{
    self, Confirmed, ConfirmedDisagg, Infeasible, PlanSpec, Screen, Screened, ScreenedDisagg,
};
use engine::plan_profile::{self, Segment};
use serde::{Deserialize, Serialize};

/// The screen of a plan, as the page shows it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PlanScreen {
    pub screen: Screen,
    /// Price against predicted p99 TTFT: the fleets no other beats on both.
    pub front: Vec<Screened>,
    /// When no family meets the target: the nearest miss, said in one sentence.
    pub shortfall: Option<String>,
    /// Each family's cheapest disaggregated split (when asked for).
    pub disagg: Vec<ScreenedDisagg>,
    pub disagg_none: Vec<Infeasible>,
    /// The profile's segments at the peak's cheapest family (empty: no profile).
    pub segments: Vec<Segment>,
}

/// Screens `plan`: every family by the analytical fleet model, the Pareto set, the
/// disaggregated splits if asked for, the profile's segments if there is one.
///
/// # Errors
/// The engine's message, with the page's labels.
pub fn screen(plan: &PlanState, p: &Params) -> Result<PlanScreen, String> {
    let spec = plan.spec(p);
    let msg = |e: plan::PlanError| page_message(&e.to_string());
    let screen = plan::screen(&spec).map_err(msg)?;
    let front = plan::pareto(&spec, &screen, PARETO_EXTRA).map_err(msg)?;
    let shortfall = screen
        .feasible
        .is_empty()
        .then(|| shortfall(&spec, &screen.infeasible));
    let (disagg, disagg_none) = if plan.disagg {
        plan::screen_disagg(&spec, &plan.disagg_plan()).map_err(msg)?
    } else {
        (Vec::new(), Vec::new())
    };
    let segments = match (screen.best(), plan.profile.is_empty()) {
        (Some(best), false) => plan_profile::segments(&spec, best, &plan.profile).map_err(msg)?,
        _ => Vec::new(),
    };
    Ok(PlanScreen {
        screen,
        front,
        shortfall,
        disagg,
        disagg_none,
        segments,
    })
}

/// The finalist of rank `rank` (0: the model's cheapest) of `screen` confirmed by
/// simulation over the plan's seeds; None when the screen has fewer feasible fleets.
///
/// # Errors
/// The engine's message for a fleet the simulator refuses.
pub fn confirm(
    plan: &PlanState,
    p: &Params,
    screen: &Screen,
    rank: u32,
) -> Result<Option<Confirmed>, String> {
    let Some(s) = screen.feasible.get(rank as usize) else {
        return Ok(None);
    };
    let seeds: Vec<u64> = (1..=u64::from(plan.seeds)).collect();
    plan::confirm(&plan.spec(p), s, &seeds)
        .map(Some)
        .map_err(|e| page_message(&e.to_string()))
}

/// The disaggregated split of rank `rank` (0: the model's cheapest) of `splits`
/// confirmed by the disaggregated simulator over the plan's seeds; None when there are
/// fewer splits.
///
/// # Errors
/// The engine's message for a split the simulator refuses.
pub fn confirm_split(
    plan: &PlanState,
    p: &Params,
    splits: &[ScreenedDisagg],
    rank: u32,
) -> Result<Option<ConfirmedDisagg>, String> {
    let Some(s) = splits.get(rank as usize) else {
        return Ok(None);
    };
    let seeds: Vec<u64> = (1..=u64::from(plan.seeds)).collect();
    plan::confirm_disagg(&plan.spec(p), &plan.disagg_plan(), s, &seeds)
        .map(Some)
        .map_err(|e| page_message(&e.to_string()))
}

/// One item of a worker's share of a plan job: the screen, or one finalist or split confirmed.
#[derive(Debug)]
pub enum PlanPart {
    Screen(Box<PlanScreen>),
    /// The finalist of `rank` simulated (None: the screen has fewer), or the split of
    /// `rank` (`split`).
    Confirmed {
        rank: u32,
        confirmed: Option<Box<Confirmed>>,
        split: Option<Box<ConfirmedDisagg>>,
    },
}

/// A worker's share of a plan job: the screen (sent when `send_screen`), then each
/// finalist of `ranks` confirmed, then (by the worker that screens, which has the
/// splits) the first `splits` disaggregated splits confirmed. Every part but the last
/// goes to `out` (`None`: one more item done, for progress); the last is returned.
///
/// # Errors
/// The first error of the screen or of a confirmation.
pub fn share(
    plan: &PlanState,
    p: &Params,
    send_screen: bool,
    ranks: &[u32],
    splits: u32,
    out: &mut dyn FnMut(Option<PlanPart>),
) -> Result<PlanPart, String> {
    let mut last: Option<PlanPart> = None;
    let mut send = |r: PlanPart, out: &mut dyn FnMut(Option<PlanPart>)| {
        if let Some(prev) = last.replace(r) {
            out(Some(prev));
        }
    };
    // Only the worker that sends the screen needs its extras (Pareto set, splits,
    // profile); the others need the feasible fleets.
    let (feasible, disagg) = if send_screen {
        let s = screen(plan, p)?;
        let kept = (s.screen.clone(), s.disagg.clone());
        out(None);
        send(PlanPart::Screen(Box::new(s)), out);
        kept
    } else {
        let s = plan::screen(&plan.spec(p)).map_err(|e| page_message(&e.to_string()))?;
        (s, Vec::new())
    };
    for &rank in ranks {
        let c = confirm(plan, p, &feasible, rank)?;
        out(None);
        let r = PlanPart::Confirmed {
            rank,
            confirmed: c.map(Box::new),
            split: None,
        };
        send(r, out);
    }
    for rank in 0..splits {
        let c = confirm_split(plan, p, &disagg, rank)?;
        out(None);
        if let Some(c) = c {
            let r = PlanPart::Confirmed {
                rank,
                confirmed: None,
                split: Some(Box::new(c)),
            };
            send(r, out);
        }
    }
    last.ok_or_else(|| "a plan share with nothing to do".to_string())
}

/// `6 × L4 (TP 1, round_robin)`.
pub fn fleet_name(n: u32, gpu: &str, tp: u32, router: RouterKind) -> String {
    format!("{n} × {gpu} (TP {tp}, {})", router.name())
}

fn screened_name(s: &Screened) -> String {
    fleet_name(s.replicas, &s.gpu, s.tp, s.router)
}

/// The simulated fleet's name.
pub fn confirmed_name(c: &Confirmed) -> String {
    fleet_name(
        c.replicas,
        &c.screened.gpu,
        c.screened.tp,
        c.screened.router,
    )
}

/// The fleet that answers: the cheapest confirmed fleet that meets the target in
/// simulation (the simulator decides), else None.
pub fn answer(confirmed: &[Confirmed]) -> Option<&Confirmed> {
    confirmed
        .iter()
        .filter(|c| c.meets)
        .min_by(|a, b| a.usd_per_hour.total_cmp(&b.usd_per_hour))
}

/// Spare throughput of `c`'s simulated count: the model's headroom at its own count
/// scaled to the simulator's.
pub fn headroom_at(c: &Confirmed) -> f64 {
    let s = &c.screened;
    (1.0 + s.headroom) * f64::from(c.replicas) / f64::from(s.replicas) - 1.0
}

fn agg(a: &Aggregate, f: impl Fn(f64) -> String) -> String {
    match (a.mean, a.ci95) {
        (Some(m), Some(h)) => format!("{} ± {}", f(m), f(h)),
        (Some(m), None) => f(m),
        _ => "–".into(),
    }
}

/// The SLO the plan asks for: "90 % of requests within TTFT 1.00 s and TPOT 50.0 ms at
/// 20 req/s".
pub fn goal(plan: &PlanState, p: &Params) -> String {
    format!(
        "{} of requests within TTFT {} and TPOT {} at {}",
        percent(plan.attainment),
        latency(p.slo_ttft_s),
        latency(p.slo_tpot_s),
        req_per_s(plan.peak())
    )
}

/// The answer in one sentence. `done`: every finalist has come back.
pub fn sentence(
    plan: &PlanState,
    p: &Params,
    s: &PlanScreen,
    confirmed: &[Confirmed],
    done: bool,
) -> String {
    let goal = goal(plan, p);
    let Some(best) = s.screen.best() else {
        return format!(
            "No candidate meets the SLO ({goal}). {}",
            s.shortfall.clone().unwrap_or_default()
        );
    };
    if let Some(c) = answer(confirmed) {
        let below = c.below.as_ref().map_or(String::new(), |b| {
            format!(
                "; with {}: {}",
                b.replicas,
                b.attainment.mean.map_or("–".into(), percent)
            )
        });
        return format!(
            "The cheapest fleet that meets the SLO ({goal}) is {} at ${:.2}/h, confirmed by simulation ({} met over {} seeds{below}); the binding limit is {}, headroom {}.",
            confirmed_name(c),
            c.usd_per_hour,
            c.at.attainment.mean.map_or("–".into(), percent),
            c.at.attainment.n,
            c.screened.binding.as_str(),
            percent(headroom_at(c)),
        );
    }
    let model = format!(
        "{} at ${:.2}/h (binding limit {}, headroom {})",
        screened_name(best),
        best.usd_per_hour,
        best.binding.as_str(),
        percent(best.headroom)
    );
    match (done, confirmed.iter().min_by(|a, b| a.usd_per_hour.total_cmp(&b.usd_per_hour))) {
        (false, _) => format!(
            "By the model, the cheapest fleet that meets the SLO ({goal}) is {model}; simulating the finalists…"
        ),
        (true, Some(c)) => format!(
            "No finalist meets the SLO ({goal}) in simulation: the model's cheapest is {model}, but {} meets it for {} of requests (p99 TTFT {}, mean TPOT {}).",
            confirmed_name(c),
            c.at.attainment.mean.map_or("–".into(), percent),
            agg(&c.at.ttft_p99_s, latency),
            agg(&c.at.tpot_mean_s, latency),
        ),
        (true, None) => format!(
            "By the model, the cheapest fleet that meets the SLO ({goal}) is {model} (not simulated)."
        ),
    }
}

/// Why no family meets the target, said of the nearest miss: one replica of each family
/// whose weights fit, at the lightest share the planner tries (λ / the most replicas),
/// by the batching model; the family with the highest attainment there, and which SLO it
/// misses by how much. Families that cannot carry even that share give their reason.
pub fn shortfall(spec: &PlanSpec, infeasible: &[Infeasible]) -> String {
    let light = spec.base.workload.rate() / f64::from(MAX_PLAN_REPLICAS);
    let block = u64::from(spec.base.server.block_size.max(1));
    let at_light = |i: &Infeasible| -> Option<Predicted> {
        let (cost, kv) = RooflineCost::preset(&i.gpu, &spec.model, spec.mem_util, i.tp).ok()?;
        let mut cfg = spec.base.clone();
        cfg.cost = cost;
        cfg.server.kv_tokens = kv / block * block;
        cfg.workload = cfg.workload.with_rate(light);
        predict(ModelKind::Batching, &cfg)
            .ok()?
            .metrics()
            .copied()
            .filter(Predicted::is_finite)
    };
    let nearest = infeasible
        .iter()
        .filter_map(|i| at_light(i).map(|p| (i, p)))
        .max_by(|a, b| a.1.slo_attainment.total_cmp(&b.1.slo_attainment));
    let Some((i, p)) = nearest else {
        return infeasible.first().map_or(String::new(), |i| {
            format!("{}: {}.", fleet_name(1, &i.gpu, i.tp, i.router), i.why)
        });
    };
    let m = &spec.base.metrics;
    let over = |x: f64, slo: f64| percent(x / slo - 1.0);
    let mut misses = Vec::new();
    if p.tpot_mean_s > m.slo_tpot_s {
        misses.push(format!(
            "its mean TPOT {} is {} over the TPOT SLO of {}",
            latency(p.tpot_mean_s),
            over(p.tpot_mean_s, m.slo_tpot_s),
            latency(m.slo_tpot_s)
        ));
    }
    if p.ttft_p99_s > m.slo_ttft_s {
        misses.push(format!(
            "its p99 TTFT {} is {} over the TTFT SLO of {}",
            latency(p.ttft_p99_s),
            over(p.ttft_p99_s, m.slo_ttft_s),
            latency(m.slo_ttft_s)
        ));
    }
    if misses.is_empty() {
        misses.push(format!(
            "p99 TTFT {} and mean TPOT {} are within the SLO, but too many requests miss it",
            latency(p.ttft_p99_s),
            latency(p.tpot_mean_s)
        ));
    }
    format!(
        "The nearest, {} GPU (TP {}, {}), meets it for {} of requests by the model even at the lightest load ({} per replica, {MAX_PLAN_REPLICAS} replicas): {}.",
        i.gpu,
        i.tp,
        i.router.name(),
        percent(p.slo_attainment),
        req_per_s(light),
        misses.join("; ")
    )
}

/// One line of the candidates table: a family at the model's count, and the
/// simulator's figures beside it when it was a finalist.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// The model's fleet.
    pub fleet: String,
    pub gpu: String,
    pub tp: u32,
    pub router: String,
    /// Cells in the table's column order ([`COLUMNS`]).
    pub cells: Vec<String>,
    /// The simulated fleet's name, when confirmed.
    pub sim_fleet: Option<String>,
    /// Whether the simulated fleet meets the target.
    pub sim_meets: Option<bool>,
    /// Whether this is the answer's family.
    pub answer: bool,
}

/// The candidates table's columns.
pub const COLUMNS: [&str; 16] = [
    "GPU",
    "TP",
    "router",
    "replicas (model)",
    "$/h (model)",
    "mean TTFT (model)",
    "p99 TTFT (model)",
    "mean TPOT (model)",
    "SLO met (model)",
    "binding limit",
    "headroom",
    "replicas (sim)",
    "$/h (sim)",
    "p99 TTFT (sim)",
    "mean TPOT (sim)",
    "SLO met (sim)",
];

/// The table: every feasible family, cheapest first by the model.
pub fn rows(s: &PlanScreen, confirmed: &[Confirmed]) -> Vec<Row> {
    let chosen = answer(confirmed);
    s.screen
        .feasible
        .iter()
        .map(|f| {
            let c = confirmed.iter().find(|c| {
                c.screened.gpu == f.gpu && c.screened.tp == f.tp && c.screened.router == f.router
            });
            let p = &f.predicted;
            let mut cells = vec![
                f.gpu.clone(),
                f.tp.to_string(),
                f.router.name(),
                f.replicas.to_string(),
                format!("{:.2}", f.usd_per_hour),
                latency(p.ttft_mean_s),
                latency(p.ttft_p99_s),
                latency(p.tpot_mean_s),
                percent(p.slo_attainment),
                f.binding.as_str().to_string(),
                percent(f.headroom),
            ];
            match c {
                Some(c) => cells.extend([
                    format!("{}{}", c.replicas, if c.meets { "" } else { " (miss)" }),
                    format!("{:.2}", c.usd_per_hour),
                    agg(&c.at.ttft_p99_s, latency),
                    agg(&c.at.tpot_mean_s, latency),
                    c.at.attainment.mean.map_or("–".into(), percent),
                ]),
                None => cells.extend(std::iter::repeat_n("–".to_string(), 5)),
            }
            Row {
                fleet: screened_name(f),
                gpu: f.gpu.clone(),
                tp: f.tp,
                router: f.router.name(),
                cells,
                sim_fleet: c.map(confirmed_name),
                sim_meets: c.map(|c| c.meets),
                answer: matches!((chosen, c), (Some(a), Some(c)) if std::ptr::eq(a, c)),
            }
        })
        .collect()
}

/// The profile's lines: each segment's count, then the period's price fixed at the
/// peak's count and resized per segment.
pub fn profile_lines(s: &PlanScreen, confirmed: &[Confirmed]) -> Vec<String> {
    let Some(best) = s.screen.best() else {
        return Vec::new();
    };
    if s.segments.is_empty() {
        return Vec::new();
    }
    // The simulator's count at the peak when it confirmed the model's cheapest family.
    let peak_n = confirmed
        .iter()
        .find(|c| c.meets && c.screened == *best)
        .map_or(best.replicas, |c| c.replicas);
    let per = best.usd_per_hour / f64::from(best.replicas);
    let mut v: Vec<String> = s
        .segments
        .iter()
        .map(|g| {
            format!(
                "{} h at {}: {}",
                sig3(g.hours),
                req_per_s(g.rate_rps),
                g.replicas
                    .map_or("no count up to the page's limit".into(), |n| {
                        format!("{n} × {} (TP {})", best.gpu, best.tp)
                    })
            )
        })
        .collect();
    let c = plan_profile::cost(&s.segments, per, peak_n);
    v.push(format!(
        "over {} h: ${:.2} fixed at the peak's {peak_n} replicas; ${:.2} resized per segment",
        sig3(c.hours),
        c.fixed_usd,
        c.resized_usd
    ));
    v
}

/// A point of the Pareto chart with its hover text.
#[derive(Clone, Debug, PartialEq)]
pub struct ChartPoint {
    /// p99 TTFT [s].
    pub x: f64,
    /// $/hour.
    pub y: f64,
    pub text: String,
}

/// The Pareto chart: price against p99 TTFT — the model's Pareto front, every family at
/// its smallest count, the simulated finalists — with the TTFT SLO as a vertical line;
/// and its points with their hover texts.
pub fn chart(p: &Params, s: &PlanScreen, confirmed: &[Confirmed]) -> (XyPanel, Vec<ChartPoint>) {
    let mut pts = Vec::new();
    let mut model_point = |f: &Screened, what: &str| {
        pts.push(ChartPoint {
            x: f.predicted.ttft_p99_s,
            y: f.usd_per_hour,
            text: format!(
                "{}: ${:.2}/h, p99 TTFT {}, {} meet the SLO ({what}, model)",
                screened_name(f),
                f.usd_per_hour,
                latency(f.predicted.ttft_p99_s),
                percent(f.predicted.slo_attainment)
            ),
        });
        (f.predicted.ttft_p99_s, f.usd_per_hour)
    };
    let front: Vec<(f64, f64)> = s
        .front
        .iter()
        .map(|f| model_point(f, "Pareto front"))
        .collect();
    let smallest: Vec<(f64, f64)> = s
        .screen
        .feasible
        .iter()
        .map(|f| model_point(f, "smallest that meets it"))
        .collect();
    let sim: Vec<(f64, f64)> = confirmed
        .iter()
        .filter_map(|c| {
            let x = c.at.ttft_p99_s.mean?;
            pts.push(ChartPoint {
                x,
                y: c.usd_per_hour,
                text: format!(
                    "{}: ${:.2}/h, p99 TTFT {} simulated ({} met{})",
                    confirmed_name(c),
                    c.usd_per_hour,
                    agg(&c.at.ttft_p99_s, latency),
                    c.at.attainment.mean.map_or("–".into(), percent),
                    if c.meets { "" } else { ", misses" }
                ),
            });
            Some((x, c.usd_per_hour))
        })
        .collect();
    let panel = XyPanel {
        x_desc: "p99 TTFT [s]".into(),
        y_desc: "fleet price [$/hour]".into(),
        series: vec![
            Series {
                name: "Pareto front (model)".into(),
                color: 1,
                points: front,
                line: true,
                dots: true,
                ci: Vec::new(),
            },
            Series {
                name: "each candidate at its smallest fleet (model)".into(),
                color: 2,
                points: smallest,
                line: false,
                dots: true,
                ci: Vec::new(),
            },
            Series {
                name: "finalists simulated".into(),
                color: 0,
                points: sim,
                line: false,
                dots: true,
                ci: Vec::new(),
            },
        ],
        vlines: vec![(format!("SLO TTFT {}", latency(p.slo_ttft_s)), p.slo_ttft_s)],
        hlines: Vec::new(),
        x_log2: false,
        y_cap: None,
        x_from_zero: true,
        legend: crate::chart::Corner::UpperRight,
    };
    (panel, pts)
}

/// The hover text of the point nearest pixel (`px`, `py`) within `r` pixels, given each
/// point's pixel position.
pub fn nearest(
    pts: &[ChartPoint],
    at: impl Fn(&ChartPoint) -> (f64, f64),
    (px, py): (f64, f64),
    r: f64,
) -> Option<&str> {
    pts.iter()
        .map(|q| {
            let (x, y) = at(q);
            (q, (x - px).hypot(y - py))
        })
        .filter(|(_, d)| *d <= r)
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(q, _)| q.text.as_str())
}
