//! The Watch view (browser only): the animation of a short run, its controls (play,
//! pause, step, speed, time bar, all on the keyboard too), its counters with a text
//! alternative, and the TTFT histogram.
//!
//! The run is simulated in a Web Worker ([`crate::job::Task::Watch`]); the page receives
//! its [`Tape`] once and, each animation frame, replays the state at the playback time
//! ([`crate::watch::replay`]) and draws it on a canvas ([`crate::watch::scene`]). The
//! main-thread time of each frame drawn while playing is kept, and its median, 95th
//! percentile and maximum are in the canvas's `data-frame-ms-*` attributes.

mod frame;

use crate::params::fmt_num;
use crate::watch::replay::{hits_text, FLASH_S};
use crate::watch::scene::{draw_ttft, HEIGHT, WIDTH};
use crate::watch::{nearest_speed, Tape, WatchState, MAX_REQUESTS, SPEEDS};
use frame::{draw_frame, fleet_table, ReplicaRow};
use leptos::prelude::*;
use plotters::prelude::IntoDrawingArea;
use plotters_canvas::CanvasBackend;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

/// The state of the watched run's simulation.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WatchRun {
    /// Identifies the run, so a stale result is dropped.
    pub id: u64,
    pub running: bool,
    pub error: Option<String>,
    /// Wall time of the simulation, worker included [ms].
    pub elapsed_ms: Option<f64>,
    pub started_ms: f64,
}

/// The counters beside the animation.
#[derive(Clone, Debug, Default, PartialEq)]
struct Counters {
    t: String,
    queue: usize,
    batch: String,
    kv: String,
    completed: String,
    rejected: u32,
    preempted: u32,
    /// Prefix-cache hits ("off" without the cache).
    hits: String,
    text: String,
    /// A fleet's replicas, by replica.
    replicas: Vec<ReplicaRow>,
}

/// The signals the Watch view reads and writes.
#[derive(Clone, Copy, Debug)]
pub struct WatchSignals {
    /// The run's parameters and the playback position as last committed to the URL.
    pub state: RwSignal<WatchState>,
    pub tape: RwSignal<Option<Arc<Tape>>>,
    pub run: RwSignal<WatchRun>,
    /// The playback time [s] (moves every frame while playing).
    pub t: RwSignal<f64>,
    pub playing: RwSignal<bool>,
}

impl WatchSignals {
    pub fn new(state: WatchState, error: Option<String>) -> WatchSignals {
        let at = state.at_s;
        WatchSignals {
            state: RwSignal::new(state),
            tape: RwSignal::new(None),
            run: RwSignal::new(WatchRun {
                error,
                ..WatchRun::default()
            }),
            t: RwSignal::new(at),
            playing: RwSignal::new(false),
        }
    }

    /// A finished run arrives: shown from the position the URL asked for.
    pub fn arrive(self, id: u64, tape: Tape, now_ms: f64) {
        if self.run.with_untracked(|r| r.id) != id {
            return;
        }
        let at = self.state.with_untracked(|s| s.at_s).min(tape.end_s);
        self.tape.set(Some(Arc::new(tape)));
        self.t.set(at);
        self.run.update(|r| {
            r.running = false;
            r.elapsed_ms = Some(now_ms - r.started_ms);
        });
        set_root_data("watch-done", &id.to_string());
    }

    /// Writes the playback position and speed into the state (and so the URL).
    fn commit(self) {
        let t = self.t.get_untracked();
        self.state.update(|s| s.at_s = t);
    }

    fn end(self) -> f64 {
        self.tape
            .with_untracked(|t| t.as_ref().map_or(0.0, |t| t.end_s))
    }

    fn seek(self, t: f64) {
        self.playing.set(false);
        self.t.set(t.clamp(0.0, self.end()));
        self.commit();
    }

    fn step(self, forward: bool) {
        let t = self.t.get_untracked();
        let to = self.tape.with_untracked(|tape| {
            tape.as_ref().map(|tape| {
                if forward {
                    tape.next_boundary(t)
                } else {
                    tape.previous_boundary(t)
                }
            })
        });
        if let Some(to) = to {
            self.seek(to);
        }
    }

    fn speed_step(self, up: bool) {
        self.state.update(|s| {
            let i = SPEEDS.iter().position(|x| *x == s.speed).unwrap_or(3);
            let j = if up {
                (i + 1).min(SPEEDS.len() - 1)
            } else {
                i.saturating_sub(1)
            };
            s.speed = SPEEDS[j];
        });
    }

    fn toggle(self) {
        if self.playing.get_untracked() {
            self.playing.set(false);
            self.commit();
        } else {
            if self.t.get_untracked() >= self.end() {
                self.t.set(0.0);
            }
            self.playing.set(true);
            play_loop(self);
        }
    }
}

fn set_root_data(key: &str, value: &str) {
    if let Some(el) = document().document_element() {
        let _ = el.set_attribute(&format!("data-{key}"), value);
    }
}

fn now_ms() -> f64 {
    window().performance().map(|p| p.now()).unwrap_or(0.0)
}

/// Median, 95th percentile and maximum of frame times [ms] (nearest rank; zeros if none).
fn frame_stats(ms: &[f64]) -> (f64, f64, f64) {
    if ms.is_empty() {
        return (0.0, 0.0, 0.0);
    }
    let mut v = ms.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = |q: f64| v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
    (rank(0.5), rank(0.95), v[v.len() - 1])
}

/// Downloads the watched run — records, time series, iterations and events — as JSON.
fn download_json(tape: &Tape) {
    let Ok(text) = serde_json::to_string(tape) else {
        return;
    };
    // The object URL is revoked when `url` drops, after the click has started the download.
    let url = gloo_file::ObjectUrl::from(gloo_file::Blob::new_with_options(
        text.as_str(),
        Some("application/json"),
    ));
    if let Ok(a) = document().create_element("a") {
        let a: web_sys::HtmlAnchorElement = a.unchecked_into();
        a.set_href(&url);
        a.set_download("kvqueue-watch.json");
        a.click();
    }
}

/// Advances the playback time every animation frame while playing.
fn play_loop(w: WatchSignals) {
    type Frame = Rc<RefCell<Option<Closure<dyn FnMut(f64)>>>>;
    let f: Frame = Rc::new(RefCell::new(None));
    let g = f.clone();
    let mut last: Option<f64> = None;
    *g.borrow_mut() = Some(Closure::wrap(Box::new(move |now: f64| {
        if !w.playing.get_untracked() {
            // Dropping the closure from inside itself is deferred to the next tick.
            let f = f.clone();
            leptos::task::spawn_local(async move {
                f.borrow_mut().take();
            });
            return;
        }
        let dt = last.map_or(0.0, |l| ((now - l) / 1000.0).clamp(0.0, 0.25));
        last = Some(now);
        let speed = w.state.with_untracked(|s| s.speed);
        let end = w.end();
        let t = (w.t.get_untracked() + dt * speed).min(end);
        w.t.set(t);
        if t >= end {
            w.playing.set(false);
            w.commit();
        }
        if let Some(cb) = f.borrow().as_ref() {
            let _ = window().request_animation_frame(cb.as_ref().unchecked_ref());
        }
    }) as Box<dyn FnMut(f64)>));
    let first = g.borrow();
    if let Some(cb) = first.as_ref() {
        let _ = window().request_animation_frame(cb.as_ref().unchecked_ref());
    }
}

/// The Watch view. `to_calculator` opens the calculator (a fleet: the Fleet view) on the
/// watched parameters.
pub fn watch_view(
    w: WatchSignals,
    to_calculator: impl Fn() + Copy + Send + Sync + 'static,
) -> impl IntoView {
    let canvas = NodeRef::<leptos::html::Canvas>::new();
    let hist = NodeRef::<leptos::html::Canvas>::new();
    let counters = RwSignal::new(Counters::default());
    // Main-thread time of each frame drawn while playing [ms], since play last started
    // (at most the last 1,200).
    let frames = StoredValue::new(Vec::<f64>::new());
    // The histogram is redrawn only when its input changes: (tape, requests finished).
    let hist_key = StoredValue::new((0usize, usize::MAX));
    Effect::new(move |was_playing: Option<bool>| {
        let playing = w.playing.get();
        if playing && was_playing != Some(true) {
            frames.update_value(Vec::clear);
        }
        playing
    });
    // Each frame: replay, draw, count.
    Effect::new(move |_| {
        let t = w.t.get();
        let playing = w.playing.get();
        let speed = w.state.with(|s| s.speed);
        let Some(tape) = w.tape.get() else { return };
        let (Some(cv), Some(hv)) = (canvas.get(), hist.get()) else {
            return;
        };
        let t0 = now_ms();
        let flash = FLASH_S * speed.max(1.0);
        let (s, drawn, text, replicas) = match draw_frame(&cv, &tape, t, flash) {
            Ok(d) => d,
            Err(e) => {
                w.run
                    .update(|r| r.error = Some(format!("drawing failed: {e}")));
                return;
            }
        };
        let key = (Arc::as_ptr(&tape) as usize, s.ttft_done.len());
        if hist_key.get_value() != key {
            hist_key.set_value(key);
            let max_ttft = tape
                .records
                .iter()
                .filter_map(|r| r.ttft())
                .fold(0.0, f64::max);
            if let Some(b) = CanvasBackend::with_canvas_object(hv.clone()) {
                let _ = draw_ttft(&b.into_drawing_area(), &s.ttft_done, max_ttft);
            }
        }
        let ms = now_ms() - t0;
        if playing {
            frames.update_value(|f| {
                // The last 20 s or so at 60 frames/s.
                if f.len() == 1200 {
                    f.remove(0);
                }
                f.push(ms)
            });
            let (median, p95, max) = frames.with_value(|f| frame_stats(f));
            let _ = cv.set_attribute("data-frames", &frames.with_value(Vec::len).to_string());
            let _ = cv.set_attribute("data-frame-ms-median", &format!("{median:.2}"));
            let _ = cv.set_attribute("data-frame-ms-p95", &format!("{p95:.2}"));
            let _ = cv.set_attribute("data-frame-ms-max", &format!("{max:.2}"));
        }
        let _ = cv.set_attribute("data-t", &format!("{t}"));
        let _ = cv.set_attribute("data-queue-drawn", &drawn.queue.to_string());
        let _ = cv.set_attribute("data-batch-drawn", &drawn.busy_slots.to_string());
        let _ = cv.set_attribute("data-kv-drawn", &drawn.kv_blocks.to_string());
        let _ = cv.set_attribute("data-kv-cached-drawn", &drawn.kv_cached_idle.to_string());
        let _ = cv.set_attribute("data-hit-tags", &drawn.hit_tags.to_string());
        if let Some((panels, routed)) = drawn.panels {
            let _ = cv.set_attribute("data-replicas-drawn", &panels.to_string());
            let _ = cv.set_attribute("data-routed-drawn", &routed.to_string());
        } else {
            let _ = cv.remove_attribute("data-replicas-drawn");
            let _ = cv.remove_attribute("data-routed-drawn");
        }
        let _ = cv.set_attribute("aria-label", &text);
        let n = tape.records.len();
        // A fleet's batch slots and KV pool are its replicas' together.
        let k = tape.fleet.as_ref().map_or(1, |f| f.replicas.len()) as u64;
        counters.set(Counters {
            t: format!("{t:.3} s of {:.2} s", tape.end_s),
            queue: s.queue.len(),
            batch: format!("{} of {}", s.running, u64::from(tape.max_batch) * k),
            kv: format!(
                "{:.0} % ({} of {} blocks)",
                100.0 * s.kv_used_blocks as f64 / (tape.kv_blocks * k).max(1) as f64,
                s.kv_used_blocks,
                tape.kv_blocks * k
            ),
            completed: format!("{} of {n}", s.completed),
            rejected: s.rejected,
            preempted: s.preempted,
            hits: if tape.prefix_cache {
                hits_text(&s)
            } else {
                "off".into()
            },
            // The live region speaks only when playback stops, not 60 times a second.
            text: if playing { String::new() } else { text },
            replicas,
        });
    });

    let on_key = move |ev: web_sys::KeyboardEvent| {
        // Inputs keep their own keys (the time bar's arrows, typing a number).
        if let Some(t) = ev.target() {
            if let Some(el) = t.dyn_ref::<web_sys::Element>() {
                let tag = el.tag_name().to_ascii_lowercase();
                if tag == "input" || tag == "select" {
                    return;
                }
            }
        }
        let handled = match ev.key().as_str() {
            " " | "k" => {
                w.toggle();
                true
            }
            "ArrowRight" | "." => {
                w.step(true);
                true
            }
            "ArrowLeft" | "," => {
                w.step(false);
                true
            }
            "+" | "=" | "]" => {
                w.speed_step(true);
                true
            }
            "-" | "[" => {
                w.speed_step(false);
                true
            }
            "Home" => {
                w.seek(0.0);
                true
            }
            "End" => {
                w.seek(f64::INFINITY);
                true
            }
            _ => false,
        };
        if handled {
            ev.prevent_default();
        }
    };

    let status = move || {
        let r = w.run.get();
        if let Some(e) = r.error {
            view! { <span class="error">{format!("error: {e}")}</span> }.into_any()
        } else if r.running {
            view! { <span>"simulating the run in a Web Worker…"</span> }.into_any()
        } else if let Some(ms) = r.elapsed_ms {
            let it = w.tape.with(|t| {
                t.as_ref().map_or(0, |t| match &t.fleet {
                    Some(f) => f.replicas.iter().map(|r| r.iterations.len()).sum(),
                    None => t.iterations.len(),
                })
            });
            view! { <span id="watch-time">{format!("{it} iterations simulated and logged in {ms:.0} ms, in a Web Worker")}</span> }.into_any()
        } else {
            view! { <span></span> }.into_any()
        }
    };
    let summary = move || {
        w.state.with(|s| {
            let p = &s.params;
            let fleet = if s.is_fleet() {
                format!(" into {} replicas behind {}", s.replicas, s.router.name())
            } else {
                String::new()
            };
            format!(
                "λ = {} req/s{fleet} · {} · {} KV · B = {} · K = {} tokens · the first {} requests of seed {}",
                fmt_num(p.rate),
                p.policy.as_str(),
                if p.kv_mode == engine::config::KvMode::Paged { "paged" } else { "reserve" },
                p.max_batch,
                p.kv_tokens,
                s.requests,
                s.seed
            )
        })
    };
    let c = move || counters.get();
    let end = move || w.tape.with(|t| t.as_ref().map_or(0.0, |t| t.end_s));

    view! {
        <div class="watch" id="watch" tabindex="0" on:keydown=on_key
            aria-label="Watch the server: space plays or pauses, the arrow keys step one iteration, + and − change the speed, Home and End jump">
            <h2>{move || if w.state.with(|s| s.is_fleet()) { "Watch the fleet" } else { "Watch the server" }}</h2>
            <p class="watch-summary" id="watch-summary">{summary}
                " · " <a href="#" id="watch-edit" on:click=move |ev| { ev.prevent_default(); to_calculator(); }>{move || if w.state.with(|s| s.is_fleet()) { "change them in the Fleet view" } else { "change them in the calculator" }}</a></p>
            <div class="watch-controls">
                <button id="watch-play" aria-pressed=move || w.playing.get().to_string()
                    on:click=move |_| w.toggle()>{move || if w.playing.get() { "‖ pause" } else { "▶ play" }}</button>
                <button id="watch-back" title="back one iteration (←)" on:click=move |_| w.step(false)>"◀ step back"</button>
                <button id="watch-step" title="one iteration (→)" on:click=move |_| w.step(true)>"step ▶"</button>
                <label>"speed "
                    <select id="watch-speed" on:change=move |ev| {
                        if let Ok(x) = event_target_value(&ev).parse::<f64>() {
                            w.state.update(|s| s.speed = nearest_speed(x));
                        }
                    }>
                        {SPEEDS.iter().map(|&x| view! {
                            <option value=fmt_num(x) selected=move || w.state.with(|s| s.speed == x)>{format!("{}×", fmt_num(x))}</option>
                        }).collect_view()}
                    </select>
                </label>
                <label>"go to t [s] "
                    <input id="watch-at" type="number" min="0" step="any" style="width: 7em"
                        prop:value=move || format!("{:.4}", w.t.get())
                        on:change=move |ev| {
                            if let Ok(x) = event_target_value(&ev).parse::<f64>() {
                                if x.is_finite() { w.seek(x); }
                            }
                        } />
                </label>
                <label>"requests "
                    <input id="watch-n" type="number" min="1" max=MAX_REQUESTS.to_string() style="width: 5em"
                        prop:value=move || w.state.with(|s| s.requests.to_string())
                        on:change=move |ev| {
                            if let Ok(n) = event_target_value(&ev).parse::<u32>() {
                                if (1..=MAX_REQUESTS).contains(&n) { w.state.update(|s| { s.requests = n; s.at_s = 0.0; }); }
                            }
                        } />
                </label>
                <label>"seed "
                    <input id="watch-seed" type="number" min="0" style="width: 4em"
                        prop:value=move || w.state.with(|s| s.seed.to_string())
                        on:change=move |ev| {
                            if let Ok(n) = event_target_value(&ev).parse::<u64>() {
                                w.state.update(|s| { s.seed = n; s.at_s = 0.0; });
                            }
                        } />
                </label>
            </div>
            <input id="watch-scrub" class="watch-scrub" type="range" min="0" step="any"
                aria-label="time in the run [s]"
                prop:max=move || end().to_string()
                prop:value=move || w.t.get().to_string()
                on:input=move |ev| {
                    if let Ok(x) = event_target_value(&ev).parse::<f64>() { w.seek(x); }
                } />
            <div class="status" id="watch-status-line">{status}</div>
            <div class="watch-body">
                <canvas id="watch-canvas" node_ref=canvas role="img" width=WIDTH.to_string() height=HEIGHT.to_string()></canvas>
                <aside class="watch-side">
                    <dl class="watch-counters" id="watch-counters">
                        <dt>"time"</dt><dd id="watch-t">{move || c().t}</dd>
                        <dt>"queue"</dt><dd id="watch-queue">{move || c().queue}</dd>
                        <dt>"batch"</dt><dd id="watch-batch">{move || c().batch}</dd>
                        <dt>"KV use"</dt><dd id="watch-kv">{move || c().kv}</dd>
                        <dt>"completed"</dt><dd id="watch-completed">{move || c().completed}</dd>
                        <dt>"refused"</dt><dd id="watch-rejected">{move || c().rejected}</dd>
                        <dt>"preempted"</dt><dd id="watch-preempted">{move || c().preempted}</dd>
                        <dt>"prefix hits"</dt><dd id="watch-hits">{move || c().hits}</dd>
                    </dl>
                    <canvas id="watch-ttft" node_ref=hist role="img" width="300" height="170"
                        aria-label="histogram of the time to first token of the requests finished so far"></canvas>
                    <p class="hint">"keys: space play/pause · ← → one iteration · + − speed · Home End"</p>
                    <button id="watch-download" title="the run's records, time series, iterations and events"
                        on:click=move |_| { if let Some(t) = w.tape.get_untracked() { download_json(&t); } }>"download this run (JSON)"</button>
                </aside>
            </div>
            {move || fleet_table(c().replicas)}
            <p class="sr-status" id="watch-text" role="status" aria-live="polite">{move || c().text}</p>
        </div>
    }
}
