//! The Plan view's table of candidates (the model's figures, the simulated finalists'
//! beside them, the families passed over) and its extras: the rate profile's segments
//! (the disaggregated splits are [`super::plan_disagg`]'s).

use super::plan_view::finalists;
use super::Ctx;
use crate::plan::work::{self, COLUMNS};
use leptos::prelude::*;

/// The candidates table, with the families passed over under it.
pub(super) fn table(c: Ctx) -> impl IntoView {
    move || {
        let screen = c.plan.screen.get()?;
        let confirmed = finalists(c);
        let rows = work::rows(&screen, &confirmed);
        let passed: Vec<String> = screen
            .screen
            .infeasible
            .iter()
            .map(|i| format!("{} × TP {} ({}): {}", i.gpu, i.tp, i.router.name(), i.why))
            .collect();
        Some(view! {
            <div class="table-scroll"><table class="plan" id="plan-table">
                <thead><tr>{COLUMNS.iter().map(|h| view! { <th>{*h}</th> }).collect_view()}</tr></thead>
                <tbody>
                    {rows.into_iter().map(|r| view! {
                        <tr data-fleet=r.fleet.clone() data-sim-fleet=r.sim_fleet.clone().unwrap_or_default()
                            data-sim-meets=r.sim_meets.map_or("", |m| if m { "yes" } else { "no" })
                            class:answer=r.answer>
                            {r.cells.into_iter().map(|x| view! { <td>{x}</td> }).collect_view()}
                        </tr>
                    }).collect_view()}
                </tbody>
            </table></div>
            <p class="hint">"Model columns: the analytical fleet model's smallest fleet of each candidate that meets the SLO (validated for random routing; off by up to tens of per cent for the others near capacity, docs/accuracy.md, Fleets). Sim columns: the finalists simulated, their count moved until the simulation meets the SLO at N and misses it at N − 1; mean ± 95 % interval over the seeds. The simulator decides the answer."</p>
            {(!passed.is_empty()).then(|| view! {
                <details id="plan-passed"><summary>{format!("Passed over ({})", passed.len())}</summary>
                    <ul>{passed.into_iter().map(|t| view! { <li>{t}</li> }).collect_view()}</ul>
                </details>
            })}
        })
    }
}

/// The rate profile's segments, when there is a profile.
pub(super) fn extras(c: Ctx) -> impl IntoView {
    move || {
        let screen = c.plan.screen.get()?;
        let confirmed = finalists(c);
        let profile = work::profile_lines(&screen, &confirmed);
        Some(view! {
            {(!profile.is_empty()).then(|| view! {
                <h3>"Rate profile: the peak's cheapest fleet type per segment (model)"</h3>
                <ul id="plan-profile">{profile.into_iter().map(|t| view! { <li>{t}</li> }).collect_view()}</ul>
            })}
        })
    }
}
