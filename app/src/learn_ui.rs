//! The Learn view (browser only): the lesson list, the open lesson's text, its sliders,
//! its live chart and read-out, and a "try this" prompt.
//!
//! The experiment itself is [`crate::learn::run`]; the page ([`crate::ui`]) decides where
//! it runs (a Web Worker of the pool, or in place when there is none) and feeds the result
//! into [`LessonRun`].

use crate::chart::{draw_panels, panels_hover_text, Geometry};
use crate::learn::{watch_links, Lesson, LessonOutput, LessonState};
use crate::params::{fmt_num, Params};
use leptos::prelude::*;
use plotters::prelude::IntoDrawingArea;
use plotters_canvas::CanvasBackend;

/// The state of the open lesson's experiment.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LessonRun {
    /// Identifies the run, so a stale result is dropped.
    pub id: u64,
    pub running: bool,
    pub output: Option<LessonOutput>,
    pub error: Option<String>,
    /// Wall time of the last finished run [ms].
    pub elapsed_ms: Option<f64>,
    pub started_ms: f64,
}

/// The signals the Learn view reads and writes.
#[derive(Clone, Copy, Debug)]
pub struct LearnSignals {
    pub state: RwSignal<LessonState>,
    pub run: RwSignal<LessonRun>,
}

/// Canvas height for `n` stacked panels [px].
pub fn canvas_height(n: usize) -> u32 {
    if n > 1 {
        620
    } else {
        430
    }
}

/// The Learn view. `watch` opens the Watch view on a lesson's server.
pub fn learn_view(
    s: LearnSignals,
    watch: impl Fn(Params) + Copy + Send + Sync + 'static,
) -> impl IntoView {
    let canvas = NodeRef::<leptos::html::Canvas>::new();
    let geo = RwSignal::new(Geometry::default());
    let hover = RwSignal::new(None::<String>);
    Effect::new(move |_| {
        let out = s.run.with(|r| r.output.clone());
        let Some(cv) = canvas.get() else { return };
        let Some(out) = out else { return };
        cv.set_height(canvas_height(out.panels.len()));
        let Some(backend) = CanvasBackend::with_canvas_object(cv.clone()) else {
            return;
        };
        let root = backend.into_drawing_area();
        match draw_panels(&root, &out.panels) {
            Ok(g) => geo.set(g),
            Err(e) => s
                .run
                .update(|r| r.error = Some(format!("drawing failed: {e}"))),
        }
    });
    let on_move = move |ev: web_sys::MouseEvent| {
        let Some(cv) = canvas.get_untracked() else {
            return;
        };
        let scale = cv.width() as f64 / (cv.client_width().max(1) as f64);
        let Some(x) = geo.get_untracked().x_at(ev.offset_x() as f64 * scale) else {
            hover.set(None);
            return;
        };
        let text = s.run.with_untracked(|r| {
            r.output
                .as_ref()
                .map(|o| panels_hover_text(&o.panels, x))
                .unwrap_or_default()
        });
        hover.set(Some(text));
    };

    let lesson = move || s.state.with(|x| x.lesson);
    let nav = move || {
        Lesson::ALL
            .into_iter()
            .map(|l| {
                view! {
                    <button class="lesson-link" id=format!("lesson-{}", l.number())
                        class:active=move || lesson() == l
                        on:click=move |_| s.state.set(LessonState::new(l))>
                        {format!("{}. {}", l.number(), l.title())}
                    </button>
                }
            })
            .collect_view()
    };
    let controls = move || {
        let st = s.state.get();
        st.lesson
            .controls()
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let c = *c;
                let value = st.values.get(i).copied().unwrap_or(c.default);
                let idx = c.nearest(value);
                view! {
                    <label class="lesson-control">
                        <span>{c.label}</span>
                        <input type="range" min="0" max=(c.steps.len() - 1).to_string() step="1"
                            data-lesson-key=c.key
                            prop:value=idx.to_string()
                            on:input=move |ev| {
                                if let Ok(k) = event_target_value(&ev).parse::<usize>() {
                                    if let Some(v) = c.steps.get(k) {
                                        s.state.update(|x| { x.set(c.key, &fmt_num(*v)); });
                                    }
                                }
                            } />
                        <output id=format!("lesson-value-{}", c.key)>{fmt_num(value)}</output>
                    </label>
                }
            })
            .collect_view()
    };
    let links = move || {
        let st = s.state.get();
        watch_links(&st)
            .into_iter()
            .map(|k| {
                let p = k.params.clone();
                view! {
                    <button class="watch-link" on:click=move |_| watch(p.clone())
                        title="animate a short run of this server, iteration by iteration">
                        {format!("▶ {}", k.label)}
                    </button>
                }
            })
            .collect_view()
    };
    let status = move || {
        let r = s.run.get();
        if let Some(e) = r.error {
            view! { <span class="error">{format!("error: {e}")}</span> }.into_any()
        } else if r.running {
            view! { <span>"simulating…"</span> }.into_any()
        } else if let (Some(o), Some(ms)) = (r.output.as_ref(), r.elapsed_ms) {
            view! { <span id="lesson-time">{format!("{} simulation runs in {:.0} ms, in a Web Worker", o.runs, ms)}</span> }.into_any()
        } else {
            view! { <span></span> }.into_any()
        }
    };
    let readout = move || {
        s.run.with(|r| {
            r.output.as_ref().map(|o| {
                let check = o.check.clone().map(|(ok, text)| {
                    view! { <p id="lesson-check" class=if ok { "check ok" } else { "check error" }>{text}</p> }
                });
                let rows = o
                    .readings
                    .iter()
                    .map(|x| view! { <tr><th>{x.label.clone()}</th><td>{x.value.clone()}</td></tr> })
                    .collect_view();
                view! {
                    {check}
                    <table class="readings" id="lesson-readings"><tbody>{rows}</tbody></table>
                }
            })
        })
    };

    let share = move || {
        s.state.with(|st| {
            let loc = window().location();
            format!(
                "{}{}?{}",
                loc.origin().unwrap_or_default(),
                loc.pathname().unwrap_or_default(),
                st.to_query()
            )
        })
    };

    view! {
        <div class="learn" id="learn">
            <nav class="lessons">
                <h2>"Lessons"</h2>
                {nav}
                <p class="hint">"Every chart here is computed live by the same simulator and queueing models as the calculator, in your browser."</p>
                <h2>"Link to this lesson"</h2>
                <input id="lesson-url" class="share" readonly prop:value=share title="copy this link: it opens this lesson with these settings" />
            </nav>
            <article class="lesson" id="lesson">
                <h2 id="lesson-title">{move || format!("{}. {}", lesson().number(), lesson().title())}</h2>
                <p class="lesson-text">{move || lesson().text()}</p>
                <div class="lesson-controls">{controls}</div>
                <div class="lesson-watch" id="lesson-watch">{links}</div>
                <div class="status" id="lesson-status">{status}</div>
                <canvas id="lesson-chart" node_ref=canvas width="900" height="430"
                    on:mousemove=on_move on:mouseleave=move |_| hover.set(None)></canvas>
                <div class="hover" id="lesson-hover">{move || hover.get().unwrap_or_else(|| "hover over the chart for values".into())}</div>
                {readout}
                <div class="try" id="lesson-try"><b>"Try this: "</b>{move || lesson().try_this()}</div>
            </article>
        </div>
    }
}
