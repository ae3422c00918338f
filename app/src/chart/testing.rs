//! Test helpers: draw a chart onto an SVG string and read its texts back.

use plotters::coord::Shift;
use plotters::prelude::*;

/// The SVG that `draw` makes on an 800 × 480 area.
pub(super) fn svg(draw: impl FnOnce(&DrawingArea<SVGBackend<'_>, Shift>)) -> String {
    let mut s = String::new();
    {
        let root = SVGBackend::with_string(&mut s, (800, 480)).into_drawing_area();
        draw(&root);
    }
    s
}

/// The text of every `<text>` element of an SVG.
pub(super) fn texts(svg: &str) -> Vec<String> {
    svg.split("<text")
        .skip(1)
        .filter_map(|t| {
            Some(
                t.split_once('>')?
                    .1
                    .split_once("</text>")?
                    .0
                    .trim()
                    .to_string(),
            )
        })
        .collect()
}
