//! The Plan view (browser only): the cheapest fleet that meets an SLO at a given
//! traffic ([`crate::plan`]). Its controls, the answer in one sentence, the Pareto chart
//! of price against p99 TTFT and the candidates table with the simulated finalists
//! beside the model's figures.
//!
//! The screen and the confirmation run in the worker pool: every worker screens (it is
//! cheap) and confirms its share of the finalists; the first also sends the screen.

use super::panel::{select_field, text_field};
use super::{next_id, now_ms, pool, set_root_data, Ctx, InputError, RunState, View};
use crate::chart::{draw_panels, Geometry};
use crate::job::{Job, Reply, Task};
use crate::params::{Invalid, Lengths, Params, Preset};
use crate::plan::work::{self, ChartPoint, PlanScreen};
use crate::plan::{label, models, price_key, PlanState, ROUTER_CHOICES, TP_CHOICES};
use engine::config::{KvMode, Policy};
use engine::cost::roofline::GPUS;
use engine::plan::{default_price, Confirmed, ConfirmedDisagg};
use leptos::prelude::*;
use plotters::prelude::IntoDrawingArea;
use plotters_canvas::CanvasBackend;

/// The Plan view's signals.
#[derive(Clone, Copy)]
pub(super) struct PlanSignals {
    pub state: RwSignal<PlanState>,
    /// Text typed (or read from the URL) that is not a value of its field.
    pub input_errs: RwSignal<Vec<InputError>>,
    /// Why the plan cannot run ([`PlanState::check`]), if it cannot.
    pub invalid: Memo<Option<Invalid>>,
    pub screen: RwSignal<Option<PlanScreen>>,
    /// The finalists back from the workers, by rank.
    pub confirmed: RwSignal<Vec<(u32, Confirmed)>>,
    /// The disaggregated finalists back from the workers, by rank.
    pub splits: RwSignal<Vec<(u32, ConfirmedDisagg)>>,
    pub run: RwSignal<RunState>,
    /// The state and parameters of the last plan started (None: none, or cancelled).
    pub planned: StoredValue<Option<(PlanState, Params)>>,
    /// The view's URL as last written: the user's own until the state is valid.
    pub url: StoredValue<String>,
    pub hover: RwSignal<Option<String>>,
    /// The chart's points and geometry, for the hover.
    pub points: StoredValue<Vec<ChartPoint>>,
    pub geo: StoredValue<Geometry>,
}

impl PlanSignals {
    /// The view's signals, from the URL's state and its unreadable values.
    pub fn new(
        state: PlanState,
        bad: Vec<(String, String)>,
        params: RwSignal<Params>,
        url: String,
    ) -> PlanSignals {
        let state = RwSignal::new(state);
        PlanSignals {
            state,
            input_errs: RwSignal::new(
                bad.into_iter()
                    .map(|(key, text)| InputError {
                        message: format!(
                            "{}: '{text}' from the URL is not a valid value",
                            label(&key)
                        ),
                        key,
                        text,
                    })
                    .collect(),
            ),
            invalid: Memo::new(move |_| state.with(|s| params.with(|p| s.check(p).err()))),
            screen: RwSignal::new(None),
            confirmed: RwSignal::new(Vec::new()),
            splits: RwSignal::new(Vec::new()),
            run: RwSignal::new(RunState::default()),
            planned: StoredValue::new(None),
            url: StoredValue::new(url),
            hover: RwSignal::new(None),
            points: StoredValue::new(Vec::new()),
            geo: StoredValue::new(Geometry::default()),
        }
    }
}

/// Whether an error stops the plan from running (and is on show).
pub(super) fn blocked(c: Ctx) -> bool {
    c.plan.input_errs.with(|v| !v.is_empty())
        || c.input_errs.with(|v| !v.is_empty())
        || c.plan.invalid.with(Option::is_some)
}

/// The view's URL query, kept as the user wrote it while the state is not valid.
pub(super) fn query(c: Ctx) -> String {
    if !blocked(c) {
        let q = c.plan.state.with(|s| c.params.with(|p| s.to_query(p)));
        c.plan.url.set_value(q);
    }
    c.plan.url.get_value()
}

/// Whether `reply` is the Plan view's: of its running job, or an error outside any job
/// while the view is shown.
pub(super) fn claims(c: Ctx, reply: &Reply) -> bool {
    let mine = c.plan.run.with_untracked(|r| r.id);
    match reply {
        Reply::Error { id: 0, .. } => c.view.get_untracked() == View::Plan,
        Reply::Progress { id, .. }
        | Reply::PlanScreen { id, .. }
        | Reply::PlanConfirmed { id, .. }
        | Reply::Done { id }
        | Reply::Error { id, .. } => *id == mine && mine != 0,
        _ => false,
    }
}

pub(super) fn on_reply(c: Ctx, w: usize, reply: Reply) {
    let r = &c.plan.run;
    match reply {
        Reply::Progress { done, .. } => r.update(|r| {
            if let Some(d) = r.done.get_mut(w) {
                *d = done;
            }
        }),
        Reply::PlanScreen { screen, .. } => c.plan.screen.set(Some(*screen)),
        Reply::PlanConfirmed {
            rank,
            confirmed: Some(x),
            ..
        } => c.plan.confirmed.update(|v| {
            let at = v.partition_point(|(k, _)| *k < rank);
            v.insert(at, (rank, *x));
        }),
        Reply::PlanConfirmed {
            rank,
            split: Some(x),
            ..
        } => c.plan.splits.update(|v| {
            let at = v.partition_point(|(k, _)| *k < rank);
            v.insert(at, (rank, *x));
        }),
        Reply::Done { id } => {
            let mut finished_now = None;
            r.update(|r| {
                if let Some(f) = r.finished.get_mut(w) {
                    *f = true;
                }
                if r.finished.iter().all(|f| *f) && r.elapsed_ms.is_none() {
                    let e = now_ms() - r.started_ms;
                    r.elapsed_ms = Some(e);
                    finished_now = Some(e);
                }
            });
            if let Some(e) = finished_now {
                set_root_data("plan-ms", &format!("{e:.0}"));
                set_root_data("plan-done", &id.to_string());
            }
        }
        Reply::Error { message, .. } => r.update(|r| r.error = Some(message)),
        _ => {}
    }
}

/// Forgets the last plan, so the view plans again when next shown (another view's work
/// cancelled it).
pub(super) fn forget(c: Ctx) {
    c.plan.planned.set_value(None);
}

/// Starts the plan in the workers, cancelling whatever they ran: the screen and the
/// first finalist in the first worker, finalist k in worker k mod n; the disaggregated
/// finalists in the first worker, which has their screen.
pub(super) fn start(c: Ctx) {
    if blocked(c) {
        return;
    }
    let Some(pool) = pool() else { return };
    let s = c.plan.state.get_untracked();
    let p = c.params.get_untracked();
    let n = pool.borrow().len();
    let splits = if s.disagg { s.finalists } else { 0 };
    let shares: Vec<Vec<Task>> = (0..n)
        .map(|w| {
            let ranks: Vec<u32> = (0..s.finalists).filter(|k| *k as usize % n == w).collect();
            if w == 0 || !ranks.is_empty() {
                vec![Task::Plan {
                    plan: s.clone(),
                    screen: w == 0,
                    ranks,
                    splits: if w == 0 { splits } else { 0 },
                }]
            } else {
                Vec::new()
            }
        })
        .collect();
    let id = next_id();
    c.plan.planned.set_value(Some((s.clone(), p.clone())));
    c.swept.set_value(None);
    c.learnt.set_value(None);
    c.watched.set_value(None);
    super::fleet_view::forget(c);
    c.plan.run.set(RunState {
        id,
        total: 1 + s.finalists + splits,
        done: vec![0; n],
        finished: shares.iter().map(|s| s.is_empty()).collect(),
        started_ms: now_ms(),
        ..RunState::default()
    });
    c.plan.screen.set(None);
    c.plan.confirmed.set(Vec::new());
    c.plan.splits.set(Vec::new());
    c.plan.hover.set(None);
    pool.borrow_mut().submit(Job::per_share(id, &p, shares));
}

/// The error about field `key`, beside it.
pub(super) fn plan_error(c: Ctx, key: &'static str) -> impl IntoView {
    move || {
        c.plan
            .input_errs
            .with(|v| v.iter().find(|e| e.key == key).map(|e| e.message.clone()))
            .or_else(|| {
                c.plan.invalid.with(|i| {
                    i.as_ref()
                        .filter(|i| i.key == Some(key))
                        .map(|i| i.message.clone())
                })
            })
            .map(|e| view! { <p class="error field-error" data-error-for=key>{e}</p> })
    }
}

pub(super) fn bad(c: Ctx, key: &'static str) -> bool {
    c.plan.input_errs.with(|v| v.iter().any(|e| e.key == key))
        || c.plan
            .invalid
            .with(|i| i.as_ref().is_some_and(|i| i.key == Some(key)))
}

/// Applies an edit of field `key`: the new state, or the text kept with its message.
pub(super) fn edit(c: Ctx, key: &str, text: String, next: Result<PlanState, String>) {
    match next {
        Ok(s) => {
            c.plan.input_errs.update(|e| e.retain(|e| e.key != key));
            c.plan.state.set(s);
        }
        Err(message) => c.plan.input_errs.update(|errs| {
            errs.retain(|e| e.key != key);
            errs.push(InputError {
                key: key.into(),
                text,
                message,
            });
        }),
    }
}

/// A text field of the view's own state.
pub(super) fn plan_field(c: Ctx, key: &'static str, title: &'static str) -> impl IntoView {
    let shown = move || {
        c.plan
            .input_errs
            .with(|v| v.iter().find(|e| e.key == key).map(|e| e.text.clone()))
            .unwrap_or_else(|| c.plan.state.with(|s| s.get(key)))
    };
    view! {
        <label class="field" title=title>
            <span>{label(key)}</span>
            <input type="text" name=key data-key=key prop:value=shown class:invalid=move || bad(c, key)
                on:change=move |ev| {
                    let v = event_target_value(&ev);
                    let next = c.plan.state.with_untracked(|s| s.edited(key, &v));
                    edit(c, key, v, next);
                } />
        </label>
        {plan_error(c, key)}
    }
}

/// A field of the calculator, with the plan's own error about it (if the calculator
/// does not already show one).
fn shared_field(c: Ctx, key: &'static str, title: &'static str) -> impl IntoView {
    view! {
        {text_field(c, key, title)}
        {move || c.field_error(key).is_none().then(|| plan_error(c, key))}
    }
}

/// One GPU preset: a checkbox and its price [$ per GPU-hour].
fn gpu_row(c: Ctx, gpu: &'static str) -> impl IntoView {
    let key = price_key(gpu);
    let default = default_price(gpu).unwrap_or(1.0);
    let shown = move || {
        c.plan
            .input_errs
            .with(|v| v.iter().find(|e| e.key == key).map(|e| e.text.clone()))
            .unwrap_or_else(|| {
                c.plan
                    .state
                    .with(|s| crate::params::fmt_num(s.price(gpu).unwrap_or(default)))
            })
    };
    view! {
        <label class="field gpu" title=format!("{gpu}: price per GPU-hour (default {default})")>
            <span>
                <input type="checkbox" name="gpu" value=gpu
                    prop:checked=move || c.plan.state.with(|s| s.price(gpu).is_some())
                    on:change=move |ev| {
                        let on = event_target_checked(&ev);
                        c.plan.input_errs.update(|e| e.retain(|e| e.key != key && e.key != "gpus"));
                        let s = c.plan.state.with_untracked(|s| s.with_gpu(gpu, on.then_some(default)));
                        c.plan.state.set(s);
                    } />
                {format!(" {gpu} $/h")}
            </span>
            <input type="text" name=key data-key=key prop:value=shown class:invalid=move || bad(c, key)
                on:change=move |ev| {
                    let v = event_target_value(&ev);
                    let next = match v.trim().parse::<f64>() {
                        Ok(x) if !x.is_nan() => Ok(c.plan.state.with_untracked(|s| s.with_gpu(gpu, Some(x)))),
                        _ => Err(format!("{gpu} price: '{v}' is not a number [$ per GPU-hour]")),
                    };
                    edit(c, key, v, next);
                } />
        </label>
        {plan_error(c, key)}
    }
}

/// A row of checkboxes over `choices`, each toggling its value in the list of `key`.
fn checks(c: Ctx, key: &'static str, choices: Vec<String>) -> impl IntoView {
    view! {
        <div class="field checks" data-key=key>
            <span>{label(key)}</span>
            <span>
                {choices.into_iter().map(|v| {
                    let v2 = v.clone();
                    let shown = v.clone();
                    view! {
                        <label class="plan-check">
                            <input type="checkbox" name=key value=v.clone()
                                prop:checked=move || c.plan.state.with(|s| s.get(key).split(',').any(|x| x == v))
                                on:change=move |ev| {
                                    let on = event_target_checked(&ev);
                                    let now = c.plan.state.with_untracked(|s| s.get(key));
                                    let mut items: Vec<String> = now.split(',').filter(|x| !x.is_empty() && *x != v2).map(String::from).collect();
                                    if on {
                                        items.push(v2.clone());
                                    }
                                    if key == "tp" {
                                        items.sort_by_key(|x| x.parse::<u32>().unwrap_or(0));
                                    }
                                    let text = items.join(",");
                                    let next = c.plan.state.with_untracked(|s| s.edited(key, &text));
                                    edit(c, key, text, next);
                                } />
                            {shown}
                        </label>
                    }
                }).collect_view()}
            </span>
        </div>
        {plan_error(c, key)}
    }
}

fn status(c: Ctx) -> impl IntoView {
    move || {
        let r = c.plan.run.get();
        let pct = if r.total > 0 {
            100.0 * f64::from(r.done_runs()) / f64::from(r.total)
        } else {
            0.0
        };
        if let Some(e) = r.error.clone() {
            view! { <span class="error">{format!("error: {e}")}</span> }.into_any()
        } else if r.running() {
            let what = if c.plan.screen.with(Option::is_none) {
                "screening every GPU × TP × router with the analytical fleet model…".to_string()
            } else {
                format!(
                    "simulating the finalists: {} of {} back",
                    c.plan.confirmed.with(Vec::len) + c.plan.splits.with(Vec::len),
                    r.total - 1
                )
            };
            view! {
                <progress max="100" value=pct></progress>
                <span>{format!(" {what}")}</span>
            }
            .into_any()
        } else if let Some(ms) = r.elapsed_ms {
            let evaluated = c
                .plan
                .screen
                .with(|s| s.as_ref().map_or(0, |s| s.screen.evaluated));
            view! { <span id="plan-time">{format!("planned in {:.2} s: {evaluated} fleets screened by the model, {} finalists simulated (in {} Web Worker{})", ms / 1000.0, r.total - 1, r.done.len(), if r.done.len() == 1 { "" } else { "s" })}</span> }.into_any()
        } else {
            view! { <span></span> }.into_any()
        }
    }
}

/// The confirmed finalists, by rank.
pub(super) fn finalists(c: Ctx) -> Vec<Confirmed> {
    c.plan
        .confirmed
        .with(|v| v.iter().map(|(_, x)| x.clone()).collect())
}

/// Draws the Pareto chart onto its canvas.
fn draw(c: Ctx, canvas: &web_sys::HtmlCanvasElement) {
    let Some(screen) = c.plan.screen.get() else {
        return;
    };
    let confirmed = finalists(c);
    let p = c.params.get();
    let (panel, pts) = work::chart(&p, &screen, &confirmed);
    if let Some(b) = CanvasBackend::with_canvas_object(canvas.clone()) {
        match draw_panels(&b.into_drawing_area(), &[panel]) {
            Ok(g) => {
                c.plan.geo.set_value(g);
                let _ = canvas.set_attribute("data-points", &pts.len().to_string());
                // Each point's canvas pixel, so a test can hover it.
                let px: Vec<String> = pts
                    .iter()
                    .map(|q| {
                        let (x, y) = g.px(q.x, q.y);
                        format!("{x:.0},{y:.0}")
                    })
                    .collect();
                let _ = canvas.set_attribute("data-points-px", &px.join(";"));
                c.plan.points.set_value(pts);
            }
            Err(e) => c
                .plan
                .run
                .update(|r| r.error = Some(format!("drawing failed: {e}"))),
        }
    }
}

/// The view.
pub(super) fn plan_view(c: Ctx) -> impl IntoView {
    let canvas = NodeRef::<leptos::html::Canvas>::new();
    Effect::new(move |_| {
        c.plan.screen.track();
        c.plan.confirmed.track();
        if let Some(cv) = canvas.get() {
            draw(c, &cv);
        }
    });
    let on_move = move |ev: web_sys::MouseEvent| {
        let Some(cv) = canvas.get_untracked() else {
            return;
        };
        let scale = f64::from(cv.width()) / f64::from(cv.client_width().max(1));
        let at = (
            f64::from(ev.offset_x()) * scale,
            f64::from(ev.offset_y()) * scale,
        );
        let g = c.plan.geo.get_value();
        let text = c.plan.points.with_value(|pts| {
            work::nearest(pts, |q| g.px(q.x, q.y), at, 14.0 * scale).map(String::from)
        });
        c.plan.hover.set(text);
    };
    let share_url = move || {
        let loc = window().location();
        format!(
            "{}{}?{}",
            loc.origin().unwrap_or_default(),
            loc.pathname().unwrap_or_default(),
            query(c)
        )
    };
    let errors = move || {
        let mut v: Vec<String> = c
            .plan
            .input_errs
            .with(|v| v.iter().map(|e| e.message.clone()).collect());
        v.extend(
            c.input_errs
                .with(|v| v.iter().map(|e| e.message.clone()).collect::<Vec<_>>()),
        );
        v.extend(
            c.plan
                .invalid
                .with(|i| i.as_ref().map(|i| i.message.clone())),
        );
        v
    };
    let sentence = move || {
        let s = c.plan.screen.get()?;
        let done = c.plan.run.with(|r| r.elapsed_ms.is_some());
        let confirmed = finalists(c);
        let text = c.plan.state.with(|st| {
            c.params
                .with(|p| work::sentence(st, p, &s, &confirmed, done))
        });
        Some(text)
    };
    view! {
        <div class="toolbar">
            <label>"Replica preset "
                <select id="plan-preset" on:change=move |ev| {
                    if let Some(p) = Preset::from_key(&event_target_value(&ev)) {
                        let (ttft, tpot, llm) = c.params.with_untracked(|x| (x.slo_ttft_s, x.slo_tpot_s, x.llm.clone()));
                        c.params.set(Params { slo_ttft_s: ttft, slo_tpot_s: tpot, llm, ..p.params() });
                    }
                }>
                    {Preset::ALL.into_iter().map(|p| view! {
                        <option value=p.key() selected=move || c.params.with(|x| x.preset == p.key())>{p.label()}</option>
                    }).collect_view()}
                </select>
            </label>
            <span class="spacer"></span>
            <input id="plan-share-url" class="share" readonly prop:value=share_url title="copy this link to share the view" />
        </div>
        <main>
            <aside class="panel">
                <h2>"Traffic"</h2>
                {plan_field(c, "prate", "the whole fleet's arrival rate")}
                {plan_field(c, "profile", "optional: HOURS:RATE segments (8:5,8:40,8:20); the fleet is planned for the peak, each segment gets its own count")}
                <h2>"SLO"</h2>
                {shared_field(c, "slo_ttft", "time to first token a request must meet")}
                {shared_field(c, "slo_tpot", "time per output token a request must meet")}
                {plan_field(c, "att", "fraction of requests that must meet both (0.9: 90 %)")}
                <h2>"Candidates"</h2>
                {select_field(c, "model", "llm", models().into_iter().map(|m| (m, m)).collect())}
                <div id="plan-gpus">
                    {GPUS.iter().map(|g| gpu_row(c, g.name)).collect_view()}
                </div>
                {plan_error(c, "gpus")}
                {checks(c, "tp", TP_CHOICES.iter().map(u32::to_string).collect())}
                {checks(c, "routers", ROUTER_CHOICES.iter().map(|r| r.name()).collect())}
                {super::plan_disagg::controls(c)}
                <h2>"Workload"</h2>
                {select_field(c, "lengths", "len", Lengths::ALL.iter().map(|l| (l.key(), match l { Lengths::Lognormal => "lognormal", Lengths::ShareGpt => "ShareGPT (5,000 pairs)", Lengths::Fixed => "fixed", Lengths::Mixture => "mixture 50 % 32→64 / 50 % 512→32" })).collect())}
                <Show when=move || c.params.with(|p| p.lengths == Lengths::Lognormal)>
                    {shared_field(c, "pm", "")}
                    {shared_field(c, "om", "")}
                </Show>
                <Show when=move || c.params.with(|p| p.lengths == Lengths::Fixed)>
                    {shared_field(c, "fp", "")}
                    {shared_field(c, "fo", "")}
                </Show>
                <h2>"Each replica"</h2>
                {select_field(c, "policy", "policy", Policy::ALL.iter().map(|p| (p.as_str(), p.as_str())).collect())}
                {shared_field(c, "B", "max_num_seqs")}
                {select_field(c, "KV mode", "kv", vec![("reserve", "reserve (loss system)"), ("paged", "paged + preemption")])}
                <Show when=move || c.params.with(|p| p.kv_mode == KvMode::Paged)>
                    {shared_field(c, "block", "")}
                </Show>
                <p class="hint">"Each candidate's cost is the roofline of the model on its GPUs, and its KV capacity what 90 % of their memory leaves after the weights."</p>
                <h2>"Confirmation"</h2>
                {plan_field(c, "fin", "how many of the model's cheapest fleets the simulator confirms")}
                {plan_field(c, "pseeds", "seeds per simulated fleet")}
                {plan_field(c, "pT", "simulated time of each fleet run")}
            </aside>
            <section class="results">
                <div class="status" id="plan-status">{status(c)}</div>
                {move || {
                    let errs = errors();
                    (!errs.is_empty()).then(|| view! {
                        <div class="error chart-error" id="plan-error">
                            {errs.into_iter().map(|e| view! { <p>{e}</p> }).collect_view()}
                        </div>
                    })
                }}
                <div style:display=move || if blocked(c) { "none" } else { "" }>
                    <p class="answer-line" id="plan-answer">{sentence}</p>
                    <canvas id="plan-chart" node_ref=canvas width="1200" height="600"
                        on:mousemove=on_move on:mouseleave=move |_| c.plan.hover.set(None)></canvas>
                    <div class="hover" id="plan-hover">{move || c.plan.hover.get().unwrap_or_else(|| "hover over a point for its fleet".into())}</div>
                    {super::plan_table::table(c)}
                    {super::plan_table::extras(c)}
                    {super::plan_disagg::table(c)}
                </div>
            </section>
        </main>
    }
}

/// The plan's state or the replicas' parameters (debounced) → a new plan, while the Plan
/// view is shown and they differ from the last plan's.
pub(super) fn replan_on_change(c: Ctx) {
    let pending = StoredValue::new_local(None::<gloo_timers::callback::Timeout>);
    Effect::new(move |_| {
        let now = (c.plan.state.get(), c.params.get());
        if c.view.get() != View::Plan {
            return;
        }
        if blocked(c) {
            pending.set_value(None);
            forget(c);
            return;
        }
        if c.plan.planned.get_value().as_ref() == Some(&now) {
            return;
        }
        pending.set_value(Some(gloo_timers::callback::Timeout::new(60, move || {
            if c.view.get_untracked() == View::Plan {
                start(c);
            }
        })));
    });
}
