//! The page (browser only): the Calculator view (parameter panel, answer bar, charts,
//! drop zone, share/export), the Learn view (lessons, [`crate::learn_ui`]), the Watch
//! view (the animation of a short run, [`crate::watch_ui`]) and the Fleet view (replicas
//! behind a router, [`fleet_view`]) and the Plan view (the cheapest fleet that meets an
//! SLO, [`plan_view`]).
//!
//! State lives in signals; the heavy work goes to the worker [`Pool`]. Every change of
//! the parameters (or of the open lesson) is written to the URL (`history.replaceState`)
//! and, after a short debounce, starts a new sweep or lesson run, cancelling the previous
//! one. The calculator only sweeps while it is shown.

use crate::chart::Geometry;
use crate::curves::{to_csv, CurvePoint};
use crate::fleet::{wants_fleet, FleetState};
use crate::format;
use crate::job::{
    model_curves, model_rates, reference_grid, shard, Detail, Job, Models, Reply, Task,
};
use crate::learn::{wants_learn, LessonState};
use crate::learn_ui::{learn_view, LearnSignals, LessonRun};
use crate::measured::{self, MeasuredSeries, MeasuredSet};
use crate::metric::Metric;
use crate::params::{self, Invalid, Params, Preset};
use crate::plan::{wants_plan, PlanState};
use crate::pool::Pool;
use crate::report_ui::report_cards;
use crate::watch::{wants_watch, WatchState};
use crate::watch_ui::{watch_view, WatchSignals};
use gloo_timers::callback::Timeout;
use leptos::prelude::*;
use std::cell::RefCell;
use std::rc::Rc;
use wasm_bindgen::JsCast;

mod answer;
mod as_run_view;
mod calc_chart;
mod fleet_view;
mod measured_io;
mod panel;
mod plan_disagg;
mod plan_table;
mod plan_view;

use answer::{answer, error_table};
use calc_chart::draw;
use fleet_view::FleetSignals;
use measured_io::{chart_svg, report_signals, take_dropped, EXPORT_H, EXPORT_W};
use panel::{select_field, text_field};
use plan_view::PlanSignals;

/// Which chart is shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tab {
    Load,
    Cdf,
    Time,
    Timeline,
}

/// Which view of the page is shown: the calculator, the Learn view or the Watch view.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    Calculator,
    Learn,
    Watch,
    Fleet,
    Plan,
}

/// Progress of the current sweep.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunState {
    pub id: u64,
    pub total: u32,
    pub done: Vec<u32>,
    pub finished: Vec<bool>,
    pub started_ms: f64,
    pub elapsed_ms: Option<f64>,
    pub error: Option<String>,
    pub cancelled: bool,
    pub grid: bool,
}

impl RunState {
    fn done_runs(&self) -> u32 {
        self.done.iter().sum()
    }
    fn running(&self) -> bool {
        self.total > 0 && self.elapsed_ms.is_none() && self.error.is_none() && !self.cancelled
    }
}

fn now_ms() -> f64 {
    window().performance().map(|p| p.now()).unwrap_or(0.0)
}

fn set_root_data(key: &str, value: &str) {
    if let Some(el) = document().document_element() {
        let _ = el.set_attribute(&format!("data-{key}"), value);
    }
}

/// Text that is not a value of its field: the field's URL key, the text (shown in the
/// field, so the user sees what to fix) and the message.
#[derive(Clone, Debug, PartialEq)]
struct InputError {
    key: String,
    text: String,
    message: String,
}

impl Ctx {
    /// Whether an error stops the calculator from running (and is on show).
    fn blocked(&self) -> bool {
        self.input_errs.with(|v| !v.is_empty()) || self.invalid.with(Option::is_some)
    }

    /// The error to show beside the field `key`: its text's, else the parameters'.
    fn field_error(&self, key: &str) -> Option<String> {
        self.input_errs
            .with(|v| v.iter().find(|e| e.key == key).map(|e| e.message.clone()))
            .or_else(|| {
                self.invalid.with(|i| {
                    i.as_ref()
                        .filter(|i| i.key == Some(key))
                        .map(|i| i.message.clone())
                })
            })
    }

    /// Every error on show, in the order of the fields' problems, then the parameters'.
    fn errors(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .input_errs
            .with(|v| v.iter().map(|e| e.message.clone()).collect());
        v.extend(self.invalid.with(|i| i.as_ref().map(|i| i.message.clone())));
        v
    }

    /// Forgets the text error of field `key` (it now holds a value).
    fn clear_input_error(&self, key: &str) {
        if self
            .input_errs
            .with_untracked(|v| v.iter().any(|e| e.key == key))
        {
            self.input_errs.update(|v| v.retain(|e| e.key != key));
        }
    }
}

/// Everything the page's closures share.
#[derive(Clone, Copy)]
struct Ctx {
    params: RwSignal<Params>,
    points: RwSignal<Vec<CurvePoint>>,
    models: RwSignal<Option<Models>>,
    detail: RwSignal<Option<Detail>>,
    measured: RwSignal<Vec<MeasuredSet>>,
    /// The measured files grouped into series (one per run).
    series: Memo<Vec<MeasuredSeries>>,
    /// The analytical model the report card shows.
    report_model: RwSignal<Option<String>>,
    run: RwSignal<RunState>,
    grid: RwSignal<Option<String>>,
    file_msg: RwSignal<Option<(bool, String)>>,
    tab: RwSignal<Tab>,
    /// The fraction of the run the "Over time" view shows, from its start.
    window: RwSignal<f64>,
    geo: RwSignal<Geometry>,
    hover: RwSignal<Option<String>>,
    /// Text that is not a value of its field (typed, or read from the URL), by field.
    input_errs: RwSignal<Vec<InputError>>,
    /// Why the parameters cannot run ([`Params::check`]), if they cannot.
    invalid: Memo<Option<Invalid>>,
    /// URL keys the page does not know (reported, not blocking).
    url_notes: RwSignal<Vec<String>>,
    view: RwSignal<View>,
    learn: LearnSignals,
    /// The parameters of the last sweep started (None: none, or it was cancelled).
    swept: StoredValue<Option<Params>>,
    /// The lesson state of the last lesson run started (None: none, or cancelled).
    learnt: StoredValue<Option<LessonState>>,
    watch: WatchSignals,
    /// The watch state of the last watched run started (None: none, or cancelled).
    watched: StoredValue<Option<WatchState>>,
    fleet: FleetSignals,
    plan: PlanSignals,
    /// "Simulate this benchmark": the benchmark-as-run job and its figures.
    as_run: RwSignal<crate::as_run::AsRunState>,
}

thread_local! {
    static POOL: RefCell<Option<Rc<RefCell<Pool>>>> = const { RefCell::new(None) };
    static NEXT_ID: RefCell<u64> = const { RefCell::new(0) };
}

fn pool() -> Option<Rc<RefCell<Pool>>> {
    POOL.with(|p| p.borrow().clone())
}

fn next_id() -> u64 {
    NEXT_ID.with(|n| {
        *n.borrow_mut() += 1;
        *n.borrow()
    })
}

fn on_reply(c: Ctx, w: usize, reply: Reply) {
    // Job ids start at 1: before the first lesson its id is 0, which must not claim the
    // errors of job 0 (a worker failing outside any job) for the hidden Learn view.
    let lesson_id = c.learn.run.with_untracked(|r| r.id);
    let lesson_id = (lesson_id != 0).then_some(lesson_id);
    let watch_id = c.watch.run.with_untracked(|r| r.id);
    if fleet_view::claims(c, &reply) {
        fleet_view::on_reply(c, w, reply);
        return;
    }
    if plan_view::claims(c, &reply) {
        plan_view::on_reply(c, w, reply);
        return;
    }
    if as_run_view::claims(c, &reply) {
        as_run_view::on_reply(c, w, reply);
        return;
    }
    match reply {
        Reply::Watch { id, tape } => {
            c.watch.arrive(id, *tape, now_ms());
        }
        Reply::Error { id, message } if id != 0 && id == watch_id => {
            c.watch.run.update(|r| {
                r.running = false;
                r.error = Some(message);
            });
        }
        reply => on_other_reply(c, w, reply, lesson_id),
    }
}

fn on_other_reply(c: Ctx, w: usize, reply: Reply, lesson_id: Option<u64>) {
    match &reply {
        Reply::Lesson { id, output } if Some(*id) == lesson_id => {
            let output = output.clone();
            let mut ms = 0.0;
            c.learn.run.update(|r| {
                ms = now_ms() - r.started_ms;
                r.elapsed_ms = Some(ms);
                r.running = false;
                r.output = Some(output);
            });
            set_root_data("lesson-ms", &format!("{ms:.0}"));
            set_root_data("lesson-done", &id.to_string());
            return;
        }
        Reply::Error { id, message } if Some(*id) == lesson_id => {
            let message = message.clone();
            c.learn.run.update(|r| {
                r.running = false;
                r.error = Some(message);
            });
            return;
        }
        // An error outside any job goes to the view on show (and only there).
        Reply::Error { id: 0, message } if c.view.get_untracked() == View::Learn => {
            let message = message.clone();
            c.learn.run.update(|r| r.error = Some(message));
            return;
        }
        _ => {}
    }
    let id = c.run.with_untracked(|r| r.id);
    match reply {
        Reply::Ready => {}
        Reply::Progress { id: rid, done } if rid == id => c.run.update(|r| {
            if let Some(d) = r.done.get_mut(w) {
                *d = done;
            }
        }),
        Reply::Point {
            id: rid,
            grid: None,
            point,
        } if rid == id => {
            c.points.update(|v| {
                let at = v.partition_point(|p| p.rate < point.rate);
                v.insert(at, point);
            });
        }
        Reply::Detail { id: rid, detail } if rid == id => c.detail.set(Some(detail)),
        Reply::Models { id: rid, models } if rid == id => c.models.set(Some(models)),
        Reply::Done { id: rid } if rid == id => {
            let mut finished_now = None;
            c.run.update(|r| {
                if let Some(f) = r.finished.get_mut(w) {
                    *f = true;
                }
                if r.finished.iter().all(|f| *f) && r.elapsed_ms.is_none() {
                    let e = now_ms() - r.started_ms;
                    r.elapsed_ms = Some(e);
                    finished_now = Some((e, r.grid));
                }
            });
            if let Some((e, grid)) = finished_now {
                if grid {
                    let msg = format!("reference grid: 800 runs (8 rates × 5 B × 4 K × 5 seeds, T = 1000 s) in {:.2} s", e / 1000.0);
                    c.grid.set(Some(msg));
                    set_root_data("grid-ms", &format!("{e:.0}"));
                } else {
                    set_root_data("sweep-ms", &format!("{e:.0}"));
                    set_root_data("sweep-done", &id.to_string());
                }
            }
        }
        Reply::Error { id: rid, message } if rid == id || rid == 0 => {
            c.run.update(|r| r.error = Some(message));
        }
        _ => {}
    }
}

fn start_sweep(c: Ctx) {
    let p = c.params.get_untracked();
    // Nothing goes to a worker that the engine's policy refuses (docs/model.md, Limits).
    if c.input_errs.with_untracked(|v| !v.is_empty()) || p.check().is_err() {
        return;
    }
    let Some(pool) = pool() else { return };
    let n = pool.borrow().len();
    let mut curve: Vec<Task> = p.rates.iter().map(|&rate| Task::Curve { rate }).collect();
    // Highest rates first: they take longest.
    curve.reverse();
    let mut shares = shard(curve, n);
    shares[0].insert(0, Task::Detail { rate: p.rate });
    shares[n - 1].push(Task::Models {
        rates: model_rates(&p.rates, 20),
    });
    let total = p.rates.len() as u32 * p.seeds + 2;
    let id = next_id();
    c.swept.set_value(Some(p.clone()));
    fleet_view::forget(c);
    plan_view::forget(c);
    as_run_view::forget(c);
    // Submitting cancels whatever the workers ran, a lesson or a watched run included.
    c.learnt.set_value(None);
    c.watched.set_value(None);
    c.run.set(RunState {
        id,
        total,
        done: vec![0; n],
        finished: shares.iter().map(|s| s.is_empty()).collect(),
        started_ms: now_ms(),
        ..RunState::default()
    });
    c.points.set(Vec::new());
    c.models.set(None);
    c.detail.set(None);
    pool.borrow_mut().submit(Job::per_share(id, &p, shares));
}

fn start_grid(c: Ctx) {
    let Some(pool) = pool() else { return };
    let n = pool.borrow().len();
    let id = next_id();
    c.swept.set_value(None);
    fleet_view::forget(c);
    plan_view::forget(c);
    as_run_view::forget(c);
    let mut tasks = reference_grid();
    tasks.reverse();
    let shares = shard(tasks, n);
    c.run.set(RunState {
        id,
        total: 800,
        done: vec![0; n],
        finished: shares.iter().map(|s| s.is_empty()).collect(),
        started_ms: now_ms(),
        grid: true,
        ..RunState::default()
    });
    c.grid.set(Some("running the reference grid…".into()));
    let params = Params::default();
    pool.borrow_mut()
        .submit(Job::per_share(id, &params, shares));
}

/// Runs the open lesson in a worker (in place if there is no pool), cancelling whatever
/// the workers were doing.
fn start_lesson(c: Ctx) {
    let state = c.learn.state.get_untracked();
    let id = next_id();
    c.learnt.set_value(Some(state.clone()));
    c.swept.set_value(None);
    c.watched.set_value(None);
    fleet_view::forget(c);
    plan_view::forget(c);
    as_run_view::forget(c);
    c.learn.run.update(|r| {
        r.id = id;
        r.running = true;
        r.error = None;
        r.started_ms = now_ms();
    });
    match pool() {
        Some(pool) => pool.borrow_mut().submit(vec![Job {
            id,
            params: Params::default(),
            tasks: vec![Task::Lesson { state }],
        }]),
        None => {
            let result = crate::learn::run(&state);
            let reply = match result {
                Ok(output) => Reply::Lesson { id, output },
                Err(message) => Reply::Error { id, message },
            };
            on_reply(c, 0, reply);
        }
    }
}

/// Simulates the watched run in a worker (in place if there is no pool), cancelling
/// whatever the workers were doing.
fn start_watch(c: Ctx) {
    let state = c.watch.state.get_untracked();
    let id = next_id();
    c.watched.set_value(Some(state.clone()));
    c.swept.set_value(None);
    c.learnt.set_value(None);
    fleet_view::forget(c);
    plan_view::forget(c);
    as_run_view::forget(c);
    c.watch.playing.set(false);
    c.watch.tape.set(None);
    c.watch.run.set(crate::watch_ui::WatchRun {
        id,
        running: true,
        started_ms: now_ms(),
        ..Default::default()
    });
    let task = Task::Watch {
        requests: state.requests,
        seed: state.seed,
        replicas: state.replicas,
        router: state.router,
    };
    match pool() {
        Some(pool) => pool.borrow_mut().submit(vec![Job {
            id,
            params: state.params,
            tasks: vec![task],
        }]),
        None => {
            let (n, router) = (state.replicas, state.router);
            let reply = match crate::watch::record_run(
                &state.params,
                state.requests,
                state.seed,
                n,
                router,
            ) {
                Ok(tape) => Reply::Watch {
                    id,
                    tape: Box::new(tape),
                },
                Err(message) => Reply::Error { id, message },
            };
            on_reply(c, 0, reply);
        }
    }
}

/// Opens the Watch view on `params` (at their chosen rate), from the start.
fn open_watch(c: Ctx, params: Params) {
    c.watch.state.set(WatchState::of(params));
    c.watch.t.set(0.0);
    c.view.set(View::Watch);
}

fn cancel(c: Ctx) {
    if let Some(pool) = pool() {
        pool.borrow_mut().cancel();
    }
    c.run.update(|r| r.cancelled = true);
}

fn canvas_of(node: &NodeRef<leptos::html::Canvas>) -> Option<web_sys::HtmlCanvasElement> {
    node.get_untracked()
}

fn download(name: &str, href: &str) {
    let Ok(a) = document().create_element("a") else {
        return;
    };
    let a: web_sys::HtmlAnchorElement = a.unchecked_into();
    a.set_href(href);
    a.set_download(name);
    a.click();
}

fn download_text(name: &str, text: &str, mime: &str) {
    // The object URL is revoked when `url` drops, after the click has started the download.
    let url = gloo_file::ObjectUrl::from(gloo_file::Blob::new_with_options(text, Some(mime)));
    download(name, &url);
}

/// The page.
#[component]
pub fn App() -> impl IntoView {
    let search = window().location().search().unwrap_or_default();
    let learn_first = wants_learn(&search);
    let watch_first = wants_watch(&search);
    let (watch0, watch_errs) = WatchState::from_query(&search);
    let fleet_first = wants_fleet(&search);
    let (fleet0, fleet_params, fleet_bad) = FleetState::from_query(&search);
    let plan_first = wants_plan(&search);
    let (plan0, plan_params, plan_bad) = PlanState::from_query(&search);
    // A lesson URL carries only the lesson's keys: the calculator starts at its default.
    // A watch URL carries the calculator's: the calculator starts on the watched server.
    let (initial, url_errs) = if learn_first {
        (Params::default(), Vec::new())
    } else if watch_first {
        (watch0.params.clone(), Vec::new())
    } else if fleet_first {
        (fleet_params, Vec::new())
    } else if plan_first {
        (plan_params, Vec::new())
    } else {
        Params::read_query(&search)
    };
    // A value the URL gives that is not a value of its field stays in the field with its
    // message; an unknown key is only reported.
    let (known, unknown): (Vec<_>, Vec<_>) = url_errs.into_iter().partition(|b| b.known);
    let input_errs = known
        .iter()
        .map(|b| InputError {
            key: b.key.clone(),
            text: b.text.clone(),
            message: b.field_message(),
        })
        .collect();
    // The calculator's URL as last written: the user's own until the state is valid.
    let calculator_url =
        StoredValue::new(if learn_first || watch_first || fleet_first || plan_first {
            initial.to_query()
        } else {
            search.trim_start_matches('?').to_string()
        });
    let (lesson0, lesson_errs) = LessonState::from_query(&search);
    let params = RwSignal::new(initial);
    let measured = RwSignal::new(Vec::<MeasuredSet>::new());
    let c = Ctx {
        params,
        points: RwSignal::new(Vec::new()),
        models: RwSignal::new(None),
        detail: RwSignal::new(None),
        measured,
        series: Memo::new(move |_| measured.with(|v| measured::group(v))),
        report_model: RwSignal::new(None),
        run: RwSignal::new(RunState::default()),
        grid: RwSignal::new(None),
        file_msg: RwSignal::new(None),
        tab: RwSignal::new(Tab::Load),
        window: RwSignal::new(0.2),
        geo: RwSignal::new(Geometry::default()),
        hover: RwSignal::new(None),
        input_errs: RwSignal::new(input_errs),
        invalid: Memo::new(move |_| params.with(|p| p.check().err())),
        url_notes: RwSignal::new(unknown.iter().map(params::BadValue::message).collect()),
        view: RwSignal::new(if learn_first {
            View::Learn
        } else if watch_first {
            View::Watch
        } else if fleet_first {
            View::Fleet
        } else if plan_first {
            View::Plan
        } else {
            View::Calculator
        }),
        learn: LearnSignals {
            state: RwSignal::new(lesson0),
            run: RwSignal::new(LessonRun {
                error: (learn_first && !lesson_errs.is_empty()).then(|| lesson_errs.join("; ")),
                ..LessonRun::default()
            }),
        },
        swept: StoredValue::new(None),
        learnt: StoredValue::new(None),
        watch: WatchSignals::new(
            watch0,
            (watch_first && !watch_errs.is_empty()).then(|| watch_errs.join("; ")),
        ),
        watched: StoredValue::new(None),
        fleet: FleetSignals::new(
            fleet0,
            if fleet_first { fleet_bad } else { Vec::new() },
            params,
            search.trim_start_matches('?').to_string(),
        ),
        plan: PlanSignals::new(
            plan0,
            if plan_first { plan_bad } else { Vec::new() },
            params,
            search.trim_start_matches('?').to_string(),
        ),
        as_run: RwSignal::new(Default::default()),
    };
    let n = window().navigator().hardware_concurrency().clamp(1.0, 4.0) as usize;
    POOL.with(|p| *p.borrow_mut() = Some(Pool::new(n, move |w, r| on_reply(c, w, r))));

    // The shown view's state → URL. The calculator's only from valid parameters: a
    // rejected value stays in the URL, where the user put it, while its error is shown.
    Effect::new(move |_| {
        let q = match c.view.get() {
            View::Calculator => {
                if !c.blocked() {
                    calculator_url.set_value(c.params.with(|p| p.to_query()));
                }
                calculator_url.get_value()
            }
            View::Learn => c.learn.state.with(|s| s.to_query()),
            View::Watch => c.watch.state.with(|s| s.to_query()),
            View::Fleet => fleet_view::query(c),
            View::Plan => plan_view::query(c),
        };
        if let Ok(h) = window().history() {
            let _ =
                h.replace_state_with_url(&wasm_bindgen::JsValue::NULL, "", Some(&format!("?{q}")));
        }
    });
    // Parameters (debounced) → a new sweep, while the calculator is shown and the
    // parameters differ from the last sweep's.
    // Each change replaces the pending timer (dropping a gloo `Timeout` cancels it), so
    // only the last change within the delay starts a sweep.
    let pending = StoredValue::new_local(None::<Timeout>);
    Effect::new(move |_| {
        let p = c.params.get();
        if c.view.get() != View::Calculator {
            return;
        }
        if c.blocked() {
            // Nothing runs while an error is on show: a pending or running sweep stops,
            // and the next valid parameters sweep even if they are the last swept.
            pending.set_value(None);
            c.swept.set_value(None);
            if c.run.with_untracked(RunState::running) {
                if let Some(pool) = pool() {
                    pool.borrow_mut().cancel();
                }
                c.run.set(RunState::default());
            }
            return;
        }
        // A failed run on show always re-runs: setting a field back to the value of the
        // last sweep must clear it.
        let error_shown = c.run.with_untracked(|r| r.error.is_some());
        if c.swept.get_value().as_ref() == Some(&p) && !error_shown {
            return;
        }
        pending.set_value(Some(Timeout::new(60, move || {
            if c.view.get_untracked() == View::Calculator {
                start_sweep(c);
            }
        })));
    });
    // Fleet state or the replicas' parameters (debounced) → a new fleet sweep, while the
    // Fleet view is shown and they differ from the last sweep's.
    let fleet_pending = StoredValue::new_local(None::<Timeout>);
    Effect::new(move |_| {
        let now = (c.fleet.state.get(), c.params.get());
        if c.view.get() != View::Fleet {
            return;
        }
        if fleet_view::blocked(c) {
            fleet_pending.set_value(None);
            fleet_view::forget(c);
            return;
        }
        if c.fleet.swept.get_value().as_ref() == Some(&now) {
            return;
        }
        fleet_pending.set_value(Some(Timeout::new(60, move || {
            if c.view.get_untracked() == View::Fleet {
                fleet_view::start(c);
            }
        })));
    });
    plan_view::replan_on_change(c);
    // Lesson state (debounced) → a new lesson run, while the Learn view is shown.
    let lesson_pending = StoredValue::new_local(None::<Timeout>);
    Effect::new(move |_| {
        let s = c.learn.state.get();
        if c.view.get() != View::Learn || c.learnt.get_value().as_ref() == Some(&s) {
            return;
        }
        lesson_pending.set_value(Some(Timeout::new(120, move || {
            if c.view.get_untracked() == View::Learn {
                start_lesson(c);
            }
        })));
    });

    // Watch state (a new run, not a new playback position) → a new watched run, while
    // the Watch view is shown.
    Effect::new(move |_| {
        let s = c.watch.state.get();
        if c.view.get() != View::Watch
            || c.watched
                .get_value()
                .as_ref()
                .is_some_and(|w| w.same_run(&s))
        {
            return;
        }
        start_watch(c);
    });

    let canvas = NodeRef::<leptos::html::Canvas>::new();
    Effect::new(move |_| {
        // Track everything the chart shows.
        c.tab.track();
        c.params.track();
        c.points.track();
        c.models.track();
        c.detail.track();
        c.measured.track();
        if let Some(cv) = canvas.get() {
            draw(c, &cv);
        }
    });

    let on_move = move |ev: web_sys::MouseEvent| {
        let Some(cv) = canvas_of(&canvas) else { return };
        let scale = cv.width() as f64 / (cv.client_width().max(1) as f64);
        let x = ev.offset_x() as f64 * scale;
        let g = c.geo.get_untracked();
        let Some(xd) = g.x_at(x) else {
            c.hover.set(None);
            return;
        };
        let text =
            match c.tab.get_untracked() {
                Tab::Load => {
                    let m = c.params.with_untracked(|p| p.metric);
                    let pts = c.points.get_untracked();
                    let Some(pt) = pts
                        .iter()
                        .min_by(|a, b| (a.rate - xd).abs().total_cmp(&(b.rate - xd).abs()))
                    else {
                        return;
                    };
                    let a = pt.get(m);
                    let mut s = format!(
                        "λ = {} · {}: {} ± {} (simulation, {} seeds)",
                        format::req_per_s(pt.rate),
                        m.name(),
                        a.mean
                            .map(|v| format::value(m, v))
                            .unwrap_or_else(|| "no samples".into()),
                        a.ci95
                            .map(|v| format::value(m, v))
                            .unwrap_or_else(|| "—".into()),
                        a.n
                    );
                    if let Some(models) = c.models.get_untracked() {
                        for mc in model_curves(&models, m) {
                            if let Some((r, v)) = mc.points.iter().min_by(|a, b| {
                                (a.0 - pt.rate).abs().total_cmp(&(b.0 - pt.rate).abs())
                            }) {
                                s.push_str(&format!(
                                    " · {} at {}: {}",
                                    mc.name,
                                    format::req_per_s(*r),
                                    v.map(|v| format::value(m, v))
                                        .unwrap_or_else(|| "unstable".into())
                                ));
                            }
                        }
                    }
                    // The measured point nearest the pointer, with the file it came from.
                    let near = c.series.with_untracked(|series| {
                        series
                            .iter()
                            .flat_map(|se| se.points.iter().map(move |p| (se, p)))
                            .filter_map(|(se, p)| Some((se, p, p.point.get(m)?.0)))
                            .min_by(|a, b| {
                                (a.1.point.rate - xd)
                                    .abs()
                                    .total_cmp(&(b.1.point.rate - xd).abs())
                            })
                            .map(|(se, p, v)| {
                                format!(
                                    " · {} at {}: {} (file {})",
                                    se.name,
                                    format::req_per_s(p.point.rate),
                                    format::value(m, v),
                                    p.file
                                )
                            })
                    });
                    s.push_str(&near.unwrap_or_default());
                    s
                }
                Tab::Cdf => format!("TTFT = {}", format::latency(xd)),
                Tab::Time => format!("t = {xd:.2} s"),
                Tab::Timeline => {
                    let row = g
                        .y_at(ev.offset_y() as f64 * scale)
                        .map(|v| v.floor().max(0.0) as usize);
                    c.detail
                        .with_untracked(|d| {
                            let d = d.as_ref()?;
                            let i = row?;
                            d.spans.get(i).map(|s| s.describe(i))
                        })
                        .unwrap_or_else(|| format!("t = {xd:.2} s"))
                }
            };
        c.hover.set(Some(text));
    };

    let file_input = NodeRef::<leptos::html::Input>::new();
    let on_drop = move |ev: web_sys::DragEvent| {
        ev.prevent_default();
        let Some(dt) = ev.data_transfer() else { return };
        // Folders come as directory entries, to be taken while the event runs; a folder
        // also shows up in the file list, as an unreadable file of its name.
        let dirs: Vec<_> = crate::drop::entries(&dt)
            .into_iter()
            .filter(|e| e.is_directory())
            .collect();
        let dir_names: Vec<String> = dirs.iter().map(|e| e.name()).collect();
        let files: Vec<web_sys::File> = dt
            .files()
            .map(|l| (0..l.length()).filter_map(|i| l.get(i)).collect())
            .unwrap_or_default();
        leptos::task::spawn_local(async move {
            let mut d = crate::drop::read_entries(dirs).await;
            let loose = files.into_iter().filter(|f| !dir_names.contains(&f.name()));
            let more = crate::drop::read_files(loose.collect()).await;
            d.files.extend(more.files);
            d.folders.extend(more.folders);
            d.problems.extend(more.problems);
            take_dropped(c, d);
        });
    };

    let share_url = move || {
        c.params.with(|p| {
            let loc = window().location();
            format!(
                "{}{}?{}",
                loc.origin().unwrap_or_default(),
                loc.pathname().unwrap_or_default(),
                p.to_query()
            )
        })
    };

    let show_prefix = Memo::new(move |_| {
        c.params
            .with(|p| !p.prefix_cache.is_off() || p.metric.is_prefix())
    });
    let tab_button = move |t: Tab, label: &'static str| {
        view! { <button class="tab" class:active=move || c.tab.get() == t on:click=move |_| c.tab.set(t)>{label}</button> }
    };

    view! {
           <header>
               <h1>"kvqueue"</h1>
               <span class="tagline">"How will this LLM server behave under load? A continuous-batching simulator with queueing models, in your browser."</span>
               <nav class="views">
                   <button id="view-calculator" class="tab" class:active=move || c.view.get() == View::Calculator
                       on:click=move |_| c.view.set(View::Calculator)>"Calculator"</button>
                   <button id="view-learn" class="tab" class:active=move || c.view.get() == View::Learn
                       on:click=move |_| c.view.set(View::Learn)>"Learn"</button>
                   <button id="view-watch" class="tab" class:active=move || c.view.get() == View::Watch
                       on:click=move |_| c.view.set(View::Watch)>"Watch"</button>
                   <button id="view-fleet" class="tab" class:active=move || c.view.get() == View::Fleet
                       on:click=move |_| c.view.set(View::Fleet)>"Fleet"</button>
                   <button id="view-plan" class="tab" class:active=move || c.view.get() == View::Plan
                       on:click=move |_| c.view.set(View::Plan)>"Plan"</button>
               </nav>
           </header>
           <div style:display=move || if c.view.get() == View::Learn { "" } else { "none" }>
               {learn_view(c.learn, move |p| open_watch(c, p))}
           </div>
           <div style:display=move || if c.view.get() == View::Watch { "" } else { "none" }>
               {watch_view(c.watch, move || {
                   if fleet_view::from_watch(c) { return; }
                   c.params.set(c.watch.state.with_untracked(|s| s.params.clone()));
                   c.view.set(View::Calculator);
               })}
           </div>
           <Show when=move || c.view.get() == View::Fleet>
               <div id="fleet">{fleet_view::fleet_view(c)}</div>
           </Show>
           <Show when=move || c.view.get() == View::Plan>
               <div id="plan">{plan_view::plan_view(c)}</div>
           </Show>
           <div id="calculator" style:display=move || if c.view.get() == View::Calculator { "" } else { "none" }>
           <div class="toolbar">
               <label>"Preset "
                   <select id="preset" on:change=move |ev| {
                       if let Some(p) = Preset::from_key(&event_target_value(&ev)) { c.params.set(p.params()); }
                   }>
                       {Preset::ALL.into_iter().map(|p| view! {
                           <option value=p.key() selected=move || c.params.with(|x| x.preset == p.key())>{p.label()}</option>
                       }).collect_view()}
                   </select>
               </label>
               // The label names the preset the view started from; say when the simulated
               // configuration no longer is that preset's.
               <span id="preset-changed" style="color: var(--muted); font-size: 12px">{move || c.params.with(|x| {
                   let changed = Preset::from_key(&x.preset)
                       .is_some_and(|p| p.params().sim_config(x.rate, 0) != x.sim_config(x.rate, 0));
                   if changed { "· changed since (workload, server or cost)" } else { "" }
               })}</span>
    <button id="open-watch" title="animate a short run of this server at the chosen rate"
                   on:click=move |_| open_watch(c, c.params.get_untracked())>"▶ watch this server"</button>
               <span class="spacer"></span>
               <input id="share-url" class="share" readonly prop:value=share_url title="copy this link to share the view" />
               <button id="export-csv" on:click=move |_| {
                   let m = c.params.with_untracked(|p| p.metric);
                   let models = c.models.with_untracked(|x| x.as_ref().map(|x| model_curves(x, m)).unwrap_or_default());
                   let named: Vec<_> = models.into_iter().map(|mc| (mc.name.clone(), m, mc)).collect();
                   download_text("kvqueue-curves.csv", &to_csv(&c.points.get_untracked(), &named), "text/csv");
               }>"export CSV"</button>
               <button id="export-png" on:click=move |_| {
                   if c.tab.get_untracked() == Tab::Load {
                       match chart_svg(c) {
                           Ok(svg) => leptos::task::spawn_local(async move {
                               if let Err(e) = crate::export::save_png_2x("kvqueue-chart.png", &svg, EXPORT_W, EXPORT_H).await {
                                   c.file_msg.set(Some((false, format!("PNG export failed: {e}"))));
                               }
                           }),
                           Err(e) => c.file_msg.set(Some((false, format!("PNG export failed: {e}")))),
                       }
                   } else if let Some(cv) = canvas_of(&canvas) {
                       if let Ok(url) = cv.to_data_url() { download("kvqueue-chart.png", &url); }
                   }
               }>"export PNG"</button>
               <button id="export-svg" style:display=move || if c.tab.get() == Tab::Load { "" } else { "none" } on:click=move |_| {
                   match chart_svg(c) {
                       Ok(svg) => crate::export::save_svg("kvqueue-chart.svg", &svg),
                       Err(e) => c.file_msg.set(Some((false, format!("SVG export failed: {e}")))),
                   }
               }>"export SVG"</button>
           </div>
           {answer(c)}
           <main>
               {panel::panel(c)}
               <section class="results">
                   <div class="tabs">
                       {tab_button(Tab::Load, "Load curves")}
                       {tab_button(Tab::Cdf, "TTFT distribution")}
                       {tab_button(Tab::Time, "Over time")}
                       {tab_button(Tab::Timeline, "Timeline")}
                       <Show when=move || c.tab.get() == Tab::Load>
                           // The prefix cache's metrics are listed while it is on (or chosen).
                           {move || {
                               let prefix = show_prefix.get();
                               select_field(c, "metric", "metric", Metric::ALL.iter().filter(|m| prefix || !m.is_prefix()).map(|m| (m.key(), m.label())).collect())
                           }}
                       </Show>
                       <Show when=move || c.tab.get() == Tab::Time>
                           <label class="field">
                               <span>"show"</span>
                               <select name="window" on:change=move |ev| {
                                   if let Ok(w) = event_target_value(&ev).parse::<f64>() {
                                       c.window.set(w);
                                   }
                               }>
                                   {[("0.05", "first 5 % of the run"), ("0.2", "first 20 % of the run"), ("1", "the whole run")].into_iter().map(|(v, l)| view! {
                                       <option value=v selected=move || c.window.get().to_string() == v>{l}</option>
                                   }).collect_view()}
                               </select>
                           </label>
                       </Show>
                   </div>
                   <div class="status" id="status">
                       {move || {
                           let r = c.run.get();
                           let pct = if r.total > 0 { 100.0 * r.done_runs() as f64 / r.total as f64 } else { 0.0 };
                           if let Some(e) = r.error.clone() {
                               view! { <span class="error">{format!("error: {e}")}</span> }.into_any()
                           } else if r.cancelled {
                               view! { <span>{format!("cancelled at {:.0} %", pct)}</span> }.into_any()
                           } else if r.running() {
                               view! {
                                   <progress max="100" value=pct></progress>
                                   <span>{format!(" {} / {} runs", r.done_runs().min(r.total), r.total)}</span>
                                   <button id="cancel" on:click=move |_| cancel(c)>"cancel"</button>
                               }.into_any()
                           } else if let Some(ms) = r.elapsed_ms {
                               view! { <span id="sweep-time">{format!("{} runs in {:.2} s (in {} Web Worker{})", r.total, ms / 1000.0, r.done.len(), if r.done.len() == 1 { "" } else { "s" })}</span> }.into_any()
                           } else {
                               view! { <span></span> }.into_any()
                           }
                       }}
                   </div>
                   <div class="dropzone" id="dropzone"
                       on:dragover=move |ev: web_sys::DragEvent| ev.prevent_default()
                       on:drop=on_drop>
                       // An error takes the chart's place until it is fixed.
                       {move || {
                           let errs = c.errors();
                           (!errs.is_empty()).then(|| view! {
                               <div class="error chart-error" id="param-error">
                                   {errs.into_iter().map(|e| view! { <p>{e}</p> }).collect_view()}
                               </div>
                           })
                       }}
                       <canvas id="chart" node_ref=canvas width="900" height="500" on:mousemove=on_move
                           style:display=move || if c.blocked() { "none" } else { "" }
                           on:mouseleave=move |_| c.hover.set(None)></canvas>
                       <div class="hover" id="hover" style:display=move || if c.blocked() { "none" } else { "" }>{move || c.hover.get().unwrap_or_else(|| "hover over the chart for values".into())}</div>
                       {move || c.url_notes.with(|n| (!n.is_empty()).then(|| view! { <p class="hint" id="url-notes">{n.join("; ")}</p> }))}
                   </div>
                   {move || {
                       let m = c.models.get();
                       let metric = c.params.with(|p| p.metric);
                       m.map(|m| {
                           let mut parts: Vec<String> = m.skipped.iter().map(|(k, why)| format!("{k}: not shown — {why}")).collect();
                           if c.tab.get() == Tab::Load && model_curves(&m, metric).is_empty() && !m.curves.is_empty() {
                               parts.push(format!("the models do not predict {}", metric.label()));
                           }
                           view! { <p class="models-note">{parts.join(" · ")}</p> }
                       })
                   }}
                   <div class="files">
                       <label class="filebtn">"Load measured results… "
                           <input type="file" id="file-input" node_ref=file_input multiple accept=".csv,.json,.jsonl,.zip,text/csv,application/json,application/zip"
                               on:change=move |_| {
                                   if let Some(files) = file_input.get_untracked().and_then(|i| i.files()) {
                                       let files: Vec<web_sys::File> = (0..files.length()).filter_map(|i| files.get(i)).collect();
                                       leptos::task::spawn_local(async move {
                                           take_dropped(c, crate::drop::read_files(files).await);
                                       });
                                   }
                               } />
                       </label>
                       <a href="examples/sim-example-summary.csv" download>"example summary CSV"</a>
                       " · "
                       <a href="examples/sim-example-requests.csv" download>"example per-request CSV"</a>
                       {move || c.file_msg.get().map(|(ok, m)| view! { <p id="file-msg" class=if ok { "ok" } else { "error" }>{m}</p> })}
                   </div>
                   {error_table(c)}
                   {report_cards(report_signals(c))}
                   <details class="bench">
                       <summary>"Benchmark: the reference study's full grid (800 runs)"</summary>
                       <button id="run-grid" on:click=move |_| start_grid(c)>"run 800-run grid"</button>
                       <span id="grid-result">{move || c.grid.get().unwrap_or_default()}</span>
                   </details>
               </section>
           </main>
           </div>
           <footer>"Simulation: discrete-event model of an iteration-level batching engine (kvqueue engine, compiled to WebAssembly). Models: the reference study's M/M/C, birth–death chain and CTMC, and kvqueue's own. Sweeps run in Web Workers; nothing leaves your browser."</footer>
       }
}
