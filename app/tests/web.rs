//! Browser tests (headless Chromium via chromedriver): the chart code on a real canvas,
//! a small sweep job run inside wasm, and a lesson of the Learn view run and rendered.
#![cfg(target_arch = "wasm32")]

use app::chart::{draw_load, LoadChart};
use app::curves::CurvePoint;
use app::job::{run, Job, Reply, Task};
use app::metric::Metric;
use app::params::Params;
use plotters::prelude::IntoDrawingArea;
use plotters_canvas::CanvasBackend;
use wasm_bindgen::JsCast;
use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_browser);

fn small_sweep() -> Vec<CurvePoint> {
    let params = Params {
        horizon_s: 60.0,
        seeds: 2,
        rates: vec![1.0, 4.0],
        ..Params::default()
    };
    let job = Job {
        id: 1,
        params,
        tasks: vec![Task::Curve { rate: 1.0 }, Task::Curve { rate: 4.0 }],
    };
    let mut pts = Vec::new();
    run(&job, &mut |r| {
        if let Reply::Point { point, .. } = r {
            pts.push(point)
        }
    });
    pts
}

#[wasm_bindgen_test]
fn a_sweep_runs_in_wasm() {
    let pts = small_sweep();
    assert_eq!(pts.len(), 2);
    assert!(
        pts[1].get(Metric::MeanTtft).mean.unwrap() > pts[0].get(Metric::MeanTtft).mean.unwrap()
    );
}

#[wasm_bindgen_test]
fn the_load_chart_paints_a_canvas() {
    let doc = web_sys::window().unwrap().document().unwrap();
    let canvas: web_sys::HtmlCanvasElement = doc.create_element("canvas").unwrap().unchecked_into();
    canvas.set_width(600);
    canvas.set_height(400);
    doc.body().unwrap().append_child(&canvas).unwrap();
    let pts = small_sweep();
    let root = CanvasBackend::with_canvas_object(canvas.clone())
        .unwrap()
        .into_drawing_area();
    let chart = LoadChart {
        metric: Metric::MeanTtft,
        points: &pts,
        ..LoadChart::default()
    };
    draw_load(&root, &chart).unwrap();
    let ctx: web_sys::CanvasRenderingContext2d =
        canvas.get_context("2d").unwrap().unwrap().unchecked_into();
    let data = ctx.get_image_data(0.0, 0.0, 600.0, 400.0).unwrap().data();
    // Count pixels in the simulation colour (31, 119, 180).
    let blue = data
        .chunks(4)
        .filter(|p| p[0] < 80 && p[1] > 90 && p[1] < 150 && p[2] > 150)
        .count();
    assert!(
        blue > 50,
        "the simulation line is drawn ({blue} blue pixels)"
    );
}

fn canvas_non_white(canvas: &web_sys::HtmlCanvasElement) -> usize {
    let ctx: web_sys::CanvasRenderingContext2d =
        canvas.get_context("2d").unwrap().unwrap().unchecked_into();
    let (w, h) = (canvas.width() as f64, canvas.height() as f64);
    let data = ctx.get_image_data(0.0, 0.0, w, h).unwrap().data();
    data.chunks(4)
        .filter(|p| p[0] < 250 || p[1] < 250 || p[2] < 250)
        .count()
}

async fn tick(ms: i32) {
    let p = js_sys::Promise::new(&mut |resolve, _| {
        web_sys::window()
            .unwrap()
            .set_timeout_with_callback_and_timeout_and_arguments_0(&resolve, ms)
            .unwrap();
    });
    wasm_bindgen_futures::JsFuture::from(p).await.unwrap();
}

#[wasm_bindgen_test]
async fn a_lesson_runs_in_wasm_and_the_learn_view_renders_it() {
    use app::learn::{run as run_lesson, Lesson, LessonState};
    use app::learn_ui::{learn_view, LearnSignals, LessonRun};
    use leptos::prelude::*;

    let state = LessonState::new(Lesson::HeadOfLine);
    let output = run_lesson(&state).unwrap();
    assert_eq!(output.runs, 2);
    let signals = LearnSignals {
        state: RwSignal::new(state),
        run: RwSignal::new(LessonRun::default()),
    };
    let doc = web_sys::window().unwrap().document().unwrap();
    let host: web_sys::HtmlElement = doc.create_element("div").unwrap().unchecked_into();
    doc.body().unwrap().append_child(&host).unwrap();
    let handle = leptos::mount::mount_to(host.clone(), move || learn_view(signals, |_| {}));
    signals.run.set(LessonRun {
        output: Some(output),
        elapsed_ms: Some(1.0),
        ..LessonRun::default()
    });
    tick(50).await;
    let text = host.text_content().unwrap_or_default();
    assert!(text.contains("4. Head-of-line blocking"), "{text}");
    assert!(text.contains("Try this:") && text.contains("worst gap p50 / p99"));
    let canvas: web_sys::HtmlCanvasElement = doc
        .get_element_by_id("lesson-chart")
        .unwrap()
        .unchecked_into();
    let painted = canvas_non_white(&canvas);
    assert!(
        painted > 3000,
        "the lesson chart is drawn ({painted} non-white pixels)"
    );
    // Picking another lesson resets the state to that lesson's defaults.
    doc.get_element_by_id("lesson-2")
        .unwrap()
        .unchecked_into::<web_sys::HtmlElement>()
        .click();
    tick(10).await;
    assert_eq!(
        signals.state.get_untracked(),
        LessonState::new(Lesson::Batching)
    );
    drop(handle);
}
