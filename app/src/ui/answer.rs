//! The calculator's answer bar (capacity at the SLO, binding limit, utilisation) and the
//! table of measured points against the simulation.

use super::Ctx;
use crate::curves::{capacity_at_slo, diagnose, interpolate, PointError};
use crate::format;
use crate::job::SLO_TARGET;
use leptos::prelude::*;

pub(super) fn answer(c: Ctx) -> impl IntoView {
    // Only whether a curve sweep runs matters here, not its progress.
    let sweeping = Memo::new(move |_| c.run.with(|r| r.running() && !r.grid));
    let failed = Memo::new(move |_| c.run.with(|r| r.error.clone()));
    let cancelled = Memo::new(move |_| c.run.with(|r| r.cancelled && !r.grid));
    move || {
        let p = c.params.get();
        let points = c.points.get();
        let models = c.models.get();
        let slo = format!(
            "TTFT ≤ {} s and TPOT ≤ {} s for ≥ {:.0} % of requests",
            p.slo_ttft_s,
            p.slo_tpot_s,
            SLO_TARGET * 100.0
        );
        // Computed from the points of the last sweep, so it goes when a new one starts.
        let diagnosis = c
            .swept
            .get_value()
            .and_then(|swept| diagnose(&swept, &points));
        // Every status ends: on an error on show, a failed run or a cancelled one.
        let sim = if c.blocked() {
            "not simulated: fix the error shown in place of the chart".to_string()
        } else if let Some(e) = failed.get() {
            format!("not simulated: {e}")
        } else if diagnosis.is_some() {
            "none".to_string()
        } else if cancelled.get() && points.len() < p.rates.len() {
            "not simulated: cancelled".to_string()
        } else if sweeping.get() || points.len() < p.rates.len() {
            "simulating…".to_string()
        } else {
            match capacity_at_slo(&points, SLO_TARGET) {
                (Some(r), false) => format!("{r:.2} req/s"),
                (Some(r), true) => format!("≥ {r:.2} req/s (every swept rate meets it)"),
                (None, _) => format!(
                    "below {} req/s (the lowest swept rate misses it)",
                    p.rates[0]
                ),
            }
        };
        let model = models
            .as_ref()
            .and_then(|m| m.slo_capacity.clone())
            .map(|(k, r)| format!("{r:.2} req/s ({k})"))
            .unwrap_or_else(|| "—".into());
        let (binding, bounds) = match models.as_ref().and_then(|m| m.bounds) {
            Some(b) => (
                b.binding.as_str().to_string(),
                format!(
                    "compute {:.2} · KV memory {:.2} · sequence slots {:.2} req/s",
                    b.compute_rps, b.kv_rps, b.slots_rps
                ),
            ),
            None => ("—".into(), String::new()),
        };
        let util = models
            .as_ref()
            .and_then(|m| m.utilisation)
            .map(|u| format!("{u:.2}"))
            .unwrap_or_else(|| "—".into());
        view! {
            <div class="answer" id="answer">
                <div class="big">"Capacity at SLO: "<b id="capacity">{sim}</b>" (simulated) · "<b>{model}</b></div>
                {diagnosis.map(|d| view! { <div class="big error" id="diagnosis">{d}</div> })}
                <div>{slo}</div>
                <div>"Binding limit: "<b id="binding">{binding}</b>" — "{bounds}" · utilisation at λ = "{p.rate}": "{util}</div>
                {prefix_line(c)}
            </div>
        }
    }
}

/// What the prefix cache did in the chosen rate's run (docs/model.md, Prefix caching):
/// hit rates in tokens and blocks, prefill tokens saved, TTFT of hits against misses
/// (nothing while an error is on show).
fn prefix_line(c: Ctx) -> impl IntoView {
    // Parameters that cannot run have no run to speak of.
    if c.blocked() {
        return None;
    }
    let detail = c.detail.get();
    let (rate, p) = detail.and_then(|d| d.prefix.map(|p| (d.rate, p)))?;
    let rate_of = |x: Option<f64>| x.map(format::percent).unwrap_or_else(|| "—".into());
    let ttft = |d: &engine::metrics::Dist| match d.mean {
        Some(m) => format!("{} ({} requests)", format::latency(m), d.n),
        None => "— (none)".into(),
    };
    let per_request = if p.lookups > 0 {
        p.saved_tokens as f64 / p.lookups as f64
    } else {
        0.0
    };
    Some(view! {
        <div id="prefix-stats">
            {format!("Prefix cache at λ = {} (one run): hit rate ", format::req_per_s(rate))}
            <b id="prefix-hit-rate">{rate_of(p.token_hit_rate)}</b>
            {format!(
                " of prompt tokens, {} of blocks · prefill tokens saved: {} ({} per admission) · mean TTFT of hits {}, of misses {}",
                rate_of(p.block_hit_rate),
                p.saved_tokens,
                format::sig3(per_request),
                ttft(&p.ttft_hit),
                ttft(&p.ttft_miss),
            )}
        </div>
    })
}

pub(super) fn error_table(c: Ctx) -> impl IntoView {
    move || {
        let m = c.params.with(|p| p.metric);
        let points = c.points.get();
        let sets = c.measured.get();
        if sets.is_empty() {
            return view! { <p class="hint">"Drop a bench-native CSV (per-request or summary), a vLLM bench serve JSON or a reference sweep CSV here, or pick a file, to overlay measurements on the curves."</p> }.into_any();
        }
        let rows = sets
            .iter()
            .flat_map(|s| {
                let name = s.name.clone();
                s.points
                    .iter()
                    .filter_map(|mp| {
                        let (v, _) = mp.get(m)?;
                        let sim = interpolate(&points, m, mp.rate);
                        let err = sim.map(|s| PointError::of(m, v, s).describe()).unwrap_or_else(|| "outside the swept rates".into());
                        Some(view! {
                            <tr><td>{name.clone()}</td><td>{format::req_per_s(mp.rate)}</td><td>{format::value(m, v)}</td>
                            <td>{sim.map(|s| format::value(m, s)).unwrap_or_else(|| "—".into())}</td><td>{err}</td></tr>
                        })
                    })
                    .collect::<Vec<_>>()
            })
            .collect::<Vec<_>>();
        // Each file's notes (a different B/K, rows filtered …) stay next to its errors,
        // not only in the message of the last file dropped.
        let notes = sets
            .iter()
            .flat_map(|s| s.notes.iter().map(move |n| format!("{}: {n}", s.name)))
            .map(|n| view! { <li>{n}</li> })
            .collect::<Vec<_>>();
        view! {
            <ul class="hint" id="measured-notes">{notes}</ul>
            <table class="errors" id="error-table">
                <thead><tr><th>"file"</th><th>"λ"</th><th>{format!("measured {}", m.name())}</th><th>"simulated"</th><th>"error"</th></tr></thead>
                <tbody>{rows}</tbody>
            </table>
            <button on:click=move |_| c.measured.set(Vec::new())>"clear measurements"</button>
        }
        .into_any()
    }
}
