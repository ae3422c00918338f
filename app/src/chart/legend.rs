//! Legends that never hide data: entries grouped under headings (simulation, models,
//! measured, limits), drawn either in a column beside the plot ([`column`]) or in a
//! corner of the plot that no drawn point or line passes through ([`clear_corner`]).
//!
//! Everything here works in backend pixels, so a chart can check a corner against the
//! pixels its data were drawn at.

use super::frame::err;
use plotters::coord::Shift;
use plotters::prelude::*;

/// A marker shape; measured series take them in turn, so two series differ in shape as
/// well as colour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    Cross,
    Square,
    Triangle,
    Diamond,
    Circle,
}

impl Shape {
    /// Shape `i` in the order measured series take them.
    pub fn nth(i: usize) -> Shape {
        const ALL: [Shape; 5] = [
            Shape::Cross,
            Shape::Square,
            Shape::Triangle,
            Shape::Diamond,
            Shape::Circle,
        ];
        ALL[i % ALL.len()]
    }

    /// The outline of a filled shape around (0, 0), `r` pixels out; `None` for the
    /// shapes drawn as strokes (cross, circle).
    pub fn outline(self, r: i32) -> Option<Vec<(i32, i32)>> {
        match self {
            Shape::Square => Some(vec![(-r, -r), (r, -r), (r, r), (-r, r)]),
            Shape::Triangle => Some(vec![(0, -r - 1), (r + 1, r), (-r - 1, r)]),
            Shape::Diamond => Some(vec![(0, -r - 1), (r + 1, 0), (0, r + 1), (-r - 1, 0)]),
            Shape::Cross | Shape::Circle => None,
        }
    }

    /// Draws the shape centred at pixel `c` of `area` (area coordinates).
    pub fn draw_px<DB: DrawingBackend>(
        self,
        area: &DrawingArea<DB, Shift>,
        c: (i32, i32),
        r: i32,
        col: RGBColor,
    ) -> Result<(), String> {
        match self.outline(r) {
            Some(o) => area
                .draw(&Polygon::new(
                    o.into_iter()
                        .map(|(x, y)| (c.0 + x, c.1 + y))
                        .collect::<Vec<_>>(),
                    col.filled(),
                ))
                .map_err(err),
            None if self == Shape::Cross => area
                .draw(&Cross::new(c, r + 1, col.stroke_width(3)))
                .map_err(err),
            None => area
                .draw(&Circle::new(c, r, col.stroke_width(2)))
                .map_err(err),
        }
    }
}

/// How an entry's sample looks.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Glyph {
    /// A line; dashed for limits (SLOs).
    Line { col: RGBColor, dashed: bool },
    /// A line over a light band (a mean with its confidence band).
    Band(RGBColor),
    /// A marker on a line (a measured series).
    Marker { shape: Shape, col: RGBColor },
    /// A filled block (a phase of a request).
    Block(RGBColor),
    /// A cross with no line (rejected requests).
    Cross(RGBColor),
}

/// One line of a legend, under the heading `group`.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub group: &'static str,
    pub label: String,
    pub glyph: Glyph,
}

const FONT: u32 = 13;
const LINE_H: i32 = 17;
const GLYPH_W: i32 = 26;
const PAD: i32 = 8;

/// Entries laid out: heading or entry, with its lines of text.
struct Row {
    heading: bool,
    glyph: Option<Glyph>,
    lines: Vec<String>,
}

/// Splits `text` into lines no wider than `max` pixels, at " · " or spaces.
fn wrap<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    text: &str,
    max: u32,
) -> Result<Vec<String>, String> {
    let font: TextStyle = ("sans-serif", FONT).into();
    let width = |s: &str| area.estimate_text_size(s, &font).map(|d| d.0).map_err(err);
    let mut lines = Vec::new();
    let mut cur = String::new();
    for word in text.split(' ') {
        let cand = if cur.is_empty() {
            word.to_string()
        } else {
            format!("{cur} {word}")
        };
        if !cur.is_empty() && width(&cand)? > max {
            lines.push(std::mem::take(&mut cur));
            cur = word.to_string();
        } else {
            cur = cand;
        }
    }
    if !cur.is_empty() {
        lines.push(cur);
    }
    Ok(lines)
}

fn rows<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    entries: &[Entry],
    max_text: u32,
) -> Result<Vec<Row>, String> {
    let mut out = Vec::new();
    let mut group = "";
    for e in entries {
        if e.group != group {
            group = e.group;
            out.push(Row {
                heading: true,
                glyph: None,
                lines: vec![group.to_string()],
            });
        }
        out.push(Row {
            heading: false,
            glyph: Some(e.glyph),
            lines: wrap(area, &e.label, max_text)?,
        });
    }
    Ok(out)
}

/// The size [px] of the legend of `entries` with text lines at most `max_text` wide.
pub fn size<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    entries: &[Entry],
    max_text: u32,
) -> Result<(i32, i32), String> {
    let font: TextStyle = ("sans-serif", FONT).into();
    let rows = rows(area, entries, max_text)?;
    let mut w = 0;
    let mut h = 0;
    for r in &rows {
        for l in &r.lines {
            let tw = area.estimate_text_size(l, &font).map_err(err)?.0 as i32;
            w = w.max(tw + if r.heading { 0 } else { GLYPH_W });
        }
        h += LINE_H * r.lines.len() as i32 + if r.heading { 2 } else { 0 };
    }
    Ok((w + 2 * PAD, h + 2 * PAD - 4))
}

/// Draws the legend with its top-left corner at backend pixel `at`; returns its box
/// `[x0, y0, x1, y1]` in backend pixels.
pub fn draw<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    entries: &[Entry],
    at: (i32, i32),
    max_text: u32,
) -> Result<[i32; 4], String> {
    let (w, h) = size(area, entries, max_text)?;
    let base = area.get_base_pixel();
    let (x0, y0) = (at.0 - base.0, at.1 - base.1);
    area.draw(&Rectangle::new(
        [(x0, y0), (x0 + w, y0 + h)],
        WHITE.mix(0.92).filled(),
    ))
    .map_err(err)?;
    area.draw(&Rectangle::new(
        [(x0, y0), (x0 + w, y0 + h)],
        RGBColor(200, 200, 200),
    ))
    .map_err(err)?;
    let ink = RGBColor(29, 36, 48);
    let font = ("sans-serif", FONT).into_font().color(&ink);
    let heading = ("sans-serif", FONT)
        .into_font()
        .style(FontStyle::Bold)
        .color(&RGBColor(90, 98, 110));
    let mut y = y0 + PAD;
    for r in rows(area, entries, max_text)? {
        if r.heading {
            area.draw_text(&r.lines[0], &heading, (x0 + PAD, y))
                .map_err(err)?;
            y += LINE_H + 2;
            continue;
        }
        let mid = y + LINE_H / 2 - 1;
        if let Some(g) = r.glyph {
            sample(area, g, (x0 + PAD, mid))?;
        }
        for l in &r.lines {
            area.draw_text(l, &font, (x0 + PAD + GLYPH_W, y))
                .map_err(err)?;
            y += LINE_H;
        }
    }
    Ok([at.0, at.1, at.0 + w, at.1 + h])
}

/// An entry's sample, 20 px wide, starting at area pixel `(x, mid)`.
fn sample<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    g: Glyph,
    (x, y): (i32, i32),
) -> Result<(), String> {
    let line =
        |col: RGBColor, w: u32| PathElement::new(vec![(x, y), (x + 20, y)], col.stroke_width(w));
    match g {
        Glyph::Line { col, dashed: false } => area.draw(&line(col, 2)).map_err(err),
        Glyph::Line { col, dashed: true } => {
            for k in 0..3 {
                area.draw(&PathElement::new(
                    vec![(x + 8 * k, y), (x + 8 * k + 5, y)],
                    col.stroke_width(2),
                ))
                .map_err(err)?;
            }
            Ok(())
        }
        Glyph::Band(col) => {
            area.draw(&Rectangle::new(
                [(x, y - 5), (x + 20, y + 5)],
                col.mix(0.18).filled(),
            ))
            .map_err(err)?;
            area.draw(&line(col, 2)).map_err(err)
        }
        Glyph::Marker { shape, col } => {
            area.draw(&line(col, 1)).map_err(err)?;
            shape.draw_px(area, (x + 10, y), 4, col)
        }
        Glyph::Block(col) => area
            .draw(&Rectangle::new([(x, y - 5), (x + 20, y + 5)], col.filled()))
            .map_err(err),
        Glyph::Cross(col) => area
            .draw(&Cross::new((x + 10, y), 4, col.stroke_width(2)))
            .map_err(err),
    }
}

/// The widest a legend column gets [px of text].
pub const COLUMN_TEXT: u32 = 210;

/// An area of the chart in pixels.
pub type Area<DB> = DrawingArea<DB, Shift>;

/// Splits `area` into the plot's part and a legend column on the right wide enough for
/// `entries` (no column without entries).
pub fn column<DB: DrawingBackend>(
    area: &Area<DB>,
    entries: &[Entry],
) -> Result<(Area<DB>, Option<Area<DB>>), String> {
    if entries.is_empty() {
        return Ok((area.clone(), None));
    }
    let (w, _) = size(area, entries, COLUMN_TEXT)?;
    let total = area.dim_in_pixel().0 as i32;
    let (plot, side) = area.split_horizontally(total - w - 12);
    Ok((plot, Some(side)))
}

/// Draws `entries` in the column `side` made by [`column`], level with the plot's top
/// `top` [backend px]; returns the legend's box.
pub fn draw_column<DB: DrawingBackend>(
    side: &DrawingArea<DB, Shift>,
    entries: &[Entry],
    top: i32,
) -> Result<[i32; 4], String> {
    let base = side.get_base_pixel();
    draw(side, entries, (base.0 + 4, top), COLUMN_TEXT)
}

/// The pixels a polyline passes through, every `step` pixels along each segment: what a
/// legend must not cover.
pub fn trace(points: &[(i32, i32)], step: f64) -> Vec<(i32, i32)> {
    let mut out = Vec::new();
    for w in points.windows(2) {
        let (a, b) = (w[0], w[1]);
        let len = (((b.0 - a.0) as f64).powi(2) + ((b.1 - a.1) as f64).powi(2)).sqrt();
        let n = (len / step).ceil().max(1.0) as i32;
        for k in 0..n {
            let t = k as f64 / n as f64;
            out.push((
                a.0 + ((b.0 - a.0) as f64 * t).round() as i32,
                a.1 + ((b.1 - a.1) as f64 * t).round() as i32,
            ));
        }
    }
    out.extend(points.last().copied());
    out
}

/// Whether pixel `p` falls in box `b` grown by `pad` on every side.
pub fn inside(b: [i32; 4], p: (i32, i32), pad: i32) -> bool {
    (b[0] - pad..=b[2] + pad).contains(&p.0) && (b[1] - pad..=b[3] + pad).contains(&p.1)
}

/// The first corner of the plot rectangle `plot` = `[x0, y0, x1, y1]` (in the order of
/// `corners`: 0 upper left, 1 upper right, 2 lower right, 3 lower left) where a legend of
/// `size` holds none of the `drawn` pixels; its top-left corner.
pub fn clear_corner(
    plot: [i32; 4],
    size: (i32, i32),
    drawn: &[(i32, i32)],
    corners: &[usize],
) -> Option<(i32, i32)> {
    const GAP: i32 = 6;
    let (w, h) = size;
    if w + 2 * GAP > plot[2] - plot[0] || h + 2 * GAP > plot[3] - plot[1] {
        return None;
    }
    corners.iter().find_map(|&c| {
        let x = if c == 1 || c == 2 {
            plot[2] - GAP - w
        } else {
            plot[0] + GAP
        };
        let y = if c >= 2 {
            plot[3] - GAP - h
        } else {
            plot[1] + GAP
        };
        let b = [x, y, x + w, y + h];
        (!drawn.iter().any(|&p| inside(b, p, 4))).then_some((x, y))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_corner_with_data_is_not_chosen() {
        let plot = [0, 0, 400, 300];
        // A line rising from the lower left to the upper right.
        let line = trace(&[(0, 300), (400, 0)], 4.0);
        let c = clear_corner(plot, (100, 60), &line, &[1, 0, 2, 3]).unwrap();
        assert!(
            c.0 < 200,
            "upper left, not the upper right the line ends in: {c:?}"
        );
        let b = [c.0, c.1, c.0 + 100, c.1 + 60];
        assert!(!line.iter().any(|&p| inside(b, p, 0)));
        // Points in every corner: none is free.
        let all = [(5, 5), (395, 5), (395, 295), (5, 295), (200, 150)];
        assert_eq!(clear_corner(plot, (100, 60), &all, &[0, 1, 2, 3]), None);
        // Too large for the plot.
        assert_eq!(clear_corner(plot, (500, 60), &[], &[0]), None);
    }

    #[test]
    fn traces_cover_the_whole_segment() {
        let t = trace(&[(0, 0), (10, 0)], 4.0);
        assert_eq!(t.first(), Some(&(0, 0)));
        assert_eq!(t.last(), Some(&(10, 0)));
        assert!(t.windows(2).all(|w| (w[1].0 - w[0].0) <= 4));
        assert_eq!(Shape::nth(0), Shape::Cross);
        assert_ne!(Shape::nth(1), Shape::nth(2));
    }
}
