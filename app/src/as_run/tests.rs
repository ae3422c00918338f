//! The 8-file vLLM-CPU sweep of the e2e fixtures, simulated as it was run.

use super::*;
use crate::adopt::page_params_for;
use crate::measured::{group, parse, Context};
use crate::metric::Metric;

const FILES: [(&str, &str); 3] = [
    (
        "vllm_rate_0.5.json",
        include_str!("../../../e2e/fixtures/vllm-sweep/vllm_rate_0.5.json"),
    ),
    (
        "vllm_rate_2.json",
        include_str!("../../../e2e/fixtures/vllm-sweep/vllm_rate_2.json"),
    ),
    (
        "vllm_rate_8.json",
        include_str!("../../../e2e/fixtures/vllm-sweep/vllm_rate_8.json"),
    ),
];

/// The server the files were measured on (the e2e test's page parameters).
fn server() -> Params {
    let (p, errs) = Params::from_query(
        "?policy=chunked&B=8&K=65536&kv=paged&block=16&budget=2048&cost=linear&b0=0.0107&bp=0.000314&bd=0.000482&seeds=3",
    );
    assert!(errs.is_empty(), "{errs:?}");
    p
}

fn series(edit: impl Fn(&str) -> String) -> MeasuredSeries {
    let p = server();
    let ctx = Context {
        max_batch: p.max_batch,
        kv_tokens: p.kv_tokens,
        metrics: p.sim_config(1.0, 0).metrics,
    };
    let sets: Vec<_> = FILES
        .iter()
        .map(|(n, t)| parse(n, &edit(t), &ctx).unwrap())
        .collect();
    let mut g = group(&sets);
    assert_eq!(g.len(), 1);
    g.remove(0)
}

#[test]
fn every_file_of_the_sweep_is_one_benchmark_at_its_rate() {
    let s = series(|t| t.to_string());
    let it = items(&s);
    assert!(covers(&s));
    let rates: Vec<f64> = it.iter().map(|i| i.rate).collect();
    assert_eq!(rates, vec![0.5, 2.0, 8.0]);
    for i in &it {
        assert_eq!(i.run.requests, 40, "{}", i.file);
        assert_eq!(i.run.max_concurrency, None);
        assert_eq!(i.run.burstiness, 1.0);
    }
    // 355 prompt and 1183 output tokens over 40 requests: the means, rounded.
    assert_eq!(it[0].run.lengths[0], (9, 30));
    let d = describe(&it, 3);
    assert!(
        d.starts_with("the benchmark as run: 40 prompts per file"),
        "{d}"
    );
    assert!(
        d.contains("mean lengths") && d.contains("3 files, 9 runs"),
        "{d}"
    );
}

#[test]
fn the_simulated_point_is_the_benchmarks_own_window() {
    let s = series(|t| t.to_string());
    let it = items(&s);
    let p = server();
    let mut ticks = 0;
    let pt = point(&p, it[1].rate, &it[1].run, &mut || ticks += 1).unwrap();
    assert_eq!((pt.rate, ticks), (2.0, 3));
    // 40 requests over first send to last token: 40 / 2 req/s = 20 s and a little more.
    let thr = pt.get(Metric::Goodput).mean.unwrap();
    assert!(thr > 1.6 && thr < 2.0, "{thr}");
    let ttft = pt.get(Metric::MeanTtft);
    assert!(
        ttft.mean.unwrap() > 0.005 && ttft.mean.unwrap() < 1.0,
        "{ttft:?}"
    );
    assert!(ttft.ci95.is_some(), "3 seeds give a band");
}

#[test]
fn a_concurrency_cap_and_warmups_are_simulated_as_run() {
    // The same files, run all at once behind a cap of 2 after 3 warm-ups.
    let s = series(|t| {
        t.replacen("\"max_concurrency\": null", "\"max_concurrency\": 2", 1)
            .replacen(
                "\"request_rate\": ",
                "\"num_warmups\": 3, \"request_rate\": ",
                1,
            )
    });
    let it = items(&s);
    assert!(it.iter().all(|i| i.run.max_concurrency == Some(2)));
    assert!(it.iter().all(|i| i.run.warmups == 3));
    let p = server();
    let capped = point(&p, it[2].rate, &it[2].run, &mut || {}).unwrap();
    let open = {
        let s = series(|t| t.to_string());
        let it = items(&s);
        point(&p, it[2].rate, &it[2].run, &mut || {}).unwrap()
    };
    // Two in flight at most: fewer requests share each step, so each token comes sooner,
    // and the benchmark takes longer than the open loop at 8 req/s.
    let tpot = |c: &CurvePoint| c.get(Metric::MeanTpot).mean.unwrap();
    let thr = |c: &CurvePoint| c.get(Metric::Goodput).mean.unwrap();
    assert!(
        tpot(&capped) < tpot(&open),
        "{} {}",
        tpot(&capped),
        tpot(&open)
    );
    assert!(thr(&capped) < thr(&open), "{} {}", thr(&capped), thr(&open));
    let d = describe(&it, 3);
    assert!(
        d.contains("up to 3 warm-ups each, not measured") && d.contains("at most 2 in flight"),
        "{d}"
    );
    // Adopting them leaves nothing unexpressed: the cap, the warm-ups and the prompt
    // count are the benchmark's own.
    let a = page_params_for(&s, &p);
    assert!(a.unexpressed.is_empty(), "{:?}", a.unexpressed);
}

#[test]
fn files_without_lengths_are_not_simulated_as_run_and_adopting_says_so() {
    let s = series(|t| {
        t.replacen("\"total_input_tokens\"", "\"input_tokens\"", 1)
            .replacen("\"max_concurrency\": null", "\"max_concurrency\": 4", 1)
    });
    assert!(items(&s).is_empty() && !covers(&s));
    let a = page_params_for(&s, &server());
    assert!(
        a.unexpressed
            .iter()
            .any(|u| u.contains("the client's cap of 4 requests in flight")),
        "{:?}",
        a.unexpressed
    );
}

#[test]
fn the_cards_figures_follow_the_job_and_its_parameters() {
    let s = series(|t| t.to_string());
    let it = items(&s);
    let p = server();
    let mut st = AsRunState {
        id: 4,
        series: s.name.clone(),
        params: Some(p.clone()),
        label: describe(&it, p.seeds),
        total: total_runs(&it, p.seeds),
        done: vec![2, 3],
        finished: vec![false, false],
        running: true,
        ..AsRunState::default()
    };
    let (k, text) = st.status_for(&s.name, &p).unwrap();
    assert_eq!(k, AsRunStatus::Running);
    assert_eq!(text, "simulating the benchmark as run… 5 of 9 runs");
    assert!(st.points_for(&s.name, &p).is_none());
    for i in it.iter().rev() {
        st.add(point(&p, i.rate, &i.run, &mut || {}).unwrap());
    }
    st.running = false;
    let rates: Vec<f64> = st
        .points_for(&s.name, &p)
        .unwrap()
        .iter()
        .map(|q| q.rate)
        .collect();
    assert_eq!(rates, vec![0.5, 2.0, 8.0]);
    let (k, text) = st.status_for(&s.name, &p).unwrap();
    assert_eq!(k, AsRunStatus::Done);
    assert!(
        text.starts_with("simulated column: the benchmark as run: 40 prompts"),
        "{text}"
    );
    // Other parameters, or another series: the figures are not theirs.
    let mut q = p.clone();
    q.max_batch = 4;
    assert!(st.points_for(&s.name, &q).is_none() && st.status_for(&s.name, &q).is_none());
    assert!(st.status_for("measured: another run", &p).is_none());
    st.error = Some("stopped".into());
    assert_eq!(st.status_for(&s.name, &p).unwrap().0, AsRunStatus::Failed);
}
