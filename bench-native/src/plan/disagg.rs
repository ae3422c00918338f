//! `plan --disagg`: each family's cheapest split into a prefill and a decode pool by the
//! tandem model, and the cheapest `--finalists` of them confirmed by the disaggregated
//! simulator over `--seeds` (`engine::plan::confirm_disagg`), printed beside the model.

use super::{agg_ms, goal, ms, pct, sim_means, CsvRow, PlanArgs};
use crate::args::ArgError;
use anyhow::Context;
use engine::plan::{self, ConfirmedDisagg, DisaggPlan, Infeasible, PlanSpec, ScreenedDisagg};
use serde_json::json;
use std::fmt::Write as _;
use std::time::Instant;

/// The checked `--disagg` settings (None without `--disagg`).
pub(super) fn settings(a: &PlanArgs) -> Result<Option<DisaggPlan>, ArgError> {
    if !a.disagg {
        return Ok(None);
    }
    let link = a.link.check()?;
    Ok(Some(DisaggPlan {
        bandwidth_bytes_per_s: link.bandwidth_bytes_per_s,
        latency_s: link.latency_s,
        first_token: link.first_token,
    }))
}

/// What `--disagg` found.
pub(super) struct DisaggAnswer {
    settings: DisaggPlan,
    found: Vec<ScreenedDisagg>,
    none: Vec<Infeasible>,
    /// The simulator decides: those that meet the SLO first, cheapest first.
    confirmed: Vec<ConfirmedDisagg>,
    screen_s: f64,
    confirm_s: f64,
}

/// Screens the splits of `spec` and confirms the cheapest `--finalists` of them.
///
/// # Errors
/// The model's or the simulator's errors.
pub(super) fn answer(
    d: Option<DisaggPlan>,
    spec: &PlanSpec,
    a: &PlanArgs,
) -> anyhow::Result<Option<DisaggAnswer>> {
    let Some(d) = d else {
        return Ok(None);
    };
    let t = Instant::now();
    let (found, none) = plan::screen_disagg(spec, &d)?;
    let screen_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let seeds: Vec<u64> = (1..=u64::from(a.seeds)).collect();
    let mut confirmed = found
        .iter()
        .take(a.finalists)
        .map(|s| plan::confirm_disagg(spec, &d, s, &seeds))
        .collect::<Result<Vec<_>, _>>()
        .context("confirming the disaggregated splits by simulation")?;
    plan::by_simulation(&mut confirmed);
    Ok(Some(DisaggAnswer {
        settings: d,
        found,
        none,
        confirmed,
        screen_s,
        confirm_s: t.elapsed().as_secs_f64(),
    }))
}

/// `15P + 3D × 1×A10G (random)`.
fn split_name(p: u32, d: u32, s: &ScreenedDisagg) -> String {
    format!("{p}P + {d}D × {}×{} ({})", s.tp, s.gpu, s.router.name())
}

fn below(c: &ConfirmedDisagg) -> String {
    c.below.as_ref().map_or("–".into(), |(p, d, f)| {
        format!("{p}P + {d}D: {} met", pct(&f.attainment))
    })
}

fn link(d: &DisaggPlan) -> String {
    format!(
        "{} Gb/s link, {} latency, first token from the {} pool",
        crate::args::num(d.bandwidth_bytes_per_s * 8.0 / 1e9),
        ms(d.latency_s),
        d.first_token.name()
    )
}

impl DisaggAnswer {
    /// The disaggregated answer in one sentence.
    pub(super) fn sentence(&self, spec: &PlanSpec) -> String {
        let goal = goal(spec);
        match (self.confirmed.first(), self.found.first()) {
            (Some(c), _) if c.meets => format!(
                "Cheapest disaggregated fleet for {goal}: {}, ${:.2}/h, confirmed by simulation ({} met; {}).",
                split_name(c.prefill, c.decode, &c.screened),
                c.usd_per_hour,
                pct(&c.at.attainment),
                below(c)
            ),
            (Some(c), _) => format!(
                "No disaggregated fleet confirmed for {goal}: the simulator gives {} at {}.",
                pct(&c.at.attainment),
                split_name(c.prefill, c.decode, &c.screened)
            ),
            (None, Some(s)) => format!(
                "Cheapest disaggregated fleet for {goal} by the model: {}, ${:.2}/h (not simulated).",
                split_name(s.prefill, s.decode, s),
                s.usd_per_hour
            ),
            (None, None) => format!("No disaggregated split meets {goal}."),
        }
    }

    pub(super) fn table(&self, spec: &PlanSpec) -> String {
        let mut out = format!(
            "\nDisaggregated ({}):\n{}\n\n",
            link(&self.settings),
            self.sentence(spec)
        );
        let _ = writeln!(
            out,
            "Confirmed by simulation ({} seeds each; the model's split beside it):",
            self.confirmed.first().map_or(0, |c| c.at.attainment.n)
        );
        let _ = writeln!(
            out,
            "{:<30} {:>8} {:>9} {:>9} {:>13} {:>18} {:>16} {:>15} {:>17} {:>24}",
            "fleet",
            "$/h",
            "model P+D",
            "sim P+D",
            "SLO met (sim)",
            "p99 TTFT (sim)",
            "p99 TTFT (model)",
            "mean TPOT (sim)",
            "mean TPOT (model)",
            "one replica fewer (sim)"
        );
        for c in &self.confirmed {
            let s = &c.screened;
            let _ = writeln!(
                out,
                "{:<30} {:>8.2} {:>9} {:>9} {:>13} {:>18} {:>16} {:>15} {:>17} {:>24}",
                format!("{}×{} ({})", s.tp, s.gpu, s.router.name()),
                c.usd_per_hour,
                format!("{}+{}", s.prefill, s.decode),
                format!(
                    "{}+{}{}",
                    c.prefill,
                    c.decode,
                    if c.meets { "" } else { " (miss)" }
                ),
                pct(&c.at.attainment),
                agg_ms(&c.at.ttft_p99_s),
                ms(s.predicted.ttft_p99_s),
                c.at.tpot_mean_s
                    .mean
                    .map_or("–".into(), |t| format!("{:.1} ms", t * 1e3)),
                format!("{:.1} ms", s.predicted.tpot_mean_s * 1e3),
                below(c)
            );
        }
        let _ = writeln!(
            out,
            "\nScreened by the tandem model (each family's cheapest split, cheapest first):"
        );
        let _ = writeln!(
            out,
            "{:<44} {:>10} {:>9} {:>11} {:>10} {:>11} {:>13} {:>9}",
            "fleet",
            "$/hour",
            "SLO met",
            "mean TTFT",
            "p99 TTFT",
            "mean TPOT",
            "binding",
            "headroom"
        );
        for s in &self.found {
            let _ = writeln!(
                out,
                "{:<44} {:>10.2} {:>8.1}% {:>11} {:>10} {:>11} {:>13} {:>8.0} %",
                split_name(s.prefill, s.decode, s),
                s.usd_per_hour,
                100.0 * s.predicted.slo_attainment,
                ms(s.predicted.ttft_mean_s),
                ms(s.predicted.ttft_p99_s),
                format!("{:.1} ms", s.predicted.tpot_mean_s * 1e3),
                s.binding,
                100.0 * s.headroom
            );
        }
        for i in &self.none {
            let _ = writeln!(out, "{}×{} ({}): {}", i.tp, i.gpu, i.router.name(), i.why);
        }
        let _ = writeln!(
            out,
            "screened the disaggregated splits in {:.2} s; simulated {} finalists in {:.2} s",
            self.screen_s,
            self.confirmed.len(),
            self.confirm_s
        );
        out
    }

    /// Rows of `plan`'s CSV: `disagg` (the model's splits) and `disagg_simulated`, the
    /// replicas P + D.
    pub(super) fn csv(&self) -> String {
        let mut o = String::new();
        for s in &self.found {
            let p = &s.predicted;
            CsvRow {
                kind: "disagg",
                gpu: &s.gpu,
                tp: s.tp,
                router: s.router.name(),
                replicas: s.prefill + s.decode,
                usd_per_hour: s.usd_per_hour,
                figures: [p.slo_attainment, p.ttft_mean_s, p.ttft_p99_s, p.tpot_mean_s].map(Some),
                binding: &s.binding.replace(' ', "_"),
                headroom: Some(s.headroom),
                split: Some((s.prefill, s.decode)),
            }
            .write(&mut o);
        }
        for c in &self.confirmed {
            let s = &c.screened;
            CsvRow {
                kind: "disagg_simulated",
                gpu: &s.gpu,
                tp: s.tp,
                router: s.router.name(),
                replicas: c.prefill + c.decode,
                usd_per_hour: c.usd_per_hour,
                figures: sim_means(&c.at),
                binding: &s.binding.replace(' ', "_"),
                headroom: None,
                split: Some((c.prefill, c.decode)),
            }
            .write(&mut o);
        }
        o
    }

    pub(super) fn json(&self, spec: &PlanSpec) -> serde_json::Value {
        json!({
            "answer": self.sentence(spec),
            "first_token": self.settings.first_token.name(),
            "link": {"bandwidth_bytes_per_s": self.settings.bandwidth_bytes_per_s, "latency_s": self.settings.latency_s},
            "fleets": self.found,
            "infeasible": self.none,
            "confirmed": self.confirmed,
            "screen_s": self.screen_s,
            "confirm_s": self.confirm_s,
        })
    }
}
