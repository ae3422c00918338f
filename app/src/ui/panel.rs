//! The calculator's parameter panel (workload, server, cost model, run) and its fields:
//! each text field shows its own error beside it ([`params::label`] names it).

use super::{Ctx, InputError};
use crate::params::{self, AdmissionRule, Arrivals, Cost, Lengths};
use engine::config::Policy;
use leptos::prelude::*;

/// A text field labelled as [`params::label`] names it. A value that is not a value of
/// the field shows an error and leaves the parameters alone; any other value is set
/// (always notifying, even when unchanged, so that correcting an error back to the value
/// shown re-runs and clears it — see the sweep effect in [`App`]).
pub(super) fn text_field(c: Ctx, key: &'static str, title: &'static str) -> impl IntoView {
    let label = params::label(key);
    // A text that is not a value stays in the field, beside its message.
    let shown = move || {
        c.input_errs
            .with(|v| v.iter().find(|e| e.key == key).map(|e| e.text.clone()))
            .unwrap_or_else(|| c.params.with(|p| p.get(key)))
    };
    view! {
        <label class="field" title=title>
            <span>{label}</span>
            <input type="text" name=key data-key=key prop:value=shown
                class:invalid=move || c.field_error(key).is_some()
                on:change=move |ev| {
                    let v = event_target_value(&ev);
                    match c.params.with_untracked(|p| p.edited(key, &v)) {
                        Ok(p) => {
                            c.clear_input_error(key);
                            c.params.set(p);
                        }
                        Err(message) => c.input_errs.update(|errs| {
                            errs.retain(|e| e.key != key);
                            errs.push(InputError { key: key.into(), text: v, message });
                        }),
                    }
                } />
        </label>
        {field_error(c, key)}
    }
}

/// The error about field `key`, beside it.
pub(super) fn field_error(c: Ctx, key: &'static str) -> impl IntoView {
    move || {
        c.field_error(key)
            .map(|e| view! { <p class="error field-error" data-error-for=key>{e}</p> })
    }
}

pub(super) fn select_field(
    c: Ctx,
    label: &'static str,
    key: &'static str,
    options: Vec<(&'static str, &'static str)>,
) -> impl IntoView {
    view! {
        <label class="field">
            <span>{label}</span>
            <select name=key data-key=key on:change=move |ev| {
                let v = event_target_value(&ev);
                c.clear_input_error(key);
                c.params.update(|p| {
                    p.set(key, &v);
                    if matches!(key, "cost" | "gpu" | "llm") {
                        p.apply_roofline_kv();
                    }
                });
            }>
                {options.into_iter().map(|(v, l)| view! {
                    <option value=v selected=move || c.params.with(|p| p.get(key) == v)>{l}</option>
                }).collect_view()}
            </select>
        </label>
        {field_error(c, key)}
    }
}

/// The parameter panel beside the charts.
pub(super) fn panel(c: Ctx) -> impl IntoView {
    view! {
            <aside class="panel">
                <h2>"Workload"</h2>
                <Show when=move || c.params.with(|p| p.trace.is_none())>
                    {select_field(c, "arrivals", "arr", Arrivals::ALL.iter().map(|a| (a.key(), match a { Arrivals::Poisson => "Poisson", Arrivals::Gamma => "gamma (bursty)", Arrivals::Deterministic => "deterministic" })).collect())}
                </Show>
                {crate::trace_ui::trace_control(c.params, c.invalid)}
                <Show when=move || c.params.with(|p| p.arrivals == Arrivals::Gamma && p.trace.is_none())>
                    {text_field(c, "k", "gamma shape; c_a² = 1/k (vLLM --burstiness)")}
                </Show>
                {text_field(c, "rates", "comma-separated arrival rates of the sweep")}
                {text_field(c, "rate", "rate of the CDF, over-time and timeline views")}
                {select_field(c, "lengths", "len", Lengths::ALL.iter().map(|l| (l.key(), match l { Lengths::Lognormal => "lognormal", Lengths::ShareGpt => "ShareGPT (5,000 pairs)", Lengths::Fixed => "fixed", Lengths::Mixture => "mixture 50 % 32→64 / 50 % 512→32" })).collect())}
                <Show when=move || c.params.with(|p| p.lengths == Lengths::Lognormal)>
                    {text_field(c, "pm", "")}
                    {text_field(c, "ps", "")}
                    {text_field(c, "om", "")}
                    {text_field(c, "os", "")}
                </Show>
                <Show when=move || c.params.with(|p| p.lengths == Lengths::Fixed)>
                    {text_field(c, "fp", "")}
                    {text_field(c, "fo", "")}
                </Show>
                {select_field(c, "system prompts", "sp", vec![("0", "none"), ("1", "shared")])}
                <Show when=move || c.params.with(|p| p.shared.system)>
                    {text_field(c, "spg", "how many different system prompts (groups)")}
                    {text_field(c, "sps", "share of requests (of conversations) that begin with a group's system prompt, in [0, 1]")}
                    {text_field(c, "spt", "system prompt length P, put before the request's own prompt")}
                    {text_field(c, "spz", "group g (from 0) is chosen with probability ∝ 1/(g+1)^s; 0: all groups alike")}
                </Show>
                {select_field(c, "conversations", "conv", vec![("0", "none"), ("1", "multi-turn")])}
                <Show when=move || c.params.with(|p| p.shared.conversations)>
                    {text_field(c, "cvm", "the arrivals start conversations of this many turns on average (geometric)")}
                    {text_field(c, "cvx", "")}
                    {text_field(c, "cvt", "each next turn arrives an exponential time later and resends the conversation so far plus a new message")}
                </Show>
                <h2>"Server"</h2>
                {select_field(c, "policy", "policy", Policy::ALL.iter().map(|p| (p.as_str(), p.as_str())).collect())}
                {text_field(c, "B", "max_num_seqs")}
                {text_field(c, "K", "")}
                {text_field(c, "block", "16 like vLLM, 1 = token-exact")}
                {text_field(c, "budget", "max_num_batched_tokens (chunked)")}
                {select_field(c, "KV mode", "kv", vec![("reserve", "reserve (loss system)"), ("paged", "paged + preemption")])}
                {select_field(c, "prefix cache", "pc", vec![("off", "off"), ("apc", "vLLM APC")])}
                <Show when=move || c.params.with(|p| !p.prefix_cache.is_off() && !p.shared.any() && !p.trace_shares())>
                    <p class="hint" id="prefix-hint">"Nothing is shared between these requests, so the cache finds only a preempted request's own blocks: turn on system prompts or conversations."</p>
                </Show>
                {select_field(c, "admission", "adm", AdmissionRule::ALL.iter().map(|a| (a.key(), match a { AdmissionRule::All => "all (the KV mode's rule)", AdmissionRule::Threshold => "threshold: max in system", AdmissionRule::Dp => "threshold (DP) from the TTFT SLO" })).collect())}
                <Show when=move || c.params.with(|p| p.admission == AdmissionRule::Threshold)>
                    {text_field(c, "nsys", "admit an arrival only while fewer than n requests are in the system (waiting + running); the others are rejected")}
                </Show>
                <Show when=move || c.params.with(|p| p.admission == AdmissionRule::Dp)>
                    <p class="hint" id="dp-threshold">{move || c.params.with(|p| match p.dp_threshold() {
                        Ok(n) => format!("admits while fewer than n* = {n} requests are in the system: the smallest n whose predicted p99 TTFT exceeds the TTFT SLO (at the B and K of each run)"),
                        Err(e) => e,
                    })}</p>
                </Show>
                {text_field(c, "oh", "per request, before the scheduler sees it: HTTP, tokenization, the server's queue; TTFT and E2E include it (bench-native fit measures it)")}
                <h2>"Cost model"</h2>
                {select_field(c, "cost", "cost", Cost::ALL.iter().map(|x| (x.key(), match x { Cost::Reference => "reference study formula", Cost::A10g => "A10G · Qwen2.5-1.5B table", Cost::Linear => "linear", Cost::Roofline => "roofline: GPU × model" })).collect())}
                <Show when=move || c.params.with(|p| p.cost == Cost::Roofline)>
                    {select_field(c, "GPU", "gpu", engine::cost::roofline::GPUS.iter().map(|g| (g.name, g.name)).collect())}
                    {select_field(c, "model", "llm", engine::cost::roofline::MODELS.iter().map(|m| (m.name, m.name)).collect())}
                    <p class="hint">"K follows the GPU's memory (90 % utilisation, one GPU) when you pick a GPU or model."</p>
                </Show>
                <Show when=move || c.params.with(|p| p.cost == Cost::Linear)>
                    {text_field(c, "b0", "")}
                    {text_field(c, "bp", "")}
                    {text_field(c, "bd", "")}
                </Show>
                <h2>"Run"</h2>
                <Show when=move || c.params.with(|p| p.trace.is_none())>
                    {text_field(c, "T", "")}
                </Show>
                {text_field(c, "seeds", "")}
                {select_field(c, "run rules", "refrules", vec![("1", "reference (cut at T, token after 1st decode)"), ("0", "vLLM (drain, prefill emits token 1)")])}
                {text_field(c, "slo_ttft", "")}
                {text_field(c, "slo_tpot", "")}
            </aside>
    }
}
