//! The request timeline of a short run: one row per request, its waiting, prefill and
//! decode phases, rejected requests crossed.

use super::frame::{err, header, DrawResult, Geometry, HEADER_PX};
use super::legend::{self, Entry, Glyph};
use super::palette::{MEASURED_COLORS, MODEL_COLORS, SIM};
use super::scale::{count_label, nice_max};
use plotters::coord::Shift;
use plotters::prelude::*;

/// One request of a short run, for the timeline view.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Span {
    /// Arrival [s].
    pub arrival: f64,
    /// Entered the running set for the first time: start of its first prefill [s]
    /// (None: rejected, never admitted, or not recorded — then waiting and prefill are
    /// drawn as one phase).
    #[serde(default)]
    pub admitted: Option<f64>,
    /// First token [s] (None: rejected or unfinished before it).
    pub first_token: Option<f64>,
    /// Finish [s].
    pub finish: Option<f64>,
    pub rejected: bool,
}

impl Span {
    /// The timeline span of a request record.
    pub fn of(r: &engine::record::RequestRecord) -> Span {
        Span {
            arrival: r.arrival_s,
            admitted: r.admitted_s,
            first_token: r.first_token_s,
            finish: r.finish_s,
            rejected: r.outcome == engine::record::Outcome::Rejected,
        }
    }

    /// (waiting, prefill, decode) durations [s], where known. Without an admission time
    /// the waiting phase is None and "prefill" runs from arrival to the first token.
    pub fn phases(&self) -> (Option<f64>, Option<f64>, Option<f64>) {
        let wait = self.admitted.map(|a| a - self.arrival);
        let start = self.admitted.unwrap_or(self.arrival);
        let prefill = self.first_token.map(|f| f - start);
        let decode = match (self.first_token, self.finish) {
            (Some(f), Some(e)) => Some(e - f),
            _ => None,
        };
        (wait, prefill, decode)
    }

    /// One line for the hover read-out.
    pub fn describe(&self, index: usize) -> String {
        let ms = |v: Option<f64>| {
            v.map(|x| format!("{:.0} ms", x * 1e3))
                .unwrap_or_else(|| "—".into())
        };
        if self.rejected {
            return format!("request {index}: arrived {:.2} s, rejected", self.arrival);
        }
        let (w, p, d) = self.phases();
        let head = format!("request {index}: arrived {:.2} s", self.arrival);
        let tail = if self.finish.is_none() {
            " (unfinished)"
        } else {
            ""
        };
        match w {
            Some(_) => format!(
                "{head} · waiting {} · prefill {} · decode {}{tail}",
                ms(w),
                ms(p),
                ms(d)
            ),
            None => format!(
                "{head} · waiting + prefill {} · decode {}{tail}",
                ms(p),
                ms(d)
            ),
        }
    }
}

/// Request timeline: one row per request — waiting (arrival → admitted), prefill
/// (admitted → first token), decode (first token → finish); rejected requests crossed.
/// `first_token_after_decode` (the reference rules) says so in the prefill legend;
/// `caption` (which run it is) goes above the chart.
///
/// # Errors
/// The backend's drawing error, as text.
pub fn draw_timeline<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    spans: &[Span],
    first_token_after_decode: bool,
    caption: &str,
) -> DrawResult {
    area.fill(&WHITE).map_err(err)?;
    let (head, area) = area.split_vertically(HEADER_PX);
    header(&head, caption, &[])?;
    let wait = RGBColor(190, 190, 190);
    let pre = MODEL_COLORS[0];
    let dec = SIM;
    let rej = MEASURED_COLORS[0];
    let any_admitted = spans.iter().any(|s| s.admitted.is_some());
    let any_merged = spans
        .iter()
        .any(|s| s.admitted.is_none() && !s.rejected && s.first_token.is_some());
    let pre_label = match (any_admitted, first_token_after_decode) {
        (true, false) => "prefill (admitted → first token)",
        (true, true) => "prefill + 1st decode step (reference rules: token 1 after it)",
        (false, _) => "waiting + prefill (until first token)",
    };
    // The legend, in a column beside the rows (the rows fill the plot).
    let entry = |label: &str, glyph| Entry {
        group: "phases",
        label: label.to_string(),
        glyph,
    };
    let mut entries = Vec::new();
    if any_admitted {
        entries.push(entry("waiting (arrival → admitted)", Glyph::Block(wait)));
    }
    entries.push(entry(pre_label, Glyph::Block(pre)));
    if any_admitted && any_merged {
        // Measured requests mixed in have no admission time: say so.
        entries.push(entry(
            "(no admission time recorded: waiting included)",
            Glyph::Block(RGBColor(
                255 - (255 - pre.0) * 2 / 5,
                255 - (255 - pre.1) * 2 / 5,
                255 - (255 - pre.2) * 2 / 5,
            )),
        ));
    }
    entries.push(entry("decode (first token → finish)", Glyph::Block(dec)));
    entries.push(entry("rejected (at arrival)", Glyph::Cross(rej)));
    let (plot, side) = legend::column(&area, &entries)?;
    let area = &plot;
    let tmax = nice_max(
        spans
            .iter()
            .map(|s| s.finish.or(s.first_token).unwrap_or(s.arrival))
            .fold(0.0, f64::max),
    );
    let n = spans.len().max(1) as f64;
    let x = (0.0, tmax);
    let y = (0.0, n);
    let mut chart = ChartBuilder::on(area)
        .margin(12)
        .x_label_area_size(42)
        .y_label_area_size(64)
        .build_cartesian_2d(x.0..x.1, y.0..y.1)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("time [s]")
        .y_desc("request (arrival order)")
        .y_label_formatter(&count_label)
        .disable_y_mesh()
        .light_line_style(RGBColor(235, 235, 235))
        .label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 14))
        .draw()
        .map_err(err)?;
    let row = |i: usize| (i as f64 + 0.1, i as f64 + 0.9);
    if any_admitted {
        chart
            .draw_series(spans.iter().enumerate().filter_map(|(i, s)| {
                let (a, b) = row(i);
                let end = s.admitted?;
                (end > s.arrival).then(|| Rectangle::new([(s.arrival, a), (end, b)], wait.filled()))
            }))
            .map_err(err)?;
    }
    chart
        .draw_series(spans.iter().enumerate().filter_map(|(i, s)| {
            let (a, b) = row(i);
            let start = s.admitted.unwrap_or(s.arrival);
            let end = s.first_token.or(s.finish)?;
            Some(Rectangle::new(
                [(start, a), (end, b)],
                pre.mix(0.85).filled(),
            ))
        }))
        .map_err(err)?;
    chart
        .draw_series(spans.iter().enumerate().filter_map(|(i, s)| {
            let (a, b) = row(i);
            Some(Rectangle::new(
                [(s.first_token?, a), (s.finish?, b)],
                dec.mix(0.8).filled(),
            ))
        }))
        .map_err(err)?;
    chart
        .draw_series(
            spans
                .iter()
                .enumerate()
                .filter(|(_, s)| s.rejected)
                .map(|(i, s)| Cross::new((s.arrival, i as f64 + 0.5), 4, rej.stroke_width(2))),
        )
        .map_err(err)?;
    let mut geo = Geometry::of(&chart, x, y);
    if let Some(side) = side {
        geo.legend = Some(legend::draw_column(&side, &entries, geo.y_px.0)?);
    }
    area.present().map_err(err)?;
    Ok(geo)
}

#[cfg(test)]
mod tests {
    use super::super::testing::{svg, texts};
    use super::*;

    #[test]
    fn the_request_axis_has_whole_number_ticks() {
        let spans: Vec<Span> = (0..12)
            .map(|i| Span {
                arrival: i as f64,
                first_token: Some(i as f64 + 0.5),
                finish: Some(i as f64 + 1.0),
                ..Span::default()
            })
            .collect();
        let s = svg(|root| {
            draw_timeline(root, &spans, false, "run").unwrap();
        });
        let t = texts(&s);
        assert!(t.iter().any(|x| x == "10"), "{t:?}");
    }

    #[test]
    fn the_timeline_draws_phases_and_rejections() {
        let spans = vec![
            Span {
                arrival: 0.0,
                admitted: Some(0.1),
                first_token: Some(0.2),
                finish: Some(1.0),
                rejected: false,
            },
            Span {
                arrival: 0.5,
                rejected: true,
                ..Span::default()
            },
        ];
        let s = svg(|root| {
            draw_timeline(root, &spans, false, "λ = 4 req/s (seed 0)").unwrap();
        });
        assert!(
            s.matches("<rect").count() >= 4,
            "three phases plus the background"
        );
        assert!(s.contains("rejected") && s.contains("waiting (arrival"));
        assert!(s.contains("prefill (admitted"));
        let s = svg(|root| {
            draw_timeline(root, &spans, true, "").unwrap();
        });
        assert!(
            s.contains("reference rules"),
            "the legend says the first token waits for a decode"
        );
        // Measured spans (no admission time) keep the merged phase.
        let merged = [Span {
            admitted: None,
            ..spans[0]
        }];
        let s = svg(|root| {
            draw_timeline(root, &merged, false, "").unwrap();
        });
        assert!(s.contains("waiting + prefill") && !s.contains("waiting (arrival"));
    }

    #[test]
    fn span_phases_and_hover_text() {
        let s = Span {
            arrival: 1.0,
            admitted: Some(1.25),
            first_token: Some(1.3),
            finish: Some(2.3),
            rejected: false,
        };
        let (w, p, d) = s.phases();
        assert!((w.unwrap() - 0.25).abs() < 1e-12);
        assert!((p.unwrap() - 0.05).abs() < 1e-12);
        assert!((d.unwrap() - 1.0).abs() < 1e-12);
        assert_eq!(
            s.describe(3),
            "request 3: arrived 1.00 s · waiting 250 ms · prefill 50 ms · decode 1000 ms"
        );
        let r = Span {
            arrival: 2.0,
            rejected: true,
            ..Span::default()
        };
        assert!(r.describe(4).ends_with("rejected"));
        let m = Span {
            admitted: None,
            ..s
        };
        assert!(m.describe(0).contains("waiting + prefill 300 ms"));
        let rec = engine::record::RequestRecord {
            id: 0,
            class: 0,
            arrival_s: 1.0,
            first_token_s: Some(1.3),
            finish_s: Some(2.3),
            prompt_tokens: 10,
            output_tokens: 5,
            max_gap_s: 0.0,
            stalls: 0,
            preemptions: 0,
            outcome: engine::record::Outcome::Completed,
            admitted_s: Some(1.25),
            cached_tokens: 0,
        };
        assert_eq!(Span::of(&rec), s);
    }
}
