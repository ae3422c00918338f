//! The tandem model of a disaggregated deployment (docs/model.md, "Disaggregated prefill
//! and decode"; accuracy in docs/accuracy.md): the prefill pool, the transfer and the
//! decode pool, each predicted on its own and then added up.
//!
//! * **Prefill pool**: each replica is an M/G/1 queue (M/G/c for the routers that join
//!   the shortest queue, Erlang C with Allen–Cunneen's `(1 + c_s²)/2`) whose service is a
//!   lone prefill, `S(P)` = the cost model's prefill iteration(s) of the prompt (chunks of
//!   the token budget under `chunked`). Waiting requests are prefilled together in the next
//!   iteration and all leave at its end, so an arrival that finds the replica busy also
//!   waits for the prompts that arrive after it in the same iteration: `ρ · ρ_tok · E[R]`,
//!   with ρ the replica's load, ρ_tok the part of it that is prompt tokens (the iteration's
//!   marginal cost per token × λ E[P]) and `E[R] = E[S²] / 2E[S]` the residual iteration.
//!   Its TTFT (the end of the prefill, plus the front end's overhead) is `S + W'`, W' zero
//!   with probability P(no wait) and otherwise a gamma of mean (W + that) / P(wait) and
//!   the squared coefficient of variation of M/G/1's wait (Takács), W the mean wait from
//!   Pollaczek–Khinchine or Erlang C.
//! * **Transfer**: each prefill replica's link is an M/G/1 queue fed at λ/P with service
//!   `S = bytes / bandwidth` (bytes from the prompt's atom); its wait is
//!   Pollaczek–Khinchine's `λ_l E[S²] / (2 (1 − ρ_l))`; the latency adds to every transfer.
//! * **Decode pool**: a birth–death chain on the requests n at a decode replica. K tokens
//!   to emit per request (the output, or the output − 1 when the prefill pool emits the
//!   first), iterations of `d(m) = decode_step(m, m · C)` with m = min(n, c) decoding,
//!   C the token-weighted mean context `E[K (P + K/2)] / E[K]` and c = min(B, ⌊KV / C⌋)
//!   the slots; it leaves at `μ_n = m / (E[K] d(m))`. An arrival that finds n < c waits
//!   the rest of the iteration in progress (uniform over `d(n)`) and then its first
//!   step `d(n + 1)`; one that finds n ≥ c waits for n − c + 1 departures (Erlang at
//!   μ_c) and then `d(c)`. TPOT is the step a token sees: `Σ π_n m / Σ π_n m / d(m)`.
//!   Random and round-robin routing give each replica λ_d / D; least outstanding, least
//!   tokens, KV-aware and power of d pool the D replicas into one chain of D·c slots whose
//!   step is `d(m / D)`.
//!
//! TTFT is the prefill pool's (first token from the prefill pool), or the sum of the
//! prefill pool's, the transfer's and the decode pool's first step (from the decode pool),
//! its quantiles those of the sum of the three taken as independent. TPOT is the decode
//! pool's; with the first token from the prefill pool the second token also waits for
//! the transfer and the decode pool's first step, spread over the output − 1 gaps.

use super::atoms::{cdf_at, convolve, quantiles};
use super::erlang::erlang_c;
use super::lengths::{shared_atoms, Atom};
use super::{AnalyticError, Predicted, Prediction};
use crate::config::{Policy, SimConfig};
use crate::cost::PreparedCost;
use crate::disagg::{DisaggConfig, FirstTokenFrom, Link};
use crate::fleet::RouterKind;
use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, Gamma};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The decode pool's share of a prediction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DecodePoolPrediction {
    /// Arrival rate at the pool [req/s].
    pub rate_rps: f64,
    /// Slots per replica (B, or fewer when the KV binds).
    pub slots: f64,
    /// Mean wait and first step of an arrival [s].
    pub first_step_mean_s: f64,
    /// Mean step a token sees [s].
    pub tpot_mean_s: f64,
    /// Fraction of time a replica runs iterations.
    pub utilisation: f64,
    /// Mean requests per replica.
    pub mean_in_system: f64,
    /// Arrival rate over the pool's full-batch departure rate (≥ 1: unstable).
    pub rho: f64,
}

/// What [`predict_disagg`] returns.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DisaggPrediction {
    /// As the user sees it (utilisation: the decode pool's).
    pub overall: Prediction,
    /// The prefill pool (TTFT = end of prefill).
    pub prefill: Prediction,
    /// Mean transfer time and its link wait [s]; the links' utilisation.
    pub transfer_mean_s: f64,
    pub transfer_wait_mean_s: f64,
    pub link_utilisation: f64,
    pub decode: DecodePoolPrediction,
}

/// Predicts a disaggregated deployment.
///
/// # Errors
/// An invalid configuration, shared tokens or arrivals from a trace (not modelled), an
/// error of the prefill pool's fleet model.
pub fn predict_disagg(cfg: &DisaggConfig) -> Result<DisaggPrediction, AnalyticError> {
    let (at, lambda) = inputs(cfg)?;
    let up = match upstream(cfg, &at, lambda)? {
        Upstream::Unstable(u) => return Ok(u),
        Upstream::Stable(s) => s,
    };
    let down = match downstream(cfg, &at, lambda)? {
        Downstream::Unstable(rho) => return Ok(unstable(up.prefill, rho)),
        Downstream::Stable(s) => s,
    };
    combine(cfg, &at, lambda, &up, &down)
}

/// The tandem model of one kind of replica split into pools of varying sizes, each
/// stage's result kept for the next prediction that shares it: the prefill pool and the
/// links at P replicas do not depend on the decode pool's size, nor the decode pool at D
/// replicas on the prefill pool's. The planner's search over splits asks for many (P, D)
/// of the same P or the same D.
///
/// # Examples
/// ```
/// use engine::analytic::{predict_disagg, DisaggSplits};
/// use engine::disagg::{DisaggConfig, FirstTokenFrom, KvGeometry, Link};
/// use engine::fleet::RouterKind;
/// use engine::SimConfig;
///
/// let base = SimConfig::vllm_like(2.0);
/// let link = Link {
///     bandwidth_bytes_per_s: 25e9 / 8.0,
///     latency_s: 1e-3,
///     geometry: KvGeometry::of_model("Qwen2.5-1.5B").unwrap(),
/// };
/// let mut splits = DisaggSplits::new(
///     base.clone(),
///     RouterKind::LeastOutstanding,
///     link,
///     FirstTokenFrom::Decode,
/// );
/// let alone = predict_disagg(&DisaggConfig::uniform(
///     base,
///     2,
///     3,
///     RouterKind::LeastOutstanding,
///     link,
///     FirstTokenFrom::Decode,
/// ));
/// assert_eq!(splits.predict(2, 3), alone);
/// ```
#[derive(Clone, Debug)]
pub struct DisaggSplits {
    /// Every replica of both pools (its workload is the whole deployment's).
    base: SimConfig,
    router: RouterKind,
    link: Link,
    first_token: FirstTokenFrom,
    /// The prefill pool and links by prefill replicas.
    up: BTreeMap<u32, Result<Upstream, AnalyticError>>,
    /// The decode pool by decode replicas.
    down: BTreeMap<u32, Result<Downstream, AnalyticError>>,
}

impl DisaggSplits {
    /// Splits of `base`'s replica, both pools routed by `router`, as
    /// [`DisaggConfig::uniform`] builds them.
    pub fn new(
        base: SimConfig,
        router: RouterKind,
        link: Link,
        first_token: FirstTokenFrom,
    ) -> Self {
        DisaggSplits {
            base,
            router,
            link,
            first_token,
            up: BTreeMap::new(),
            down: BTreeMap::new(),
        }
    }

    /// The configuration of `p` prefill and `d` decode replicas.
    pub fn config(&self, p: u32, d: u32) -> DisaggConfig {
        DisaggConfig::uniform(
            self.base.clone(),
            p,
            d,
            self.router,
            self.link,
            self.first_token,
        )
    }

    /// [`predict_disagg`] of [`DisaggSplits::config`]`(p, d)`, the same figures.
    ///
    /// # Errors
    /// As [`predict_disagg`].
    pub fn predict(&mut self, p: u32, d: u32) -> Result<DisaggPrediction, AnalyticError> {
        self.evaluate(p, d, None)
            .map(|x| x.expect("no target: always a prediction"))
    }

    /// [`DisaggSplits::predict`]`(p, d)` when it is stable and its SLO attainment is at
    /// least `target`, else None. Faster for a split that misses: when the decode pool
    /// alone already misses the TPOT SLO (first token from the decode pool), the TTFT
    /// distribution is not convolved.
    ///
    /// # Errors
    /// As [`predict_disagg`].
    pub fn meets(
        &mut self,
        p: u32,
        d: u32,
        target: f64,
    ) -> Result<Option<DisaggPrediction>, AnalyticError> {
        let pr = self.evaluate(p, d, Some(target))?;
        Ok(pr.filter(|pr| {
            pr.overall
                .metrics()
                .is_some_and(|m| m.slo_attainment >= target)
        }))
    }

    /// The prediction, or None when `target` is given and the split surely misses it.
    fn evaluate(
        &mut self,
        p: u32,
        d: u32,
        target: Option<f64>,
    ) -> Result<Option<DisaggPrediction>, AnalyticError> {
        let cfg = self.config(p, d);
        let (at, lambda) = inputs(&cfg)?;
        let up = match self
            .up
            .entry(p)
            .or_insert_with(|| upstream(&cfg, &at, lambda))
        {
            Err(e) => return Err(e.clone()),
            Ok(Upstream::Unstable(u)) => return Ok(Some(u.clone())),
            Ok(Upstream::Stable(s)) => s,
        };
        let down = match self
            .down
            .entry(d)
            .or_insert_with(|| downstream(&cfg, &at, lambda))
        {
            Err(e) => return Err(e.clone()),
            Ok(Downstream::Unstable(rho)) => return Ok(Some(unstable(up.prefill, *rho))),
            Ok(Downstream::Stable(s)) => s,
        };
        // The decode pool's TPOT misses the SLO: the attainment is 0 whatever the TTFT
        // (the figures being finite, the prediction is not an error).
        if let Some(target) = target {
            if target > 0.0
                && cfg.first_token == FirstTokenFrom::Decode
                && up.finite
                && down.finite
                && small(lambda)
                && down.dp.tpot_mean_s > cfg.base.metrics.slo_tpot_s
            {
                return Ok(None);
            }
        }
        combine(&cfg, &at, lambda, up, down).map(Some)
    }
}

/// The checked configuration's length atoms and arrival rate.
fn inputs(cfg: &DisaggConfig) -> Result<(Arc<[Atom]>, f64), AnalyticError> {
    cfg.validate_with(&crate::limits::Limits::default())
        .map_err(|e| AnalyticError::Unsupported {
            model: "disaggregated",
            what: e.to_string(),
        })?;
    let w = &cfg.base.workload;
    if w.shared.is_some() {
        return Err(AnalyticError::Unsupported {
            model: "disaggregated",
            what: "shared tokens (system prompts, conversations)".into(),
        });
    }
    Ok((shared_atoms(&w.lengths, 60), w.rate()))
}

/// The prefill pool and the links.
#[derive(Clone, Debug)]
enum Upstream {
    /// One of them is unstable: the whole prediction.
    Unstable(DisaggPrediction),
    Stable(UpstreamStages),
}

#[derive(Clone, Debug)]
struct UpstreamStages {
    pf: PrefillPool,
    prefill: Prediction,
    /// The links' mean wait, load and mean transfer time [s].
    wait_l: f64,
    rho_l: f64,
    tx_mean: f64,
    /// The prefill pool's TTFT plus the transfer (first token from the decode pool;
    /// empty otherwise).
    pf_tx: Vec<(f64, f64)>,
    /// Every figure above finite.
    finite: bool,
}

fn upstream(cfg: &DisaggConfig, at: &[Atom], lambda: f64) -> Result<Upstream, AnalyticError> {
    // 1. The prefill pool.
    let pf = prefill_pool(cfg, at, lambda)?;
    let Some(pf) = pf else {
        return Ok(Upstream::Unstable(unstable(
            Prediction::Unstable {
                rho: prefill_rho(cfg, at, lambda),
            },
            prefill_rho(cfg, at, lambda),
        )));
    };
    let prefill = Prediction::Stable(pf.summary(cfg.base.metrics.slo_ttft_s, lambda));

    // 2. The links.
    let link = &cfg.link;
    let lam_l = lambda / cfg.prefill.replicas.len() as f64;
    let (mut es, mut es2) = (0.0, 0.0);
    for a in at.iter() {
        let s = link.serialisation_s(link.geometry.bytes_per_token() * a.prompt);
        es += a.w * s;
        es2 += a.w * s * s;
    }
    let rho_l = lam_l * es;
    if rho_l >= 1.0 {
        return Ok(Upstream::Unstable(unstable(prefill, rho_l)));
    }
    let wait_l = lam_l * es2 / (2.0 * (1.0 - rho_l));
    let tx_mean = wait_l + es + link.latency_s;
    let pf_tx = if cfg.first_token == FirstTokenFrom::Decode {
        let tx_atoms: Vec<(f64, f64)> = at
            .iter()
            .map(|a| {
                let s = link.serialisation_s(link.geometry.bytes_per_token() * a.prompt);
                (a.w, wait_l + s + link.latency_s)
            })
            .collect();
        let tx = convolve(&tx_atoms, &[(1.0, 0.0)]);
        convolve(&pf.atoms, &tx)
    } else {
        Vec::new()
    };
    let finite = [pf.mean, wait_l, rho_l, tx_mean].into_iter().all(small)
        && atoms_finite(&pf.atoms)
        && (pf_tx.is_empty() || atoms_finite(&pf_tx));
    Ok(Upstream::Stable(UpstreamStages {
        pf,
        prefill,
        wait_l,
        rho_l,
        tx_mean,
        pf_tx,
        finite,
    }))
}

/// The decode pool.
#[derive(Clone, Debug)]
enum Downstream {
    /// Unstable at this load.
    Unstable(f64),
    Stable(DownstreamStage),
}

#[derive(Clone, Debug)]
struct DownstreamStage {
    dp: DecodePoolPrediction,
    /// The first step's distribution (first token from the decode pool; empty
    /// otherwise).
    first: Vec<(f64, f64)>,
    /// Every figure above finite.
    finite: bool,
}

fn downstream(cfg: &DisaggConfig, at: &[Atom], lambda: f64) -> Result<Downstream, AnalyticError> {
    // 3. The decode pool.
    let from_prefill = cfg.first_token == FirstTokenFrom::Prefill;
    let tokens = |a: &Atom| {
        if from_prefill {
            a.output - 1.0
        } else {
            a.output
        }
    };
    let dec: Vec<(f64, f64, f64)> = at
        .iter()
        .map(|a| (a.w, a.prompt, tokens(a)))
        .filter(|&(_, _, k)| k >= 0.5)
        .collect();
    let p_dec: f64 = dec.iter().map(|d| d.0).sum();
    let chain = DecodeChain::new(cfg, &dec, lambda * p_dec)?;
    let Some(pi) = chain.stationary() else {
        return Ok(Downstream::Unstable(chain.rho()));
    };
    let dp = chain.solve(&pi);
    let first = if from_prefill {
        Vec::new()
    } else {
        convolve(&chain.first_step_atoms(&pi), &[(1.0, 0.0)])
    };
    let finite = [
        dp.first_step_mean_s,
        dp.tpot_mean_s,
        dp.utilisation,
        dp.mean_in_system,
        dp.rho,
    ]
    .into_iter()
    .all(small)
        && (from_prefill || atoms_finite(&first));
    Ok(Downstream::Stable(DownstreamStage { dp, first, finite }))
}

/// Finite and far from overflowing when a few are added.
fn small(x: f64) -> bool {
    x.is_finite() && x.abs() < 1e300
}

/// Non-empty, of finite weights summing to more than 0 and [`small`] times.
fn atoms_finite(a: &[(f64, f64)]) -> bool {
    !a.is_empty()
        && a.iter().all(|&(w, t)| small(w) && w >= 0.0 && small(t))
        && a.iter().any(|&(w, _)| w > 1e-100)
}

/// 4. The user's view of the three stages.
fn combine(
    cfg: &DisaggConfig,
    at: &[Atom],
    lambda: f64,
    up: &UpstreamStages,
    down: &DownstreamStage,
) -> Result<DisaggPrediction, AnalyticError> {
    let from_prefill = cfg.first_token == FirstTokenFrom::Prefill;
    let link = &cfg.link;
    let (pf, wait_l, dp) = (&up.pf, up.wait_l, &down.dp);
    let (ttft_mean, tpot_mean, q, dist) = if from_prefill {
        // TPOT over requests of two or more tokens: the second token's wait spread over
        // their gaps.
        let (mut num, mut den) = (0.0, 0.0);
        for a in at.iter().filter(|a| a.output >= 1.5) {
            let k = a.output - 1.0;
            let tx = wait_l
                + link.serialisation_s(link.geometry.bytes_per_token() * a.prompt)
                + link.latency_s;
            num += a.w * ((tx + dp.first_step_mean_s) / k + (k - 1.0) / k * dp.tpot_mean_s);
            den += a.w;
        }
        (
            pf.mean,
            num / den.max(1e-300),
            quantiles(&pf.atoms),
            pf.atoms.clone(),
        )
    } else {
        let ttft = pf.mean + up.tx_mean + dp.first_step_mean_s;
        let sum = convolve(&up.pf_tx, &down.first);
        let q = quantiles(&sum);
        (ttft, dp.tpot_mean_s, q, sum)
    };
    let slo_ttft = cfg.base.metrics.slo_ttft_s;
    let ttft_ok = cdf_at(&dist, slo_ttft);
    let tpot_ok = if tpot_mean <= cfg.base.metrics.slo_tpot_s {
        1.0
    } else {
        0.0
    };
    let overall = Prediction::Stable(Predicted {
        ttft_mean_s: ttft_mean,
        ttft_p50_s: q[0],
        ttft_p95_s: q[1],
        ttft_p99_s: q[2],
        tpot_mean_s: tpot_mean,
        goodput_rps: lambda,
        blocking: 0.0,
        utilisation: dp.utilisation,
        slo_attainment: ttft_ok * tpot_ok,
    });
    if !overall.metrics().is_some_and(Predicted::is_finite) {
        return Err(AnalyticError::Unsupported {
            model: "disaggregated",
            what: "this configuration: a figure came out non-finite".into(),
        });
    }
    Ok(DisaggPrediction {
        overall,
        prefill: up.prefill,
        transfer_mean_s: up.tx_mean,
        transfer_wait_mean_s: wait_l,
        link_utilisation: up.rho_l,
        decode: *dp,
    })
}

fn unstable(prefill: Prediction, rho: f64) -> DisaggPrediction {
    DisaggPrediction {
        overall: Prediction::Unstable { rho },
        prefill,
        transfer_mean_s: 0.0,
        transfer_wait_mean_s: 0.0,
        link_utilisation: 0.0,
        decode: DecodePoolPrediction::default(),
    }
}

/// The decode pool's chain.
struct DecodeChain {
    lambda: f64,
    /// Servers pooled into the chain (1: one replica at its share).
    pooled: f64,
    slots: f64,
    mean_tokens: f64,
    /// Step at 0…⌈slots⌉ decoding sequences of one replica [s].
    step: Vec<f64>,
}

impl DecodeChain {
    fn new(
        cfg: &DisaggConfig,
        dec: &[(f64, f64, f64)],
        lambda: f64,
    ) -> Result<Self, AnalyticError> {
        let r = &cfg.decode.replicas[0];
        if cfg.decode.replicas.iter().any(|x| x != r) {
            return Err(AnalyticError::Unsupported {
                model: "disaggregated",
                what: "decode replicas that differ".into(),
            });
        }
        let d = cfg.decode.replicas.len() as f64;
        let total: f64 = dec.iter().map(|x| x.0).sum::<f64>().max(1e-300);
        let mean_tokens = dec.iter().map(|x| x.0 * x.2).sum::<f64>() / total;
        // Token-weighted context: a request holds P + k tokens at its k-th step.
        let ctx = dec
            .iter()
            .map(|x| x.0 * x.2 * (x.1 + x.2 / 2.0))
            .sum::<f64>()
            / (total * mean_tokens).max(1e-300);
        let bs = f64::from(r.server.block_size.max(1));
        let kv_slots = (r.server.kv_tokens as f64 / (ctx + bs / 2.0))
            .floor()
            .max(1.0);
        let slots = f64::from(r.server.max_batch).min(kv_slots);
        let cost = PreparedCost::new(&r.cost, r.server.max_batch)
            .with_step_overhead(r.server.step_overhead_s);
        let top = slots.ceil() as u32;
        let step = (0..=top)
            .map(|m| cost.decode_step(m, (f64::from(m) * ctx) as u64))
            .collect();
        let pooled = match cfg.decode.router {
            RouterKind::RoundRobin | RouterKind::Random | RouterKind::PrefixAffinity => 1.0,
            _ => d,
        };
        Ok(DecodeChain {
            lambda: if pooled > 1.0 { lambda } else { lambda / d },
            pooled,
            slots,
            mean_tokens,
            step,
        })
    }

    /// One replica's step with `m` (possibly fractional) decoding [s].
    fn d(&self, m: f64) -> f64 {
        let m = m.clamp(1.0, self.slots);
        let lo = m.floor() as usize;
        let hi = (m.ceil() as usize).min(self.step.len() - 1);
        let f = m - lo as f64;
        self.step[lo] * (1.0 - f) + self.step[hi] * f
    }

    /// Decoding requests in state n, per replica.
    fn busy(&self, n: f64) -> f64 {
        n.min(self.slots * self.pooled) / self.pooled
    }

    fn mu(&self, n: f64) -> f64 {
        let m = self.busy(n);
        if m <= 0.0 {
            0.0
        } else {
            m * self.pooled / (self.mean_tokens * self.d(m))
        }
    }

    fn rho(&self) -> f64 {
        let full = self.slots * self.pooled;
        self.lambda / self.mu(full)
    }

    /// π_n up to where it is negligible; None when unstable.
    fn stationary(&self) -> Option<Vec<f64>> {
        if self.rho() >= 1.0 {
            return None;
        }
        let mut p = vec![1.0f64];
        let mut sum = 1.0;
        let mut n = 0usize;
        loop {
            n += 1;
            let mut next = p[n - 1] * self.lambda / self.mu(n as f64);
            if next > 1e200 {
                // Many slots at a high offered load: rescale before the terms overflow.
                p.iter_mut().for_each(|x| *x *= 1e-200);
                sum *= 1e-200;
                next *= 1e-200;
            }
            p.push(next);
            sum += next;
            // Past a term that underflowed to 0 every term is 0: the rest of the chain
            // adds nothing to the sums below.
            if (n as f64 > self.slots * self.pooled && next < 1e-13 * sum)
                || n > 2_000_000
                || next == 0.0
            {
                break;
            }
        }
        let sum: f64 = p.iter().sum();
        p.iter_mut().for_each(|x| *x /= sum);
        Some(p)
    }

    /// The pool's figures from the stationary law `pi`.
    fn solve(&self, pi: &[f64]) -> DecodePoolPrediction {
        let mut first = 0.0;
        let (mut tok, mut tok_t) = (0.0, 0.0);
        let mut busy = 0.0;
        let mut mean_n = 0.0;
        for (n, p) in pi.iter().enumerate() {
            let nf = n as f64;
            mean_n += p * nf;
            first += p * self.first_step(nf).0;
            let m = self.busy(nf);
            if m > 0.0 {
                tok += p * m;
                tok_t += p * m / self.d(m);
            }
            // Replicas running iterations: n requests spread over the pooled replicas.
            busy += p * nf.min(self.pooled) / self.pooled;
        }
        DecodePoolPrediction {
            rate_rps: self.lambda,
            slots: self.slots,
            first_step_mean_s: first,
            tpot_mean_s: if tok_t > 0.0 {
                tok / tok_t
            } else {
                self.d(1.0)
            },
            utilisation: busy,
            mean_in_system: mean_n / self.pooled,
            rho: self.rho(),
        }
    }

    /// An arrival finding n: (mean wait + first step, and its parts: residual span,
    /// Erlang departures and rate, first step).
    fn first_step(&self, n: f64) -> (f64, f64, f64, f64, f64) {
        let full = self.slots * self.pooled;
        if n < full.floor() {
            let resid = if n >= 1.0 { self.d(self.busy(n)) } else { 0.0 };
            let step = self.d(self.busy(n + 1.0));
            (resid / 2.0 + step, resid, 0.0, 0.0, step)
        } else {
            let k = n - full.floor() + 1.0;
            let mu = self.mu(full);
            let step = self.d(self.slots);
            (k / mu + step, 0.0, k, mu, step)
        }
    }

    /// The first-step time's distribution as weighted atoms, from the stationary law.
    fn first_step_atoms(&self, pi: &[f64]) -> Vec<(f64, f64)> {
        let mut out = Vec::new();
        for (n, p) in pi.iter().enumerate() {
            if *p < 1e-12 {
                continue;
            }
            let (_, resid, k, mu, step) = self.first_step(n as f64);
            const M: usize = 8;
            for i in 0..M {
                let u = (i as f64 + 0.5) / M as f64;
                let t = if k > 0.0 {
                    step + gamma_quantile(k, mu, u)
                } else {
                    step + resid * u
                };
                out.push((p / M as f64, t));
            }
        }
        out
    }
}

/// The u-quantile of a gamma of integer-ish shape k and rate μ, by the Wilson–Hilferty
/// approximation (exact enough for the wait's tail at the shapes a queue reaches).
fn gamma_quantile(k: f64, mu: f64, u: f64) -> f64 {
    let z = super::special::normal_quantile(u);
    let c = 1.0 / (9.0 * k);
    let x = k * (1.0 - c + z * c.sqrt()).max(0.0).powi(3);
    x / mu
}

/// The prefill pool's prediction: TTFT atoms (weight, seconds) and its mean.
#[derive(Clone, Debug)]
struct PrefillPool {
    atoms: Vec<(f64, f64)>,
    mean: f64,
    rho: f64,
}

impl PrefillPool {
    fn summary(&self, slo_ttft_s: f64, lambda: f64) -> Predicted {
        let q = quantiles(&self.atoms);
        Predicted {
            ttft_mean_s: self.mean,
            ttft_p50_s: q[0],
            ttft_p95_s: q[1],
            ttft_p99_s: q[2],
            tpot_mean_s: 0.0,
            goodput_rps: lambda,
            blocking: 0.0,
            utilisation: self.rho,
            slo_attainment: cdf_at(&self.atoms, slo_ttft_s),
        }
    }
}

/// A lone prefill of `prompt` tokens on the pool's replica, and its marginal cost per
/// prompt token [s].
fn service(cfg: &DisaggConfig, prompt: f64) -> (f64, f64) {
    let r = &cfg.prefill.replicas[0];
    let step = r.server.step_overhead_s;
    let one = |tokens: f64| r.cost.prefill(1, 1, tokens.max(1.0) as u64) + step;
    let per_token = (one(1025.0) - one(1.0)) / 1024.0;
    let chunk = match r.server.policy {
        Policy::Chunked | Policy::LlamaCpp => f64::from(r.server.token_budget.max(1)),
        _ => f64::INFINITY,
    };
    let whole = (prompt / chunk).floor();
    let rest = prompt - whole * chunk;
    let s = if whole >= 1.0 && chunk.is_finite() {
        whole * one(chunk) + if rest >= 0.5 { one(rest) } else { 0.0 }
    } else {
        one(prompt)
    };
    (s, per_token)
}

/// The prefill pool's load per replica.
fn prefill_rho(cfg: &DisaggConfig, at: &[Atom], lambda: f64) -> f64 {
    let es: f64 = at.iter().map(|a| a.w * service(cfg, a.prompt).0).sum();
    lambda / cfg.prefill.replicas.len() as f64 * es
}

/// The prefill pool (module docs); None when unstable.
fn prefill_pool(
    cfg: &DisaggConfig,
    at: &[Atom],
    lambda: f64,
) -> Result<Option<PrefillPool>, AnalyticError> {
    let r = &cfg.prefill.replicas[0];
    if cfg.prefill.replicas.iter().any(|x| x != r) {
        return Err(AnalyticError::Unsupported {
            model: "disaggregated",
            what: "prefill replicas that differ".into(),
        });
    }
    let n = cfg.prefill.replicas.len();
    let lam = lambda / n as f64;
    let (mut es, mut es2, mut es3, mut ep, mut b) = (0.0, 0.0, 0.0, 0.0, 0.0);
    let svc: Vec<f64> = at
        .iter()
        .map(|a| {
            let (s, per_token) = service(cfg, a.prompt);
            b = per_token;
            es += a.w * s;
            es2 += a.w * s * s;
            es3 += a.w * s * s * s;
            ep += a.w * a.prompt;
            s
        })
        .collect();
    let rho = lam * es;
    if rho >= 1.0 {
        return Ok(None);
    }
    let scv = (es2 / (es * es) - 1.0).max(0.0);
    let pooled = !matches!(
        cfg.prefill.router,
        RouterKind::RoundRobin | RouterKind::Random | RouterKind::PrefixAffinity
    ) && n > 1;
    // P(wait) and the mean wait.
    let (p_wait, wait) = if pooled {
        let c = match erlang_c(n as u32, lambda * es)? {
            Ok(c) => c,
            Err(_) => return Ok(None),
        };
        (c, c * es / (n as f64 * (1.0 - rho)) * (1.0 + scv) / 2.0)
    } else {
        (rho, lam * es2 / (2.0 * (1.0 - rho)))
    };
    if !wait.is_finite() {
        return Ok(None);
    }
    let extra = rho * (lam * b * ep).min(rho) * es2 / (2.0 * es);
    let front = |p: f64| r.server.overhead_s + r.server.overhead_per_token_s * p;
    // W: 0 with probability 1 − P(wait), else a gamma of mean wait / P(wait) whose
    // squared coefficient of variation is M/G/1's at the replica's load (Takács:
    // E[W²] = 2 E[W]² + λ E[S³] / 3(1 − ρ)).
    const K: usize = 32;
    let mut w_atoms = vec![(1.0 - p_wait, 0.0)];
    if p_wait > 0.0 && wait > 0.0 {
        let w1 = lam * es2 / (2.0 * (1.0 - rho));
        let w2 = 2.0 * w1 * w1 + lam * es3 / (3.0 * (1.0 - rho));
        let (m1, m2) = (w1 / rho, w2 / rho);
        let shape = (m1 * m1 / (m2 - m1 * m1).max(1e-300)).clamp(0.05, 1e3);
        // The prompts that arrive after it in the same iteration: spread in proportion
        // to the wait (the longer the iteration it waits out, the more join it).
        let m = (wait + extra) / p_wait;
        let g = Gamma::new(shape, shape / m).map_err(|_| AnalyticError::Invalid {
            name: "prefill wait",
            value: m,
            why: "must be finite and > 0",
        })?;
        for i in 0..K {
            // Finer in the upper tail: u-edges 1 − (1 − i/K)².
            let (u0, u1) = (
                1.0 - (1.0 - i as f64 / K as f64).powi(2),
                1.0 - (1.0 - (i + 1) as f64 / K as f64).powi(2),
            );
            let u = 0.5 * (u0 + u1);
            // statrs' inversion can fail at very small shapes: the exponential's then.
            let t = g.inverse_cdf(u);
            let t = if t.is_finite() && t >= 0.0 {
                t
            } else {
                -m * (1.0 - u).ln()
            };
            w_atoms.push((p_wait * (u1 - u0), t));
        }
    }
    let s_atoms: Vec<(f64, f64)> = at
        .iter()
        .zip(&svc)
        .map(|(a, s)| {
            (
                a.w,
                s + front(a.prompt)
                    + if p_wait > 0.0 && wait > 0.0 {
                        0.0
                    } else {
                        extra
                    },
            )
        })
        .collect();
    let atoms = convolve(&s_atoms, &w_atoms);
    let mean = atoms.iter().map(|(w, t)| w * t).sum::<f64>();
    Ok(Some(PrefillPool { atoms, mean, rho }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::RooflineCost;
    use crate::disagg::KvGeometry;
    use crate::workload::LengthDist;

    fn config(
        rate: f64,
        p: u32,
        d: u32,
        router: RouterKind,
        first: FirstTokenFrom,
    ) -> DisaggConfig {
        DisaggSplits::new(base(rate), router, link(), first).config(p, d)
    }

    fn base(rate: f64) -> SimConfig {
        let (cost, kv) = RooflineCost::preset("A10G", "Qwen2.5-1.5B", 0.9, 1).unwrap();
        let mut one = SimConfig::vllm_like(rate);
        one.cost = cost;
        one.server.kv_tokens = kv;
        one.server.max_batch = 32;
        one.server.token_budget = 2048;
        one.workload.lengths = LengthDist::reference();
        one
    }

    fn link() -> Link {
        Link {
            bandwidth_bytes_per_s: 25e9 / 8.0,
            latency_s: 1e-3,
            geometry: KvGeometry::of_model("Qwen2.5-1.5B").unwrap(),
        }
    }

    #[test]
    fn splits_predict_what_the_tandem_model_predicts_alone() {
        for router in [RouterKind::Random, RouterKind::LeastOutstanding] {
            for first in [FirstTokenFrom::Prefill, FirstTokenFrom::Decode] {
                let mut splits = DisaggSplits::new(base(12.0), router, link(), first);
                // Pool sizes met again in another order, unstable ones among them.
                for (p, d) in [
                    (1, 1),
                    (2, 1),
                    (1, 4),
                    (2, 4),
                    (4, 2),
                    (1, 2),
                    (2, 2),
                    (4, 64),
                ] {
                    let alone = predict_disagg(&config(12.0, p, d, router, first));
                    assert_eq!(splits.predict(p, d), alone, "{p}:{d} {router:?} {first:?}");
                }
            }
        }
    }

    #[test]
    fn meets_answers_as_the_prediction_does() {
        for first in [FirstTokenFrom::Prefill, FirstTokenFrom::Decode] {
            for (rate, slo_tpot) in [(12.0, 0.05), (12.0, 0.005)] {
                let mut b = base(rate);
                b.metrics.slo_ttft_s = 0.5;
                b.metrics.slo_tpot_s = slo_tpot;
                let mut splits = DisaggSplits::new(b.clone(), RouterKind::Random, link(), first);
                for (p, d) in [(1, 1), (2, 2), (2, 8), (3, 16)] {
                    let whole = splits.predict(p, d).unwrap();
                    let att = whole.overall.metrics().map(|m| m.slo_attainment);
                    for target in [0.5, 0.9, 0.999] {
                        let met = splits.meets(p, d, target).unwrap();
                        assert_eq!(met.is_some(), att.is_some_and(|a| a >= target));
                        if let Some(m) = met {
                            assert_eq!(m, whole);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn a_chain_cut_where_its_terms_underflow_solves_as_the_whole_chain() {
        // Many pooled decode replicas at a light load: the chain's terms reach 0 long
        // before its D·c states.
        let cfg = config(
            2.0,
            1,
            512,
            RouterKind::LeastOutstanding,
            FirstTokenFrom::Decode,
        );
        let at = shared_atoms(&cfg.base.workload.lengths, 60);
        let dec: Vec<(f64, f64, f64)> = at.iter().map(|a| (a.w, a.prompt, a.output)).collect();
        let chain = DecodeChain::new(&cfg, &dec, 2.0).unwrap();
        let pi = chain.stationary().unwrap();
        assert!(pi.len() < 4096, "{} states", pi.len());
        let mut whole = pi.clone();
        whole.resize(512 * 32 + 2, 0.0);
        assert_eq!(chain.solve(&pi), chain.solve(&whole));
    }
}
