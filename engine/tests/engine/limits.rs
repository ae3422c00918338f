//! Resource limits (docs/model.md, Limits): configurations that would run forever or
//! exhaust memory are errors before they start, and a drained run whose clock runs away
//! stops at its cap, reported unstable.

use engine::analytic::{predict, ModelKind};
use engine::config::{EndRule, Policy, SimConfig};
use engine::cost::{CostModel, LinearCost};
use engine::limits::{LimitError, Limits, Scope, MAX_BATCH, MAX_DRAIN_HORIZONS};
use engine::record::Outcome;
use engine::sim::{simulate, simulate_requests, simulate_with};
use engine::sweep::{run_sweep, SweepSpec};
use engine::workload::ArrivalProcess;
use engine::ConfigError;

fn too_many(e: ConfigError) -> (Scope, f64, f64) {
    match e {
        ConfigError::Limit(LimitError::TooManyRequests {
            scope,
            estimate,
            limit,
            ..
        }) => (scope, estimate, limit),
        other => panic!("expected a request limit, got {other:?}"),
    }
}

fn bound_name(e: ConfigError) -> &'static str {
    match e {
        ConfigError::Limit(LimitError::AboveMax { name, .. })
        | ConfigError::Limit(LimitError::BelowMin { name, .. }) => name,
        other => panic!("expected a structural bound, got {other:?}"),
    }
}

#[test]
fn a_run_of_a_trillion_seconds_is_refused_with_its_estimate() {
    let mut cfg = SimConfig::reference(4.0, 8, 8192);
    cfg.horizon_s = 1e12;
    let (scope, estimate, limit) = too_many(simulate(&cfg).unwrap_err());
    assert_eq!(scope, Scope::Run);
    assert_eq!(estimate, 4e12);
    assert_eq!(limit, Limits::default().max_requests_per_run);
    // Past the longest horizon the clock can resolve, whatever the rate.
    cfg.horizon_s = 1e12;
    cfg.workload = cfg.workload.with_rate(1e-9);
    assert_eq!(bound_name(simulate(&cfg).unwrap_err()), "horizon_s");
}

#[test]
fn an_astronomic_rate_is_refused() {
    // Over 1000 s, λ·T says it first…
    for rate in [1e308, 1e6] {
        let cfg = SimConfig::reference(rate, 8, 8192);
        too_many(simulate(&cfg).unwrap_err());
    }
    // …and over a short horizon the rate's own bound.
    let mut cfg = SimConfig::reference(1e12, 8, 8192);
    cfg.horizon_s = 1e-9;
    assert_eq!(bound_name(simulate(&cfg).unwrap_err()), "arrival rate");
}

#[test]
fn a_burstiness_too_small_to_advance_the_clock_is_refused() {
    let mut cfg = SimConfig::reference(1.0, 8, 8192);
    cfg.workload.arrivals = ArrivalProcess::Gamma {
        rate: 1.0,
        burstiness: 1e-300,
    };
    assert_eq!(bound_name(simulate(&cfg).unwrap_err()), "burstiness");
    // Allowed shapes still count their bursts: 1/(2k) extra arrivals.
    cfg.workload.arrivals = ArrivalProcess::Gamma {
        rate: 1.0,
        burstiness: 1e-6,
    };
    let raised = Limits {
        max_requests_per_run: 1e5,
        ..Limits::default()
    };
    let (_, estimate, _) = too_many(simulate_with(&cfg, &raised).unwrap_err());
    assert!(estimate > 5e5, "{estimate}");
}

fn sweep_error(spec: &SweepSpec) -> ConfigError {
    match run_sweep(spec, None, &mut |_, _| true) {
        Err(e) => e,
        Ok(_) => panic!("the sweep ran"),
    }
}

#[test]
fn a_sweep_of_a_trillion_seconds_is_refused_before_it_allocates() {
    for mut spec in [
        SweepSpec::reference_default(),
        SweepSpec::reference_compare(),
    ] {
        spec.base.horizon_s = 1e12;
        let (scope, estimate, _) = too_many(sweep_error(&spec));
        assert_eq!(scope, Scope::Run);
        assert!(estimate >= 5e11, "{estimate}");
        // Each run within its limit, but all of them together over the sweep's.
        spec.base.horizon_s = 1000.0;
        spec.seeds = (0..2000).collect();
        let (scope, estimate, limit) = too_many(sweep_error(&spec));
        assert_eq!(scope, Scope::Sweep);
        assert!(estimate > limit);
    }
}

#[test]
fn a_saturated_drain_of_astronomic_iterations_stops_unstable_with_bounded_memory() {
    for step_s in [1e306, 1e307, 1e308] {
        let mut cfg = SimConfig::reference(2.0, 8, 8192);
        cfg.horizon_s = 100.0;
        cfg.end = EndRule::Drain;
        cfg.timeseries_points = 100;
        cfg.keep_records = true;
        cfg.cost = CostModel::Linear(LinearCost {
            beta0: step_s,
            beta_decode: step_s,
            ..LinearCost::default()
        });
        // Refused before it starts: at the best case the drain would take forever…
        assert!(
            matches!(
                simulate(&cfg),
                Err(ConfigError::Limit(LimitError::DrainTooLong { .. }))
            ),
            "{step_s}"
        );
        // …and run anyway, it stops at the cap.
        let reqs = cfg.workload.generate(cfg.seed, cfg.horizon_s).unwrap();
        let r = simulate_requests(&cfg, reqs.into_iter());
        assert!(r.stats.unstable, "{step_s}");
        assert!(r.stats.end_s.is_finite(), "{step_s}");
        assert!(r.stats.end_s <= cfg.horizon_s * (1.0 + MAX_DRAIN_HORIZONS));
        assert!(r.timeseries.len() <= 2 * 100 + 1, "{}", r.timeseries.len());
        // Every request is accounted for: none completed, the accepted ones unfinished.
        let s = &r.summary;
        assert_eq!(s.completed, 0);
        assert_eq!(s.arrivals, r.records.len() as u64);
        assert_eq!(s.arrivals, s.rejected + s.unfinished);
        assert!(s.unfinished > 0);
    }
}

/// The drain estimate (docs/model.md, Limits): 20,000 req/s for 1 s at the reference
/// server, whose best case is ≈ 5.4 req/s, leaves ≈ 2e4 requests to drain, ≈ 3700 s: past
/// the cap of 1000 horizons, so the run is refused before it starts. Raised, the run
/// drains, and no sooner than estimated (the estimate is a lower bound).
#[test]
fn a_drain_longer_than_the_cap_is_refused_before_it_runs() {
    let mut cfg = SimConfig::reference(20_000.0, 8, 1 << 30);
    cfg.horizon_s = 1.0;
    cfg.end = EndRule::Drain;
    let e = cfg.drain_estimate().expect("overloaded");
    assert!((5.0..6.0).contains(&e.capacity_rps), "{e:?}");
    assert_eq!(e.offered_rps, 20_000.0);
    assert!(
        (e.backlog - (20_000.0 - e.capacity_rps)).abs() < 1e-6,
        "{e:?}"
    );
    assert!((3000.0..4000.0).contains(&e.drain_s), "{e:?}");
    match simulate(&cfg) {
        Err(ConfigError::Limit(LimitError::DrainTooLong {
            estimate, limit, ..
        })) => assert_eq!((estimate, limit), (e, MAX_DRAIN_HORIZONS)),
        other => panic!("expected a refused drain, got {other:?}"),
    }
    let msg = simulate(&cfg).unwrap_err().to_string();
    assert!(
        msg.starts_with(
            "this drained run offers ≈ 20000 req/s to a server whose best case is ≈ 5."
        ) && msg.ends_with("over the limit of 1000 (max_drain_horizons)"),
        "{msg}"
    );
    let raised = Limits {
        max_drain_horizons: 10_000.0,
        ..Limits::default()
    };
    let r = simulate_with(&cfg, &raised).unwrap();
    assert!(!r.stats.unstable && r.summary.unfinished == 0);
    let drained = r.stats.end_s - cfg.horizon_s;
    assert!(
        drained >= e.drain_s && drained < 3.0 * e.drain_s,
        "{drained} vs {e:?}"
    );
    // Cut at the horizon, or within capacity, there is nothing to estimate.
    cfg.end = EndRule::Cut;
    assert!(cfg.drain_estimate().is_none() && cfg.validate().is_ok());
    let light = SimConfig {
        end: EndRule::Drain,
        ..SimConfig::reference(2.0, 8, 8192)
    };
    assert!(light.drain_estimate().is_none());
    // What the admission rule lets in bounds the backlog.
    let mut capped = SimConfig::reference(20_000.0, 8, 1 << 30);
    capped.horizon_s = 1.0;
    capped.end = EndRule::Drain;
    capped.server.admission = engine::config::Admission::MaxInSystem { max_in_system: 50 };
    assert_eq!(capped.drain_estimate().unwrap().backlog, 50.0);
    assert!(capped.validate().is_ok());
    // A cap that would take the drained clock past 1.001e12 s is a structural error.
    let mut long = SimConfig::reference(0.001, 8, 8192);
    long.horizon_s = 1e9;
    long.end = EndRule::Drain;
    assert!(long.validate().is_ok());
    let e = long.validate_with(&Limits {
        max_drain_horizons: 5000.0,
        ..Limits::default()
    });
    assert_eq!(bound_name(e.unwrap_err()), "max_drain_horizons");
}

#[test]
fn a_run_that_drains_is_not_unstable() {
    let mut cfg = SimConfig::reference(3.0, 8, 8192);
    cfg.end = EndRule::Drain;
    let r = simulate(&cfg).unwrap();
    assert!(!r.stats.unstable);
    assert_eq!(r.summary.unfinished, 0);
}

/// The URLs that made the page's worker trap: every one is now an error from the
/// engine's own checks (`SimConfig::validate`, which `simulate`, the sweep and the
/// analytical models all call), before anything is allocated.
#[test]
fn the_page_urls_that_trapped_are_errors() {
    let page = |f: &dyn Fn(&mut SimConfig)| {
        let mut c = SimConfig::reference(1.0, 8, 8192);
        f(&mut c);
        c
    };
    let cases: Vec<(&str, SimConfig)> = vec![
        // ?rates=1e5: 1e5 req/s over the page's 1000 s.
        (
            "rates=1e5",
            page(&|c| c.workload = c.workload.with_rate(1e5)),
        ),
        (
            "rate=1e308",
            page(&|c| c.workload = c.workload.with_rate(1e308)),
        ),
        ("B=4294967295", page(&|c| c.server.max_batch = u32::MAX)),
        (
            "K=18446744073709551615",
            page(&|c| c.server.kv_tokens = u64::MAX),
        ),
        (
            "arr=gamma&k=1e-300",
            page(&|c| {
                c.workload.arrivals = ArrivalProcess::Gamma {
                    rate: 1.0,
                    burstiness: 1e-300,
                }
            }),
        ),
    ];
    for (url, cfg) in cases {
        assert!(
            matches!(cfg.validate(), Err(ConfigError::Limit(_))),
            "{url}: {:?}",
            cfg.validate()
        );
        assert!(simulate(&cfg).is_err(), "{url}");
        for kind in ModelKind::ALL {
            assert!(predict(kind, &cfg).is_err(), "{url}: {kind:?}");
        }
    }
    // The llama.cpp policy keeps state per slot: the largest B is still a run.
    let mut cfg = SimConfig::llama_cpp(1.0, MAX_BATCH, 1 << 24, 512);
    cfg.horizon_s = 10.0;
    assert_eq!(cfg.server.policy, Policy::LlamaCpp);
    assert!(simulate(&cfg).is_ok());
    cfg.server.max_batch = MAX_BATCH + 1;
    assert_eq!(bound_name(cfg.validate().unwrap_err()), "max_batch");
}

#[test]
fn the_error_reads_well() {
    let mut cfg = SimConfig::reference(4.0, 8, 8192);
    cfg.horizon_s = 1e8;
    assert_eq!(
        simulate(&cfg).unwrap_err().to_string(),
        "this run would simulate ≈ 4.0e8 requests, over the limit of 2.0e7 (max_requests_per_run)"
    );
    cfg.server.max_batch = u32::MAX;
    assert_eq!(
        cfg.validate().unwrap_err().to_string(),
        "max_batch = 4294967295 is above the simulator's bound of 65536: state is kept per batch slot"
    );
    let mut cfg = SimConfig::reference(1.0, 8, 8192);
    cfg.workload.arrivals = ArrivalProcess::Gamma {
        rate: 1.0,
        burstiness: 1e-300,
    };
    assert_eq!(
        cfg.validate().unwrap_err().to_string(),
        "burstiness = 1e-300 is below the simulator's bound of 1e-6: smaller shapes make almost every gap exactly 0"
    );
}

/// A drained run past twice its horizon keeps at most `2 · points + 1` samples, each
/// still the state at its instant (rebuilt from the records as in the time-series test:
/// reserve mode, no preemption), on a grid of twice, four times… the spacing.
#[test]
fn the_time_series_of_a_long_drain_is_thinned_not_lost() {
    let mut cfg = SimConfig::reference(8.0, 1, 1 << 20);
    cfg.horizon_s = 64.0;
    cfg.end = EndRule::Drain;
    cfg.timeseries_points = 64;
    cfg.keep_records = true;
    let r = simulate(&cfg).unwrap();
    let end = r.stats.end_s;
    assert!(end > 4.0 * cfg.horizon_s, "{end}");
    let ts = &r.timeseries;
    assert!(ts.len() <= 2 * 64 + 1 && ts.len() > 64, "{}", ts.len());
    // h / points = 1 s, so the spacing is a power of two of seconds.
    let every = ts[1].t_s - ts[0].t_s;
    assert!(every >= 4.0 && every.log2().fract() == 0.0, "{every}");
    assert!(ts.last().unwrap().t_s <= end && ts.last().unwrap().t_s + every > end);
    let accepted: Vec<_> = r
        .records
        .iter()
        .filter(|x| x.outcome != Outcome::Rejected)
        .collect();
    for (i, p) in ts.iter().enumerate() {
        let at = p.t_s;
        assert_eq!(at, i as f64 * every);
        let waiting = accepted
            .iter()
            .filter(|x| x.arrival_s <= at && x.admitted_s.is_none_or(|a| a > at))
            .count();
        let running = accepted
            .iter()
            .filter(|x| x.admitted_s.is_some_and(|a| a <= at) && x.finish_s.is_none_or(|f| f > at))
            .count();
        assert_eq!(p.waiting as usize, waiting, "waiting at {at}");
        assert_eq!(p.running as usize, running, "running at {at}");
    }
}
