//! The Plan view's disaggregated splits (plain Rust, tested natively): each family's
//! cheapest split by the tandem model, the finalists simulated beside it, and the
//! disaggregated answer in one sentence.

use super::work::PlanScreen;
use super::PlanState;
use crate::format::{latency, percent};
use engine::metrics::Aggregate;
use engine::plan::{self, ConfirmedDisagg, ScreenedDisagg};

/// `3P + 2D × A10G (TP 1, round_robin)`.
pub fn split_name(p: u32, d: u32, gpu: &str, tp: u32, router: &str) -> String {
    format!("{p}P + {d}D × {gpu} (TP {tp}, {router})")
}

fn screened_name(s: &ScreenedDisagg) -> String {
    split_name(s.prefill, s.decode, &s.gpu, s.tp, &s.router.name())
}

/// The simulated split's name.
pub fn confirmed_name(c: &ConfirmedDisagg) -> String {
    let s = &c.screened;
    split_name(c.prefill, c.decode, &s.gpu, s.tp, &s.router.name())
}

fn agg(a: &Aggregate) -> String {
    match (a.mean, a.ci95) {
        (Some(m), Some(h)) => format!("{} ± {}", latency(m), latency(h)),
        (Some(m), None) => latency(m),
        _ => "–".into(),
    }
}

/// The splits table's columns.
pub const SPLIT_COLUMNS: [&str; 13] = [
    "split (model)",
    "$/h (model)",
    "p99 TTFT (model)",
    "mean TPOT (model)",
    "SLO met (model)",
    "binding",
    "headroom",
    "split (sim)",
    "$/h (sim)",
    "p99 TTFT (sim)",
    "mean TPOT (sim)",
    "SLO met (sim)",
    "one replica fewer (sim)",
];

/// One line of the splits table.
#[derive(Clone, Debug, PartialEq)]
pub struct SplitRow {
    pub split: String,
    /// Cells in [`SPLIT_COLUMNS`]' order.
    pub cells: Vec<String>,
    /// The simulated split's name, when confirmed.
    pub sim_split: Option<String>,
    pub sim_meets: Option<bool>,
    /// Whether this is the disaggregated answer.
    pub answer: bool,
}

/// The splits table: every family's cheapest split, cheapest first by the model, the
/// simulator's split beside the finalists.
pub fn split_rows(s: &PlanScreen, confirmed: &[ConfirmedDisagg]) -> Vec<SplitRow> {
    let chosen = plan::answer(confirmed);
    s.disagg
        .iter()
        .map(|d| {
            let c = confirmed.iter().find(|c| {
                c.screened.gpu == d.gpu && c.screened.tp == d.tp && c.screened.router == d.router
            });
            let p = &d.predicted;
            let mut cells = vec![
                screened_name(d),
                format!("{:.2}", d.usd_per_hour),
                latency(p.ttft_p99_s),
                latency(p.tpot_mean_s),
                percent(p.slo_attainment),
                d.binding.clone(),
                percent(d.headroom),
            ];
            match c {
                Some(c) => cells.extend([
                    format!(
                        "{}P + {}D{}",
                        c.prefill,
                        c.decode,
                        if c.meets { "" } else { " (miss)" }
                    ),
                    format!("{:.2}", c.usd_per_hour),
                    agg(&c.at.ttft_p99_s),
                    agg(&c.at.tpot_mean_s),
                    c.at.attainment.mean.map_or("–".into(), percent),
                    c.below.as_ref().map_or("–".into(), |(p, d, f)| {
                        format!(
                            "{p}P + {d}D: {}",
                            f.attainment.mean.map_or("–".into(), percent)
                        )
                    }),
                ]),
                None => cells.extend(std::iter::repeat_n("–".to_string(), 6)),
            }
            SplitRow {
                split: screened_name(d),
                cells,
                sim_split: c.map(confirmed_name),
                sim_meets: c.map(|c| c.meets),
                answer: matches!((chosen, c), (Some(a), Some(c)) if std::ptr::eq(a, c)),
            }
        })
        .collect()
}

/// The disaggregated answer in one sentence. `done`: every finalist has come back.
pub fn split_sentence(
    plan: &PlanState,
    s: &PlanScreen,
    confirmed: &[ConfirmedDisagg],
    done: bool,
) -> String {
    let link = format!(
        "{} Gb/s link, {} ms latency, first token from the {} pool",
        plan.link_gbps,
        plan.link_ms,
        plan.first_token.name()
    );
    let Some(best) = s.disagg.first() else {
        return format!("Disaggregated ({link}): no split meets the SLO by the tandem model.");
    };
    if let Some(c) = plan::answer(confirmed) {
        return format!(
            "Disaggregated ({link}): the cheapest split that meets the SLO is {} at ${:.2}/h, confirmed by simulation ({} met over {} seeds{}).",
            confirmed_name(c),
            c.usd_per_hour,
            c.at.attainment.mean.map_or("–".into(), percent),
            c.at.attainment.n,
            c.below.as_ref().map_or(String::new(), |(p, d, f)| format!(
                "; {p}P + {d}D: {}",
                f.attainment.mean.map_or("–".into(), percent)
            ))
        );
    }
    let model = format!("{} at ${:.2}/h", screened_name(best), best.usd_per_hour);
    match (done, confirmed.first()) {
        (false, _) => format!(
            "Disaggregated ({link}): by the tandem model, {model}; simulating the finalists…"
        ),
        (true, Some(c)) => format!(
            "Disaggregated ({link}): no finalist meets the SLO in simulation: the model's cheapest is {model}, but {} meets it for {} of requests.",
            confirmed_name(c),
            c.at.attainment.mean.map_or("–".into(), percent)
        ),
        (true, None) => format!("Disaggregated ({link}): by the tandem model, {model} (not simulated)."),
    }
}
