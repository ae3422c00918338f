//! The Fleet view (browser only): N identical replicas of the calculator's server behind a
//! router ([`crate::fleet`]). Its controls, the four load curves with the analytical
//! fleet model's line, the per-replica utilisation bars and the load-imbalance figure,
//! and the fleet benchmark (10 rates × 4 routers × 5 seeds at N = 8, T = 1000 s).
//!
//! The sweep goes to the worker pool split by rate, like the calculator's; the server
//! fields are the calculator's own (one set of parameters for both views).

use super::{
    next_id, now_ms, pool, select_field, set_root_data, text_field, Ctx, InputError, RunState, View,
};
use crate::chart::{draw_fleet_curves, draw_replicas};
use crate::curves::CurvePoint;
use crate::fleet::{
    self, label, model_caveat, model_validated, FleetDetail, FleetModel, FleetState, BENCH_ROUTERS,
};
use crate::job::{model_rates, shard, Job, Reply, Task};
use crate::params::{Cost, Invalid, Params, Preset};
use engine::config::Policy;
use engine::fleet::RouterKind;
use leptos::prelude::*;
use plotters::prelude::IntoDrawingArea;
use plotters_canvas::CanvasBackend;

/// The Fleet view's signals.
#[derive(Clone, Copy)]
pub(super) struct FleetSignals {
    pub state: RwSignal<FleetState>,
    /// Text typed (or read from the URL) that is not a value of its fleet field.
    pub input_errs: RwSignal<Vec<InputError>>,
    /// Why the fleet cannot run ([`FleetState::check`]), if it cannot.
    pub invalid: Memo<Option<Invalid>>,
    pub points: RwSignal<Vec<CurvePoint>>,
    pub model: RwSignal<Option<FleetModel>>,
    pub detail: RwSignal<Option<FleetDetail>>,
    pub run: RwSignal<RunState>,
    pub bench: RwSignal<Option<String>>,
    /// The state and parameters of the last sweep started (None: none, or cancelled).
    pub swept: StoredValue<Option<(FleetState, Params)>>,
    /// The view's URL as last written: the user's own until the state is valid.
    pub url: StoredValue<String>,
}

impl FleetSignals {
    /// The view's signals, from the URL's state and its unreadable values.
    pub fn new(
        state: FleetState,
        bad: Vec<(String, String)>,
        params: RwSignal<Params>,
        url: String,
    ) -> FleetSignals {
        let state = RwSignal::new(state);
        FleetSignals {
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
            points: RwSignal::new(Vec::new()),
            model: RwSignal::new(None),
            detail: RwSignal::new(None),
            run: RwSignal::new(RunState::default()),
            bench: RwSignal::new(None),
            swept: StoredValue::new(None),
            url: StoredValue::new(url),
        }
    }
}

/// Whether an error stops the fleet from running (and is on show).
pub(super) fn blocked(c: Ctx) -> bool {
    c.fleet.input_errs.with(|v| !v.is_empty())
        || c.input_errs.with(|v| !v.is_empty())
        || c.fleet.invalid.with(Option::is_some)
}

/// The view's URL query, kept as the user wrote it while the state is not valid.
pub(super) fn query(c: Ctx) -> String {
    if !blocked(c) {
        let q = c.fleet.state.with(|s| c.params.with(|p| s.to_query(p)));
        c.fleet.url.set_value(q);
    }
    c.fleet.url.get_value()
}

/// The job id a reply belongs to (None: a worker's announcement).
fn id_of(r: &Reply) -> Option<u64> {
    match r {
        Reply::Ready => None,
        Reply::Progress { id, .. }
        | Reply::Point { id, .. }
        | Reply::Detail { id, .. }
        | Reply::Models { id, .. }
        | Reply::Lesson { id, .. }
        | Reply::Watch { id, .. }
        | Reply::FleetPoints { id, .. }
        | Reply::FleetDetail { id, .. }
        | Reply::FleetModel { id, .. }
        | Reply::PlanScreen { id, .. }
        | Reply::PlanConfirmed { id, .. }
        | Reply::Done { id }
        | Reply::Error { id, .. } => Some(*id),
    }
}

/// Whether `reply` is the Fleet view's: of its running job, or an error outside any job
/// while the view is shown.
pub(super) fn claims(c: Ctx, reply: &Reply) -> bool {
    let mine = c.fleet.run.with_untracked(|r| r.id);
    match id_of(reply) {
        Some(0) => matches!(reply, Reply::Error { .. }) && c.view.get_untracked() == View::Fleet,
        Some(id) => id == mine,
        None => false,
    }
}

pub(super) fn on_reply(c: Ctx, w: usize, reply: Reply) {
    let r = &c.fleet.run;
    match reply {
        Reply::Progress { done, .. } => r.update(|r| {
            if let Some(d) = r.done.get_mut(w) {
                *d = done;
            }
        }),
        Reply::FleetPoints { points, .. } => {
            if r.with_untracked(|r| r.grid) {
                return;
            }
            let router = c.fleet.state.with_untracked(|s| s.router);
            c.fleet.points.update(|v| {
                for (k, point) in points.into_iter().filter(|(k, _)| *k == router) {
                    let _ = k;
                    let at = v.partition_point(|p| p.rate < point.rate);
                    v.insert(at, point);
                }
            });
        }
        Reply::FleetDetail { detail, .. } => c.fleet.detail.set(Some(detail)),
        Reply::FleetModel { model, .. } => c.fleet.model.set(Some(model)),
        Reply::Done { id } => {
            let mut finished_now = None;
            r.update(|r| {
                if let Some(f) = r.finished.get_mut(w) {
                    *f = true;
                }
                if r.finished.iter().all(|f| *f) && r.elapsed_ms.is_none() {
                    let e = now_ms() - r.started_ms;
                    r.elapsed_ms = Some(e);
                    finished_now = Some((e, r.grid));
                }
            });
            match finished_now {
                Some((e, true)) => {
                    c.fleet.bench.set(Some(format!(
                        "fleet sweep: 200 runs (10 rates × 4 routers × 5 seeds, N = 8, T = 1000 s) in {:.2} s",
                        e / 1000.0
                    )));
                    set_root_data("fleet-bench-ms", &format!("{e:.0}"));
                }
                Some((e, false)) => {
                    set_root_data("fleet-sweep-ms", &format!("{e:.0}"));
                    set_root_data("fleet-done", &id.to_string());
                }
                None => {}
            }
        }
        Reply::Error { message, .. } => r.update(|r| r.error = Some(message)),
        _ => {}
    }
}

/// Forgets the last sweep, so the view sweeps again when next shown (another view's work
/// cancelled it).
pub(super) fn forget(c: Ctx) {
    c.fleet.swept.set_value(None);
}

/// Starts the view's sweep in the workers, cancelling whatever they ran.
pub(super) fn start(c: Ctx) {
    if blocked(c) {
        return;
    }
    let Some(pool) = pool() else { return };
    let s = c.fleet.state.get_untracked();
    let p = c.params.get_untracked();
    let n = pool.borrow().len();
    let curve: Vec<Task> = s
        .rates
        .iter()
        .rev()
        .map(|&rate| Task::FleetCurve {
            fleet: s.clone(),
            routers: vec![s.router],
            rate,
        })
        .collect();
    let mut shares = shard(curve, n);
    shares[0].insert(0, Task::FleetDetail { fleet: s.clone() });
    shares[n - 1].push(Task::FleetModel {
        fleet: s.clone(),
        rates: model_rates(&s.rates, 20),
    });
    let total = s.rates.len() as u32 * p.seeds + 2;
    let id = next_id();
    c.fleet.swept.set_value(Some((s, p.clone())));
    c.swept.set_value(None);
    c.learnt.set_value(None);
    c.watched.set_value(None);
    super::plan_view::forget(c);
    c.fleet.run.set(RunState {
        id,
        total,
        done: vec![0; n],
        finished: shares.iter().map(|s| s.is_empty()).collect(),
        started_ms: now_ms(),
        ..RunState::default()
    });
    c.fleet.points.set(Vec::new());
    c.fleet.model.set(None);
    c.fleet.detail.set(None);
    pool.borrow_mut().submit(Job::per_share(id, &p, shares));
}

/// Runs the fleet benchmark ([`fleet::bench`]) in the workers.
fn start_bench(c: Ctx) {
    let Some(pool) = pool() else { return };
    let (state, params, rates) = fleet::bench();
    let n = pool.borrow().len();
    let tasks: Vec<Task> = rates
        .iter()
        .rev()
        .map(|&rate| Task::FleetCurve {
            fleet: state.clone(),
            routers: BENCH_ROUTERS.to_vec(),
            rate,
        })
        .collect();
    let shares = shard(tasks, n);
    let id = next_id();
    if c.fleet.run.with_untracked(RunState::running) {
        forget(c);
    }
    c.swept.set_value(None);
    c.learnt.set_value(None);
    c.watched.set_value(None);
    super::plan_view::forget(c);
    c.fleet.run.set(RunState {
        id,
        total: rates.len() as u32 * BENCH_ROUTERS.len() as u32 * params.seeds,
        done: vec![0; n],
        finished: shares.iter().map(|s| s.is_empty()).collect(),
        started_ms: now_ms(),
        grid: true,
        ..RunState::default()
    });
    c.fleet.bench.set(Some("running the fleet sweep…".into()));
    pool.borrow_mut()
        .submit(Job::per_share(id, &params, shares));
}

/// The error about fleet field `key`, beside it.
fn fleet_error(c: Ctx, key: &'static str) -> impl IntoView {
    move || {
        c.fleet
            .input_errs
            .with(|v| v.iter().find(|e| e.key == key).map(|e| e.message.clone()))
            .or_else(|| {
                c.fleet.invalid.with(|i| {
                    i.as_ref()
                        .filter(|i| i.key == Some(key))
                        .map(|i| i.message.clone())
                })
            })
            .map(|e| view! { <p class="error field-error" data-error-for=key>{e}</p> })
    }
}

/// A text field of the view's own state.
fn fleet_field(c: Ctx, key: &'static str, title: &'static str) -> impl IntoView {
    let shown = move || {
        c.fleet
            .input_errs
            .with(|v| v.iter().find(|e| e.key == key).map(|e| e.text.clone()))
            .unwrap_or_else(|| c.fleet.state.with(|s| s.get(key)))
    };
    let bad = move || {
        c.fleet.input_errs.with(|v| v.iter().any(|e| e.key == key))
            || c.fleet
                .invalid
                .with(|i| i.as_ref().is_some_and(|i| i.key == Some(key)))
    };
    view! {
        <label class="field" title=title>
            <span>{label(key)}</span>
            <input type="text" name=key data-key=key prop:value=shown class:invalid=bad
                on:change=move |ev| {
                    let v = event_target_value(&ev);
                    match c.fleet.state.with_untracked(|s| s.edited(key, &v)) {
                        Ok(s) => {
                            c.fleet.input_errs.update(|e| e.retain(|e| e.key != key));
                            c.fleet.state.set(s);
                        }
                        Err(message) => c.fleet.input_errs.update(|errs| {
                            errs.retain(|e| e.key != key);
                            errs.push(InputError { key: key.into(), text: v, message });
                        }),
                    }
                } />
        </label>
        {fleet_error(c, key)}
    }
}

/// A server field of the calculator, with the fleet's own error about it (if the
/// calculator does not already show one).
fn server_field(c: Ctx, key: &'static str, title: &'static str) -> impl IntoView {
    view! {
        {text_field(c, key, title)}
        {move || c.field_error(key).is_none().then(|| fleet_error(c, key))}
    }
}

fn router_help(r: RouterKind) -> &'static str {
    match r {
        RouterKind::RoundRobin => "round_robin — every N-th request (nginx, HAProxy roundrobin)",
        RouterKind::Random => "random — uniformly at random",
        RouterKind::LeastOutstanding => {
            "least_outstanding — fewest requests in flight (least_conn)"
        }
        RouterKind::LeastTokens => "least_tokens — least outstanding tokens",
        RouterKind::PowerOfD { .. } => "power_of_2 — the less loaded of 2 drawn at random",
        RouterKind::KvAware => "kv_aware — lowest KV use (paged servers only)",
        RouterKind::PrefixAffinity => {
            "prefix_affinity — one server per shared prefix (rendezvous hashing)"
        }
    }
}

fn status(c: Ctx) -> impl IntoView {
    move || {
        let r = c.fleet.run.get();
        let pct = if r.total > 0 {
            100.0 * r.done_runs() as f64 / r.total as f64
        } else {
            0.0
        };
        if let Some(e) = r.error.clone() {
            view! { <span class="error">{format!("error: {e}")}</span> }.into_any()
        } else if r.running() {
            view! {
                <progress max="100" value=pct></progress>
                <span>{format!(" {} / {} fleet runs", r.done_runs().min(r.total), r.total)}</span>
            }
            .into_any()
        } else if let (Some(ms), false) = (r.elapsed_ms, r.grid) {
            view! { <span id="fleet-time">{format!("{} fleet runs in {:.2} s (in {} Web Worker{})", r.total, ms / 1000.0, r.done.len(), if r.done.len() == 1 { "" } else { "s" })}</span> }.into_any()
        } else {
            view! { <span></span> }.into_any()
        }
    }
}

/// The imbalance line under the bars.
fn imbalance_text(d: &FleetDetail) -> String {
    let (lo, hi) = d
        .utilisation
        .iter()
        .fold((f64::INFINITY, 0.0f64), |(a, b), u| (a.min(*u), b.max(*u)));
    let (rlo, rhi) = (
        d.routed.iter().min().copied().unwrap_or(0),
        d.routed.iter().max().copied().unwrap_or(0),
    );
    format!(
        "Load imbalance {:.3} (time average of the busiest replica's outstanding requests over the mean; 1 is even, N is all on one) · utilisation {:.3}–{:.3} · requests routed per replica {rlo}–{rhi} · {} at λ = {} req/s, seed 0",
        d.imbalance,
        if lo.is_finite() { lo } else { 0.0 },
        hi,
        d.router.name(),
        crate::format::sig3(d.rate)
    )
}

/// Draws the curves and the bars onto their canvases.
fn draw(c: Ctx, curves: &web_sys::HtmlCanvasElement, bars: &web_sys::HtmlCanvasElement) {
    let points = c.fleet.points.get();
    let model = c.fleet.model.get();
    let rate = c.fleet.state.with(|s| s.rate);
    if let Some(b) = CanvasBackend::with_canvas_object(curves.clone()) {
        let root = b.into_drawing_area();
        if let Err(e) = draw_fleet_curves(&root, &points, model.as_ref(), rate) {
            c.fleet
                .run
                .update(|r| r.error = Some(format!("drawing failed: {e}")));
        } else if !points.is_empty() {
            let _ = curves.set_attribute("data-points", &points.len().to_string());
        }
    }
    let detail = c.fleet.detail.get();
    if let Some(b) = CanvasBackend::with_canvas_object(bars.clone()) {
        let root = b.into_drawing_area();
        let d = detail.clone().unwrap_or_default();
        match draw_replicas(&root, &d) {
            Ok(g) => {
                let _ = bars.set_attribute("data-bars", &d.utilisation.len().to_string());
                let bx = g.plot_box();
                let _ = bars.set_attribute(
                    "data-plot",
                    &format!("{},{},{},{}", bx[0], bx[1], bx[2], bx[3]),
                );
            }
            Err(e) => c
                .fleet
                .run
                .update(|r| r.error = Some(format!("drawing failed: {e}"))),
        }
    }
}

/// The view.
/// Opens the Watch view on this fleet: its replicas, router and server, at the fleet-wide
/// rate of the per-replica chart, from the start.
fn open_watch(c: Ctx) {
    let s = c.fleet.state.get_untracked();
    let watched = crate::watch::WatchState::of_fleet(
        c.params.get_untracked(),
        s.rate,
        s.replicas.max(1),
        s.router,
    );
    c.watch.state.set(watched);
    c.watch.t.set(0.0);
    c.view.set(View::Watch);
}

/// From a watched fleet back to the Fleet view on it (its replicas, router and server, its
/// rate as the per-replica chart's; the calculator keeps its own rate). False, and nothing
/// done, when the Watch view shows one server.
pub(super) fn from_watch(c: Ctx) -> bool {
    let w = c.watch.state.get_untracked();
    if !w.is_fleet() {
        return false;
    }
    let mut s = c.fleet.state.get_untracked();
    if s.replicas != w.replicas {
        s = FleetState::of(w.replicas, w.router);
    }
    s.router = w.router;
    s.rate = w.params.rate;
    let rate = c.params.with_untracked(|p| p.rate);
    c.params.set(Params { rate, ..w.params });
    c.fleet.state.set(s);
    c.view.set(View::Fleet);
    true
}

pub(super) fn fleet_view(c: Ctx) -> impl IntoView {
    let curves = NodeRef::<leptos::html::Canvas>::new();
    let bars = NodeRef::<leptos::html::Canvas>::new();
    Effect::new(move |_| {
        c.fleet.points.track();
        c.fleet.model.track();
        c.fleet.detail.track();
        c.fleet.state.track();
        if let (Some(a), Some(b)) = (curves.get(), bars.get()) {
            draw(c, &a, &b);
        }
    });
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
            .fleet
            .input_errs
            .with(|v| v.iter().map(|e| e.message.clone()).collect());
        v.extend(
            c.input_errs
                .with(|v| v.iter().map(|e| e.message.clone()).collect::<Vec<_>>()),
        );
        v.extend(
            c.fleet
                .invalid
                .with(|i| i.as_ref().map(|i| i.message.clone())),
        );
        v
    };
    view! {
        <div class="toolbar">
            <label>"Replica preset "
                <select id="fleet-preset" on:change=move |ev| {
                    if let Some(p) = Preset::from_key(&event_target_value(&ev)) { c.params.set(p.params()); }
                }>
                    {Preset::ALL.into_iter().map(|p| view! {
                        <option value=p.key() selected=move || c.params.with(|x| x.preset == p.key())>{p.label()}</option>
                    }).collect_view()}
                </select>
            </label>
            <button id="open-fleet-watch" title="animate a short run of this fleet at the per-replica chart's rate"
                on:click=move |_| open_watch(c)>"▶ watch this fleet"</button>
            <span class="spacer"></span>
            <input id="fleet-share-url" class="share" readonly prop:value=share_url title="copy this link to share the view" />
        </div>
        <main>
            <aside class="panel">
                <h2>"Fleet"</h2>
                {fleet_field(c, "replicas", "identical replicas behind the router, 1 to 64 here")}
                <label class="field">
                    <span>"router"</span>
                    <select name="router" data-key="router" on:change=move |ev| {
                        let v = event_target_value(&ev);
                        if let Ok(s) = c.fleet.state.with_untracked(|s| s.edited("router", &v)) {
                            c.fleet.input_errs.update(|e| e.retain(|e| e.key != "router"));
                            c.fleet.state.set(s);
                        }
                    }>
                        {RouterKind::ALL.into_iter().map(|r| view! {
                            <option value=r.name() selected=move || c.fleet.state.with(|s| s.router == r)>{router_help(r)}</option>
                        }).collect_view()}
                    </select>
                </label>
                {fleet_error(c, "router")}
                {fleet_field(c, "frates", "comma-separated fleet-wide arrival rates of the sweep")}
                {fleet_field(c, "frate", "fleet-wide rate of the per-replica chart")}
                <p class="hint" id="fleet-mixed">"Every replica here is the same server (set below, shared with the Calculator). Mixed fleets — replicas with different servers or cost models — are the CLI's: bench-native simulate --fleet FILE."</p>
                <h2>"Each replica"</h2>
                {select_field(c, "policy", "policy", Policy::ALL.iter().map(|p| (p.as_str(), p.as_str())).collect())}
                {server_field(c, "B", "max_num_seqs")}
                {server_field(c, "K", "")}
                {select_field(c, "KV mode", "kv", vec![("reserve", "reserve (loss system)"), ("paged", "paged + preemption")])}
                {select_field(c, "cost", "cost", Cost::ALL.iter().map(|x| (x.key(), match x { Cost::Reference => "reference study formula", Cost::A10g => "A10G · Qwen2.5-1.5B table", Cost::Linear => "linear", Cost::Roofline => "roofline: GPU × model" })).collect())}
                <h2>"Run"</h2>
                {server_field(c, "T", "")}
                {server_field(c, "seeds", "")}
            </aside>
            <section class="results">
                <div class="status" id="fleet-status">{status(c)}</div>
                {move || {
                    let errs = errors();
                    (!errs.is_empty()).then(|| view! {
                        <div class="error chart-error" id="fleet-error">
                            {errs.into_iter().map(|e| view! { <p>{e}</p> }).collect_view()}
                        </div>
                    })
                }}
                <div style:display=move || if blocked(c) { "none" } else { "" }>
                    <canvas id="fleet-chart" node_ref=curves width="1200" height="760"></canvas>
                    <p class="models-note" id="fleet-model-note" class:error=move || c.fleet.state.with(|s| !model_validated(s.router))>
                        {move || {
                            let s = c.fleet.state.get();
                            match c.fleet.model.get().and_then(|m| m.error) {
                                Some(e) => format!("No model line: {e}"),
                                None => model_caveat(s.router),
                            }
                        }}
                    </p>
                    <h3>"Per replica"</h3>
                    <canvas id="fleet-replicas" node_ref=bars width="1200" height="320"></canvas>
                    <p id="fleet-imbalance">{move || c.fleet.detail.get().map(|d| imbalance_text(&d)).unwrap_or_else(|| "simulating…".into())}</p>
                </div>
                <details class="bench" open>
                    <summary>"Benchmark: a fleet sweep of 200 runs (10 rates × 4 routers × 5 seeds, N = 8, T = 1000 s)"</summary>
                    <button id="run-fleet-bench" on:click=move |_| start_bench(c)>"run the fleet sweep"</button>
                    " "<span id="fleet-bench-result">{move || c.fleet.bench.get().unwrap_or_default()}</span>
                </details>
            </section>
        </main>
    }
}
