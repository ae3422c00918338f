//! The report card: how far the simulation (and one analytical model) is from a measured
//! run, for every metric the run has, at every rate it was measured at — one table, a
//! median |error| per metric, and one sentence that sums it up.
//!
//! The error of a cell is the page's one definition ([`PointError`], docs/model.md,
//! Metrics): |measured − simulated| / |simulated|, absolute where the simulated value is
//! near zero; its sign says whether the simulation is high or low.
//!
//! Everything here is plain data, tested natively; the page shows it
//! ([`crate::report_ui`]) and exports it as CSV and markdown ([`Card::to_csv`],
//! [`Card::to_markdown`]).

use crate::curves::{interpolate, CurvePoint, ModelCurve, PointError};
use crate::format;
use crate::measured::MeasuredSeries;
use crate::metric::Metric;

/// The chosen analytical model: its name, and its curve of a metric (None where it
/// predicts nothing).
pub type ModelOf<'a> = (&'a str, &'a dyn Fn(Metric) -> Option<ModelCurve>);

/// One metric at one rate.
#[derive(Clone, Debug, PartialEq)]
pub struct Cell {
    /// The file the measured value came from.
    pub file: String,
    pub measured: f64,
    /// The simulation's mean at this rate (interpolated between swept rates); `None`
    /// outside the swept rates.
    pub simulated: Option<f64>,
    /// Half-width of the simulation's 95 % CI at this rate.
    pub band: Option<f64>,
    /// The chosen analytical model's value; `None` where it predicts nothing.
    pub model: Option<f64>,
    pub error: Option<PointError>,
    /// Whether the simulation is above the measured value.
    pub high: bool,
}

/// One metric across the run's rates.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub metric: Metric,
    /// One cell per rate of [`Card::rates`].
    pub cells: Vec<Option<Cell>>,
    /// Median |error| over the rates that have one.
    pub median: Option<PointError>,
}

/// The report card of one measured series.
#[derive(Clone, Debug, PartialEq)]
pub struct Card {
    /// The series' name.
    pub series: String,
    /// The chosen analytical model's name.
    pub model: Option<String>,
    /// The measured rates [req/s], ascending.
    pub rates: Vec<f64>,
    /// One row per metric the run measured, in [`Metric::ALL`] order.
    pub rows: Vec<Row>,
    /// Median relative |error| over the metrics, per rate.
    pub median_by_rate: Vec<Option<f64>>,
    /// Median relative |error| over every cell.
    pub median_all: Option<f64>,
    /// One sentence for people.
    pub verdict: String,
}

/// The median of `v` (None when empty).
fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// The chosen model's value of `m` at `rate`, interpolated along its curve.
fn model_at(curve: &ModelCurve, rate: f64) -> Option<f64> {
    let pts = &curve.points;
    let i = pts.iter().position(|p| p.0 >= rate)?;
    let hi = pts[i];
    if (hi.0 - rate).abs() < 1e-12 {
        return hi.1;
    }
    let lo = pts.get(i.checked_sub(1)?)?;
    let (a, b) = (lo.1?, hi.1?);
    Some(a + (b - a) * (rate - lo.0) / (hi.0 - lo.0))
}

/// The simulation's 95 % CI half-width at `rate` (the larger of its neighbours').
fn band_at(points: &[CurvePoint], m: Metric, rate: f64) -> Option<f64> {
    let i = points.iter().position(|p| p.rate >= rate - 1e-12)?;
    let hi = points[i].get(m).ci95;
    if (points[i].rate - rate).abs() < 1e-12 {
        return hi;
    }
    let lo = points.get(i.checked_sub(1)?)?.get(m).ci95;
    match (lo, hi) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

impl Card {
    /// The card of `series` against the simulated `points` and the chosen model's curves
    /// (`model`: its name and a curve per metric, empty where it predicts nothing).
    pub fn of(series: &MeasuredSeries, points: &[CurvePoint], model: Option<ModelOf<'_>>) -> Card {
        let mut rates: Vec<f64> = series.points.iter().map(|p| p.point.rate).collect();
        rates.dedup_by(|a, b| (*a - *b).abs() < 1e-9);
        let mut rows = Vec::new();
        for m in Metric::ALL {
            let curve = model.and_then(|(_, f)| f(m));
            let cells: Vec<Option<Cell>> = rates
                .iter()
                .map(|&r| {
                    let sp = series
                        .points
                        .iter()
                        .find(|p| (p.point.rate - r).abs() < 1e-9 && p.point.get(m).is_some())?;
                    let (v, _) = sp.point.get(m)?;
                    let sim = interpolate(points, m, r);
                    Some(Cell {
                        file: sp.file.clone(),
                        measured: v,
                        simulated: sim,
                        band: sim.and(band_at(points, m, r)),
                        model: curve.as_ref().and_then(|c| model_at(c, r)),
                        error: sim.map(|s| PointError::of(m, v, s)),
                        high: sim.is_some_and(|s| s > v),
                    })
                })
                .collect();
            if cells.iter().all(Option::is_none) {
                continue;
            }
            let rel: Vec<f64> = cells
                .iter()
                .flatten()
                .filter_map(|c| match c.error? {
                    PointError::Relative(e) => Some(e),
                    PointError::Absolute(_) => None,
                })
                .collect();
            let abs: Vec<f64> = cells
                .iter()
                .flatten()
                .filter_map(|c| match c.error? {
                    PointError::Absolute(e) => Some(e),
                    PointError::Relative(_) => None,
                })
                .collect();
            let median = median(rel)
                .map(PointError::Relative)
                .or_else(|| median(abs).map(PointError::Absolute));
            rows.push(Row {
                metric: m,
                cells,
                median,
            });
        }
        let rel_at = |i: usize| -> Vec<f64> {
            rows.iter()
                .filter_map(|r| match r.cells[i].as_ref()?.error? {
                    PointError::Relative(e) => Some(e),
                    PointError::Absolute(_) => None,
                })
                .collect()
        };
        let median_by_rate = (0..rates.len()).map(|i| median(rel_at(i))).collect();
        let median_all = median((0..rates.len()).flat_map(rel_at).collect());
        let mut card = Card {
            series: series.name.clone(),
            model: model.map(|(n, _)| n.to_string()),
            rates,
            rows,
            median_by_rate,
            median_all,
            verdict: String::new(),
        };
        card.verdict = card.sentence();
        card
    }

    /// "The simulation is within 3 % of the run on mean TPOT and 70–150 % low on p99
    /// TTFT (… measured at 8 rates)."
    fn sentence(&self) -> String {
        let mut clauses: Vec<String> = Vec::new();
        let mut outside = 0;
        for row in &self.rows {
            let signed: Vec<f64> = row
                .cells
                .iter()
                .flatten()
                .filter_map(|c| match c.error? {
                    PointError::Relative(e) => Some(if c.high { e } else { -e }),
                    PointError::Absolute(_) => None,
                })
                .collect();
            outside += row
                .cells
                .iter()
                .flatten()
                .filter(|c| c.simulated.is_none())
                .count();
            let Some(med) = median(signed.iter().map(|e| e.abs()).collect()) else {
                continue;
            };
            let pct = |x: f64| format!("{:.0}", (100.0 * x).round());
            let lo = signed.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = signed.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let span = |a: f64, b: f64| {
                if pct(a) == pct(b) {
                    format!("{} %", pct(a))
                } else {
                    format!("{}–{} %", pct(a), pct(b))
                }
            };
            let name = row.metric.name();
            let clause = if med <= 0.10 && lo.abs().max(hi.abs()) <= 0.10 {
                // "within 0 %" reads as a claim of exactness: at least 1 %.
                let worst = (100.0 * lo.abs().max(hi.abs())).round().max(1.0);
                format!("within {worst:.0} % on {name}")
            } else if lo >= 0.0 {
                format!("{} high on {name}", span(lo, hi))
            } else if hi <= 0.0 {
                format!("{} low on {name}", span(-hi, -lo))
            } else {
                format!(
                    "off by up to {} % on {name} (high and low)",
                    pct(lo.abs().max(hi))
                )
            };
            clauses.push(clause);
        }
        let n = self.rates.len();
        let run = format!(
            "{} at {n} rate{}",
            self.series.trim_start_matches("measured: "),
            if n == 1 { "" } else { "s" }
        );
        if clauses.is_empty() {
            return format!(
                "No simulated value to compare with the run ({run}) yet: the sweep has not reached its rates."
            );
        }
        let list = match clauses.len() {
            1 => clauses[0].clone(),
            k => format!("{} and {}", clauses[..k - 1].join(", "), clauses[k - 1]),
        };
        let tail = if outside > 0 {
            format!(
                "; {outside} value{} lie outside the swept rates",
                if outside == 1 { "" } else { "s" }
            )
        } else {
            String::new()
        };
        format!("Against the run ({run}), the simulation is {list}{tail}.")
    }

    /// The card as CSV, one line per metric and rate, values in the metric's base unit
    /// (seconds, req/s, fraction).
    pub fn to_csv(&self) -> String {
        let mut out = String::from(
            "series,metric,arrival_rate,file,measured,simulated,simulated_ci95,model,model_value,error_kind,error,simulation_is\n",
        );
        let q = |s: &str| {
            if s.contains([',', '"', '\n']) {
                format!("\"{}\"", s.replace('"', "\"\""))
            } else {
                s.to_string()
            }
        };
        let num = |x: Option<f64>| x.map(|v| format!("{v}")).unwrap_or_default();
        for row in &self.rows {
            for (r, c) in self.rates.iter().zip(&row.cells) {
                let Some(c) = c else { continue };
                let (kind, e) = match c.error {
                    Some(PointError::Relative(e)) => ("relative", Some(e)),
                    Some(PointError::Absolute(e)) => ("absolute", Some(e)),
                    None => ("", None),
                };
                out.push_str(&format!(
                    "{},{},{},{},{},{},{},{},{},{},{},{}\n",
                    q(&self.series),
                    row.metric.column(),
                    format::rate_key(*r),
                    q(&c.file),
                    c.measured,
                    num(c.simulated),
                    num(c.band),
                    q(self.model.as_deref().unwrap_or("")),
                    num(c.model),
                    kind,
                    num(e),
                    match (c.simulated, c.high) {
                        (None, _) => "",
                        (Some(s), _) if s == c.measured => "equal",
                        (Some(_), true) => "high",
                        (Some(_), false) => "low",
                    }
                ));
            }
        }
        out
    }

    /// The text of one cell: measured, simulated ± band, model, error.
    pub fn cell_lines(&self, m: Metric, c: &Cell) -> [String; 4] {
        let model = self.model.as_deref().unwrap_or("model");
        [
            format::value(m, c.measured),
            match (c.simulated, c.band) {
                (Some(s), Some(b)) => {
                    // A band below the value's own last digit (rounding noise of a
                    // deterministic run) reads as 0.
                    let b = if b < 5e-4 * s.abs() { 0.0 } else { b };
                    format!("sim {} ± {}", format::value(m, s), format::value(m, b))
                }
                (Some(s), None) => format!("sim {}", format::value(m, s)),
                (None, _) => "sim: outside the sweep".into(),
            },
            match c.model {
                Some(v) => format!("{model} {}", format::value(m, v)),
                None => format!("{model} —"),
            },
            describe_error(m, c),
        ]
    }

    /// The card as a markdown table (the verdict above it), as the page shows it.
    pub fn to_markdown(&self) -> String {
        let mut out = format!("**{}**\n\n{}\n\n", self.series, self.verdict);
        out.push_str("| metric |");
        for r in &self.rates {
            out.push_str(&format!(" {} |", format::req_per_s(*r)));
        }
        out.push_str(" median \\|error\\| |\n|---|");
        for _ in &self.rates {
            out.push_str("---|");
        }
        out.push_str("---|\n");
        for row in &self.rows {
            out.push_str(&format!("| {} |", row.metric.name()));
            for c in &row.cells {
                match c {
                    Some(c) => out.push_str(&format!(
                        " {} |",
                        self.cell_lines(row.metric, c).join("<br>")
                    )),
                    None => out.push_str(" — |"),
                }
            }
            out.push_str(&format!(" {} |\n", describe_median(row.metric, row.median)));
        }
        out.push_str("| **median \\|error\\|** |");
        for m in &self.median_by_rate {
            out.push_str(&format!(
                " {} |",
                m.map(format::percent).unwrap_or_else(|| "—".into())
            ));
        }
        out.push_str(&format!(
            " **{}** |\n",
            self.median_all
                .map(format::percent)
                .unwrap_or_else(|| "—".into())
        ));
        out.push_str(&format!(
            "\nmeasured · sim = simulated mean ± 95 % CI half-width · {} = analytical model · error = |measured − simulated| / simulated\n",
            self.model.as_deref().unwrap_or("model")
        ));
        out
    }
}

/// A cell's error with its direction: "4.1 % (sim low)".
pub fn describe_error(m: Metric, c: &Cell) -> String {
    match c.error {
        None => "error: —".into(),
        Some(PointError::Relative(e)) => format!(
            "{} (sim {})",
            format::percent(e),
            if c.high { "high" } else { "low" }
        ),
        Some(PointError::Absolute(e)) => format!("±{} (abs.)", format::value(m, e)),
    }
}

/// A row's median |error|.
pub fn describe_median(m: Metric, e: Option<PointError>) -> String {
    match e {
        None => "—".into(),
        Some(PointError::Relative(e)) => format::percent(e),
        Some(PointError::Absolute(e)) => format!("±{} (abs.)", format::value(m, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measured::{group, MeasuredPoint, MeasuredSet, Setup, Source};
    use engine::metrics::Aggregate;

    /// A run at 1, 2, 4 req/s: TTFT 2× the simulation's, TPOT within 2 %.
    fn run() -> Vec<MeasuredSeries> {
        let sets: Vec<MeasuredSet> = [1.0, 2.0, 4.0]
            .iter()
            .map(|&r| {
                let mut p = MeasuredPoint {
                    rate: r,
                    values: vec![None; Metric::N],
                };
                p.values[Metric::MeanTtft.index()] = Some((0.04 * r, None));
                p.values[Metric::MeanTpot.index()] = Some((0.0102, None));
                p.values[Metric::Goodput.index()] = Some((r, None));
                MeasuredSet {
                    name: format!("r{r}.json"),
                    source: Source::VllmJson,
                    points: vec![p],
                    notes: vec![],
                    setup: Setup {
                        server: Some("vLLM".into()),
                        prompts: Some(300),
                        rate: Some(r),
                        ..Setup::default()
                    },
                }
            })
            .collect();
        group(&sets)
    }

    fn sim() -> Vec<CurvePoint> {
        [1.0, 2.0, 3.0]
            .iter()
            .map(|&r| {
                let mut aggs = vec![Aggregate::default(); Metric::N];
                let agg = |v: f64, ci: f64| Aggregate {
                    n: 5,
                    mean: Some(v),
                    std: Some(ci),
                    ci95: Some(ci),
                };
                aggs[Metric::MeanTtft.index()] = agg(0.02 * r, 0.001);
                aggs[Metric::MeanTpot.index()] = agg(0.01, 0.0002);
                aggs[Metric::Goodput.index()] = agg(r, 0.01);
                CurvePoint {
                    rate: r,
                    aggs,
                    slo_attainment: Some(1.0),
                }
            })
            .collect()
    }

    #[test]
    fn every_measured_metric_is_a_row_with_a_cell_per_rate_and_a_median() {
        let s = run();
        let card = Card::of(&s[0], &sim(), None);
        let metrics: Vec<Metric> = card.rows.iter().map(|r| r.metric).collect();
        assert_eq!(
            metrics,
            vec![Metric::MeanTtft, Metric::MeanTpot, Metric::Goodput]
        );
        assert_eq!(card.rates, vec![1.0, 2.0, 4.0]);
        let ttft = &card.rows[0];
        let c = ttft.cells[0].as_ref().unwrap();
        assert_eq!(
            (c.measured, c.simulated, c.band),
            (0.04, Some(0.02), Some(0.001))
        );
        assert_eq!(c.error, Some(PointError::Relative(1.0)));
        assert!(!c.high);
        // 4 req/s is beyond the sweep (1–3 req/s): no simulated value, no error.
        assert_eq!(ttft.cells[2].as_ref().unwrap().simulated, None);
        assert_eq!(ttft.median, Some(PointError::Relative(1.0)));
        let tpot = card.rows[1].median.unwrap();
        assert!(
            matches!(tpot, PointError::Relative(e) if (e - 0.02).abs() < 1e-9),
            "{tpot:?}"
        );
        assert_eq!(card.median_by_rate.len(), 3);
        assert_eq!(card.median_by_rate[2], None);
    }

    #[test]
    fn the_verdict_says_where_the_simulation_is_close_and_where_it_is_low() {
        let s = run();
        let card = Card::of(&s[0], &sim(), None);
        assert_eq!(
            card.verdict,
            "Against the run (vLLM · 300 prompts at 3 rates), the simulation is 100 % low on mean TTFT, \
             within 2 % on mean TPOT and within 1 % on goodput (completed); 3 values lie outside the swept rates."
        );
    }

    #[test]
    fn the_chosen_model_fills_its_line_and_exports_carry_every_cell() {
        let s = run();
        let curve = |m: Metric| {
            (m == Metric::MeanTtft).then(|| ModelCurve {
                name: "M/M/c".into(),
                slot: 0,
                points: vec![(0.5, Some(0.01)), (1.5, Some(0.03)), (4.0, None)],
            })
        };
        let card = Card::of(&s[0], &sim(), Some(("M/M/c", &curve)));
        let c = card.rows[0].cells[0].as_ref().unwrap();
        assert!((c.model.unwrap() - 0.02).abs() < 1e-12);
        assert_eq!(card.rows[0].cells[2].as_ref().unwrap().model, None);
        let lines = card.cell_lines(Metric::MeanTtft, c);
        assert_eq!(
            lines,
            [
                "40.0 ms",
                "sim 20.0 ms ± 1.00 ms",
                "M/M/c 20.0 ms",
                "100 % (sim low)"
            ]
            .map(String::from)
        );
        let csv = card.to_csv();
        assert_eq!(csv.lines().count(), 1 + 3 * 3, "{csv}");
        assert!(
            csv.contains("mean_ttft_s,1,r1.json,0.04,0.02,0.001,M/M/c,0.0199999"),
            "{csv}"
        );
        assert!(
            csv.contains("goodput_rps,1,r1.json,1,1,0.01,M/M/c,,relative,0,equal\n"),
            "{csv}"
        );
        let md = card.to_markdown();
        assert!(md.contains(&card.verdict));
        assert!(md.contains("| mean TTFT | 40.0 ms<br>sim 20.0 ms ± 1.00 ms<br>M/M/c 20.0 ms<br>100 % (sim low) |"), "{md}");
        assert!(md.contains("| **median \\|error\\|** |"), "{md}");
    }
}
