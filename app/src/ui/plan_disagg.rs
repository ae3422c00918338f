//! The Plan view's disaggregated splits (browser only): the switch and the link's
//! inputs, and the table of each family's cheapest split by the tandem model with the
//! simulated finalists beside it ([`crate::plan::split`]).

use super::plan_view::{bad, edit, plan_error, plan_field};
use super::Ctx;
use crate::plan::label;
use crate::plan::split::{split_rows, split_sentence, SPLIT_COLUMNS};
use engine::disagg::FirstTokenFrom;
use engine::plan::ConfirmedDisagg;
use leptos::prelude::*;

/// The disaggregated finalists, by rank.
fn splits(c: Ctx) -> Vec<ConfirmedDisagg> {
    c.plan
        .splits
        .with(|v| v.iter().map(|(_, x)| x.clone()).collect())
}

/// The switch, and the link's bandwidth, latency and first token when it is on.
pub(super) fn controls(c: Ctx) -> impl IntoView {
    view! {
        <label class="field">
            <span>{label("disagg")}</span>
            <input type="checkbox" name="disagg" prop:checked=move || c.plan.state.with(|s| s.disagg)
                on:change=move |ev| {
                    let on = event_target_checked(&ev);
                    c.plan.state.update(|s| s.disagg = on);
                } />
        </label>
        <Show when=move || c.plan.state.with(|s| s.disagg)>
            {plan_field(c, "plink", "bandwidth of the KV link from each prefill replica to the decode pool (inf: the transfers take no time)")}
            {plan_field(c, "plat", "latency added to every KV transfer")}
            <label class="field" title="decode: the decode pool's first iteration after the transfer (vLLM's proxy, Dynamo, SGLang); prefill: the end of the prefill (DistServe)">
                <span>{label("pfirst")}</span>
                <select name="pfirst" data-key="pfirst" class:invalid=move || bad(c, "pfirst")
                    on:change=move |ev| {
                        let v = event_target_value(&ev);
                        let next = c.plan.state.with_untracked(|s| s.edited("pfirst", &v));
                        edit(c, "pfirst", v, next);
                    }>
                    {[FirstTokenFrom::Decode, FirstTokenFrom::Prefill].into_iter().map(|f| view! {
                        <option value=f.name() selected=move || c.plan.state.with(|s| s.first_token == f)>{format!("the {} pool", f.name())}</option>
                    }).collect_view()}
                </select>
            </label>
            {plan_error(c, "pfirst")}
        </Show>
    }
}

/// The splits table, when asked for.
pub(super) fn table(c: Ctx) -> impl IntoView {
    move || {
        let screen = c.plan.screen.get()?;
        let (on, sentence) = c.plan.state.with(|s| {
            let done = c.plan.run.with(|r| r.elapsed_ms.is_some());
            (s.disagg, split_sentence(s, &screen, &splits(c), done))
        });
        if !on {
            return None;
        }
        let rows = split_rows(&screen, &splits(c));
        Some(view! {
            <h3>"Disaggregated splits: prefill pool + decode pool"</h3>
            <p class="answer-line" id="plan-disagg-answer">{sentence}</p>
            <div class="table-scroll"><table class="plan" id="plan-disagg">
                <thead><tr>{SPLIT_COLUMNS.iter().map(|h| view! { <th>{*h}</th> }).collect_view()}</tr></thead>
                <tbody>
                    {rows.into_iter().map(|r| view! {
                        <tr data-split=r.split.clone() data-sim-split=r.sim_split.clone().unwrap_or_default()
                            data-sim-meets=r.sim_meets.map_or("", |m| if m { "yes" } else { "no" })
                            class:answer=r.answer>
                            {r.cells.into_iter().map(|x| view! { <td>{x}</td> }).collect_view()}
                        </tr>
                    }).collect_view()}
                </tbody>
            </table></div>
            <p class="hint">"Model columns: the tandem model's cheapest split of each candidate (docs/model.md, Planning). Sim columns: the finalists simulated by the disaggregated simulator over the same seeds, the split moved one replica at a time until it meets the SLO and every split one replica smaller misses it; mean ± 95 % interval over the seeds. The simulator decides."</p>
            <ul id="plan-disagg-none">
                {screen.disagg_none.iter().map(|i| view! { <li>{format!("{} × TP {} ({}): {}", i.gpu, i.tp, i.router.name(), i.why)}</li> }).collect_view()}
            </ul>
        })
    }
}
