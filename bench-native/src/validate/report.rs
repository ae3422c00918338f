//! `validate.md` and `validate.csv`: the report of a prediction against a measurement.

use super::errors::{median, relative_differences_over, ValidateReport, FLEET_METRICS, METRICS};
use super::server::{kv_text, ServerModel};
use super::{fmt_rate, ValidateArgs, BESIDE};
use crate::fit;
use crate::microbench::MicrobenchResult;
use anyhow::Context;
use engine::metrics::Summary;
use std::fmt::Write as _;
use std::path::Path;

/// The wake-up after idle as the report's model line names it ("" without one).
fn wake_text(wake: &[(f64, f64)]) -> String {
    if wake.is_empty() {
        return String::new();
    }
    format!(
        " and a wake-up after idle added to the step that ends an idle spell ({}; the idle \
         probe's TTFT over the lone prompt's)",
        fit::wake_points(wake)
    )
}

/// How a metric's values are shown in the tables: the factor to ms for times, and the
/// decimals (TPOT and throughput 2, other times whole ms).
fn display_unit(name: &str) -> (f64, usize) {
    if !name.ends_with("_s") {
        (1.0, 2)
    } else if name.starts_with("tpot") {
        (1e3, 2)
    } else {
        (1e3, 0)
    }
}

fn steps(m: &MicrobenchResult) -> String {
    m.decode
        .iter()
        .map(|d| {
            if d.slots.is_empty() {
                format!("{:.1}", d.step_s * 1e3)
            } else {
                format!(
                    "{{{}}}@{:.0}: {:.1}",
                    d.slot_list(","),
                    d.context_tokens,
                    d.step_s * 1e3
                )
            }
        })
        .collect::<Vec<_>>()
        .join(" / ")
}

/// The CSV header of `validate.csv`.
pub fn csv_header() -> String {
    let mut h = String::from("rate_rps,load,completed_pred,completed_meas");
    for (m, _) in METRICS {
        let _ = write!(h, ",{m}_pred,{m}_meas,{m}_rel_err");
    }
    h
}

pub(super) fn write_csv(r: &ValidateReport, path: &Path) -> anyhow::Result<()> {
    let mut s = csv_header() + "\n";
    for x in &r.rates {
        let _ = write!(
            s,
            "{},{:.4},{},{}",
            x.rate, x.load, x.predicted.completed, x.measured.completed
        );
        for (_, p, m, e) in x.errors(false) {
            let _ = write!(s, ",{p},{m},{e}");
        }
        s.push('\n');
    }
    std::fs::write(path, s).with_context(|| format!("writing {}", path.display()))
}

pub(super) fn markdown(
    r: &ValidateReport,
    args: &ValidateArgs,
    m: &ServerModel,
    cap: u32,
    command: &str,
    f: &fit::Fit,
    (pre, post): (&MicrobenchResult, &MicrobenchResult),
) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# Simulator vs real server\n\n```text\n{command}\n```\n");
    let _ = writeln!(
        s,
        "Server: {} slots, {} KV tokens (per slot {}), token budget {} (llama.cpp `-b`, vLLM \
         `max_num_batched_tokens`). Model: max_batch = slots, {}, budget as the \
         server's, first token after prefill, drain; cost = fitted **{:?}** (relative RMS \
         over the microbenchmark's points: linear {:.1} %, micro-batch {:.1} %, split slot \
         layouts included), plus a per-request front-end overhead of {:.2} ms (a lone \
         prompt's client TTFT minus the server's prompt time){}. \
         Workload: ShareGPT lengths × {}, prompt + output ≤ {cap}, Poisson, seed {}, {} \
         requests per rate, the same trace replayed against the server and simulated. \
         Predicted saturation {:.2} req/s.\n",
        m.slots,
        m.kv_tokens,
        m.per_slot.map_or("-".into(), |p| p.to_string()),
        m.budget,
        kv_text(m),
        args.cost,
        f.linear_rel_rms * 100.0,
        f.ubatch_rel_rms * 100.0,
        f.overhead_s * 1e3,
        wake_text(&f.idle_wake),
        args.scale,
        args.seed,
        args.requests,
        r.capacity_rps
    );
    let _ = writeln!(
        s,
        "Machine drift (the cost model pools a microbenchmark before and after the \
         measurement): decode step at 1..{} streams {} ms before, {} ms after; prefill of \
         {} tokens {:.1} ms before, {:.1} ms after; median |change| over every point \
         {:.1} %.\n",
        m.slots.min(8),
        steps(pre),
        steps(post),
        pre.prefill.last().map_or(0, |p| p.prompt_tokens),
        pre.prefill.last().map_or(f64::NAN, |p| p.latency_s * 1e3),
        post.prefill.last().map_or(f64::NAN, |p| p.latency_s * 1e3),
        r.drift * 100.0,
    );
    if m.replicas > 1 {
        fleet_section(&mut s, r, args, m);
    }
    let split: Vec<String> = f
        .ubatch_residuals
        .iter()
        .filter(|r| r.0.starts_with("decode_streams_in_") && !r.0.contains("_in_1_"))
        .map(|r| format!("{} ({}): {:.1} / {:.1} ms", r.0, r.1, r.3 * 1e3, r.2 * 1e3))
        .collect();
    if !split.is_empty() {
        let _ = writeln!(
            s,
            "Decode steps in split slot layouts (not fitted; the micro-batch model sums one \
             forward pass per run of consecutive slots), predicted / measured: {}.\n",
            split.join("; ")
        );
    }
    let _ = writeln!(
        s,
        "Each cell: predicted / measured (relative error = (pred − meas) / meas). Times in ms, \
         throughput in completed req/s; latencies from the intended send time.\n"
    );
    let _ = writeln!(
        s,
        "| rate [req/s] | load | TTFT mean | TTFT p50 | TTFT p99 | TPOT mean | E2E mean | throughput |"
    );
    let _ = writeln!(s, "|---:|---:|---:|---:|---:|---:|---:|---:|");
    for x in &r.rates {
        let _ = write!(s, "| {} | {:.2} ", fmt_rate(x.rate), x.load);
        for (name, p, me, e) in x.errors(false) {
            let (k, d) = display_unit(name);
            let _ = write!(s, "| {:.d$} / {:.d$} ({:+.0} %) ", p * k, me * k, e * 100.0);
        }
        s.push_str("|\n");
    }
    let _ = writeln!(
        s,
        "\n**Median |relative error| over all {} cells: {:.1} %** ({:?} cost); with the {} \
         cost model instead: {:.1} %.\n",
        r.rates.len() * METRICS.len(),
        r.median_abs_rel_error * 100.0,
        args.cost,
        format!("{:?}", args.cost.alt()).to_lowercase(),
        r.median_abs_rel_error_alt * 100.0
    );
    if let Some((noise, against)) = r.repeat_noise {
        let rounds = r.rates.first().map_or(1, |x| 1 + x.repeats.len());
        let _ = writeln!(
            s,
            "**Measurement noise ({rounds} rounds):** the same traces measured again after the \
             first round moved by a median {:.1} % from it (|relative difference| over the same \
             cells). A prediction cannot be expected to be closer to one measurement than \
             repeated measurements are to each other. The prediction against the later rounds: \
             median {:.1} %. Measured values round by round (the later rounds' runs are in \
             `repeat-<k>/`), prediction last:\n",
            noise * 100.0,
            against * 100.0
        );
        let _ = writeln!(
            s,
            "| rate [req/s] | TTFT mean | TTFT p50 | TTFT p99 | TPOT mean | E2E mean | throughput |"
        );
        let _ = writeln!(s, "|---:|---:|---:|---:|---:|---:|---:|");
        for x in &r.rates {
            let _ = write!(s, "| {} ", fmt_rate(x.rate));
            for (name, get) in METRICS {
                let (k, d) = display_unit(name);
                let v = |m: &Summary| get(m).map_or("–".into(), |v| format!("{:.d$}", v * k));
                let rounds: Vec<String> = std::iter::once(&x.measured)
                    .chain(&x.repeats)
                    .map(v)
                    .collect();
                let _ = write!(s, "| {} → {} ", rounds.join(" / "), v(&x.predicted));
            }
            s.push_str("|\n");
        }
        s.push('\n');
    }
    let _ = writeln!(
        s,
        "Per metric, median |relative error| over rates: {}.\n",
        METRICS
            .iter()
            .enumerate()
            .map(|(i, (name, _))| format!(
                "{name} {:.1} %",
                median(r.rates.iter().map(|x| x.errors(false)[i].3.abs()).collect()) * 100.0
            ))
            .collect::<Vec<_>>()
            .join(", ")
    );
    s
}

/// With `--replicas` > 1: the fleet, and the prediction of mean/p99 TTFT and TPOT per rate
/// against every round.
fn fleet_section(s: &mut String, r: &ValidateReport, args: &ValidateArgs, m: &ServerModel) {
    let _ = writeln!(
        s,
        "Fleet: measured through the load balancer at {}; predicted by the fleet simulator \
         as {} copies of the server above (each with the cost fitted on the one at the \
         microbenchmarked URL) behind the `{}` router, the trace being the whole fleet's.\n",
        args.balancer.as_deref().unwrap_or("(recorded run)"),
        m.replicas,
        m.router.name()
    );
    if let Some(sd) = r.slowdown {
        let per_rate: Vec<String> = r
            .rates
            .iter()
            .filter_map(|x| {
                let (k, busy) = x.colocation?;
                Some(format!(
                    "{} req/s: ×{k:.2} (busy {:.0} %)",
                    fmt_rate(x.rate),
                    busy * 100.0
                ))
            })
            .collect();
        let _ = writeln!(
            s,
            "Co-location: beside its busy neighbours the replica's prefills took ×{:.2} and \
             its decode steps ×{:.2} as long as alone (median ×{:.2} over {}). Each rate's \
             prediction scales the cost by 1 + (×{:.2} − 1) × the replicas' simulated busy \
             fraction: {}.\n",
            sd.prefill,
            sd.decode,
            sd.factor,
            BESIDE,
            sd.factor,
            per_rate.join("; ")
        );
    }
    let _ = writeln!(
        s,
        "| rate [req/s] | TTFT mean | TTFT p99 | TPOT mean | TPOT p99 |\n|---:|---:|---:|---:|---:|"
    );
    for x in &r.rates {
        let _ = write!(s, "| {} ", fmt_rate(x.rate));
        for (name, p, me, e) in relative_differences_over(&FLEET_METRICS, &x.predicted, &x.measured)
        {
            let (k, d) = display_unit(name);
            let later: String = x
                .repeats
                .iter()
                .filter_map(|rep| FLEET_METRICS.iter().find(|f| f.0 == name)?.1(rep))
                .map(|v| format!(" / {:.d$}", v * k))
                .collect();
            let _ = write!(
                s,
                "| {:.d$} / {:.d$}{later} ({:+.0} %) ",
                p * k,
                me * k,
                e * 100.0
            );
        }
        s.push_str("|\n");
    }
    let noise = r
        .noise_over(&FLEET_METRICS)
        .map_or("one round: not measured".into(), |n| {
            format!("{:.1} %", n * 100.0)
        });
    let _ = writeln!(
        s,
        "\nEach cell: predicted / measured in every round (error against the first). \
         **Fleet median |relative error| over mean/p99 TTFT and TPOT: {:.1} %**; the \
         measurement's own noise (later rounds against the first, same cells): {noise}.\n",
        r.median_error_over(&FLEET_METRICS) * 100.0
    );
}
