//! The report card on the page (browser only): per measured series, the verdict, the
//! metric × rate table ([`crate::report::Card`]), the setup each file records, where it
//! contradicts the page's parameters, one click to adopt it ([`crate::adopt`]) — and,
//! when the files record their benchmarks, to simulate each as it was run
//! ([`crate::as_run`]), whose figures then fill the simulated column — and the CSV and
//! markdown exports.

use crate::adopt::{contradictions, page_params_for};
use crate::as_run::{AsRunState, AsRunStatus};
use crate::curves::{CurvePoint, ModelCurve};
use crate::format;
use crate::job::{model_curves, Models};
use crate::measured::MeasuredSeries;
use crate::metric::Metric;
use crate::params::Params;
use crate::report::{describe_median, Card};
use leptos::prelude::*;

/// The signals the report card reads (and, on "adopt", writes).
#[derive(Clone, Copy, Debug)]
pub struct ReportSignals {
    pub series: Memo<Vec<MeasuredSeries>>,
    pub points: RwSignal<Vec<CurvePoint>>,
    pub models: RwSignal<Option<Models>>,
    pub params: RwSignal<Params>,
    /// The analytical model the card shows (by name; None: the first that predicts).
    pub model: RwSignal<Option<String>>,
    /// The benchmark-as-run job and its figures.
    pub as_run: RwSignal<AsRunState>,
    /// "Simulate this benchmark" (or, without benchmarks in the files, "adopt").
    pub simulate: Callback<MeasuredSeries>,
}

/// The names of the models that predict anything.
fn model_names(models: &Option<Models>) -> Vec<String> {
    models
        .as_ref()
        .map(|m| {
            m.curves
                .iter()
                .map(|c| c.kind.label().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// The card of `series` with the chosen model.
pub fn card_of(
    series: &MeasuredSeries,
    points: &[CurvePoint],
    models: &Option<Models>,
    chosen: Option<&str>,
) -> Card {
    let names = model_names(models);
    let name = chosen
        .filter(|c| names.iter().any(|n| n == c))
        .map(str::to_string)
        .or_else(|| names.first().cloned());
    match (models, name) {
        (Some(m), Some(name)) => {
            let curve = |metric| model_curves(m, metric).into_iter().find(|c| c.name == name);
            let curve: &dyn Fn(Metric) -> Option<ModelCurve> = &curve;
            Card::of(series, points, Some((name.as_str(), curve)))
        }
        _ => Card::of(series, points, None),
    }
}

/// The verdict of the first series' card (for exports), if any series is loaded.
pub fn first_verdict(s: ReportSignals) -> Option<String> {
    let series = s.series.get_untracked();
    let first = series.first()?;
    let chosen = s.model.get_untracked();
    Some(
        s.models
            .with_untracked(|m| {
                s.points
                    .with_untracked(|p| card_of(first, p, m, chosen.as_deref()))
            })
            .verdict,
    )
}

fn download_text(name: &str, text: &str, mime: &str) {
    let url = gloo_file::ObjectUrl::from(gloo_file::Blob::new_with_options(text, Some(mime)));
    let Ok(a) = document().create_element("a") else {
        return;
    };
    use wasm_bindgen::JsCast;
    let a: web_sys::HtmlAnchorElement = a.unchecked_into();
    a.set_href(&url);
    a.set_download(name);
    a.click();
}

/// One report card per measured series, below the chart.
pub fn report_cards(s: ReportSignals) -> impl IntoView {
    move || {
        let series = s.series.get();
        // The contradictions follow the parameters.
        s.params.track();
        if series.is_empty() {
            return None;
        }
        let names = s.models.with(model_names);
        let chosen = s.model.get();
        let params = s.params.get();
        let cards = series
            .into_iter()
            .enumerate()
            .map(|(i, ser)| {
                // The benchmark as run, when it is done for these parameters; else the sweep.
                let card = s.as_run.with(|a| match a.points_for(&ser.name, &params) {
                    Some(pts) => s.models.with(|m| card_of(&ser, pts, m, chosen.as_deref())),
                    None => s
                        .models
                        .with(|m| s.points.with(|p| card_of(&ser, p, m, chosen.as_deref()))),
                });
                card_view(s, i, ser, card)
            })
            .collect_view();
        Some(view! {
            <section class="report" id="report">
                <h2>"Report card"</h2>
                <label class="field">
                    <span>"analytical model"</span>
                    <select id="report-model" on:change=move |ev| s.model.set(Some(event_target_value(&ev)))>
                        {names.into_iter().map(|n| {
                            let sel = chosen.as_deref() == Some(n.as_str());
                            view! { <option value=n.clone() selected=sel>{n.clone()}</option> }
                        }).collect_view()}
                    </select>
                </label>
                {cards}
            </section>
        })
    }
}

fn card_view(s: ReportSignals, i: usize, series: MeasuredSeries, card: Card) -> impl IntoView {
    let p = s.params.get_untracked();
    let clashes = contradictions(&series, &p);
    let adopt_series = series.clone();
    let as_run_items = crate::as_run::items(&series).len();
    let status = s.as_run.with(|a| a.status_for(&series.name, &p));
    let as_run_done = matches!(status, Some((AsRunStatus::Done, _)));
    let button = if as_run_items > 0 {
        "simulate this benchmark"
    } else {
        "adopt the file's setup"
    };
    let csv = card.to_csv();
    let md = card.to_markdown();
    let slug = format!("kvqueue-report-{}", i + 1);
    let (slug_csv, slug_md) = (format!("{slug}.csv"), format!("{slug}.md"));
    let model = card.model.clone().unwrap_or_else(|| "model".into());
    let head = card
        .rates
        .iter()
        .map(|r| view! { <th>{format::req_per_s(*r)}</th> })
        .collect_view();
    let rows = card
        .rows
        .iter()
        .map(|row| {
            let cells = row
                .cells
                .iter()
                .map(|c| match c {
                    Some(c) => {
                        let [m, sim, mo, err] = card.cell_lines(row.metric, c);
                        view! {
                            <td title=c.file.clone()>
                                <b class="measured">{m}</b><br/>
                                <span class="sim">{sim}</span><br/>
                                <span class="model">{mo}</span><br/>
                                <span class="err">{err}</span>
                            </td>
                        }
                        .into_any()
                    }
                    None => view! { <td>"—"</td> }.into_any(),
                })
                .collect_view();
            view! {
                <tr class="metric-row" data-metric=row.metric.key()>
                    <th>{row.metric.name()}</th>{cells}<td class="median">{describe_median(row.metric, row.median)}</td>
                </tr>
            }
        })
        .collect_view();
    let medians = card
        .median_by_rate
        .iter()
        .map(|m| view! { <td>{m.map(format::percent).unwrap_or_else(|| "—".into())}</td> })
        .collect_view();
    let all = card
        .median_all
        .map(format::percent)
        .unwrap_or_else(|| "—".into());
    let files = series
        .files
        .iter()
        .map(|(f, setup)| view! { <li><b>{f.clone()}</b>": "{setup.describe()}</li> })
        .collect_view();
    let notes = series
        .notes
        .iter()
        .map(|n| view! { <li>{n.clone()}</li> })
        .collect_view();
    let has_clashes = !clashes.is_empty();
    let show_button = has_clashes || as_run_items > 0;
    let sim_hint = if as_run_done {
        "sim = the benchmark as run, mean over seeds ± 95 % CI half-width"
    } else {
        "sim = simulated mean ± 95 % CI half-width"
    };
    view! {
        <div class="card" data-series=series.name.clone()>
            <h3 class="series-name">{series.name.clone()}</h3>
            <p class="verdict">{card.verdict.clone()}</p>
            {show_button.then(|| {
                let unexpressed = page_params_for(&adopt_series, &p).unexpressed;
                view! {
                    <div class="clashes">
                        {has_clashes.then(|| view! {
                            <p>"The page's sweep simulates something else than this run:"</p>
                            <ul>{clashes.into_iter().map(|c| view! { <li>{c}</li> }).collect_view()}</ul>
                        })}
                        <button class="adopt" on:click=move |_| s.simulate.run(adopt_series.clone())>{button}</button>
                        {(!unexpressed.is_empty()).then(|| view! {
                            <span class="hint">{format!(" — not simulated yet: {}", unexpressed.join("; "))}</span>
                        })}
                    </div>
                }
            })}
            {status.map(|(k, text)| view! {
                <p class="as-run" data-as-run=k.key()>{text}</p>
            })}
            <div class="table-scroll">
            <table class="report-card">
                <thead><tr><th>"metric"</th>{head}<th>"median |error|"</th></tr></thead>
                <tbody>
                    {rows}
                    <tr class="median-row"><th>"median |error|"</th>{medians}<td><b>{all}</b></td></tr>
                </tbody>
            </table>
            </div>
            <p class="hint">{format!("each cell: measured · {sim_hint} · {model} · error = |measured − simulated| / simulated (hover a cell for its file)")}</p>
            <button class="report-csv" on:click=move |_| download_text(&slug_csv, &csv, "text/csv")>"export CSV"</button>
            " "
            <button class="report-md" on:click=move |_| download_text(&slug_md, &md, "text/markdown")>"export markdown"</button>
            <details class="setup">
                <summary>"what the files say about their benchmark"</summary>
                <ul>{files}</ul>
                <ul class="hint">{notes}</ul>
            </details>
        </div>
    }
}
