//! Unit tests of the parsers: the formats they read, the messages for bad files, the
//! physical checks, CSV quoting, and the sample files shipped with the page.

use super::*;

fn ctx() -> Context {
    Context {
        max_batch: 8,
        kv_tokens: 8192,
        metrics: MetricsConfig::default(),
    }
}

const SUMMARY: &str = "arrival_rate,max_batch_size,kv_budget,n_seeds,mean_ttft_mean,mean_ttft_std,p50_ttft_mean,p50_ttft_std,p95_ttft_mean,p95_ttft_std,p99_ttft_mean,p99_ttft_std,goodput_mean,goodput_std,blocking_probability_mean,blocking_probability_std
1.0,8,8192,5,0.1,0.01,0.09,0.01,0.2,0.02,0.3,0.03,0.99,0.01,0.0,0.0
0.5,8,8192,5,0.08,0.01,0.07,0.01,0.15,0.02,0.2,0.03,0.5,0.01,0.0,0.0
1.0,4,8192,5,0.5,0.01,0.4,0.01,0.9,0.02,1.3,0.03,0.9,0.01,0.1,0.0
";

#[test]
fn one_configuration_is_compared_with_the_view() {
    // A llama.cpp server at B = 4 dropped on the default view (B = 8).
    let csv =
        "arrival_rate,max_batch_size,kv_budget,p99_ttft_mean\n1.6780423965510918,4,8192,0.2\n";
    let s = parse("llama.csv", csv, &ctx()).unwrap();
    assert_eq!(s.points.len(), 1, "still overlaid");
    assert_eq!(s.notes.len(), 1, "{:?}", s.notes);
    assert!(
        s.notes[0].contains("measured at B = 4, K = 8192; the view is B = 8, K = 8192")
            && s.notes[0].contains("different servers"),
        "{:?}",
        s.notes
    );
    // The view's own configuration: nothing to say.
    let same = Context {
        max_batch: 4,
        ..ctx()
    };
    assert!(parse("llama.csv", csv, &same).unwrap().notes.is_empty());
    // `bench-native run` writes 0 for what it cannot know.
    let unknown = "arrival_rate,max_batch_size,kv_budget,p99_ttft_mean\n2,0,0,0.2\n";
    let s = parse("run.csv", unknown, &ctx()).unwrap();
    assert!(
        s.notes[0].contains("B = unknown, K = unknown") && s.notes[0].contains("assume"),
        "{:?}",
        s.notes
    );
    // Known K that differs, unknown B: still a different server.
    let k_only = "arrival_rate,max_batch_size,kv_budget,p99_ttft_mean\n2,0,4096,0.2\n";
    let s = parse("run.csv", k_only, &ctx()).unwrap();
    assert!(s.notes[0].contains("different servers"), "{:?}", s.notes);
    // No B/K columns at all: no claim either way.
    let bare = "arrival_rate,p99_ttft_mean\n2,0.2\n";
    assert!(parse("bare.csv", bare, &ctx()).unwrap().notes.is_empty());
}

#[test]
fn rates_in_tables_are_rounded() {
    assert_eq!(fmt_rate(1.6780423965510918), "1.678");
    assert_eq!(fmt_rate(1.139593038692236), "1.14");
    assert_eq!(fmt_rate(0.5), "0.5");
    assert_eq!(fmt_rate(12.0), "12");
}

#[test]
fn summary_csv_filters_to_the_current_configuration() {
    let s = parse("s.csv", SUMMARY, &ctx()).unwrap();
    assert_eq!(s.source, Source::SummaryCsv);
    assert_eq!(s.points.len(), 2);
    assert_eq!(s.points[0].rate, 0.5);
    assert_eq!(s.points[1].get(Metric::P99Ttft), Some((0.3, Some(0.03))));
    assert_eq!(s.notes.len(), 1);
    let other = Context {
        max_batch: 2,
        ..ctx()
    };
    let s = parse("s.csv", SUMMARY, &other).unwrap();
    assert!(s.notes[0].contains("no rows for B = 2"), "{:?}", s.notes);
}

#[test]
fn request_csv_is_summarised_per_rate() {
    let mut csv = String::from(
        "request_id,arrival_rate,arrival_s,ttft_s,tpot_s,e2e_s,prompt_tokens,completion_tokens\n",
    );
    for i in 0..100 {
        let ttft = 0.1 + 0.001 * i as f64;
        csv.push_str(&format!(
            "{i},2,{},{ttft},0.01,{},100,11\n",
            i as f64 * 0.5,
            ttft + 0.1
        ));
    }
    let s = parse("r.csv", &csv, &ctx()).unwrap();
    assert_eq!(s.source, Source::RequestCsv);
    assert_eq!(s.points.len(), 1);
    let p = &s.points[0];
    assert_eq!(p.rate, 2.0);
    assert!((p.get(Metric::MeanTtft).unwrap().0 - 0.1495).abs() < 1e-9);
    assert!((p.get(Metric::MeanTpot).unwrap().0 - 0.01).abs() < 1e-9);
    assert!((p.get(Metric::Goodput).unwrap().0 - 2.0).abs() < 1e-6);
}

#[test]
fn request_csv_without_rate_estimates_it() {
    let csv = "arrival_s,ttft_ms\n0,100\n1,120\n2,130\n";
    let s = parse("r.csv", csv, &ctx()).unwrap();
    assert!((s.points[0].rate - 1.0).abs() < 1e-9);
    assert!((s.points[0].get(Metric::MeanTtft).unwrap().0 - 0.11666666666666667).abs() < 1e-9);
}

#[test]
fn vllm_json_in_all_three_shapes() {
    let one = r#"{"request_rate": 4.0, "mean_ttft_ms": 50.0, "median_ttft_ms": 45, "p99_ttft_ms": 120.5, "mean_tpot_ms": 9.1, "request_throughput": 3.9}"#;
    let s = parse("v.json", one, &ctx()).unwrap();
    assert_eq!(s.source, Source::VllmJson);
    assert_eq!(s.points[0].get(Metric::P99Ttft), Some((0.1205, None)));
    let arr = format!("[{one}, {}]", one.replace("4.0", "2.0"));
    assert_eq!(parse("v.json", &arr, &ctx()).unwrap().points.len(), 2);
    let lines = format!("{one}\n{}\n", one.replace("4.0", "\"inf\""));
    let s = parse("v.jsonl", &lines, &ctx()).unwrap();
    assert_eq!(s.points.len(), 2);
    assert!(s.notes[0].contains("infinite"));
}

#[test]
fn bad_files_say_what_is_wrong() {
    let msg = |t: &str| parse("x", t, &ctx()).unwrap_err().to_string();
    assert!(msg("").contains("empty"));
    assert!(msg("a,b,c\n1,2,3").contains("unrecognised"));
    assert!(msg("ttft_s,e2e_s\n0.1,0.2").contains("arrival_s"));
    assert!(msg("arrival_s,ttft_s\n0,0.1\n1,abc").contains("line 3"));
    assert!(msg("arrival_s,ttft_s\n0,0.1\n1").contains("1 fields"));
    assert!(msg("arrival_rate,foo_mean\n").contains("no rows"));
    assert!(
        msg("arrival_rate,max_batch_size,kv_budget,n_seeds,x_mean\n1,8,8192,5,0.1")
            .contains("mean_ttft_mean")
    );
    assert!(msg("{\"a\": 1}").contains("mean_ttft_ms"));
    assert!(msg("{\"a\": ").contains("JSON"));
    assert!(check_size(60.0 * 1048576.0)
        .unwrap_err()
        .to_string()
        .contains("60.0 MB"));
}

/// The error of a file, or a panic if it was accepted.
fn rejected(name: &str, text: &str) -> MeasuredError {
    match parse(name, text, &ctx()) {
        Ok(s) => panic!("{name} accepted: {s:?}"),
        Err(e) => e,
    }
}

fn places(e: &MeasuredError) -> Vec<String> {
    match e {
        MeasuredError::Implausible(r) => r.iter().map(|r| r.place.to_string()).collect(),
        other => panic!("not an implausible-values error: {other}"),
    }
}

#[test]
fn impossible_summary_values_are_rejected_with_their_place() {
    let csv = "arrival_rate,max_batch_size,kv_budget,n_seeds,mean_ttft_mean,mean_ttft_std,p99_ttft_mean\n\
               1.0,8,8192,5,0.1,0.01,0.3\n\
               2.0,8,8192,5,-1e308,0.01,0.3\n\
               4.0,8,8192,5,0.2,-0.5,1e308\n\
               8.0,8,8192,5,inf,0.01,0.3\n";
    let e = rejected("bad.csv", csv);
    assert_eq!(
        places(&e),
        [
            "line 3, column mean_ttft_mean",
            "line 4, column mean_ttft_std",
            "line 4, column p99_ttft_mean",
            "line 5, column mean_ttft_mean"
        ]
    );
    let msg = e.to_string();
    assert!(
        msg.starts_with("4 values cannot be measured, so nothing from this file is plotted"),
        "{msg}"
    );
    assert!(
        msg.contains("line 3, column mean_ttft_mean = '-1e308': a time cannot be negative"),
        "{msg}"
    );
    assert!(
        msg.contains("= '1e308': a time cannot exceed 1e6 s"),
        "{msg}"
    );
    assert!(msg.contains("= 'inf': infinite"), "{msg}");
}

#[test]
fn summary_rates_must_be_above_zero_and_fractions_at_most_one() {
    let e = rejected(
        "s.csv",
        "arrival_rate,p99_ttft_mean,blocking_probability_mean\n0,0.2,0\n-1,0.2,0\n1,0.2,1.5\n",
    );
    assert_eq!(
        places(&e),
        [
            "line 2, column arrival_rate",
            "line 3, column arrival_rate",
            "line 4, column blocking_probability_mean"
        ]
    );
    assert!(
        e.to_string().contains("an arrival rate must be above zero"),
        "{e}"
    );
}

#[test]
fn percentiles_out_of_order_are_rejected() {
    let e = rejected(
        "s.csv",
        "arrival_rate,p50_ttft_mean,p95_ttft_mean,p99_ttft_mean\n1,0.1,0.2,0.3\n2,0.5,0.2,0.3\n",
    );
    assert_eq!(places(&e), ["line 3, column p95_ttft_mean"]);
    assert!(
        e.to_string()
            .contains("p95_ttft_mean is below p50_ttft_mean = 0.5"),
        "{e}"
    );
    // Equal percentiles (few requests) are fine.
    parse(
        "s.csv",
        "arrival_rate,p50_ttft_mean,p99_ttft_mean\n1,0.3,0.3\n",
        &ctx(),
    )
    .unwrap();
}

#[test]
fn ttft_after_e2e_is_rejected() {
    let e = rejected(
        "s.csv",
        "arrival_rate,mean_ttft_mean,mean_e2e_s_mean,p99_ttft_mean,p99_e2e_s_mean\n1,0.1,1.0,0.5,0.4\n2,2.0,1.0,0.5,3\n",
    );
    assert_eq!(
        places(&e),
        [
            "line 2, column p99_ttft_mean",
            "line 3, column mean_ttft_mean"
        ]
    );
    let e = rejected(
        "r.csv",
        "arrival_rate,arrival_s,ttft_s,e2e_s\n1,0,0.1,0.2\n1,1,0.3,0.2\n1,2,-0.1,0.2\n",
    );
    assert_eq!(
        places(&e),
        ["line 3, column ttft_s", "line 4, column ttft_s"]
    );
    assert!(
        e.to_string()
            .contains("the first token cannot come after the last"),
        "{e}"
    );
    // One-token outputs: TTFT = E2E.
    parse(
        "r.csv",
        "arrival_rate,arrival_s,ttft_s,e2e_s\n1,0,0.2,0.2\n",
        &ctx(),
    )
    .unwrap();
}

#[test]
fn impossible_request_rows_are_rejected() {
    let e = rejected(
        "r.csv",
        "arrival_s,ttft_s,e2e_s,completion_tokens\n0,0.1,0.5,10\n1,1e308,,10\n2,inf,,10\n-3,0.1,0.5,10\n4,0.1,0.5,-2\n",
    );
    assert_eq!(
        places(&e),
        [
            "line 3, column ttft_s",
            "line 4, column ttft_s",
            "line 5, column arrival_s",
            "line 6, column completion_tokens"
        ]
    );
    // TTFT in ms is checked in seconds: 2e9 ms is beyond any run.
    let e = rejected("r.csv", "arrival_s,ttft_ms\n0,100\n1,2e9\n");
    assert_eq!(places(&e), ["line 3, column ttft_ms"]);
    // An arrival rate estimated from arrivals a picosecond apart is not a rate.
    let e = rejected("r.csv", "arrival_s,ttft_s\n0,0.1\n1e-12,0.1\n2e-12,0.1\n");
    assert!(places(&e)[0].starts_with("arrival rate at λ"), "{e}");
}

#[test]
fn impossible_vllm_values_are_rejected_with_their_field() {
    let good = r#"{"request_rate": 4.0, "mean_ttft_ms": 50.0, "median_ttft_ms": 45, "p99_ttft_ms": 120.5, "mean_e2el_ms": 900}"#;
    let e = rejected("v.json", &good.replace("50.0", "-5"));
    assert_eq!(places(&e), ["field mean_ttft_ms"]);
    assert!(
        e.to_string()
            .contains("field mean_ttft_ms = '-5': a time cannot be negative"),
        "{e}"
    );
    let arr = format!("[{good}, {}]", good.replace("120.5", "1e308"));
    assert_eq!(
        places(&rejected("v.json", &arr)),
        ["item 2, field p99_ttft_ms"]
    );
    let lines = format!(
        "{good}\n\n{}\n",
        good.replace("\"median_ttft_ms\": 45", "\"median_ttft_ms\": 200")
    );
    assert_eq!(
        places(&rejected("v.jsonl", &lines)),
        ["line 3, field p99_ttft_ms"]
    );
    assert_eq!(
        places(&rejected("v.json", &good.replace("900", "40"))),
        ["field mean_ttft_ms"]
    );
    // A negative or zero rate is not "infinite": it is rejected, not moved to the throughput.
    let neg = good
        .replace("4.0", "-4")
        .replace("}", ", \"request_throughput\": 3.9}");
    assert_eq!(places(&rejected("v.json", &neg)), ["field request_rate"]);
    let text = good.replace("50.0", "\"fast\"");
    assert!(rejected("v.json", &text)
        .to_string()
        .contains("field mean_ttft_ms = '\"fast\"': not a number"));
}

#[test]
fn empty_and_header_only_files_say_so() {
    let msg = |t: &str| rejected("x", t).to_string();
    for empty in ["", "\u{feff}", " \n\n\t\n", "\u{feff}\r\n"] {
        assert_eq!(msg(empty), "the file is empty", "{empty:?}");
    }
    for header in [
        "arrival_rate,max_batch_size,kv_budget,p99_ttft_mean\n",
        "arrival_rate,max_batch_size,kv_budget,p99_ttft_mean\n\n  \n",
        "id,arrival_s,ttft_s",
        "a,b,c\n",
    ] {
        assert!(
            msg(header).contains("only a header line, no rows of data"),
            "{header:?}: {}",
            msg(header)
        );
    }
    assert!(msg("[]").contains("the JSON array is empty"));
    // Rows, but not one value the page can plot.
    assert!(
        msg("arrival_rate,p99_ttft_mean,mean_ttft_mean\n1,,\n2,nan,\n")
            .contains("no row has a value")
    );
}

/// A `requests.csv` as `bench-native run` writes it (csv crate quoting), whose error
/// fields hold commas, quotes and line breaks.
const RUN_REQUESTS: &str = "id,class,intended_send_s,actual_send_s,client_queue_s,first_token_s,last_token_s,ttft_s,tpot_s,e2e_s,target_prompt_tokens,target_output_tokens,prompt_tokens,completion_tokens,chunks,max_gap_s,stalls,finish_reason,outcome,server_prompt_ms,server_predicted_ms,error
0,0,0.25,0.25,,0.26,0.40,0.01,0.005,0.15,2,29,2,29,29,0.007,0,length,completed,11.4,139.4,
1,0,0.88,0.88,,,,,,,1,37,,,0,0,0,,error,,,\"line 2: 23 fields, the header has 22\"
2,0,1.72,1.72,,,,,,,3,84,,,0,0,0,,error,,,\"HTTP 500: {\"\"error\"\": \"\"bad, worse\"\"}
and a second line\"
3,0,2.10,2.10,,2.12,2.50,0.02,0.006,0.40,3,60,3,60,60,0.009,0,length,completed,9.3,300.1,
";

#[test]
fn quoted_commas_and_line_breaks_in_a_run_requests_csv_are_read() {
    let s = parse("requests.csv", RUN_REQUESTS, &ctx()).unwrap();
    assert_eq!(s.source, Source::RequestCsv);
    assert_eq!(s.points.len(), 1);
    assert!(
        s.notes.iter().any(|n| n.starts_with("2 failed requests")),
        "{:?}",
        s.notes
    );
    assert!((s.points[0].get(Metric::MeanTtft).unwrap().0 - 0.015).abs() < 1e-12);
    // Line numbers count the line break inside the quoted field: the last row starts on
    // line 6.
    let bad = RUN_REQUESTS.replace("2.50,0.02,0.006,0.40", "2.50,-0.02,0.006,0.40");
    assert_eq!(
        places(&rejected("requests.csv", &bad)),
        ["line 6, column ttft_s"]
    );
}

#[test]
fn line_numbers_are_the_files_own_after_leading_blank_lines() {
    let e = rejected(
        "s.csv",
        "\u{feff}\n\narrival_rate,p99_ttft_mean\n1,0.2\n2,-0.2\n",
    );
    assert_eq!(places(&e), ["line 5, column p99_ttft_mean"]);
    let e = rejected("s.csv", "\n\narrival_rate,p99_ttft_mean\n1,0.2\n2\n");
    assert_eq!(
        e,
        MeasuredError::BadRow {
            row: 5,
            why: "1 fields, the header has 2".into()
        }
    );
}

#[test]
fn quoted_cells_and_crlf_still_read() {
    let csv = "\"arrival_rate\",\"p99_ttft_mean\"\r\n\"1.0\", 0.2 \r\n\"2\",\"0.3\"\r\n";
    let s = parse("s.csv", csv, &ctx()).unwrap();
    assert_eq!(s.points.len(), 2);
    assert_eq!(s.points[1].get(Metric::P99Ttft), Some((0.3, None)));
}

#[test]
fn the_sample_files_are_read() {
    let files: [(&str, &str, Source, usize); 5] = [
        (
            "sim-example-requests.csv",
            include_str!("../../../public/examples/sim-example-requests.csv"),
            Source::RequestCsv,
            3,
        ),
        (
            "sim-example-summary.csv",
            include_str!("../../../public/examples/sim-example-summary.csv"),
            Source::SummaryCsv,
            8,
        ),
        (
            "llama-server-requests.csv",
            include_str!("../../../public/examples/llama-server-requests.csv"),
            Source::RequestCsv,
            1,
        ),
        (
            "llama-server-summary.csv",
            include_str!("../../../public/examples/llama-server-summary.csv"),
            Source::SummaryCsv,
            1,
        ),
        (
            "sweep_summary.csv",
            include_str!("../../../results/sweep_summary.csv"),
            Source::SummaryCsv,
            8,
        ),
    ];
    for (name, text, source, n) in files {
        let s = parse(name, text, &ctx()).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!((s.source, s.points.len()), (source, n), "{name}");
    }
}
