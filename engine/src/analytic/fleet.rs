//! Fleet models: N replicas behind a router, predicted without simulating
//! (`docs/model.md`, Fleets; accuracy in `docs/accuracy.md`, Fleets).
//!
//! Each router induces an arrival stream at each replica, which is fed to the one-server
//! model ([`super::predict`]):
//!
//! * **round-robin** over N: replica i gets every N-th arrival, so a Poisson stream at λ
//!   becomes Erlang-N gaps at λ/N, and a gamma stream of shape k gamma gaps of shape N·k
//!   (a sum of N i.i.d. gamma gaps); deterministic stays deterministic. Replicas get λ/N
//!   whatever their capacity, as the router does.
//! * **random**: Poisson thinning: each replica gets a Poisson stream at λ/N (exact);
//!   a renewal stream of SCV c² thinned with probability 1/N has gaps of SCV
//!   `1 + (c² − 1)/N` (a geometric sum of gaps), modelled as a gamma renewal stream.
//! * **join the shortest queue** (least outstanding requests, least outstanding tokens;
//!   KV-aware is treated alike): in heavy traffic the N queues collapse onto one
//!   (state-space collapse; Foschini & Salz 1978, Reiman 1984): the fleet's number in
//!   system is a diffusion with the whole stream's arrival variance and N servers'
//!   departure variance. The one-server model follows the N replicas' joint chain on a
//!   lattice of 1/N of a request per replica (`BatchingModel::pooled`; at most 128 / B
//!   replicas, the SCVs divided by the rest, so the chain stays small): an arrival
//!   joins a replica with the fewest, all N·B slots must be busy before it waits (the
//!   Halfin–Whitt regime of N·B servers: waiting thins smoothly as N grows, not at
//!   once), and a full replica next to free slots is stalled by the joiners the others
//!   take. A waiting arrival waits for its own replica's departures. Mixed replicas get
//!   λ in proportion to their capacity ([`super::capacity_bounds`]), as a router
//!   balancing outstanding work does.
//!   Least tokens balances work, not requests: replicas holding equal work hold counts
//!   spread like a renewal count, so the count an arrival finds is the pooled one spread
//!   by a variance `n̄·c_u²·(1 − 1/N)` (`BatchingModel::routed_by_work`; c_u² the SCV of
//!   one request's outstanding tokens, 1 − 1/N a deviation from the fleet's mean). It
//!   keeps one replica's chain with both SCVs divided by N.
//! * **power of d choices** (d < N): the mean-field (supermarket) model of Mitzenmacher
//!   (2001) and Vvedenskaya, Dobrushin & Karpelevich (1996): the fraction of queues with
//!   at least i requests is `s_i = ρ^((dⁱ − 1)/(d − 1))` ([`supermarket_tail`]). Its mean
//!   wait over M/M/1's at the replica's utilisation ρ (from the random router's
//!   prediction) is the factor by which power of d shrinks the queue's variance, applied
//!   to the one-server model as a partial pooling (between 1 and N: a lattice of ⌊factor⌋
//!   replicas, the SCVs divided by the rest). d ≥ N is JSQ.
//!
//! The fleet's figures combine the replicas': means weighted by each replica's accepted
//! arrivals, quantiles from the mixture of the replicas' TTFT distributions (each
//! interpolated through its p50, p95 and p99 on a log-odds / log-time scale). A fleet
//! with any unstable replica is unstable.

use super::{capacity_bounds, predict_pooled, AnalyticError, ModelKind, Predicted, Prediction};
use crate::config::SimConfig;
use crate::fleet::{FleetConfig, RouterKind};
use crate::workload::ArrivalProcess;
use serde::{Deserialize, Serialize};

/// One replica's share of a fleet prediction.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReplicaPrediction {
    /// Arrival rate the router sends it [req/s].
    pub rate_rps: f64,
    /// Squared coefficient of variation of its arrival gaps.
    pub arrival_scv: f64,
    pub prediction: Prediction,
}

/// What [`predict_fleet`] returns.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FleetPrediction {
    /// Fleet-wide (utilisation: the mean of the replicas').
    pub fleet: Prediction,
    pub replicas: Vec<ReplicaPrediction>,
}

/// Predicts a fleet with `model` as the one-server model.
///
/// # Errors
/// [`AnalyticError::Config`] for an invalid fleet (no replicas, a router that cannot
/// apply); [`AnalyticError::Unsupported`] for arrivals from timestamps or a trace, or a
/// reference model asked for anything but Poisson streams per replica (random routing of
/// Poisson arrivals); and any error of the one-server model.
///
/// # Examples
/// ```
/// use engine::analytic::{predict_fleet, ModelKind};
/// use engine::fleet::{FleetConfig, RouterKind};
/// let one = engine::SimConfig::reference(8.0, 8, 8192);
/// let fleet = FleetConfig::uniform(one, 4, RouterKind::RoundRobin);
/// let p = predict_fleet(ModelKind::Batching, &fleet).unwrap();
/// assert_eq!(p.replicas.len(), 4);
/// assert!((p.replicas[0].rate_rps - 2.0).abs() < 1e-12);
/// assert!(p.fleet.metrics().unwrap().ttft_mean_s > 0.0);
/// ```
pub fn predict_fleet(
    model: ModelKind,
    cfg: &FleetConfig,
) -> Result<FleetPrediction, AnalyticError> {
    cfg.validate_with(&crate::limits::Limits::default())?;
    let arrivals = &cfg.base.workload.arrivals;
    let lambda = arrivals.rate();
    let scv = match arrivals {
        ArrivalProcess::Poisson { .. }
        | ArrivalProcess::Gamma { .. }
        | ArrivalProcess::Deterministic { .. } => arrivals.scv(),
        _ => {
            return Err(AnalyticError::Unsupported {
                model: "fleet",
                what: "arrivals from timestamps or a trace".into(),
            })
        }
    };
    // A uniform fleet is predicted from one replica (they all get the same share).
    let uniform = cfg.replicas.windows(2).all(|w| w[0] == w[1]);
    let n = cfg.replicas.len();
    let configs = if uniform {
        vec![SimConfig {
            server: cfg.replicas[0].server.clone(),
            cost: cfg.replicas[0].cost.clone(),
            ..cfg.base.clone()
        }]
    } else {
        cfg.replica_configs()
    };
    let nf = n as f64;
    let router = match cfg.router {
        RouterKind::PowerOfD { d } if d as usize >= n => RouterKind::LeastOutstanding,
        r => r,
    };
    // (rate, arrival SCV, pooling) per replica.
    let plan: Vec<(f64, f64, Pooling)> = match router {
        RouterKind::RoundRobin => {
            vec![(lambda / nf, scv / nf, Pooling::None); n]
        }
        // Prefix affinity splits the stream by group, independently of load: modelled
        // as a random split (even only when the groups' traffic hashes evenly).
        RouterKind::Random | RouterKind::PrefixAffinity => {
            vec![(lambda / nf, 1.0 + (scv - 1.0) / nf, Pooling::None); n]
        }
        RouterKind::LeastOutstanding | RouterKind::LeastTokens | RouterKind::KvAware => {
            let pool = if router == RouterKind::LeastTokens {
                Pooling::Work(nf)
            } else {
                Pooling::Full(nf)
            };
            if uniform {
                vec![(lambda / nf, scv, pool); n]
            } else {
                by_capacity(&configs, lambda)?
                    .into_iter()
                    .map(|r| (r, scv, pool))
                    .collect()
            }
        }
        RouterKind::PowerOfD { d } => vec![
            (
                lambda / nf,
                1.0 + (scv - 1.0) / nf,
                Pooling::PowerOfD { d, n: nf }
            );
            n
        ],
    };
    let mut done: Vec<(SimConfig, Pooling, Prediction)> = Vec::new();
    let mut replicas = Vec::with_capacity(n);
    for (i, (rate, a_scv, pool)) in plan.into_iter().enumerate() {
        if uniform && i > 0 {
            replicas.push(replicas[0]);
            continue;
        }
        let mut one = configs[i].clone();
        one.workload.arrivals = stream(rate, a_scv);
        let p = match done.iter().find(|(c, q, _)| *c == one && *q == pool) {
            Some((_, _, p)) => *p,
            None => {
                let p = replica(model, &one, pool)?;
                done.push((one, pool, p));
                p
            }
        };
        replicas.push(ReplicaPrediction {
            rate_rps: rate,
            arrival_scv: a_scv,
            prediction: p,
        });
    }
    Ok(FleetPrediction {
        fleet: combine(&replicas),
        replicas,
    })
}

/// How a replica's queue is pooled with the others'.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Pooling {
    None,
    /// Join the shortest queue over this many replicas.
    Full(f64),
    /// Join the least outstanding work over this many replicas.
    Work(f64),
    /// Power of d choices over n replicas.
    PowerOfD {
        d: u32,
        n: f64,
    },
}

/// A renewal stream at `rate` with gaps of SCV `scv`.
fn stream(rate: f64, scv: f64) -> ArrivalProcess {
    if scv == 1.0 {
        ArrivalProcess::Poisson { rate }
    } else if scv <= 0.0 {
        ArrivalProcess::Deterministic { rate }
    } else {
        ArrivalProcess::Gamma {
            rate,
            burstiness: 1.0 / scv,
        }
    }
}

/// The fleet's rate split in proportion to each replica's capacity.
fn by_capacity(configs: &[SimConfig], lambda: f64) -> Result<Vec<f64>, AnalyticError> {
    if configs.windows(2).all(|w| w[0] == w[1]) {
        return Ok(vec![lambda / configs.len() as f64; configs.len()]);
    }
    let caps = configs
        .iter()
        .map(|c| capacity_bounds(c).map(|b| b.max_rps()))
        .collect::<Result<Vec<_>, _>>()?;
    let total: f64 = caps.iter().sum();
    Ok(caps.iter().map(|c| lambda * c / total).collect())
}

fn replica(model: ModelKind, cfg: &SimConfig, pool: Pooling) -> Result<Prediction, AnalyticError> {
    let scv = cfg.workload.arrivals.scv();
    if model != ModelKind::Batching && scv != 1.0 {
        return Err(AnalyticError::Unsupported {
            model: model.as_str(),
            what: "non-Poisson arrivals at a replica (only random routing of a Poisson \
                   stream gives Poisson replicas)"
                .into(),
        });
    }
    match pool {
        Pooling::None => predict_pooled(model, cfg, 1.0, false),
        Pooling::Full(n) => predict_pooled(model, cfg, n, false),
        Pooling::Work(n) => predict_pooled(model, cfg, n, true),
        Pooling::PowerOfD { d, n } => {
            let alone = predict_pooled(model, cfg, 1.0, false)?;
            let Some(m) = alone.metrics() else {
                return Ok(alone);
            };
            let rho = m.utilisation.clamp(0.0, 0.999);
            let factor = if rho <= 0.0 {
                1.0
            } else {
                let mm1_wait = rho / (1.0 - rho);
                let sm_wait = supermarket_mean_sojourn(rho, d) - 1.0;
                (mm1_wait / sm_wait.max(1e-12)).clamp(1.0, n)
            };
            predict_pooled(model, cfg, factor, false)
        }
    }
}

/// The supermarket model's tail: the fraction of servers with at least `i` requests when
/// each arrival joins the shortest of `d` random queues of exponential servers at load ρ,
/// as N → ∞: `s_i = ρ^((dⁱ − 1)/(d − 1))` (`ρ^i` for d = 1, M/M/1).
///
/// # Formula
/// Vvedenskaya, Dobrushin & Karpelevich (1996); Mitzenmacher (2001), Theorem 3.
pub fn supermarket_tail(rho: f64, d: u32, i: u32) -> f64 {
    if d == 1 {
        return rho.powi(i as i32);
    }
    let df = f64::from(d);
    rho.powf((df.powi(i as i32) - 1.0) / (df - 1.0))
}

/// Mean time in system of the supermarket model, in units of the mean service time:
/// `Σ_{i≥1} s_i / ρ` (Little's law on the mean-field queue).
pub(crate) fn supermarket_mean_sojourn(rho: f64, d: u32) -> f64 {
    let mut sum = 0.0;
    for i in 1..100_000u32 {
        let s = supermarket_tail(rho, d, i);
        sum += s;
        if s < 1e-15 * sum.max(1e-300) {
            break;
        }
    }
    sum / rho
}

/// The fleet-wide prediction from the replicas'.
fn combine(replicas: &[ReplicaPrediction]) -> Prediction {
    let mut ms: Vec<(f64, &Predicted)> = Vec::with_capacity(replicas.len());
    let mut rho_max: Option<f64> = None;
    for r in replicas {
        match &r.prediction {
            Prediction::Stable(m) => ms.push((r.rate_rps, m)),
            Prediction::Unstable { rho } => rho_max = Some(rho_max.unwrap_or(0.0).max(*rho)),
        }
    }
    if let Some(rho) = rho_max {
        return Prediction::Unstable { rho };
    }
    if ms.windows(2).all(|w| w[0] == w[1]) {
        // Identical replicas: every per-request figure is each one's; the fleet's
        // goodput is their sum.
        let mut one = *ms[0].1;
        one.goodput_rps *= ms.len() as f64;
        return Prediction::Stable(one);
    }
    let lambda: f64 = ms.iter().map(|(r, _)| r).sum();
    // Accepted-arrival weights for per-request figures.
    let acc: Vec<f64> = ms.iter().map(|(r, m)| r * (1.0 - m.blocking)).collect();
    let acc_sum: f64 = acc.iter().sum::<f64>().max(1e-300);
    let wmean = |f: fn(&Predicted) -> f64| {
        ms.iter().zip(&acc).map(|((_, m), w)| w * f(m)).sum::<f64>() / acc_sum
    };
    let q = |level: f64, f: fn(&Predicted) -> f64| mixture_quantile(&ms, &acc, level, f);
    Prediction::Stable(Predicted {
        ttft_mean_s: wmean(|m| m.ttft_mean_s),
        ttft_p50_s: q(0.5, |m| m.ttft_p50_s),
        ttft_p95_s: q(0.95, |m| m.ttft_p95_s),
        ttft_p99_s: q(0.99, |m| m.ttft_p99_s),
        tpot_mean_s: wmean(|m| m.tpot_mean_s),
        goodput_rps: ms.iter().map(|(_, m)| m.goodput_rps).sum(),
        blocking: ms.iter().map(|(r, m)| r * m.blocking).sum::<f64>() / lambda,
        utilisation: ms.iter().map(|(_, m)| m.utilisation).sum::<f64>() / ms.len() as f64,
        slo_attainment: ms.iter().map(|(r, m)| r * m.slo_attainment).sum::<f64>() / lambda,
    })
}

/// One replica's TTFT CDF at `t` [s], interpolated through its (p50, p95, p99) linearly
/// in log-odds against log-time, extended by the end segments.
fn cdf(m: &Predicted, t: f64) -> f64 {
    let pts = [
        (m.ttft_p50_s.max(1e-12).ln(), logit(0.5)),
        (m.ttft_p95_s.max(1e-12).ln(), logit(0.95)),
        (m.ttft_p99_s.max(1e-12).ln(), logit(0.99)),
    ];
    let x = t.max(1e-12).ln();
    let seg = if x <= pts[1].0 { 0 } else { 1 };
    let ((x0, y0), (x1, y1)) = (pts[seg], pts[seg + 1]);
    let y = if x1 - x0 > 1e-12 {
        y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    } else if x < x0 {
        -40.0
    } else {
        40.0
    };
    1.0 / (1.0 + (-y).exp())
}

fn logit(p: f64) -> f64 {
    (p / (1.0 - p)).ln()
}

/// The `level` quantile of the replicas' TTFT mixture (weights `w`), by bisection on
/// log-time between the replicas' own quantiles at that level.
fn mixture_quantile(
    ms: &[(f64, &Predicted)],
    w: &[f64],
    level: f64,
    own: fn(&Predicted) -> f64,
) -> f64 {
    let total: f64 = w.iter().sum::<f64>().max(1e-300);
    let (mut lo, mut hi) = ms.iter().fold((f64::INFINITY, 0.0f64), |(a, b), (_, m)| {
        (a.min(own(m)), b.max(own(m)))
    });
    if hi - lo <= 1e-12 * hi {
        return hi;
    }
    for _ in 0..60 {
        let mid = (lo * hi).sqrt();
        let f: f64 = ms
            .iter()
            .zip(w)
            .map(|((_, m), wi)| wi * cdf(m, mid))
            .sum::<f64>()
            / total;
        if f < level {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    (lo * hi).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analytic::predict;
    use crate::fleet::Replica;

    fn fleet(lambda: f64, n: u32, router: RouterKind) -> FleetConfig {
        FleetConfig::uniform(SimConfig::reference(lambda, 8, 8192), n, router)
    }

    /// Mitzenmacher (2001), eq. (3.1) with d = 2: s_i = λ^(2^i − 1); d = 1 is M/M/1's
    /// geometric tail and mean sojourn 1/(1 − λ).
    #[test]
    fn the_supermarket_tail_matches_its_closed_form() {
        for (i, want) in [
            (1, 0.9),
            (2, 0.729),
            (3, 0.9f64.powi(7)),
            (4, 0.9f64.powi(15)),
        ] {
            assert!(
                (supermarket_tail(0.9, 2, i) - want).abs() < 1e-12,
                "i = {i}"
            );
        }
        assert!((supermarket_tail(0.5, 3, 2) - 0.5f64.powi(4)).abs() < 1e-15);
        for rho in [0.3, 0.7, 0.95] {
            let mm1 = 1.0 / (1.0 - rho);
            assert!((supermarket_mean_sojourn(rho, 1) - mm1).abs() < 1e-9 * mm1);
        }
        // d = 2 at λ = 0.9: Σ 0.9^(2^i − 1) / 0.9 = 2.6141 mean service times, against
        // M/M/1's 10.
        let t = supermarket_mean_sojourn(0.9, 2);
        assert!((t - 2.614_057).abs() < 1e-5, "{t}");
        assert!(t < supermarket_mean_sojourn(0.9, 1) / 3.0);
    }

    #[test]
    fn one_replica_is_the_one_server_model_for_every_router() {
        let one = SimConfig::reference(2.0, 8, 8192);
        let alone = predict(ModelKind::Batching, &one).unwrap();
        for router in RouterKind::ALL {
            let mut f = FleetConfig::uniform(one.clone(), 1, router);
            if router == RouterKind::KvAware {
                f.replicas[0].server.kv_mode = crate::config::KvMode::Paged;
                f.base.server.kv_mode = crate::config::KvMode::Paged;
                let mut paged = one.clone();
                paged.server.kv_mode = crate::config::KvMode::Paged;
                let p = predict_fleet(ModelKind::Batching, &f).unwrap();
                assert_eq!(p.fleet, predict(ModelKind::Batching, &paged).unwrap());
                continue;
            }
            let p = predict_fleet(ModelKind::Batching, &f).unwrap();
            assert_eq!(p.fleet, alone, "{}", router.name());
        }
    }

    #[test]
    fn random_routing_of_poisson_arrivals_is_n_poisson_servers() {
        let p = predict_fleet(ModelKind::Batching, &fleet(12.0, 4, RouterKind::Random)).unwrap();
        let alone = predict(ModelKind::Batching, &SimConfig::reference(3.0, 8, 8192)).unwrap();
        // Each replica is one server at λ/N; the fleet's goodput is the four's.
        let (f, a) = (p.fleet.metrics().unwrap(), alone.metrics().unwrap());
        assert_eq!(p.replicas[0].prediction, alone);
        assert_eq!(
            (f.ttft_mean_s, f.ttft_p99_s, f.tpot_mean_s),
            (a.ttft_mean_s, a.ttft_p99_s, a.tpot_mean_s)
        );
        assert_eq!(
            (f.blocking, f.slo_attainment),
            (a.blocking, a.slo_attainment)
        );
        assert!(
            (f.goodput_rps - 4.0 * a.goodput_rps).abs() < 1e-12,
            "{} vs 4 × {}",
            f.goodput_rps,
            a.goodput_rps
        );
        assert!((f.goodput_rps - 12.0 * (1.0 - f.blocking)).abs() < 0.05 * 12.0);
        assert!(p.replicas.iter().all(|r| r.arrival_scv == 1.0));
        // The reference models cover it too (Poisson replicas), not round-robin's.
        let mmc = predict_fleet(ModelKind::ReferenceMmc, &fleet(12.0, 4, RouterKind::Random));
        assert!(mmc.is_ok());
        let rr = predict_fleet(
            ModelKind::ReferenceMmc,
            &fleet(12.0, 4, RouterKind::RoundRobin),
        );
        assert!(
            matches!(rr, Err(AnalyticError::Unsupported { .. })),
            "{rr:?}"
        );
    }

    #[test]
    fn smoother_and_pooled_streams_wait_less() {
        // Near capacity (0.9 of the replicas' bound, 5.3 req/s each): random >
        // round-robin > join the shortest queue.
        let n = 8;
        let lambda = 4.77 * f64::from(n);
        let ttft = |router| {
            predict_fleet(ModelKind::Batching, &fleet(lambda, n, router))
                .unwrap()
                .fleet
                .metrics()
                .unwrap()
                .ttft_mean_s
        };
        let (random, rr, jsq) = (
            ttft(RouterKind::Random),
            ttft(RouterKind::RoundRobin),
            ttft(RouterKind::LeastOutstanding),
        );
        let p2 = ttft(RouterKind::PowerOfD { d: 2 });
        let work = ttft(RouterKind::LeastTokens);
        assert!(random > rr && rr > jsq, "{random} {rr} {jsq}");
        assert!(random > p2 && p2 >= jsq, "{random} {p2} {jsq}");
        // Balancing work leaves the counts spread: between random and the fewest requests.
        assert!(random > work && work > 1.1 * jsq, "{random} {work} {jsq}");
        let p = predict_fleet(
            ModelKind::Batching,
            &fleet(lambda, n, RouterKind::RoundRobin),
        )
        .unwrap();
        assert!((p.replicas[0].arrival_scv - 1.0 / 8.0).abs() < 1e-15);
    }

    /// Join the shortest queue at 0.9 of capacity: the M·B slots' queue thins smoothly
    /// as the fleet grows (Halfin–Whitt: β = 0.1·√(8N)), so mean and p99 TTFT fall with
    /// N and a 16-replica fleet still waits (its p99 well above a 64-replica one's, the
    /// simulator's 0.36 s against 0.18 s); against the replicas' starts alone (0.3 load)
    /// every fleet waits somewhat.
    #[test]
    fn pooled_waiting_thins_smoothly_with_the_fleet() {
        let at = |load: f64, n: u32| {
            let mut one = SimConfig::reference(4.7735 / 0.9 * load * f64::from(n), 8, 8192);
            one.horizon_s = 50.0;
            let f = FleetConfig::uniform(one, n, RouterKind::LeastOutstanding);
            let p = predict_fleet(ModelKind::Batching, &f).unwrap();
            let m = p.fleet.metrics().unwrap();
            (m.ttft_mean_s, m.ttft_p99_s)
        };
        let (n8, n16, n32, n64) = (at(0.9, 8), at(0.9, 16), at(0.9, 32), at(0.9, 64));
        assert!(
            n8.0 > n16.0 && n16.0 > n32.0 && n32.0 > n64.0,
            "{n8:?} {n16:?} {n32:?} {n64:?}"
        );
        assert!(
            n16.1 > 1.5 * n64.1 && n8.1 > 1.5 * n16.1,
            "{n8:?} {n16:?} {n64:?}"
        );
        assert!((n16.1 - 0.363).abs() < 0.25 * 0.363, "{n16:?}");
        let light = at(0.3, 64);
        assert!(
            n64.0 > 1.2 * light.0 && n64.1 > 1.2 * light.1,
            "{n64:?} {light:?}"
        );
    }

    #[test]
    fn mixed_replicas_split_by_capacity_under_jsq_and_evenly_under_round_robin() {
        let base = SimConfig::reference(6.0, 8, 8192);
        let mut f = FleetConfig::uniform(base.clone(), 2, RouterKind::LeastOutstanding);
        let mut fast = base.clone();
        fast.server.max_batch = 16;
        fast.server.kv_tokens = 16384;
        f.replicas[1] = Replica {
            server: fast.server.clone(),
            cost: fast.cost.clone(),
        };
        let p = predict_fleet(ModelKind::Batching, &f).unwrap();
        assert!(p.replicas[1].rate_rps > p.replicas[0].rate_rps);
        assert!((p.replicas[0].rate_rps + p.replicas[1].rate_rps - 6.0).abs() < 1e-9);
        let m = p.fleet.metrics().unwrap();
        let (a, b) = (
            p.replicas[0].prediction.metrics().unwrap(),
            p.replicas[1].prediction.metrics().unwrap(),
        );
        let (lo, hi) = (
            a.ttft_p99_s.min(b.ttft_p99_s),
            a.ttft_p99_s.max(b.ttft_p99_s),
        );
        assert!(m.ttft_p99_s >= lo && m.ttft_p99_s <= hi, "{m:?}");
        f.router = RouterKind::RoundRobin;
        let p = predict_fleet(ModelKind::Batching, &f).unwrap();
        assert_eq!(p.replicas[0].rate_rps, p.replicas[1].rate_rps);
    }

    #[test]
    fn bad_fleets_are_errors_not_panics() {
        let mut f = fleet(4.0, 2, RouterKind::RoundRobin);
        f.replicas.clear();
        assert!(matches!(
            predict_fleet(ModelKind::Batching, &f),
            Err(AnalyticError::Config(_))
        ));
        let mut f = fleet(4.0, 2, RouterKind::RoundRobin);
        f.base.workload.arrivals = ArrivalProcess::Timestamps {
            times: vec![0.0, 1.0],
        };
        assert!(matches!(
            predict_fleet(ModelKind::Batching, &f),
            Err(AnalyticError::Unsupported { .. })
        ));
        // Far past capacity: explicitly unstable.
        let over = predict_fleet(ModelKind::Batching, &{
            let mut f = fleet(400.0, 2, RouterKind::RoundRobin);
            for r in &mut f.replicas {
                r.server.kv_mode = crate::config::KvMode::Paged;
            }
            f
        })
        .unwrap();
        assert!(
            matches!(over.fleet, Prediction::Unstable { .. }),
            "{over:?}"
        );
    }
}
