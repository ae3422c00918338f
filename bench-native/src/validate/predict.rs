//! What the simulator is told about the server, and the prediction: the named server
//! models of `engine::config::ServerConfig`, the scaled ShareGPT traces, the saturation
//! estimate, and the simulation of every measured trace.

use super::colocation;
use super::errors::{median, pool, RateResult, ValidateReport};
use super::report::{markdown, write_csv};
use super::server::ServerModel;
use super::{fmt_rate, ValidateArgs};
use crate::args::Overheads;
use crate::fit;
use crate::microbench::{self, MicrobenchResult};
use anyhow::Context;
use engine::config::{EndRule, FirstToken, ServerConfig, SimConfig};
use engine::cost::CostModel;
use engine::fleet::FleetConfig;
use engine::metrics::Summary;
use engine::workload::{ArrivalProcess, LengthDist, TraceRequest, Workload};
use std::path::Path;

/// One rate: (rate, trace, first round's summary, later rounds' summaries).
pub(super) type Measured = (f64, Vec<TraceRequest>, Summary, Vec<Summary>);

/// ShareGPT pairs scaled by `scale` (each length ≥ 1).
pub(super) fn scaled_sharegpt(scale: f64) -> LengthDist {
    let LengthDist::Empirical { pairs } = LengthDist::sharegpt() else {
        unreachable!("sharegpt is empirical")
    };
    let s = |x: u32| ((x as f64 * scale).round() as u32).max(1);
    LengthDist::Empirical {
        pairs: pairs.into_iter().map(|(p, o)| (s(p), s(o))).collect(),
    }
}

/// The first `n` requests of the scaled, capped ShareGPT workload at `rate`, as a trace.
pub(super) fn trace(args: &ValidateArgs, rate: f64, cap: u32) -> anyhow::Result<Vec<TraceRequest>> {
    let w = Workload {
        arrivals: ArrivalProcess::Poisson { rate },
        lengths: scaled_sharegpt(args.scale),
        max_model_len: Some(cap),
        shared: None,
    };
    let horizon = args.requests as f64 / rate * 4.0 + 60.0;
    Ok(w.stream(args.seed, horizon)?
        .take(args.requests)
        .map(|r| TraceRequest {
            arrival: r.arrival,
            prompt: r.prompt,
            output: r.output,
            class: r.class,
        })
        .collect())
}

fn sim_config(
    m: &ServerModel,
    cost: &CostModel,
    over: &Overheads,
    requests: Vec<TraceRequest>,
) -> SimConfig {
    let mut c = SimConfig::vllm_like(1.0);
    c.workload = Workload {
        arrivals: ArrivalProcess::Trace { requests },
        lengths: LengthDist::Fixed {
            prompt: 1,
            output: 1,
        },
        max_model_len: None,
        shared: None,
    };
    // The named server models (engine::config): what each server's scheduler does.
    c.server = if m.block_size <= 1 {
        ServerConfig::llama_cpp(m.slots, m.kv_tokens, m.budget)
    } else {
        ServerConfig::vllm_v1(
            m.slots,
            m.kv_tokens / m.block_size as u64,
            m.block_size,
            m.budget,
        )
    };
    over.apply(&mut c.server);
    c.cost = cost.clone();
    c.first_token = FirstToken::AfterPrefill;
    c.end = EndRule::Drain;
    c.horizon_s = 1e6;
    c
}

/// Simulates trace `t`; with `records`, also writes every simulated request there (the
/// per-request CSV columns of `bench-native simulate --records`, ids as in the trace and
/// in the real run's `requests.csv`).
pub(super) fn simulate(
    m: &ServerModel,
    cost: &CostModel,
    over: &Overheads,
    t: &[TraceRequest],
    records: Option<&Path>,
) -> anyhow::Result<Summary> {
    Ok(simulate_busy(m, cost, over, t, records)?.0)
}

/// As [`simulate`], with the replicas' mean busy fraction (the share of the run each
/// spent running iterations; 1 server: its own).
pub(super) fn simulate_busy(
    m: &ServerModel,
    cost: &CostModel,
    over: &Overheads,
    t: &[TraceRequest],
    records: Option<&Path>,
) -> anyhow::Result<(Summary, f64)> {
    let mut cfg = sim_config(m, cost, over, t.to_vec());
    cfg.keep_records = records.is_some();
    cfg.validate().context("simulator configuration")?;
    let (summary, recs, busy) = if m.replicas > 1 {
        // `replicas` copies of the fitted server behind the balancer's policy
        // (docs/model.md, "Fleets"); the trace is the whole fleet's.
        let fleet = FleetConfig::uniform(cfg, m.replicas, m.router);
        let rep = engine::fleet::simulate_fleet(&fleet).context("fleet simulator configuration")?;
        let busy = rep.replicas.iter().map(|r| r.utilisation).sum::<f64>() / f64::from(m.replicas);
        (rep.summary, rep.records, busy)
    } else {
        let rep = engine::sim::simulate(&cfg)?;
        let busy = if rep.stats.end_s > 0.0 {
            rep.stats.busy_s / rep.stats.end_s
        } else {
            0.0
        };
        (rep.summary, rep.records, busy)
    };
    if let Some(path) = records {
        let csv = format!(
            "{}\n{}",
            engine::sweep::RECORD_COLUMNS,
            engine::sweep::records_csv(&recs, "")
        );
        std::fs::write(path, csv).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok((summary, busy))
}

/// Predicted saturation throughput: everything arrives at once, the drain rate [req/s].
pub(super) fn capacity(
    args: &ValidateArgs,
    m: &ServerModel,
    cost: &CostModel,
    cap: u32,
) -> anyhow::Result<f64> {
    let burst = Workload {
        arrivals: ArrivalProcess::Poisson { rate: 1e6 },
        lengths: scaled_sharegpt(args.scale),
        max_model_len: Some(cap),
        shared: None,
    };
    let t: Vec<TraceRequest> = burst
        .stream(args.seed, 1.0)?
        .take(400)
        .map(|r| TraceRequest {
            arrival: r.arrival,
            prompt: r.prompt,
            output: r.output,
            class: 0,
        })
        .collect();
    // The drain rate depends on neither the per-request overhead nor the wake-up (a
    // saturated server never idles).
    Ok(simulate(m, cost, &Overheads::default(), &t, None)?.throughput_rps)
}

/// Steps 4–5: fit the pooled microbenchmarks, simulate every measured trace, write the
/// report.
pub(super) fn predict_and_report(
    args: &ValidateArgs,
    command: &str,
    model: &ServerModel,
    cap: u32,
    (mb_pre, mb_post): (&MicrobenchResult, &MicrobenchResult),
    beside: Option<&MicrobenchResult>,
    measured: Vec<Measured>,
) -> anyhow::Result<ValidateReport> {
    let out = &args.out;
    let mb = pool(mb_pre, mb_post);
    let mb_path = out.join("microbench.json");
    microbench::write(&mb, &mb_path)?;
    let f = fit::fit(&mb, false)?;
    fit::write(&f, &mb_path, &out.join("fit.json"))?;
    let (cost, alt) = (args.cost.of(&f), args.cost.alt().of(&f));
    // replicas sharing the machine: how much slower one runs beside busy neighbours
    // than alone just before (the machine's speed drifts between microbenchmarks
    // minutes apart; these two are back to back)
    let slowdown = match beside.filter(|_| model.replicas > 1) {
        Some(b) => Some(colocation::slowdown(mb_pre, b).context(
            "the microbenchmark beside busy neighbours has no point in common with the one alone",
        )?),
        None => None,
    };
    // at saturation every replica is busy: the full slowdown
    let full = slowdown.map_or(1.0, |s| s.factor);
    let capacity_rps = capacity(args, model, &cost.scaled(full), cap)?;
    let over = Overheads {
        request_s: f.overhead_s,
        per_token_s: f.overhead_per_token_s,
        step_s: 0.0,
        idle_wake: f.idle_wake.clone(),
    };
    let mut results = Vec::new();
    for (rate, t, m, repeats) in measured {
        // each replica's cost scaled by how busy its neighbours are at this rate
        let colocation = match slowdown {
            Some(s) => Some(colocation::factor(s.factor, |k| {
                Ok(simulate_busy(model, &cost.scaled(k), &over, &t, None)?.1)
            })?),
            None => None,
        };
        let k = colocation.map_or(1.0, |c| c.0);
        results.push(RateResult {
            rate,
            load: rate / capacity_rps,
            predicted: simulate(
                model,
                &cost.scaled(k),
                &over,
                &t,
                Some(
                    &out.join("sim")
                        .join(format!("requests-{}.csv", fmt_rate(rate))),
                ),
            )?,
            predicted_alt: simulate(model, &alt.scaled(k), &over, &t, None)?,
            measured: m,
            repeats,
            colocation,
        });
    }

    // 5. report
    let cells = |alt: bool| {
        median(
            results
                .iter()
                .flat_map(|r| r.errors(alt).into_iter().map(|e| e.3.abs()))
                .collect(),
        )
    };
    let differences: Vec<f64> = results
        .iter()
        .flat_map(RateResult::repeat_differences)
        .collect();
    let repeat_noise = (!differences.is_empty()).then(|| {
        (
            median(differences),
            median(
                results
                    .iter()
                    .flat_map(RateResult::errors_against_repeats)
                    .collect(),
            ),
        )
    });
    let report = ValidateReport {
        median_abs_rel_error: cells(false),
        median_abs_rel_error_alt: cells(true),
        repeat_noise,
        slowdown,
        drift: colocation::drift(mb_pre, mb_post),
        rates: results,
        capacity_rps,
        out: out.clone(),
    };
    write_csv(&report, &out.join("validate.csv"))?;
    let md = markdown(&report, args, model, cap, command, &f, (mb_pre, mb_post));
    std::fs::write(out.join("validate.md"), &md)
        .with_context(|| format!("writing {}", out.join("validate.md").display()))?;
    eprintln!("4/4 wrote {}", out.join("validate.md").display());
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::fleet::RouterKind;

    fn model(replicas: u32, router: RouterKind) -> ServerModel {
        ServerModel {
            slots: 1,
            kv_tokens: 8192,
            block_size: 1,
            per_slot: Some(8192),
            budget: 2048,
            replicas,
            router,
        }
    }

    fn req(arrival: f64, prompt: u32, output: u32) -> TraceRequest {
        TraceRequest {
            arrival,
            prompt,
            output,
            class: 0,
        }
    }

    #[test]
    fn a_fleet_prediction_routes_the_trace_as_the_balancer_would() {
        let cost = SimConfig::vllm_like(1.0).cost;
        // a long request, then three short ones half a second apart
        let t = vec![
            req(0.0, 200, 4000),
            req(0.5, 8, 4),
            req(1.0, 8, 4),
            req(1.5, 8, 4),
        ];
        let dir = std::env::temp_dir().join(format!("kvqueue-fleet-pred-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let records = dir.join("requests.csv");
        let one = simulate(
            &model(1, RouterKind::RoundRobin),
            &cost,
            &Overheads::default(),
            &t,
            None,
        )
        .unwrap();
        let rr = simulate(
            &model(2, RouterKind::RoundRobin),
            &cost,
            &Overheads::default(),
            &t,
            Some(&records),
        )
        .unwrap();
        let lor = simulate(
            &model(2, RouterKind::LeastOutstanding),
            &cost,
            &Overheads::default(),
            &t,
            None,
        )
        .unwrap();
        for s in [&one, &rr, &lor] {
            assert_eq!(s.completed, 4);
        }
        let ttft = |s: &Summary| s.ttft.mean.unwrap();
        // one slot alone: every short request waits behind the long one
        assert!(ttft(&rr) < ttft(&one), "{} {}", ttft(&rr), ttft(&one));
        // round-robin sends the third request to the long one's replica; least
        // outstanding sends it to the idle one
        assert!(ttft(&lor) < ttft(&rr), "{} {}", ttft(&lor), ttft(&rr));
        assert!(ttft(&lor) * 3.0 < ttft(&rr));
        // the fleet's simulated requests are written, one row each
        let csv = std::fs::read_to_string(&records).unwrap();
        assert_eq!(csv.lines().count(), 5, "{csv}");
        assert!(csv.starts_with(engine::sweep::RECORD_COLUMNS));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
