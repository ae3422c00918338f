//! The Fleet view's state and work (plain Rust, tested natively): N identical replicas of
//! the calculator's server behind a router (docs/model.md, Fleets), its URL, its checks,
//! and what a worker computes for it — load curves over seeds at fleet-wide rates, the
//! per-replica detail of one run, and the analytical fleet model's line.
//!
//! The replicas' server, cost and workload are the calculator's [`Params`]; the view adds
//! N, the router, the fleet's arrival rates and the rate of its per-replica chart. Mixed
//! fleets are the CLI's (`bench-native simulate --fleet FILE`).

use crate::curves::CurvePoint;
use crate::params::{fmt_num, format_rates, page_message, parse_rates, Invalid, Params, FIELDS};
use engine::analytic::{predict_fleet, ModelKind, Predicted};
use engine::fleet::{simulate_fleet_requests, FleetConfig, RouterKind};
use engine::limits::Limits;
use engine::ConfigError;
use serde::{Deserialize, Serialize};

/// The most replicas the page simulates (the engine takes up to
/// [`engine::limits::MAX_REPLICAS`]; the CLI's `--replicas` goes there).
pub const MAX_PAGE_REPLICAS: u32 = 64;

/// The Fleet view's own URL keys (the rest are the calculator's).
pub const KEYS: [&str; 4] = ["replicas", "router", "frates", "frate"];

/// Per-replica rates whose multiples by N are the default fleet sweep [req/s].
const PER_REPLICA_RATES: [f64; 8] = [0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0];

/// The Fleet view: N, router, the fleet-wide sweep and the per-replica chart's rate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FleetState {
    /// Replicas N (kept as given, 0 or too many included, so the URL keeps what the user
    /// wrote while the page says what is wrong).
    pub replicas: u32,
    pub router: RouterKind,
    /// Fleet-wide arrival rates of the sweep [req/s], ascending.
    pub rates: Vec<f64>,
    /// The rate of the per-replica chart [req/s].
    pub rate: f64,
}

impl Default for FleetState {
    /// Four reference servers behind round-robin, swept to 7 req/s per replica.
    fn default() -> Self {
        FleetState::of(4, RouterKind::RoundRobin)
    }
}

impl FleetState {
    /// `n` replicas behind `router`, swept over `n` × 0.5 … 7 req/s, the per-replica chart
    /// at `n` × 2 req/s.
    pub fn of(n: u32, router: RouterKind) -> FleetState {
        let k = f64::from(n.max(1));
        FleetState {
            replicas: n,
            router,
            rates: PER_REPLICA_RATES.iter().map(|r| r * k).collect(),
            rate: 2.0 * k,
        }
    }

    /// The URL query (without `?`): `view=fleet`, the fleet's keys, then the calculator's.
    pub fn to_query(&self, params: &Params) -> String {
        format!(
            "view=fleet&replicas={}&router={}&frates={}&frate={}&{}",
            self.replicas,
            self.router.name(),
            format_rates(&self.rates).replace(',', "%2C"),
            fmt_num(self.rate),
            params.to_query()
        )
    }

    /// Reads a Fleet URL: its own keys, then the calculator's. Bad values are reported
    /// (as `(key, text)`) and left at their defaults; missing rates follow N.
    pub fn from_query(query: &str) -> (FleetState, Params, Vec<(String, String)>) {
        let query = query.trim_start_matches('?');
        let mut rest = Vec::new();
        let mut own = Vec::new();
        for kv in query.split('&').filter(|s| !s.is_empty()) {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            if k == "view" {
                continue;
            }
            if KEYS.contains(&k) {
                own.push((k, v.replace("%2C", ",").replace("%2c", ",")));
            } else {
                rest.push(kv);
            }
        }
        let (params, _) = Params::from_query(&rest.join("&"));
        let mut bad = Vec::new();
        let n = own
            .iter()
            .find(|(k, _)| *k == "replicas")
            .map(|(_, v)| v.parse::<u32>().map_err(|_| v.clone()));
        let mut s = match n {
            Some(Ok(n)) => FleetState::of(n, RouterKind::RoundRobin),
            Some(Err(v)) => {
                bad.push(("replicas".to_string(), v));
                FleetState::default()
            }
            None => FleetState::default(),
        };
        for (k, v) in own {
            let ok = match k {
                "replicas" => true,
                "router" => RouterKind::parse(&v).map(|r| s.router = r).is_some(),
                "frates" => parse_rates(&v).map(|r| s.rates = r).is_ok(),
                "frate" => v
                    .parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite() && *x > 0.0)
                    .map(|x| s.rate = x)
                    .is_some(),
                _ => true,
            };
            if !ok {
                bad.push((k.to_string(), v));
            }
        }
        (s, params, bad)
    }

    /// Sets one of the view's own fields from the text typed; the message names the
    /// field when the text is not a value of it.
    ///
    /// # Errors
    /// "replicas N: 'abc' is not a whole number".
    pub fn edited(&self, key: &str, text: &str) -> Result<FleetState, String> {
        let mut s = self.clone();
        let t = text.trim();
        let ok = match key {
            "replicas" => t.parse::<u32>().map(|n| s.replicas = n).is_ok(),
            "router" => RouterKind::parse(t).map(|r| s.router = r).is_some(),
            "frates" => parse_rates(t).map(|r| s.rates = r).is_ok(),
            "frate" => t
                .parse::<f64>()
                .ok()
                .filter(|x| x.is_finite() && *x > 0.0)
                .map(|x| s.rate = x)
                .is_some(),
            _ => false,
        };
        if ok {
            Ok(s)
        } else {
            Err(format!("{}: '{text}' is not a valid value", label(key)))
        }
    }

    /// One of the view's own fields as text.
    pub fn get(&self, key: &str) -> String {
        match key {
            "replicas" => self.replicas.to_string(),
            "router" => self.router.name(),
            "frates" => format_rates(&self.rates),
            "frate" => fmt_num(self.rate),
            _ => String::new(),
        }
    }

    /// The fleet at `rate` (fleet-wide) and `seed`: N copies of the calculator's server.
    pub fn config(&self, p: &Params, rate: f64, seed: u64) -> FleetConfig {
        FleetConfig::uniform(p.sim_config(rate, seed), self.replicas, self.router)
    }

    /// Checks every run the view would start, as the engine will, plus the page's limits.
    ///
    /// # Errors
    /// The first problem, with the URL key of the field it is about: N = 0 or over
    /// [`MAX_PAGE_REPLICAS`], a router that cannot apply (KV-aware over reserve-mode
    /// servers), no rates, a trace as the workload, or any run's own error.
    pub fn check(&self, p: &Params) -> Result<(), Invalid> {
        let at = |key: &'static str, message: String| Invalid {
            key: Some(key),
            message,
        };
        if self.replicas == 0 {
            return Err(at(
                "replicas",
                format!("{} must be at least 1", label("replicas")),
            ));
        }
        if self.replicas > MAX_PAGE_REPLICAS {
            return Err(at(
                "replicas",
                format!(
                    "{} = {}: the page simulates at most {MAX_PAGE_REPLICAS} replicas (bench-native simulate --replicas takes up to {})",
                    label("replicas"),
                    self.replicas,
                    engine::limits::MAX_REPLICAS
                ),
            ));
        }
        if self.rates.is_empty() {
            return Err(at(
                "frates",
                format!("{}: give at least one arrival rate", label("frates")),
            ));
        }
        if p.trace.is_some() {
            return Err(Invalid {
                key: None,
                message: "the Fleet view does not replay a trace: remove it in the Calculator's Workload panel".into(),
            });
        }
        if !(1..=50).contains(&p.seeds) {
            return Err(at(
                "seeds",
                format!("{} must be between 1 and 50", crate::params::label("seeds")),
            ));
        }
        let limits = Limits::default();
        let runs = self
            .rates
            .iter()
            .map(|&r| ("frates", r))
            .chain([("frate", self.rate)]);
        for (key, r) in runs {
            let cfg = self.config(p, r, 0);
            cfg.validate_with(&limits)
                .map_err(|e| self.engine_error(&e, key, r))?;
            let work = f64::from(p.seeds) * cfg.base.expected_requests();
            if work.is_nan() || work > limits.max_requests_per_sweep {
                return Err(at(
                    key,
                    format!(
                        "{} = {}: {} seeds × ≈ {:.1e} requests is over the page's limit of {:.1e} requests per rate (max_requests_per_sweep); lower the rate, {} or {}",
                        label(key),
                        fmt_num(r),
                        p.seeds,
                        cfg.base.expected_requests(),
                        limits.max_requests_per_sweep,
                        crate::params::label("T"),
                        crate::params::label("seeds"),
                    ),
                ));
            }
        }
        Ok(())
    }

    /// An engine error of the fleet at `rate`, said with the page's labels and the field
    /// it is about.
    fn engine_error(&self, e: &ConfigError, rate_key: &'static str, rate: f64) -> Invalid {
        let message = page_message(&e.to_string());
        let key = match e {
            ConfigError::Fleet(_) => Some("router"),
            ConfigError::Zero {
                name: "replicas", ..
            }
            | ConfigError::OutOfRange {
                name: "replicas", ..
            } => Some("replicas"),
            ConfigError::NotPositive { name, .. }
            | ConfigError::Negative { name, .. }
            | ConfigError::Zero { name, .. }
            | ConfigError::OutOfRange { name, .. } => {
                FIELDS.iter().find(|f| f.1 == Some(*name)).map(|f| f.0)
            }
            ConfigError::KvTooSmall { .. } => Some("K"),
            _ => None,
        };
        match (e, key) {
            // The engine names the CLI's flag; the page's field is "KV mode".
            (ConfigError::Fleet(m), _) => Invalid {
                key,
                message: m.replace("use --kv-mode paged", "set KV mode to paged"),
            },
            (_, Some(k)) => Invalid {
                key: Some(k),
                message,
            },
            (_, None) => Invalid {
                key: Some(rate_key),
                message: format!("{} = {}: {message}", label(rate_key), fmt_num(rate)),
            },
        }
    }
}

/// The page label of one of the view's fields (else the calculator's).
pub fn label(key: &str) -> &str {
    match key {
        "replicas" => "replicas N",
        "router" => "router",
        "frates" => "fleet rates λ [req/s]",
        "frate" => "per-replica chart at λ [req/s]",
        k => crate::params::label(k),
    }
}

/// Whether a query asks for the Fleet view (`view=fleet`).
pub fn wants_fleet(query: &str) -> bool {
    query
        .trim_start_matches('?')
        .split('&')
        .any(|kv| kv == "view=fleet")
}

/// Whether the analytical fleet model's line is drawn without a caveat for `router`
/// (docs/accuracy.md, Fleets: random, round-robin, least-outstanding and least-tokens
/// routing are within the targets on the fleet grid, 5 % on mean TTFT and 10 % on p99).
pub fn model_validated(router: RouterKind) -> bool {
    matches!(
        router,
        RouterKind::Random
            | RouterKind::RoundRobin
            | RouterKind::LeastOutstanding
            | RouterKind::LeastTokens
    )
}

/// What the page says about the model line for `router`.
pub fn model_caveat(router: RouterKind) -> String {
    if model_validated(router) {
        format!(
            "The line is the analytical fleet model (each replica's stream under {} fed to the batching model): its mean TTFT is within the 5 % target on the fleet grid, and its p99 TTFT is within the 10 % target (6–9 % off on average; docs/accuracy.md, Fleets).",
            router.name()
        )
    } else {
        format!(
            "Caveat: for {} the analytical fleet model is not validated — docs/accuracy.md (Fleets) measures errors over its targets (5 % on mean TTFT, 10 % on p99) for this router, high or low with the load and the number of replicas. Read the simulation.",
            router.name()
        )
    }
}

/// The model line's name in the chart's legend.
pub fn model_name(router: RouterKind) -> String {
    if model_validated(router) {
        "fleet model (batching)".into()
    } else {
        format!("fleet model (not validated for {})", router.name())
    }
}

/// The per-replica picture of one run (seed 0) at the chosen rate.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FleetDetail {
    /// Fleet-wide rate [req/s].
    pub rate: f64,
    pub router: RouterKind,
    /// Fraction of the run each replica spent running iterations.
    pub utilisation: Vec<f64>,
    /// Requests routed to each replica.
    pub routed: Vec<u64>,
    /// Time average of the most outstanding requests at a replica over the mean (1 is even).
    pub imbalance: f64,
}

/// The analytical model's predictions across rates (`None`: unstable there).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FleetModel {
    pub router: RouterKind,
    pub points: Vec<(f64, Option<Predicted>)>,
    /// Why there is no line, when the model cannot predict this fleet.
    pub error: Option<String>,
}

/// Every seed of `state`'s fleet at `rate`, for each router of `routers` (common random
/// numbers: every router gets the same requests of each seed): one curve point per router.
///
/// # Errors
/// The engine's message for a fleet it refuses.
pub fn curve_points(
    state: &FleetState,
    p: &Params,
    rate: f64,
    routers: &[RouterKind],
    tick: &mut dyn FnMut(),
) -> Result<Vec<(RouterKind, CurvePoint)>, String> {
    let limits = Limits::default();
    let mut summaries = vec![Vec::with_capacity(p.seeds as usize); routers.len()];
    for seed in 0..u64::from(p.seeds) {
        let mut requests = None;
        for (i, &router) in routers.iter().enumerate() {
            let cfg = FleetConfig {
                router,
                ..state.config(p, rate, seed)
            };
            cfg.validate_with(&limits)
                .map_err(|e| page_message(&e.to_string()))?;
            let reqs = match &requests {
                Some(r) => r,
                None => requests.insert(
                    cfg.base
                        .workload
                        .generate(seed, cfg.base.horizon_s)
                        .map_err(|e| page_message(&e.to_string()))?,
                ),
            };
            let rep = simulate_fleet_requests(&cfg, reqs.iter().copied());
            summaries[i].push(rep.summary);
            tick();
        }
    }
    Ok(routers
        .iter()
        .zip(summaries)
        .map(|(&r, s)| (r, CurvePoint::from_summaries(rate, &s)))
        .collect())
}

/// One run (seed 0) at the chosen rate, per replica.
///
/// # Errors
/// The engine's message for a fleet it refuses.
pub fn detail(state: &FleetState, p: &Params) -> Result<FleetDetail, String> {
    let cfg = state.config(p, state.rate, 0);
    let rep = engine::fleet::simulate_fleet(&cfg).map_err(|e| page_message(&e.to_string()))?;
    Ok(FleetDetail {
        rate: state.rate,
        router: state.router,
        utilisation: rep.replicas.iter().map(|r| r.utilisation).collect(),
        routed: rep.replicas.iter().map(|r| r.routed).collect(),
        imbalance: rep.imbalance,
    })
}

/// The analytical fleet model (batching model per replica) at `rates`.
pub fn model(state: &FleetState, p: &Params, rates: &[f64]) -> FleetModel {
    let mut out = FleetModel {
        router: state.router,
        ..FleetModel::default()
    };
    for &r in rates {
        match predict_fleet(ModelKind::Batching, &state.config(p, r, 0)) {
            Ok(pred) => {
                let m = pred.fleet.metrics().copied();
                out.points.push((r, m.filter(Predicted::is_finite)));
            }
            Err(e) => {
                out.error = Some(page_message(&e.to_string()));
                out.points.clear();
                break;
            }
        }
    }
    out
}

/// The routers of the page's fleet benchmark: the ones the other fleet simulators have
/// (round-robin, random, least outstanding) and power of two choices.
pub const BENCH_ROUTERS: [RouterKind; 4] = [
    RouterKind::RoundRobin,
    RouterKind::Random,
    RouterKind::LeastOutstanding,
    RouterKind::PowerOfD { d: 2 },
];

/// The page's fleet benchmark: 8 reference servers, 10 fleet rates (3.8 … 38 req/s, to
/// 90 % of the fleet's compute capacity bound of 8 × 5.3 req/s), 5 seeds, T = 1000 s, for
/// each of [`BENCH_ROUTERS`]: 200 fleet runs, ≈ 4.2 M requests.
pub fn bench() -> (FleetState, Params, Vec<f64>) {
    let state = FleetState::of(8, RouterKind::RoundRobin);
    let rates = (1..=10).map(|i| 3.8 * f64::from(i)).collect();
    (state, Params::default(), rates)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metric::Metric;

    #[test]
    fn the_url_round_trips_and_keeps_what_the_user_wrote() {
        let s = FleetState {
            router: RouterKind::LeastTokens,
            ..FleetState::of(8, RouterKind::RoundRobin)
        };
        let p = Params {
            max_batch: 16,
            ..Params::default()
        };
        let q = s.to_query(&p);
        assert!(
            q.starts_with("view=fleet&replicas=8&router=least_tokens&"),
            "{q}"
        );
        assert!(wants_fleet(&q));
        let (back, bp, bad) = FleetState::from_query(&format!("?{q}"));
        assert_eq!((back, bp), (s, p));
        assert!(bad.is_empty());
        // N = 0 stays N = 0 (the page says what is wrong), an unknown router is reported.
        let (z, _, bad) = FleetState::from_query("view=fleet&replicas=0&router=nope");
        assert_eq!(z.replicas, 0);
        assert_eq!(bad, vec![("router".to_string(), "nope".to_string())]);
        // Missing rates follow N.
        let (n2, _, _) = FleetState::from_query("view=fleet&replicas=2");
        assert_eq!(n2.rates, FleetState::of(2, RouterKind::RoundRobin).rates);
    }

    #[test]
    fn bad_fleets_get_a_message_beside_their_field() {
        let p = Params::default();
        let e = FleetState::of(0, RouterKind::Random).check(&p).unwrap_err();
        assert_eq!(e.key, Some("replicas"), "{e:?}");
        assert!(e.message.contains("at least 1"), "{}", e.message);
        let e = FleetState::of(65, RouterKind::Random)
            .check(&p)
            .unwrap_err();
        assert_eq!(e.key, Some("replicas"));
        assert!(e.message.contains("at most 64"), "{}", e.message);
        // KV-aware over the reference (reserve-mode) server.
        let e = FleetState::of(4, RouterKind::KvAware)
            .check(&p)
            .unwrap_err();
        assert_eq!(e.key, Some("router"));
        assert!(e.message.contains("paged"), "{}", e.message);
        let paged = Params {
            kv_mode: engine::config::KvMode::Paged,
            ..Params::default()
        };
        assert!(FleetState::of(4, RouterKind::KvAware).check(&paged).is_ok());
        // A server error names its field.
        let e = FleetState::default()
            .check(&Params {
                max_batch: 0,
                ..Params::default()
            })
            .unwrap_err();
        assert_eq!(e.key, Some("B"), "{e:?}");
        assert!(FleetState::default().check(&p).is_ok());
    }

    #[test]
    fn one_router_point_equals_the_engine_fleet_run_per_seed() {
        let s = FleetState::of(3, RouterKind::LeastOutstanding);
        let p = Params {
            horizon_s: 100.0,
            seeds: 2,
            ..Params::default()
        };
        let mut ticks = 0;
        let got = curve_points(
            &s,
            &p,
            9.0,
            &[RouterKind::LeastOutstanding, RouterKind::RoundRobin],
            &mut || ticks += 1,
        )
        .unwrap();
        assert_eq!(ticks, 4);
        let sums: Vec<_> = (0..2)
            .map(|seed| {
                engine::fleet::simulate_fleet(&s.config(&p, 9.0, seed))
                    .unwrap()
                    .summary
            })
            .collect();
        assert_eq!(got[0].1, CurvePoint::from_summaries(9.0, &sums));
        assert_ne!(
            got[0].1.get(Metric::MeanTtft),
            got[1].1.get(Metric::MeanTtft)
        );
    }

    #[test]
    fn a_fleet_job_replies_with_points_detail_and_model_that_read_back() {
        use crate::job::{run, Job, Reply, Task};
        let fleet = FleetState::of(3, RouterKind::PowerOfD { d: 2 });
        let job = Job {
            id: 7,
            params: Params {
                horizon_s: 50.0,
                seeds: 2,
                ..Params::default()
            },
            tasks: vec![
                Task::FleetCurve {
                    fleet: fleet.clone(),
                    routers: BENCH_ROUTERS.to_vec(),
                    rate: 6.0,
                },
                Task::FleetDetail {
                    fleet: fleet.clone(),
                },
                Task::FleetModel {
                    fleet,
                    rates: vec![3.0, 6.0],
                },
            ],
        };
        let mut replies = Vec::new();
        run(&job, &mut |r| {
            let text = serde_json::to_string(&r).unwrap();
            replies.push(serde_json::from_str::<Reply>(&text).expect("reads back"));
        });
        let points = replies.iter().find_map(|r| match r {
            Reply::FleetPoints { id: 7, points } => Some(points.clone()),
            _ => None,
        });
        let routers: Vec<_> = points.unwrap().iter().map(|(k, _)| *k).collect();
        assert_eq!(routers, BENCH_ROUTERS.to_vec());
        assert!(replies.iter().any(
            |r| matches!(r, Reply::FleetDetail { id: 7, detail } if detail.utilisation.len() == 3)
        ));
        assert!(replies
            .iter()
            .any(|r| matches!(r, Reply::FleetModel { id: 7, model } if model.points.len() == 2)));
        assert_eq!(replies.last(), Some(&Reply::Done { id: 7 }));
    }

    #[test]
    fn the_routers_within_the_mean_target_get_a_plain_model_line() {
        for r in RouterKind::ALL {
            let plain = matches!(
                r,
                RouterKind::Random
                    | RouterKind::RoundRobin
                    | RouterKind::LeastOutstanding
                    | RouterKind::LeastTokens
            );
            assert_eq!(model_validated(r), plain);
            assert_eq!(model_caveat(r).starts_with("Caveat"), !plain);
            assert_eq!(model_caveat(r).contains("its p99 TTFT is"), plain);
            assert_eq!(model_name(r).contains("not validated"), !plain);
        }
    }

    #[test]
    fn detail_has_one_bar_per_replica_and_the_model_a_line() {
        let s = FleetState::of(5, RouterKind::Random);
        let p = Params {
            horizon_s: 100.0,
            ..Params::default()
        };
        let d = detail(&s, &p).unwrap();
        assert_eq!((d.utilisation.len(), d.routed.len()), (5, 5));
        assert!(d.utilisation.iter().all(|u| (0.0..=1.0).contains(u)));
        assert!(d.imbalance >= 1.0, "{}", d.imbalance);
        let m = model(&s, &p, &[5.0, 10.0, 20.0]);
        assert!(m.error.is_none(), "{m:?}");
        assert!(m.points.iter().all(|(_, x)| x.is_some()), "{m:?}");
        // Throughput is the fleet's: near λ at light load, not one replica's share.
        let g = m.points[0].1.unwrap().goodput_rps;
        assert!((g - 5.0).abs() < 0.5, "fleet goodput at λ = 5: {g}");
        let kv = model(&FleetState::of(2, RouterKind::KvAware), &p, &[1.0]);
        assert!(kv.error.is_some_and(|e| e.contains("paged")));
    }
}
