//! Prefill/decode disaggregation: a prefill pool and a decode pool, each of its own
//! replicas behind its own router, with the KV of every prompt sent from one to the other
//! over a link (docs/model.md, "Disaggregated prefill and decode").
//!
//! * **Prefill pool**: a fleet ([`crate::fleet`]) of servers that run each request's
//!   prefill only: the request leaves when its prefill ends (its first token, computed
//!   there).
//! * **Transfer**: each prefill replica sends the KV of the requests it prefilled, in the
//!   order their prefills end, over its own link: `bytes = layers × 2 × KV heads × head
//!   dim × dtype bytes × prompt tokens` ([`KvGeometry`]), taking `bytes / bandwidth` on the
//!   link (one transfer at a time) and then `latency`.
//! * **Decode pool**: paged servers that admit a request once its KV has arrived and fits,
//!   decode it to its last token and preempt as paged mode does.
//! * **First token** ([`FirstTokenFrom`]): where the user sees it — from the prefill pool
//!   (the transfer then delays the second token) or from the decode pool's first
//!   iteration for the request (a proxy forwarding the decode instance's stream).
//!
//! The prefill pool does not wait for the decode pool (a prefill replica frees its KV when
//! the prefill ends), so the three stages run one after the other on the whole stream.
//!
//! ```
//! use engine::disagg::{simulate_disagg, DisaggConfig, FirstTokenFrom, Link, KvGeometry};
//! use engine::fleet::RouterKind;
//! let mut one = engine::SimConfig::vllm_like(4.0);
//! one.horizon_s = 60.0;
//! let link = Link { bandwidth_bytes_per_s: 10e9, latency_s: 1e-3,
//!                   geometry: KvGeometry::of_model("Qwen2.5-1.5B").unwrap() };
//! let cfg = DisaggConfig::uniform(one, 1, 2, RouterKind::LeastOutstanding, link,
//!                                 FirstTokenFrom::Prefill);
//! let rep = simulate_disagg(&cfg).unwrap();
//! assert_eq!(rep.summary.completed, rep.summary.arrivals);
//! assert!(rep.transfer.time.mean.unwrap() > 1e-3);
//! ```

mod decode;

use crate::config::{EndRule, FirstToken, KvMode, SimConfig};
use crate::cost::roofline::ModelSpec;
use crate::cost::CostModel;
use crate::error::ConfigError;
use crate::fleet::{simulate_fleet_requests, Client, FleetConfig, Replica, RouterKind};
use crate::limits::Limits;
use crate::metrics::{
    pool_utilisation, Accumulator, Summary, TransferAccumulator, TransferSummary,
};
use crate::record::{Outcome, RequestRecord};
use crate::workload::Request;
use decode::{Arrival, DecodeServer};
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// The model's KV geometry: what one token's KV weighs.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct KvGeometry {
    pub layers: u32,
    pub kv_heads: u32,
    pub head_dim: u32,
    /// Bytes per KV element (2 for bf16).
    pub dtype_bytes: f64,
}

impl KvGeometry {
    /// The geometry of a roofline model preset (`Qwen2.5-1.5B`, `Llama-3.1-8B`…, bf16).
    pub fn of_model(name: &str) -> Option<KvGeometry> {
        ModelSpec::by_name(name).map(|m| KvGeometry {
            layers: m.layers,
            kv_heads: m.kv_heads,
            head_dim: m.head_dim,
            dtype_bytes: 2.0,
        })
    }

    /// The geometry a roofline cost model holds (all its KV heads, whatever its TP).
    pub fn of_cost(cost: &CostModel) -> Option<KvGeometry> {
        match cost {
            CostModel::Roofline(r) => Some(KvGeometry {
                layers: r.layers,
                kv_heads: r.kv_heads,
                head_dim: r.head_dim,
                dtype_bytes: r.kv_bytes_per_elem,
            }),
            _ => None,
        }
    }

    /// `layers × 2 × KV heads × head dim × dtype bytes` [B/token].
    pub fn bytes_per_token(&self) -> f64 {
        f64::from(self.layers)
            * 2.0
            * f64::from(self.kv_heads)
            * f64::from(self.head_dim)
            * self.dtype_bytes
    }
}

/// The link from each prefill replica to the decode pool.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Link {
    /// Bytes per second, > 0 (`f64::INFINITY`: the bytes take no time).
    pub bandwidth_bytes_per_s: f64,
    /// Added to every transfer [s], ≥ 0.
    pub latency_s: f64,
    pub geometry: KvGeometry,
}

impl Link {
    /// KV bytes of `tokens` tokens [B].
    pub fn bytes(&self, tokens: u32) -> f64 {
        self.geometry.bytes_per_token() * f64::from(tokens)
    }

    /// Time the link is busy with `bytes` [s] (0 at infinite bandwidth).
    pub fn serialisation_s(&self, bytes: f64) -> f64 {
        if self.bandwidth_bytes_per_s.is_infinite() {
            0.0
        } else {
            bytes / self.bandwidth_bytes_per_s
        }
    }
}

/// Where the user's first token comes from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FirstTokenFrom {
    /// The prefill pool, at the end of the prefill; the decode pool emits the rest, so
    /// the transfer delays the second token (DistServe).
    Prefill,
    /// The decode pool, at the end of its first iteration for the request after the
    /// transfer; it emits every token (vLLM's disaggregated proxy, Dynamo, SGLang).
    #[default]
    Decode,
}

impl FirstTokenFrom {
    pub fn name(self) -> &'static str {
        match self {
            FirstTokenFrom::Prefill => "prefill",
            FirstTokenFrom::Decode => "decode",
        }
    }

    pub fn parse(s: &str) -> Option<FirstTokenFrom> {
        match s.trim().to_ascii_lowercase().as_str() {
            "prefill" => Some(FirstTokenFrom::Prefill),
            "decode" => Some(FirstTokenFrom::Decode),
            _ => None,
        }
    }
}

/// One pool: its replicas and its router.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Pool {
    pub replicas: Vec<Replica>,
    pub router: RouterKind,
}

/// A disaggregated deployment and the run's settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DisaggConfig {
    /// The workload, horizon, seed, metrics and outputs of the whole run (drained). Its
    /// server, cost and first-token convention are not used.
    pub base: SimConfig,
    pub prefill: Pool,
    pub decode: Pool,
    pub link: Link,
    pub first_token: FirstTokenFrom,
}

/// A disaggregated configuration that cannot run; each variant names what to change.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum DisaggError {
    /// A pool's own configuration (or the workload's, checked with it).
    #[error("{pool} pool: {source}")]
    Pool {
        pool: &'static str,
        source: ConfigError,
    },
    #[error("link bandwidth must be > 0 bytes/s (infinite is allowed), got {0}")]
    Bandwidth(f64),
    #[error("link latency must be a finite number of seconds >= 0, got {0}")]
    Latency(f64),
    #[error("KV geometry: layers, KV heads and head dim must be >= 1 and dtype bytes a finite number > 0")]
    Geometry,
    #[error(
        "decode pool: replica {0} is not paged (its KV grows as it decodes); use --kv-mode paged"
    )]
    DecodeNotPaged(usize),
    #[error("a disaggregated run is drained (its requests run to their end); use --drain")]
    Cut,
    #[error("{0}")]
    Config(#[from] ConfigError),
}

impl DisaggConfig {
    /// `p` prefill and `d` decode replicas, each with `base`'s server and cost, one
    /// router for both pools.
    pub fn uniform(
        base: SimConfig,
        p: u32,
        d: u32,
        router: RouterKind,
        link: Link,
        first_token: FirstTokenFrom,
    ) -> DisaggConfig {
        let one = Replica {
            server: base.server.clone(),
            cost: base.cost.clone(),
        };
        DisaggConfig {
            prefill: Pool {
                replicas: vec![one.clone(); p as usize],
                router,
            },
            decode: Pool {
                replicas: vec![one; d as usize],
                router,
            },
            base,
            link,
            first_token,
        }
    }

    /// The prefill pool as a fleet of the run's workload.
    pub fn prefill_fleet(&self) -> FleetConfig {
        FleetConfig {
            base: SimConfig {
                first_token: FirstToken::AfterPrefill,
                keep_records: true,
                timeseries_points: 0,
                ..self.base.clone()
            },
            replicas: self.prefill.replicas.clone(),
            router: self.prefill.router,
            client: Client::Open,
        }
    }

    /// The decode pool as a fleet of the run's workload (for its checks and its models).
    pub fn decode_fleet(&self) -> FleetConfig {
        FleetConfig {
            base: SimConfig {
                timeseries_points: 0,
                ..self.base.clone()
            },
            replicas: self.decode.replicas.clone(),
            router: self.decode.router,
            client: Client::Open,
        }
    }

    /// Checks the configuration within `limits`.
    ///
    /// # Errors
    /// A pool of no replicas or any pool's error (named by pool), a bandwidth ≤ 0 or NaN,
    /// a negative or non-finite latency, a bad geometry, a decode replica that is not
    /// paged, a run cut at its horizon.
    pub fn validate_with(&self, limits: &Limits) -> Result<(), DisaggError> {
        let bw = self.link.bandwidth_bytes_per_s;
        if bw.is_nan() || bw <= 0.0 {
            return Err(DisaggError::Bandwidth(bw));
        }
        let lat = self.link.latency_s;
        if !(lat.is_finite() && lat >= 0.0) {
            return Err(DisaggError::Latency(lat));
        }
        let g = &self.link.geometry;
        if g.layers == 0
            || g.kv_heads == 0
            || g.head_dim == 0
            || !(g.dtype_bytes.is_finite() && g.dtype_bytes > 0.0)
        {
            return Err(DisaggError::Geometry);
        }
        if self.base.end == EndRule::Cut {
            return Err(DisaggError::Cut);
        }
        let pool = |pool: &'static str| move |source| DisaggError::Pool { pool, source };
        self.prefill_fleet()
            .validate_with(limits)
            .map_err(pool("prefill"))?;
        self.decode_fleet()
            .validate_with(limits)
            .map_err(pool("decode"))?;
        if let Some(i) = self
            .decode
            .replicas
            .iter()
            .position(|r| r.server.kv_mode != KvMode::Paged)
        {
            return Err(DisaggError::DecodeNotPaged(i));
        }
        Ok(())
    }
}

/// One request's way from the prefill pool to the decode pool.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Handoff {
    pub id: u64,
    pub prefill_replica: u32,
    /// End of its prefill [s].
    pub prefill_done_s: f64,
    /// KV bytes moved [B].
    pub bytes: f64,
    /// When its link started sending it, and when its KV reached the decode pool [s].
    pub transfer_start_s: f64,
    pub transfer_end_s: f64,
    pub decode_replica: u32,
    /// When the decode pool first admitted it [s] (None: it never was).
    pub decode_admitted_s: Option<f64>,
}

/// One pool's replica in a run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PoolReplica {
    /// Busy time over the run's end.
    pub utilisation: f64,
    /// Requests its router sent it.
    pub routed: u64,
    /// Highest KV use and capacity [tokens].
    pub kv_peak_tokens: u64,
    pub kv_capacity_tokens: u64,
}

/// One pool's share of a run. Little's law holds per pool: `time_avg_in_system =
/// departed / end_s × mean_sojourn_s`, each request counted from its entry to the pool
/// (the prefill pool: its arrival plus the front end's overhead; the decode pool: the
/// end of its transfer) to its departure from it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PoolReport {
    pub replicas: Vec<PoolReplica>,
    /// The replicas' mean utilisation.
    pub utilisation: f64,
    pub time_avg_in_system: f64,
    pub departed: u64,
    pub mean_sojourn_s: f64,
}

/// What a disaggregated run returns.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DisaggReport {
    /// Over every request, as the user sees it.
    pub summary: Summary,
    pub prefill: PoolReport,
    pub decode: PoolReport,
    pub transfer: TransferSummary,
    /// Every request's record and handoff in id order, when `keep_records` was set
    /// (requests that never reached the decode pool have no handoff).
    pub records: Vec<RequestRecord>,
    pub handoffs: Vec<Handoff>,
    pub end_s: f64,
    /// A pool's drained run stopped at its cap.
    pub unstable: bool,
}

/// Simulates a disaggregated deployment, within the default [`Limits`].
///
/// # Errors
/// As [`DisaggConfig::validate_with`].
pub fn simulate_disagg(cfg: &DisaggConfig) -> Result<DisaggReport, DisaggError> {
    simulate_disagg_with(cfg, &Limits::default())
}

/// [`simulate_disagg`] within other work limits.
///
/// # Errors
/// As [`DisaggConfig::validate_with`].
pub fn simulate_disagg_with(
    cfg: &DisaggConfig,
    limits: &Limits,
) -> Result<DisaggReport, DisaggError> {
    cfg.validate_with(limits)?;
    let stream = cfg
        .base
        .workload
        .stream(cfg.base.seed, cfg.base.horizon_s)?;
    Ok(run(cfg, stream.collect(), limits.max_drain_horizons))
}

/// Simulates a disaggregated deployment on an explicit request sequence (sorted by
/// arrival; their ids become 0, 1, 2… in this order); `cfg` must be valid
/// ([`DisaggConfig::validate_with`]). The workload in `cfg` is ignored.
pub fn simulate_disagg_requests(cfg: &DisaggConfig, mut requests: Vec<Request>) -> DisaggReport {
    for (i, r) in requests.iter_mut().enumerate() {
        r.id = i as u64;
    }
    run(cfg, requests, Limits::default().max_drain_horizons)
}

fn run(cfg: &DisaggConfig, requests: Vec<Request>, drain_horizons: f64) -> DisaggReport {
    // 1. The prefill pool: every request with one output token, the first.
    let pf = cfg.prefill_fleet();
    let prefill =
        simulate_fleet_requests(&pf, requests.iter().map(|r| Request { output: 1, ..*r }));
    // Requests by id (ids follow arrival order from 0).
    let first = requests.first().map_or(0, |r| r.id);
    let by_id = |id: u64| &requests[(id - first) as usize];

    // 2. The links, in the order prefills end.
    let mut done: Vec<usize> = (0..prefill.records.len())
        .filter(|&i| prefill.records[i].outcome == Outcome::Completed)
        .collect();
    let done_at = |i: usize| prefill.records[i].finish_s.unwrap_or(f64::INFINITY);
    done.sort_by(|&a, &b| done_at(a).total_cmp(&done_at(b)).then(a.cmp(&b)));
    let mut link_free = vec![0.0f64; cfg.prefill.replicas.len()];
    let mut finals: Vec<RequestRecord> = Vec::with_capacity(prefill.records.len());
    let mut handoffs: Vec<Handoff> = Vec::new();
    let mut arrivals: Vec<Arrival> = Vec::new();
    for r in prefill
        .records
        .iter()
        .filter(|r| r.outcome != Outcome::Completed)
    {
        finals.push(RequestRecord {
            output_tokens: 0,
            first_token_s: None,
            ..r.clone()
        });
    }
    for i in done {
        let rec = &prefill.records[i];
        let req = by_id(rec.id);
        let mut out = RequestRecord {
            output_tokens: 1,
            ..rec.clone()
        };
        if cfg.first_token == FirstTokenFrom::Prefill && req.output == 1 {
            finals.push(out);
            continue;
        }
        if cfg.first_token == FirstTokenFrom::Decode {
            out.output_tokens = 0;
            out.first_token_s = None;
            out.finish_s = None;
        }
        let replica = prefill.routed_to[(rec.id - first) as usize];
        let t_done = done_at(i);
        let bytes = cfg.link.bytes(req.prompt);
        let start = t_done.max(link_free[replica as usize]);
        let sent = start + cfg.link.serialisation_s(bytes);
        link_free[replica as usize] = sent;
        let at = sent + cfg.link.latency_s;
        handoffs.push(Handoff {
            id: rec.id,
            prefill_replica: replica,
            prefill_done_s: t_done,
            bytes,
            transfer_start_s: start,
            transfer_end_s: at,
            decode_replica: 0,
            decode_admitted_s: None,
        });
        arrivals.push(Arrival {
            record: out,
            at_s: at,
            output: req.output,
        });
    }

    // 3. The decode pool, in the order the KV arrives.
    let mut order: Vec<usize> = (0..arrivals.len()).collect();
    order.sort_by(|&a, &b| {
        arrivals[a]
            .at_s
            .total_cmp(&arrivals[b].at_s)
            .then(arrivals[a].record.id.cmp(&arrivals[b].record.id))
    });
    let cap_s = cfg.base.horizon_s * (1.0 + drain_horizons);
    let mut servers: Vec<DecodeServer> = cfg
        .decode
        .replicas
        .iter()
        .map(|r| {
            DecodeServer::new(
                &r.server,
                &r.cost,
                cfg.base.metrics.stall_threshold_s,
                cap_s,
            )
        })
        .collect();
    let mut router = cfg.decode.router.build(cfg.base.seed);
    let n = servers.len();
    let mut routed = vec![0u64; n];
    for k in order {
        let a = &arrivals[k];
        let t = a.at_s;
        let req = by_id(a.record.id);
        let as_seen = Request {
            id: req.id,
            arrival: t,
            prompt: req.prompt,
            output: a.output - a.record.output_tokens,
            ..*req
        };
        let i = if n == 1 {
            0
        } else {
            router.pick(&as_seen, n, &mut |i| {
                servers[i].advance(t);
                servers[i].view()
            })
        };
        servers[i].advance(t);
        servers[i].push(a.clone());
        routed[i] += 1;
        handoffs[k].decode_replica = i as u32;
    }
    let finished: Vec<_> = servers.into_iter().map(DecodeServer::finish).collect();

    // 4. The report.
    let mut admitted = vec![None; requests.len()];
    for f in &finished {
        for &(id, t) in &f.admitted {
            admitted[(id - first) as usize] = Some(t);
        }
    }
    for h in &mut handoffs {
        h.decode_admitted_s = admitted[(h.id - first) as usize];
    }
    let end_prefill = prefill.end_s;
    let end_decode = finished.iter().map(|f| f.last_event_s).fold(0.0, f64::max);
    let end = end_prefill.max(end_decode);
    let window = (end - cfg.base.metrics.warmup_s).max(0.0);
    for f in &finished {
        finals.extend(f.records.iter().cloned());
    }
    finals.sort_by_key(|r| r.id);
    let mut acc = Accumulator::with_capacity(cfg.base.metrics.clone(), finals.len());
    for r in &finals {
        acc.push(r);
    }
    let mut tx = TransferAccumulator::new(cfg.base.metrics.warmup_s);
    for h in &handoffs {
        tx.push(
            by_id(h.id).arrival,
            h.prefill_done_s,
            h.transfer_start_s,
            h.transfer_end_s,
            h.bytes,
        );
    }
    handoffs.sort_by_key(|h| h.id);

    let busy: Vec<f64> = prefill.replicas.iter().map(|r| r.stats.busy_s).collect();
    let (mut area, mut dep, mut soj) = (0.0, 0, 0.0);
    for r in &prefill.replicas {
        area += r.stats.time_avg_in_system * r.stats.end_s;
        dep += r.stats.departed;
        soj += r.stats.sojourn_sum_s;
    }
    let prefill_report = PoolReport {
        replicas: prefill
            .replicas
            .iter()
            .map(|r| PoolReplica {
                utilisation: pool_utilisation(&[r.stats.busy_s], end),
                routed: r.routed,
                kv_peak_tokens: r.stats.kv_peak_tokens,
                kv_capacity_tokens: r.stats.kv_capacity_tokens,
            })
            .collect(),
        utilisation: pool_utilisation(&busy, end),
        time_avg_in_system: if end > 0.0 { area / end } else { 0.0 },
        departed: dep,
        mean_sojourn_s: if dep > 0 { soj / dep as f64 } else { 0.0 },
    };
    let busy: Vec<f64> = finished.iter().map(|f| f.busy_s).collect();
    let area: f64 = finished.iter().map(|f| f.area).sum();
    let dep: u64 = finished.iter().map(|f| f.departed).sum();
    let soj: f64 = finished.iter().map(|f| f.sojourn_sum_s).sum();
    let decode_report = PoolReport {
        replicas: finished
            .iter()
            .zip(&routed)
            .map(|(f, &routed)| PoolReplica {
                utilisation: pool_utilisation(&[f.busy_s], end),
                routed,
                kv_peak_tokens: f.peak_blocks * f.block_size,
                kv_capacity_tokens: f.total_blocks * f.block_size,
            })
            .collect(),
        utilisation: pool_utilisation(&busy, end),
        time_avg_in_system: if end > 0.0 { area / end } else { 0.0 },
        departed: dep,
        mean_sojourn_s: if dep > 0 { soj / dep as f64 } else { 0.0 },
    };
    let keep = cfg.base.keep_records;
    DisaggReport {
        summary: acc.finish(window),
        prefill: prefill_report,
        decode: decode_report,
        transfer: tx.finish(),
        records: if keep { finals } else { Vec::new() },
        handoffs: if keep { handoffs } else { Vec::new() },
        end_s: end,
        unstable: prefill.unstable || finished.iter().any(|f| f.unstable),
    }
}
