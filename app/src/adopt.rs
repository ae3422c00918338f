//! A measured run's setup against the page's parameters: where they contradict each
//! other ([`contradictions`]), and the page's parameters that come closest to the run
//! ([`page_params_for`]) — the one place that maps a file's setup onto what the engine
//! simulates.
//!
//! The engine runs an open arrival process over a horizon T; a benchmark sends a fixed
//! number of prompts at a rate and waits for all of them. So the closest parameters take
//! the run's rates, its burstiness (gamma arrivals, docs/model.md, Workload), a horizon
//! that yields its prompt count at the run's middle rate, the vLLM run rules (drain, no
//! cut at T), and the server flags the files record (B, K, block size, token budget).
//! The sweep cannot express a client-side concurrency cap, warm-up requests or the exact
//! prompt count at every rate; when every file records its benchmark, "simulate this
//! benchmark" runs each one as it was run ([`crate::as_run`]) and these are expressed
//! there. Otherwise they are listed, not approximated.

use crate::format;
use crate::measured::MeasuredSeries;
use crate::params::{Arrivals, Params};

/// The page's parameters closest to a measured run, and what they still leave out.
#[derive(Clone, Debug, PartialEq)]
pub struct Adopted {
    pub params: Params,
    /// What the run did that the page cannot simulate yet, one phrase each.
    pub unexpressed: Vec<String>,
}

/// The run's rates, ascending and without repeats [req/s].
fn rates(s: &MeasuredSeries) -> Vec<f64> {
    let mut r: Vec<f64> = s.points.iter().map(|p| p.point.rate).collect();
    r.dedup_by(|a, b| (*a - *b).abs() < 1e-9);
    r
}

/// The middle rate of the run (the lower middle of an even count) [req/s].
fn middle(r: &[f64]) -> Option<f64> {
    r.get(r.len().saturating_sub(1) / 2).copied()
}

/// A server flag the files record, as a number.
fn flag(s: &MeasuredSeries, names: &[&str]) -> Option<f64> {
    s.setup
        .flags
        .iter()
        .find(|(k, _)| names.contains(&k.as_str()))
        .and_then(|(_, v)| v.parse::<f64>().ok())
        .filter(|x| x.is_finite() && *x > 0.0)
}

/// The page's arrival process as a burstiness (gamma shape; Poisson = 1).
fn page_burstiness(p: &Params) -> Option<f64> {
    match p.arrivals {
        Arrivals::Poisson => Some(1.0),
        Arrivals::Gamma => Some(p.burstiness),
        Arrivals::Deterministic => None,
    }
}

fn arrivals_text(b: Option<f64>) -> String {
    match b {
        Some(b) if (b - 1.0).abs() < 1e-9 => "Poisson arrivals".into(),
        Some(b) => format!("gamma arrivals with burstiness {b}"),
        None => "evenly spaced arrivals".into(),
    }
}

/// Where the page's parameters `p` contradict what the run's files record, one sentence
/// each ("the file is 300 prompts per rate; the simulation runs 120 s of arrivals …").
pub fn contradictions(s: &MeasuredSeries, p: &Params) -> Vec<String> {
    let mut out = Vec::new();
    let r = rates(s);
    let (Some(&lo), Some(&hi)) = (r.first(), r.last()) else {
        return out;
    };
    if let Some(n) = s.setup.prompts {
        let at = |rate: f64| (rate * p.horizon_s).round();
        let far = |rate: f64| (at(rate) - n as f64).abs() > 0.2 * n as f64;
        if r.iter().any(|&x| far(x)) {
            let span = if r.len() > 1 {
                format!(
                    "≈ {} prompts at {} … {} at {}",
                    at(lo),
                    format::req_per_s(lo),
                    at(hi),
                    format::req_per_s(hi)
                )
            } else {
                format!("≈ {} prompts", at(lo))
            };
            out.push(format!(
                "the file is {n} prompts per rate; the simulation runs {} of arrivals ({span})",
                format::latency(p.horizon_s)
            ));
        }
    }
    if let Some(b) = s.setup.burstiness {
        let page = page_burstiness(p);
        if page.is_none_or(|x| (x - b).abs() > 1e-6) {
            out.push(format!(
                "the file's benchmark sends {}; the simulation has {}",
                arrivals_text(Some(b)),
                arrivals_text(page)
            ));
        }
    }
    let (plo, phi) = (
        p.rates.first().copied().unwrap_or(0.0),
        p.rates.last().copied().unwrap_or(0.0),
    );
    if lo < plo - 1e-9 || hi > phi + 1e-9 {
        out.push(format!(
            "the file's rates run from {} to {}; the sweep covers {} to {}",
            format::req_per_s(lo),
            format::req_per_s(hi),
            format::req_per_s(plo),
            format::req_per_s(phi)
        ));
    }
    if s.setup.prompts.is_some() && p.reference_rules {
        out.push(
            "the benchmark waits for every request; the simulation cuts the run at T (reference run rules)"
                .into(),
        );
    }
    if let Some(c) = s.setup.max_concurrency {
        out.push(format!(
            "the file's client keeps at most {c} requests in flight; the simulation has no client-side cap"
        ));
    }
    let server = [
        (&["max_num_seqs", "slots"][..], "B", p.max_batch as f64),
        (
            &["kv_tokens", "kv_cache_tokens"][..],
            "K",
            p.kv_tokens as f64,
        ),
        (&["block_size"][..], "block size", p.block_size as f64),
        (
            &["max_num_batched_tokens"][..],
            "token budget",
            p.token_budget as f64,
        ),
    ];
    for (names, what, page) in server {
        if let Some(v) = flag(s, names) {
            if (v - page).abs() > 1e-9 {
                out.push(format!(
                    "the server ran with {} = {v}; the simulation has {what} = {page}",
                    names[0]
                ));
            }
        }
    }
    out
}

/// The page's parameters closest to the run `s`, starting from `p` (the seam where a
/// benchmark-as-run simulation takes over: it receives the same run and parameters).
pub fn page_params_for(s: &MeasuredSeries, p: &Params) -> Adopted {
    let mut q = p.clone();
    let mut unexpressed = Vec::new();
    // Each file simulated as run: its prompt count, warm-ups and cap are its own.
    let as_run = crate::as_run::covers(s);
    let r = rates(s);
    if !r.is_empty() {
        q.rates = r.clone();
    }
    if let Some(mid) = middle(&r) {
        q.rate = mid;
        if let Some(n) = s.setup.prompts {
            q.horizon_s = (n as f64 / mid * 1000.0).round() / 1000.0;
            if r.len() > 1 && !as_run {
                unexpressed.push(format!(
                    "exactly {n} prompts at every rate (T = {} gives {n} at {}, more above it, fewer below)",
                    format::latency(q.horizon_s),
                    format::req_per_s(mid)
                ));
            }
        }
    }
    match s.setup.burstiness {
        Some(b) if (b - 1.0).abs() < 1e-9 => q.arrivals = Arrivals::Poisson,
        Some(b) => {
            q.arrivals = Arrivals::Gamma;
            q.burstiness = b;
        }
        None => {}
    }
    if s.setup.prompts.is_some() {
        // A benchmark waits for its last request: the vLLM run rules drain.
        q.reference_rules = false;
    }
    if let Some(b) = flag(s, &["max_num_seqs", "slots"]) {
        q.max_batch = b as u32;
    }
    if let Some(k) = flag(s, &["kv_tokens", "kv_cache_tokens"]) {
        q.kv_tokens = k as u64;
    }
    if let Some(b) = flag(s, &["block_size"]) {
        q.block_size = b as u32;
    }
    if let Some(t) = flag(s, &["max_num_batched_tokens"]) {
        q.token_budget = t as u32;
    }
    if let Some(c) = s.setup.max_concurrency.filter(|_| !as_run) {
        unexpressed.push(format!("the client's cap of {c} requests in flight"));
    }
    if let Some(w) = s.setup.warmups.filter(|w| *w > 0 && !as_run) {
        unexpressed.push(format!(
            "{w} warm-up request{} before the measured ones",
            if w == 1 { "" } else { "s" }
        ));
    }
    Adopted {
        params: q,
        unexpressed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measured::{group, MeasuredPoint, MeasuredSet, Setup, Source};
    use crate::metric::Metric;

    fn series(prompts: u64, burstiness: f64, conc: Option<u64>) -> MeasuredSeries {
        let sets: Vec<MeasuredSet> = [0.5, 1.0, 2.0, 4.0]
            .iter()
            .map(|&r| {
                let mut p = MeasuredPoint {
                    rate: r,
                    values: vec![None; Metric::N],
                };
                p.values[Metric::MeanTtft.index()] = Some((0.03, None));
                MeasuredSet {
                    name: format!("r{r}.json"),
                    source: Source::VllmJson,
                    points: vec![p],
                    notes: vec![],
                    setup: Setup {
                        server: Some("vLLM".into()),
                        prompts: Some(prompts),
                        warmups: Some(1),
                        rate: Some(r),
                        burstiness: Some(burstiness),
                        max_concurrency: conc,
                        flags: vec![("max_num_seqs".into(), "16".into())],
                        ..Setup::default()
                    },
                }
            })
            .collect();
        group(&sets).remove(0)
    }

    #[test]
    fn a_horizon_that_is_not_the_files_prompt_count_is_named() {
        let s = series(300, 1.0, None);
        let p = Params {
            horizon_s: 120.0,
            rates: vec![0.5, 1.0, 2.0],
            max_batch: 16,
            ..Params::default()
        };
        let c = contradictions(&s, &p);
        assert!(
            c[0].starts_with("the file is 300 prompts per rate; the simulation runs 120 s of arrivals (≈ 60 prompts at 0.5 req/s … 480 at 4 req/s)"),
            "{c:?}"
        );
        assert!(
            c.iter()
                .any(|x| x.contains("the sweep covers 0.5 req/s to 2 req/s")),
            "{c:?}"
        );
        assert!(
            !c.iter().any(|x| x.contains("max_num_seqs")),
            "B matches: {c:?}"
        );
    }

    #[test]
    fn adopting_the_files_setup_leaves_only_what_the_engine_cannot_express() {
        let s = series(300, 0.5, Some(8));
        let p = Params::default();
        let a = page_params_for(&s, &p);
        let q = &a.params;
        assert_eq!(q.rates, vec![0.5, 1.0, 2.0, 4.0]);
        assert_eq!((q.rate, q.horizon_s), (1.0, 300.0));
        assert_eq!((q.arrivals, q.burstiness), (Arrivals::Gamma, 0.5));
        assert_eq!((q.max_batch, q.reference_rules), (16, false));
        assert!(q.check().is_ok(), "{:?}", q.check());
        // After adopting, only the inexpressible remains.
        let left = contradictions(&s, q);
        assert_eq!(left.len(), 2, "{left:?}");
        assert!(
            left[0].starts_with("the file is 300 prompts per rate"),
            "{left:?}"
        );
        assert!(left[1].contains("at most 8 requests in flight"), "{left:?}");
        assert_eq!(a.unexpressed.len(), 3, "{:?}", a.unexpressed);
    }
}
