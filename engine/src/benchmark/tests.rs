//! The benchmark as run: its request count, its order, its gate, its schedule, and the
//! vLLM reader.

use super::*;
use serde_json::json;

fn run(requests: usize, rate: f64) -> BenchmarkRun {
    BenchmarkRun {
        requests,
        warmups: 0,
        rate,
        burstiness: 1.0,
        schedule: Schedule::VllmNormalized,
        max_concurrency: None,
        lengths: (0..requests)
            .map(|i| (8 + (i as u32 * 7) % 40, 4 + (i as u32 * 5) % 30))
            .collect(),
        fixed_times: None,
    }
}

fn server() -> SimConfig {
    let mut c = SimConfig::vllm_like(1.0);
    c.server.max_batch = 8;
    c
}

/// Requests in flight at the busiest instant: sends at `arrival_s`, ends at `finish_s`.
fn peak_in_flight(records: &[RequestRecord]) -> usize {
    let mut ev: Vec<(f64, i32)> = Vec::new();
    for r in records {
        ev.push((r.arrival_s, 1));
        ev.push((r.finish_s.expect("every request finishes"), -1));
    }
    // Ends before starts at the same instant: a freed place is taken at once.
    ev.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let (mut now, mut peak) = (0i32, 0i32);
    for (_, d) in ev {
        now += d;
        peak = peak.max(now);
    }
    peak as usize
}

#[test]
fn exactly_the_benchmarks_requests_are_counted_and_warmups_are_not() {
    let mut b = run(37, 3.0);
    let plain = simulate(&b, &server(), 1).unwrap();
    assert_eq!((plain.arrivals, plain.completed), (37, 37));
    assert_eq!(plain.ttft.n, 37);
    b.warmups = 5;
    let warmed = simulate(&b, &server(), 1).unwrap();
    assert_eq!((warmed.arrivals, warmed.completed), (37, 37));
    // The window runs from the first measured send to the last token.
    let (records, _) = simulate_records(&b, &server(), 1).unwrap();
    let last = records
        .iter()
        .filter_map(|r| r.finish_s)
        .fold(0.0, f64::max);
    assert!(
        (warmed.window_s - last).abs() < 1e-12,
        "{}",
        warmed.window_s
    );
    assert!((warmed.throughput_rps - 37.0 / last).abs() < 1e-9);
}

#[test]
fn requests_keep_their_lengths_in_send_order() {
    let b = run(25, 2.0);
    let (mut records, _) = simulate_records(&b, &server(), 4).unwrap();
    records.sort_by_key(|r| r.id);
    let got: Vec<(u32, u32)> = records
        .iter()
        .map(|r| (r.prompt_tokens, r.output_tokens))
        .collect();
    assert_eq!(got, b.lengths);
    let sends: Vec<f64> = records.iter().map(|r| r.arrival_s).collect();
    assert!(sends.windows(2).all(|w| w[0] <= w[1]), "{sends:?}");
    assert_eq!(sends, send_times(&b, 4));
}

#[test]
fn a_closed_loop_never_has_more_than_its_cap_in_flight() {
    // Every request at once: without a cap the server sees all of them.
    let mut b = run(40, f64::INFINITY);
    let (open, _) = simulate_records(&b, &server(), 0).unwrap();
    assert_eq!(peak_in_flight(&open), 40);
    for cap in [1, 3, 7] {
        b.max_concurrency = Some(cap);
        let (records, cfg) = simulate_records(&b, &server(), 0).unwrap();
        assert_eq!(records.len(), 40);
        assert_eq!(peak_in_flight(&records), cap as usize, "cap {cap}");
        // Timed from its send after the gate: a TTFT well under the open loop's.
        let s = summarize(&records, &cfg);
        assert_eq!(s.completed, 40);
        if cap == 1 {
            let o = summarize(&open, &cfg);
            assert!(s.ttft.mean.unwrap() < 0.5 * o.ttft.mean.unwrap());
        }
    }
}

#[test]
fn vllms_schedule_ends_at_n_over_rate_and_depends_on_the_seed() {
    let mut b = run(200, 4.0);
    b.burstiness = 0.5;
    let t = send_times(&b, 3);
    assert_eq!(t.len(), 200);
    assert!((t[199] - 50.0).abs() < 1e-9, "{}", t[199]);
    assert!(t.windows(2).all(|w| w[0] <= w[1]));
    assert!(t[0] > 0.0);
    assert_ne!(t, send_times(&b, 4));
    b.burstiness = f64::INFINITY;
    b.rate = 2.0;
    let t = send_times(&b, 0);
    assert!((t[1] - t[0] - 0.5).abs() < 1e-9, "{:?}", &t[..2]);
    b.rate = f64::INFINITY;
    assert!(send_times(&b, 0).iter().all(|&x| x == 0.0));
}

#[test]
fn inconsistent_runs_are_refused_with_the_field_named() {
    let mut b = run(10, 1.0);
    b.lengths.pop();
    let e = simulate(&b, &server(), 0).unwrap_err().to_string();
    assert!(e.contains("9 request lengths for 10 requests"), "{e}");
    let mut b = run(10, 1.0);
    b.max_concurrency = Some(0);
    assert!(b.check().unwrap_err().contains("max_concurrency is 0"));
    b.max_concurrency = None;
    b.rate = f64::NAN;
    assert!(b.check().unwrap_err().contains("request rate is NaN"));
    assert!(run(0, 1.0).check().is_err());
}

#[test]
fn a_detailed_vllm_result_is_read_request_by_request() {
    let v = json!({"num_prompts": 3, "num_warmups": 2, "request_rate": 1.5, "burstiness": 0.5,
        "max_concurrency": 2, "completed": 3, "failed": 0,
        "input_lens": [10, 0, 30], "output_lens": [5, 6, 7], "mean_ttft_ms": 20.0});
    let (b, notes) = vllm::read(v.as_object().unwrap()).unwrap();
    assert_eq!(
        (b.requests, b.warmups, b.rate, b.burstiness),
        (3, 2, 1.5, 0.5)
    );
    assert_eq!(b.max_concurrency, Some(2));
    // A prompt of 0 tokens is simulated as 1.
    assert_eq!(b.lengths, vec![(10, 5), (1, 6), (30, 7)]);
    assert!(notes.is_empty(), "{notes:?}");
}

#[test]
fn a_summary_vllm_result_takes_mean_lengths_and_says_so() {
    let v = json!({"num_prompts": 40, "request_rate": "inf", "completed": 40,
        "total_input_tokens": 355, "total_output_tokens": 1183, "mean_ttft_ms": 20.0});
    let (b, notes) = vllm::read(v.as_object().unwrap()).unwrap();
    assert!(b.rate.is_infinite());
    assert_eq!(b.lengths, vec![(9, 30); 40]);
    assert_eq!(b.warmups, 0);
    assert!(
        notes
            .iter()
            .any(|n| n.contains("no \"max_concurrency\" field")),
        "{notes:?}"
    );
    assert!(notes
        .iter()
        .any(|n| n.contains("mean lengths, 9 prompt and 30 output")));
    let bad = json!({"num_prompts": 3, "input_lens": [1, 2], "output_lens": [1, 2]});
    let e = vllm::read(bad.as_object().unwrap()).unwrap_err();
    assert!(e.contains("\"input_lens\" has 2 entries"), "{e}");
    let bad = json!({"num_prompts": 3, "request_rate": -1});
    let e = vllm::read(bad.as_object().unwrap()).unwrap_err();
    assert!(e.contains("\"request_rate\" is -1"), "{e}");
}

#[test]
fn an_infinite_rate_travels_through_json_as_inf() {
    let mut b = run(3, f64::INFINITY);
    b.burstiness = f64::INFINITY;
    let text = serde_json::to_string(&b).unwrap();
    assert!(text.contains("\"rate\":\"inf\""), "{text}");
    let back: BenchmarkRun = serde_json::from_str(&text).unwrap();
    assert_eq!(back, b);
    assert!(!back.is_random());
    b.rate = 2.5;
    let back: BenchmarkRun = serde_json::from_str(&serde_json::to_string(&b).unwrap()).unwrap();
    assert_eq!(back.rate, 2.5);
    assert!(back.is_random());
    let bad = serde_json::to_string(&b)
        .unwrap()
        .replace("2.5", "\"fast\"");
    let e = serde_json::from_str::<BenchmarkRun>(&bad)
        .unwrap_err()
        .to_string();
    assert!(e.contains("expected a number or \"inf\""), "{e}");
}
