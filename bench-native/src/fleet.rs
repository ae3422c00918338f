//! Fleet runs for `simulate --replicas/--fleet` and `sweep --replicas/--fleet`: the run,
//! the per-replica table and the sweep's fleet CSVs (docs/model.md, "Fleets").

use engine::fleet::{FleetConfig, FleetReport, ReplicaReport};
use engine::workload::Request;
use serde::Serialize;

/// A fleet run's JSON (`simulate --json`): the fleet-wide summary, the router, the
/// imbalance and each replica's share.
#[derive(Debug, Serialize)]
pub struct FleetJson<'a> {
    pub router: String,
    pub replicas: usize,
    pub imbalance: f64,
    pub summary: &'a engine::metrics::Summary,
    /// The replicas' prefix caches together, when on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefix_cache: Option<&'a engine::metrics::PrefixSummary>,
    pub per_replica: Vec<ReplicaJson<'a>>,
}

/// One replica in [`FleetJson`].
#[derive(Debug, Serialize)]
pub struct ReplicaJson<'a> {
    pub replica: usize,
    pub routed: u64,
    pub utilisation: f64,
    pub summary: &'a engine::metrics::Summary,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefix_cache: Option<&'a engine::metrics::PrefixSummary>,
}

impl<'a> FleetJson<'a> {
    pub fn new(cfg: &FleetConfig, rep: &'a FleetReport) -> FleetJson<'a> {
        FleetJson {
            router: cfg.router.name(),
            replicas: rep.replicas.len(),
            imbalance: rep.imbalance,
            summary: &rep.summary,
            prefix_cache: rep.prefix.as_ref(),
            per_replica: rep
                .replicas
                .iter()
                .enumerate()
                .map(|(i, r)| ReplicaJson {
                    replica: i,
                    routed: r.routed,
                    utilisation: r.utilisation,
                    summary: &r.summary,
                    prefix_cache: r.stats.prefix.as_ref(),
                })
                .collect(),
        }
    }
}

/// Runs `cfg` on `requests` (the caller has validated it).
pub fn run<I: Iterator<Item = Request>>(cfg: &FleetConfig, requests: I) -> FleetReport {
    engine::fleet::simulate_fleet_requests(cfg, requests)
}

fn ms(x: Option<f64>) -> String {
    x.map_or("-".to_string(), |v| format!("{:.1}", v * 1e3))
}

/// The per-replica table: requests routed, utilisation, mean and p99 TTFT; then the
/// imbalance and the router.
pub fn replica_table(cfg: &FleetConfig, rep: &FleetReport) -> String {
    let mut rows: Vec<Vec<String>> = vec![[
        "replica",
        "routed",
        "util",
        "TTFT mean",
        "TTFT p99",
        "TPOT mean",
    ]
    .map(String::from)
    .to_vec()];
    for (i, r) in rep.replicas.iter().enumerate() {
        rows.push(replica_row(i, r));
    }
    let mut out = crate::table::aligned(&rows);
    out += &format!(
        "router {} over {} replicas  imbalance {:.3} (time-averaged max / mean outstanding requests; 1 = even)\n",
        cfg.router.name(),
        rep.replicas.len(),
        rep.imbalance
    );
    out
}

fn replica_row(i: usize, r: &ReplicaReport) -> Vec<String> {
    vec![
        i.to_string(),
        r.routed.to_string(),
        format!("{:.3}", r.utilisation),
        ms(r.summary.ttft.mean),
        ms(r.summary.ttft.p99),
        ms(r.summary.tpot.mean),
    ]
}

/// The header of `sweep`'s `fleet_summary.csv`: one row per run.
pub const SUMMARY_COLUMNS: &str = "arrival_rate,max_batch_size,kv_budget,seed,router,replicas,\
arrivals,completed,rejected,ttft_mean_s,ttft_p99_s,tpot_mean_s,tpot_p99_s,e2e_mean_s,e2e_p99_s,\
throughput_rps,blocking_probability,imbalance,max_utilisation";

/// The header of `sweep`'s `fleet_replicas.csv`: one row per replica per run.
pub const REPLICA_COLUMNS: &str = "arrival_rate,max_batch_size,kv_budget,seed,replica,routed,\
utilisation,ttft_mean_s,ttft_p99_s,tpot_mean_s";

fn opt(x: Option<f64>) -> String {
    x.map_or(String::new(), |v| format!("{v:?}"))
}

/// One run's row of `fleet_summary.csv` (without a newline).
pub fn summary_row(cfg: &FleetConfig, rep: &FleetReport, point: (f64, u32, u64, u64)) -> String {
    let s = &rep.summary;
    let (rate, b, k, seed) = point;
    let umax = rep
        .replicas
        .iter()
        .map(|r| r.utilisation)
        .fold(0.0, f64::max);
    format!(
        "{rate:?},{b},{k},{seed},{},{},{},{},{},{},{},{},{},{},{},{:?},{:?},{:?},{:?}",
        cfg.router.name(),
        rep.replicas.len(),
        s.arrivals,
        s.completed,
        s.rejected,
        opt(s.ttft.mean),
        opt(s.ttft.p99),
        opt(s.tpot.mean),
        opt(s.tpot.p99),
        opt(s.e2e.mean),
        opt(s.e2e.p99),
        s.throughput_rps,
        s.blocking_probability,
        rep.imbalance,
        umax
    )
}

/// One run's rows of `fleet_replicas.csv`, each ending in a newline.
pub fn replica_rows(rep: &FleetReport, point: (f64, u32, u64, u64)) -> String {
    let (rate, b, k, seed) = point;
    let mut out = String::new();
    for (i, r) in rep.replicas.iter().enumerate() {
        out += &format!(
            "{rate:?},{b},{k},{seed},{i},{},{:?},{},{},{}\n",
            r.routed,
            r.utilisation,
            opt(r.summary.ttft.mean),
            opt(r.summary.ttft.p99),
            opt(r.summary.tpot.mean)
        );
    }
    out
}
