//! Property tests of every parser (per-request CSV, summary CSV, the reference sweep CSV,
//! vLLM JSON): no input makes them panic; whatever they accept passes the physical checks
//! (restated here, independently of [`super::check`]); a valid file written by a real
//! CSV/JSON writer reads back as what was written, quoted commas and line breaks
//! included; one impossible value in it is rejected at its own line and column.
//!
//! Quick by default (`cargo test -p app`); `PROPTEST_CASES=n` raises the case count of
//! every property for a longer run.

use super::check::{MAX_COUNT, MAX_RATE, MAX_TIME_S};
use super::*;
use proptest::prelude::*;
use proptest::test_runner::Config;
use serde_json::{json, Value};

/// `cases` unless `PROPTEST_CASES` is set; no regression files in the source tree (the
/// cases found are unit tests in `tests.rs`).
fn config(cases: u32) -> Config {
    let mut c = Config {
        failure_persistence: None,
        ..Config::default()
    };
    if std::env::var_os("PROPTEST_CASES").is_none() {
        c.cases = cases;
    }
    c
}

fn ctx() -> Context {
    Context {
        max_batch: 8,
        kv_tokens: 8192,
        metrics: MetricsConfig::default(),
    }
}

/// The physical checks on what the page would plot.
fn physical(s: &MeasuredSet) -> Result<(), TestCaseError> {
    prop_assert!(!s.points.is_empty());
    for p in &s.points {
        prop_assert!(
            p.rate.is_finite() && p.rate > 0.0 && p.rate <= MAX_RATE,
            "rate {}",
            p.rate
        );
        for m in Metric::ALL {
            let Some((v, std)) = p.get(m) else { continue };
            let max = match m {
                Metric::Goodput | Metric::SloGoodput => MAX_RATE,
                Metric::Blocking | Metric::PrefixHitRate | Metric::PrefixBlockHitRate => 1.0,
                Metric::Preemptions => MAX_COUNT,
                _ => MAX_TIME_S,
            };
            for x in std::iter::once(v).chain(std) {
                prop_assert!(x.is_finite() && (0.0..=max).contains(&x), "{m:?} = {x}");
            }
        }
        let pct: Vec<f64> = [Metric::P50Ttft, Metric::P95Ttft, Metric::P99Ttft]
            .iter()
            .filter_map(|m| Some(p.get(*m)?.0))
            .collect();
        for w in pct.windows(2) {
            prop_assert!(w[0] <= w[1] * (1.0 + 1e-9), "percentiles {pct:?}");
        }
    }
    Ok(())
}

/// Parses and, if accepted, checks; never panics (a panic fails the property).
fn parse_checked(text: &str) -> Result<(), TestCaseError> {
    if let Ok(s) = parse("f", text, &ctx()) {
        physical(&s)?;
    }
    Ok(())
}

/// Every column name any format reads.
const NAMES: [&str; 30] = [
    "arrival_rate",
    "max_batch_size",
    "kv_budget",
    "n_seeds",
    "mean_ttft_mean",
    "mean_ttft_std",
    "p50_ttft_mean",
    "p95_ttft_mean",
    "p99_ttft_mean",
    "goodput_mean",
    "blocking_probability_mean",
    "mean_tpot_s_mean",
    "p99_tpot_s_mean",
    "mean_e2e_s_mean",
    "p99_e2e_s_mean",
    "slo_goodput_rps_mean",
    "preemptions_per_request_mean",
    "id",
    "arrival_s",
    "intended_send_s",
    "ttft_s",
    "ttft_ms",
    "tpot_s",
    "e2e_s",
    "prompt_tokens",
    "completion_tokens",
    "outcome",
    "rate",
    "error",
    "x_mean",
];

/// A cell: valid, impossible, non-numeric, or quoted with separators inside.
fn token() -> impl Strategy<Value = String> {
    prop_oneof![
        (0.0..10.0f64).prop_map(|x| x.to_string()),
        any::<f64>().prop_map(|x| x.to_string()),
        (-1e3..1e3f64).prop_map(|x| format!("{x:e}")),
        Just(String::new()),
        Just("nan".to_string()),
        Just("inf".to_string()),
        Just("-inf".to_string()),
        Just("1e308".to_string()),
        Just("-1e308".to_string()),
        Just("completed".to_string()),
        Just("error".to_string()),
        "[a-z0-9 .,\"\n-]{0,12}".prop_map(|s| format!("\"{}\"", s.replace('"', "\"\""))),
        "[a-z0-9 .-]{0,6}",
    ]
}

/// A CSV that looks like one of the formats: known names in the header, random cells,
/// now and then a row one field short or long.
fn csv_like() -> impl Strategy<Value = String> {
    (prop::sample::subsequence(NAMES.to_vec(), 1..12), 0usize..6).prop_flat_map(|(cols, n)| {
        let w = cols.len();
        let row = (
            prop::collection::vec(token(), w),
            prop_oneof![8 => Just(0i8), 1 => Just(-1i8), 1 => Just(1i8)],
        );
        (
            Just(cols),
            prop::collection::vec(row, n),
            prop::sample::select(vec!["\n", "\r\n"]),
        )
            .prop_map(|(cols, rows, nl)| {
                let mut s = cols.join(",");
                for (mut cells, d) in rows {
                    match d {
                        -1 => {
                            cells.pop();
                        }
                        1 => cells.push("1".into()),
                        _ => {}
                    }
                    s.push_str(nl);
                    s.push_str(&cells.join(","));
                }
                s
            })
    })
}

/// A JSON value for a vLLM field.
fn json_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        (0.0..1e4f64).prop_map(|x| json!(x)),
        any::<f64>()
            .prop_filter("JSON numbers are finite", |x| x.is_finite())
            .prop_map(|x| json!(x)),
        any::<i64>().prop_map(|x| json!(x)),
        Just(json!("inf")),
        Just(json!("fast")),
        Just(Value::Null),
        Just(json!([1, 2])),
    ]
}

const VLLM_KEYS: [&str; 16] = [
    "request_rate",
    "request_throughput",
    "request_goodput",
    "duration",
    "mean_ttft_ms",
    "median_ttft_ms",
    "std_ttft_ms",
    "p90_ttft_ms",
    "p99_ttft_ms",
    "p99.9_ttft_ms",
    "mean_tpot_ms",
    "p99_tpot_ms",
    "mean_e2el_ms",
    "median_e2el_ms",
    "p99_e2el_ms",
    "completed",
];

/// vLLM-like JSON in its three shapes.
fn json_like() -> impl Strategy<Value = String> {
    let obj = prop::collection::btree_map(
        prop::sample::select(VLLM_KEYS.to_vec()),
        json_value(),
        0..12,
    )
    .prop_map(|m| Value::Object(m.into_iter().map(|(k, v)| (k.to_string(), v)).collect()));
    (prop::collection::vec(obj, 0..4), 0u8..3).prop_map(|(objs, shape)| match shape {
        0 => objs.first().map_or("{}".into(), |o| o.to_string()),
        1 => Value::Array(objs).to_string(),
        _ => objs
            .iter()
            .map(|o| o.to_string())
            .collect::<Vec<_>>()
            .join("\n"),
    })
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn any_text_is_refused_or_physical(text in any::<String>()) {
        parse_checked(&text)?;
    }

    #[test]
    fn csv_like_text_is_refused_or_physical(text in csv_like()) {
        parse_checked(&text)?;
    }

    #[test]
    fn json_like_text_is_refused_or_physical(text in json_like()) {
        parse_checked(&text)?;
    }
}

/// One valid per-request row: arrival, TTFT ≤ E2E, tokens, and an error text that may
/// hold commas, quotes and line breaks.
#[derive(Clone, Debug)]
struct RequestRow {
    rate: f64,
    arrival: f64,
    ttft: f64,
    e2e: f64,
    tokens: u32,
    completed: bool,
    error: String,
}

fn request_row() -> impl Strategy<Value = RequestRow> {
    (
        prop::sample::select(vec![0.5, 1.0, 4.0]),
        0.0..1000.0f64,
        0.0..10.0f64,
        0.0..100.0f64,
        1u32..2000,
        prop::bool::weighted(0.8),
        "[a-z0-9 :,\"\n]{0,30}",
    )
        .prop_map(
            |(rate, arrival, ttft, extra, tokens, completed, error)| RequestRow {
                rate,
                arrival,
                ttft,
                e2e: ttft + extra,
                tokens,
                completed,
                error: if completed { String::new() } else { error },
            },
        )
}

/// The rows as bench-native's csv writer would write them (quoting as needed).
fn request_csv(rows: &[RequestRow]) -> String {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record([
        "id",
        "arrival_rate",
        "intended_send_s",
        "ttft_s",
        "e2e_s",
        "completion_tokens",
        "outcome",
        "error",
    ])
    .unwrap();
    for (i, r) in rows.iter().enumerate() {
        let (t, e) = if r.completed {
            (r.ttft.to_string(), r.e2e.to_string())
        } else {
            (String::new(), String::new())
        };
        let outcome = if r.completed { "completed" } else { "error" };
        w.write_record([
            i.to_string(),
            r.rate.to_string(),
            r.arrival.to_string(),
            t,
            e,
            r.tokens.to_string(),
            outcome.into(),
            r.error.clone(),
        ])
        .unwrap();
    }
    String::from_utf8(w.into_inner().unwrap()).unwrap()
}

/// The physical checks accept valid values and the rate groups survive the round trip.
fn request_round_trip(rows: &[RequestRow]) -> Result<(), TestCaseError> {
    let text = request_csv(rows);
    let s = parse("requests.csv", &text, &ctx())
        .map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
    physical(&s)?;
    let mut rates: Vec<f64> = rows.iter().map(|r| r.rate).collect();
    rates.sort_by(f64::total_cmp);
    rates.dedup();
    prop_assert_eq!(
        s.points.iter().map(|p| p.rate).collect::<Vec<_>>(),
        rates.clone()
    );
    for (p, rate) in s.points.iter().zip(rates) {
        let done: Vec<&RequestRow> = rows
            .iter()
            .filter(|r| r.rate == rate && r.completed)
            .collect();
        let got = p.get(Metric::MeanTtft).map(|v| v.0);
        if done.is_empty() {
            prop_assert_eq!(got, None);
        } else {
            let want = done.iter().map(|r| r.ttft).sum::<f64>() / done.len() as f64;
            let got = got.unwrap_or(f64::NAN);
            prop_assert!(
                (got - want).abs() <= 1e-9 * (1.0 + want),
                "mean TTFT {got} vs {want}"
            );
        }
    }
    Ok(())
}

/// One valid summary row: ordered TTFT percentiles, TTFT ≤ E2E, a probability ≤ 1.
#[derive(Clone, Debug)]
struct SummaryRow {
    rate: f64,
    b: u32,
    k: u64,
    /// mean, p50, p95, p99 TTFT [s]
    ttft: [f64; 4],
    /// mean and p99 E2E [s]
    e2e: [f64; 2],
    goodput: f64,
    blocking: f64,
    std: f64,
    policy: String,
}

fn summary_row() -> impl Strategy<Value = SummaryRow> {
    (
        (1u32..=64).prop_map(|x| x as f64 / 4.0),
        prop::sample::select(vec![4u32, 8]),
        prop::sample::select(vec![4096u64, 8192]),
        prop::array::uniform3(0.0..5.0f64),
        0.0..5.0f64,
        prop::array::uniform2(0.0..50.0f64),
        (0.0..20.0f64, 0.0..=1.0f64, 0.0..1.0f64),
        "[a-z, \"\n]{0,12}",
    )
        .prop_map(
            |(rate, b, k, mut pct, mean, extra, (goodput, blocking, std), policy)| {
                pct.sort_by(f64::total_cmp);
                SummaryRow {
                    rate,
                    b,
                    k,
                    ttft: [mean, pct[0], pct[1], pct[2]],
                    e2e: [mean + extra[0], pct[2] + extra[1]],
                    goodput,
                    blocking,
                    std,
                    policy,
                }
            },
        )
}

/// Summary columns written, with their values in a row.
fn summary_cells(r: &SummaryRow) -> Vec<(&'static str, String)> {
    vec![
        ("arrival_rate", r.rate.to_string()),
        ("max_batch_size", r.b.to_string()),
        ("kv_budget", r.k.to_string()),
        ("n_seeds", "5".into()),
        ("mean_ttft_mean", r.ttft[0].to_string()),
        ("mean_ttft_std", r.std.to_string()),
        ("p50_ttft_mean", r.ttft[1].to_string()),
        ("p95_ttft_mean", r.ttft[2].to_string()),
        ("p99_ttft_mean", r.ttft[3].to_string()),
        ("goodput_mean", r.goodput.to_string()),
        ("blocking_probability_mean", r.blocking.to_string()),
        ("mean_e2e_s_mean", r.e2e[0].to_string()),
        ("p99_e2e_s_mean", r.e2e[1].to_string()),
        ("policy", r.policy.clone()),
    ]
}

fn summary_csv(rows: &[SummaryRow]) -> String {
    let mut w = csv::Writer::from_writer(Vec::new());
    let header = summary_cells(&rows[0]).into_iter().map(|(c, _)| c);
    w.write_record(header).unwrap();
    for r in rows {
        w.write_record(summary_cells(r).into_iter().map(|(_, v)| v))
            .unwrap();
    }
    String::from_utf8(w.into_inner().unwrap()).unwrap()
}

/// The rows the page shows for the view (B = 8, K = 8192), sorted by rate.
fn expected_points(rows: &[SummaryRow]) -> Vec<MeasuredPoint> {
    let configs: std::collections::BTreeSet<(u32, u64)> = rows.iter().map(|r| (r.b, r.k)).collect();
    let chosen = if configs.len() == 1 || configs.contains(&(8, 8192)) {
        if configs.len() == 1 {
            *configs.iter().next().unwrap()
        } else {
            (8, 8192)
        }
    } else {
        *configs.iter().next().unwrap()
    };
    let mut pts: Vec<MeasuredPoint> = rows
        .iter()
        .filter(|r| (r.b, r.k) == chosen)
        .map(|r| {
            let mut p = MeasuredPoint::new(r.rate);
            p.set(Metric::MeanTtft, Some(r.ttft[0]), Some(r.std));
            p.set(Metric::P50Ttft, Some(r.ttft[1]), None);
            p.set(Metric::P95Ttft, Some(r.ttft[2]), None);
            p.set(Metric::P99Ttft, Some(r.ttft[3]), None);
            p.set(Metric::Goodput, Some(r.goodput), None);
            p.set(Metric::Blocking, Some(r.blocking), None);
            p.set(Metric::MeanE2e, Some(r.e2e[0]), None);
            p
        })
        .collect();
    pts.sort_by(|a, b| a.rate.total_cmp(&b.rate));
    pts
}

/// One impossible value for a summary column.
fn breakage() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec!["-0.5", "1e308", "-1e308", "inf", "NaN?", "abc"])
}

proptest! {
    #![proptest_config(config(64))]

    #[test]
    fn a_valid_request_csv_round_trips(rows in prop::collection::vec(request_row(), 1..40)) {
        request_round_trip(&rows)?;
    }

    #[test]
    fn a_bad_request_value_is_rejected_at_its_place(
        rows in prop::collection::vec(request_row(), 1..20),
        at in any::<prop::sample::Index>(),
        col in prop::sample::select(vec![("intended_send_s", 2usize), ("completion_tokens", 5)]),
        bad in breakage(),
    ) {
        let text = request_csv(&rows);
        let i = at.index(rows.len());
        // Rewrite one cell of row i through a csv round trip of the records.
        let mut r = csv::ReaderBuilder::new().has_headers(false).from_reader(text.as_bytes());
        let mut recs: Vec<csv::StringRecord> = r.records().map(Result::unwrap).collect();
        let line = recs[i + 1].position().unwrap().line() as usize;
        let mut fields: Vec<String> = recs[i + 1].iter().map(str::to_string).collect();
        fields[col.1] = bad.to_string();
        recs[i + 1] = csv::StringRecord::from(fields);
        let mut w = csv::Writer::from_writer(Vec::new());
        for rec in &recs {
            w.write_record(rec).unwrap();
        }
        let text = String::from_utf8(w.into_inner().unwrap()).unwrap();
        match parse("requests.csv", &text, &ctx()) {
            Err(MeasuredError::Implausible(rej)) => {
                let want = Place::Csv { line, column: col.0.to_string() };
                prop_assert!(rej.iter().any(|r| r.place == want), "{:?} not in {:?}", want, rej);
            }
            other => prop_assert!(false, "accepted or other error: {:?}", other),
        }
    }

    #[test]
    fn a_valid_summary_csv_round_trips(rows in prop::collection::vec(summary_row(), 1..12)) {
        let text = summary_csv(&rows);
        let s = parse("summary.csv", &text, &ctx()).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        physical(&s)?;
        prop_assert_eq!(s.source, Source::SummaryCsv);
        prop_assert_eq!(s.points, expected_points(&rows));
    }

    #[test]
    fn a_bad_summary_value_is_rejected_at_its_place(
        rows in prop::collection::vec(summary_row(), 1..8),
        at in any::<prop::sample::Index>(),
        col in prop::sample::select(vec!["arrival_rate", "mean_ttft_mean", "mean_ttft_std", "p99_ttft_mean", "goodput_mean", "blocking_probability_mean"]),
        bad in breakage(),
    ) {
        let i = at.index(rows.len());
        let mut w = csv::Writer::from_writer(Vec::new());
        w.write_record(summary_cells(&rows[0]).into_iter().map(|(c, _)| c)).unwrap();
        for (j, r) in rows.iter().enumerate() {
            w.write_record(summary_cells(r).into_iter().map(|(c, v)| if j == i && c == col { bad.to_string() } else { v })).unwrap();
        }
        let text = String::from_utf8(w.into_inner().unwrap()).unwrap();
        let mut r = csv::ReaderBuilder::new().has_headers(false).from_reader(text.as_bytes());
        let line = r.records().nth(i + 1).unwrap().unwrap().position().unwrap().line() as usize;
        match parse("summary.csv", &text, &ctx()) {
            Err(MeasuredError::Implausible(rej)) => {
                let want = Place::Csv { line, column: col.to_string() };
                prop_assert!(rej.iter().any(|r| r.place == want), "{:?} not in {:?}", want, rej);
            }
            other => prop_assert!(false, "accepted or other error: {:?}", other),
        }
    }

    #[test]
    fn a_valid_reference_sweep_csv_round_trips(rows in prop::collection::vec(summary_row(), 1..12)) {
        // The full sweep schema, as `bench-native sweep` writes it and the reference study
        // ships it: every column present, the unread ones too.
        let header = engine::sweep::summary_header();
        let cols: Vec<&str> = header.split(',').collect();
        let mut w = csv::Writer::from_writer(Vec::new());
        w.write_record(&cols).unwrap();
        for r in &rows {
            let known = summary_cells(r);
            w.write_record(cols.iter().map(|c| {
                known.iter().find(|(k, _)| k == c).map_or_else(
                    || match *c {
                        "kv_mode" => "reserve".to_string(),
                        "slo_attainment_mean" | "blocking_probability_std" => "0.5".to_string(),
                        _ => "0".to_string(),
                    },
                    |(_, v)| v.clone(),
                )
            })).unwrap();
        }
        let text = String::from_utf8(w.into_inner().unwrap()).unwrap();
        let s = parse("sweep_summary.csv", &text, &ctx()).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        physical(&s)?;
        let want = expected_points(&rows);
        prop_assert_eq!(s.points.len(), want.len());
        for (got, want) in s.points.iter().zip(&want) {
            prop_assert_eq!(got.rate, want.rate);
            for m in [Metric::MeanTtft, Metric::P50Ttft, Metric::P95Ttft, Metric::P99Ttft, Metric::Goodput, Metric::MeanE2e] {
                prop_assert_eq!(got.get(m).map(|v| v.0), want.get(m).map(|v| v.0));
            }
        }
    }

    #[test]
    fn valid_vllm_json_round_trips(
        objs in prop::collection::vec(
            ((0.1..50.0f64), prop::array::uniform3(0.0..5000.0f64), 0.0..5000.0f64, 0.0..100.0f64),
            1..6,
        ),
        shape in 0u8..3,
    ) {
        let values: Vec<Value> = objs.iter().map(|(rate, pct, extra, thr)| {
            let mut p = *pct;
            p.sort_by(f64::total_cmp);
            json!({
                "request_rate": rate, "request_throughput": thr,
                "mean_ttft_ms": p[1], "median_ttft_ms": p[0], "p99_ttft_ms": p[2],
                "mean_e2el_ms": p[1] + extra, "p99_e2el_ms": p[2] + extra,
            })
        }).collect();
        let text = match shape {
            0 => values[0].to_string(),
            1 => Value::Array(values.clone()).to_string(),
            _ => values.iter().map(|v| serde_json::to_string_pretty(v).unwrap().replace('\n', " ")).collect::<Vec<_>>().join("\n"),
        };
        let n = if shape == 0 { 1 } else { values.len() };
        let s = parse("v.json", &text, &ctx()).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        physical(&s)?;
        let mut want: Vec<(f64, f64)> = values[..n].iter().map(|v| (v["request_rate"].as_f64().unwrap(), v["p99_ttft_ms"].as_f64().unwrap() / 1000.0)).collect();
        want.sort_by(|a, b| a.0.total_cmp(&b.0));
        let got: Vec<(f64, f64)> = s.points.iter().map(|p| (p.rate, p.get(Metric::P99Ttft).unwrap().0)).collect();
        // serde_json without its `float_roundtrip` feature reads a float to within an ulp
        // or so of what it wrote (14.279041052121599 → 14.2790410521216).
        let close = |a: f64, b: f64| (a - b).abs() <= 4.0 * f64::EPSILON * a.abs().max(b.abs());
        prop_assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(&want) {
            prop_assert!(close(g.0, w.0) && close(g.1, w.1), "{got:?} vs {want:?}");
        }
    }
}
