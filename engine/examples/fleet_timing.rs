//! Times one run of the fleet benchmark's configuration (docs/performance.md, Fleets) and
//! prints digests of its outcome, so two builds can be compared for speed and for
//! identical results:
//!
//! ```text
//! cargo run --release -p engine --example fleet_timing -- [ROUTER|one] [HOURS] [paged|reference] [records]
//! ```
//!
//! `ROUTER` is any `--router` name (`rr`, `random`, `lor`, `p2c`, `jsq`, `kv`); `one` runs
//! one replica on the same requests (its share of the rate over 64 × HOURS). `paged` gives
//! the replicas paged KV (16-token blocks); `reference` runs the reference cost instead of
//! the A10G table. `records` keeps every record and prints their digest.

use engine::config::{KvMode, SimConfig};
use engine::cost::{CostModel, TableCost};
use engine::fleet::{simulate_fleet, FleetConfig, RouterKind};
use engine::sim::{digest, simulate};

/// FNV-1a over bytes.
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let router = args.first().map_or("rr", String::as_str);
    let hours: f64 = args.get(1).and_then(|h| h.parse().ok()).unwrap_or(1.0);
    let paged = args.iter().any(|a| a == "paged");
    let reference = args.iter().any(|a| a == "reference");
    let records = args.iter().any(|a| a == "records");
    const N: u32 = 64;
    const RATE: f64 = 1000.0;
    let mut one = SimConfig::reference(RATE / f64::from(N), 128, 1 << 20);
    if !reference {
        one.cost = CostModel::Table(TableCost::a10g_qwen_1_5b());
    }
    if paged {
        one.server.kv_mode = KvMode::Paged;
        one.server.block_size = 16;
    }
    one.horizon_s = 3600.0 * hours;
    one.keep_records = records;
    let t = std::time::Instant::now();
    let (arrivals, summary, rec) = if router == "one" {
        one.horizon_s *= f64::from(N);
        let r = simulate(&one).expect("valid");
        let s = serde_json::to_string(&(&r.summary, &r.stats)).expect("json");
        (r.stats.arrivals, s, digest(&r.records))
    } else {
        let kind = RouterKind::parse(router).expect("a router name");
        let base = SimConfig {
            workload: one.workload.clone().with_rate(RATE),
            ..one.clone()
        };
        let cfg = FleetConfig::uniform(base, N, kind);
        let r = simulate_fleet(&cfg).expect("valid");
        let rec = digest(&r.records) ^ fnv(format!("{:?}", r.routed_to).as_bytes());
        let s =
            serde_json::to_string(&(&r.summary, &r.replicas, r.imbalance, r.end_s)).expect("json");
        (r.summary.arrivals, s, rec)
    };
    let el = t.elapsed().as_secs_f64();
    println!(
        "{router}: {arrivals} requests in {:.3} s ({:.2} M req/s); summary {:016x}{}",
        el,
        arrivals as f64 / el / 1e6,
        fnv(summary.as_bytes()),
        if records {
            format!(" records {rec:016x}")
        } else {
            String::new()
        }
    );
}
