//! How often a router sends a request to a replica whose previous request has not yet had
//! its first token (docs/accuracy.md, Fleets): the joiners whose prefills lengthen a
//! TTFT. For each router, replica count and load of the fleet grid's reference server
//! (B 8, K 8192, reserve), over seeds 0–39 of 50 s:
//!
//! - `ttft`: the mean TTFT of the completed requests [s];
//! - `joined`: the share of them that another request reached on the same replica
//!   before their first token;
//! - `next`: the share of arrivals whose next fleet arrival went to the same replica.
//!
//! ```text
//! cargo run --release -p engine --example fleet_joiners -- [N,N,...] [LOAD,LOAD,...] [ROUTER,...]
//! ```

use engine::analytic::capacity_bounds;
use engine::config::SimConfig;
use engine::fleet::{simulate_fleet, FleetConfig, RouterKind};

fn list<T: std::str::FromStr>(arg: Option<&String>, default: &str) -> Vec<T> {
    arg.map_or(default, String::as_str)
        .split(',')
        .map(|x| x.parse().ok().expect("a comma-separated list"))
        .collect()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let ns: Vec<u32> = list(args.first(), "2,8,64");
    let loads: Vec<f64> = list(args.get(1), "0.3,0.6");
    let routers: Vec<String> = list(args.get(2), "lor,jsq,random");
    let base = SimConfig::reference(1.0, 8, 8192);
    let cap = capacity_bounds(&base).expect("capacity").max_rps();
    for name in &routers {
        let kind = RouterKind::parse(name).expect("a router name");
        for &n in &ns {
            for &load in &loads {
                let (mut done, mut ttft, mut joined, mut next, mut pairs) =
                    (0.0, 0.0, 0.0, 0.0, 0.0);
                for seed in 0..40 {
                    let mut one = base.clone();
                    one.workload = one.workload.with_rate(load * cap * f64::from(n));
                    one.horizon_s = 50.0;
                    one.seed = seed;
                    one.keep_records = true;
                    let rep = simulate_fleet(&FleetConfig::uniform(one, n, kind)).expect("valid");
                    let to = &rep.routed_to;
                    pairs += to.len().saturating_sub(1) as f64;
                    next += to.windows(2).filter(|w| w[0] == w[1]).count() as f64;
                    // Each replica's arrivals in order: (arrival, first token).
                    let mut by_id = vec![(f64::NAN, None); to.len()];
                    for r in &rep.records {
                        by_id[r.id as usize] = (r.arrival_s, r.first_token_s);
                    }
                    let mut per = vec![Vec::new(); n as usize];
                    for (id, &i) in to.iter().enumerate() {
                        per[i as usize].push(by_id[id]);
                    }
                    for arrivals in &per {
                        for (k, &(a, first)) in arrivals.iter().enumerate() {
                            let Some(first) = first else { continue };
                            done += 1.0;
                            ttft += first - a;
                            if arrivals.get(k + 1).is_some_and(|&(b, _)| b < first) {
                                joined += 1.0;
                            }
                        }
                    }
                }
                println!(
                    "{name:>7} N={n:<3} load={load:<4} ttft={:.4} joined={:.3} next={:.3}",
                    ttft / done,
                    joined / done,
                    next / pairs
                );
            }
        }
    }
}
