//! Browser tests (headless Chromium via chromedriver): the chart code on a real canvas,
//! and a small sweep job run inside wasm.
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
