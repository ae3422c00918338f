//! `simulate --disagg P:D`: a disaggregated deployment through the engine's simulator
//! (`engine::disagg`), printed with its pools, its transfers and the tandem model's
//! prediction beside the simulation (docs/model.md, "Disaggregated prefill and decode").

use super::SimulateArgs;
use crate::args::limits::Scope;
use crate::args::ArgError;
use crate::table::summary_table;
use anyhow::Context;
use engine::analytic::{predict_disagg, DisaggPrediction};
use engine::disagg::{simulate_disagg_with, DisaggConfig, DisaggReport, PoolReport};
use engine::fleet::RouterKind;
use serde::Serialize;

/// The validated configuration of `simulate --disagg` (None without it).
///
/// # Errors
/// As [`SimulateArgs::config`] and [`crate::args::DisaggArgs::resolve`]; an unknown
/// `--router`; `--dp-slo`.
pub fn config(a: &SimulateArgs) -> anyhow::Result<Option<DisaggConfig>> {
    let base = a.config()?;
    let Some(d) = a.disagg.resolve(&base.cost)? else {
        return Ok(None);
    };
    if a.dp_slo.is_some() {
        return Err(ArgError::Conflict(
            "--dp-slo is a one-server threshold: it does not apply to --disagg".into(),
        )
        .into());
    }
    let router = match a.fleet.router.as_deref() {
        None => RouterKind::RoundRobin,
        Some(r) => RouterKind::parse(r)
            .ok_or_else(|| ArgError::range("--router", "a router name (see --help)", r))?,
    };
    let mut cfg = DisaggConfig::uniform(base, d.prefill, d.decode, router, d.link, d.first_token);
    for r in &mut cfg.decode.replicas {
        if let Some(b) = a.disagg.decode_batch {
            r.server.max_batch = b;
        }
        if let Some(k) = a.disagg.decode_kv {
            r.server.kv_tokens = k;
        }
    }
    Ok(Some(cfg))
}

#[derive(Serialize)]
struct Json<'a> {
    prefill_replicas: usize,
    decode_replicas: usize,
    router: String,
    first_token: &'static str,
    link_gbps: f64,
    link_latency_ms: f64,
    summary: &'a engine::metrics::Summary,
    prefill: &'a PoolReport,
    decode: &'a PoolReport,
    transfer: &'a engine::metrics::TransferSummary,
    model: Option<&'a DisaggPrediction>,
}

pub fn execute(a: SimulateArgs) -> anyhow::Result<()> {
    let cfg = config(&a)?.expect("--disagg was given");
    let t = std::time::Instant::now();
    let mut run_cfg = cfg.clone();
    run_cfg.base.keep_records = a.records.is_some();
    let rep =
        simulate_disagg_with(&run_cfg, &a.model.work_limits(Scope::Run)).context("--disagg")?;
    let took = t.elapsed().as_secs_f64();
    let model = predict_disagg(&cfg);
    if let Some(path) = &a.records {
        crate::table::write_records(path, &rep.records)?;
    }
    if a.json {
        let j = Json {
            prefill_replicas: cfg.prefill.replicas.len(),
            decode_replicas: cfg.decode.replicas.len(),
            router: cfg.prefill.router.name(),
            first_token: cfg.first_token.name(),
            link_gbps: cfg.link.bandwidth_bytes_per_s * 8.0 / 1e9,
            link_latency_ms: cfg.link.latency_s * 1e3,
            summary: &rep.summary,
            prefill: &rep.prefill,
            decode: &rep.decode,
            transfer: &rep.transfer,
            model: model.as_ref().ok(),
        };
        println!("{}", serde_json::to_string_pretty(&j)?);
    } else {
        print!("{}", summary_table(&rep.summary));
        print!("{}", pools_table(&cfg, &rep));
        match &model {
            Ok(m) => println!("{}", model_line(m)),
            Err(e) => println!("tandem model: {e}"),
        }
    }
    eprintln!(
        "simulated {} requests on {} prefill + {} decode replicas ({}, first token from the {} pool) in {:.1} ms",
        rep.summary.arrivals,
        cfg.prefill.replicas.len(),
        cfg.decode.replicas.len(),
        cfg.prefill.router.name(),
        cfg.first_token.name(),
        took * 1e3
    );
    if rep.unstable {
        eprintln!("warning: a pool's drained run stopped at its cap: the deployment is overloaded");
    }
    Ok(())
}

/// The pools and the transfers, as a table.
pub fn pools_table(cfg: &DisaggConfig, rep: &DisaggReport) -> String {
    let mut out = String::from(
        "pool     replicas  utilisation  in pool (L)  sojourn [ms]  KV peak / capacity [tokens]\n",
    );
    for (name, n, p) in [
        ("prefill", cfg.prefill.replicas.len(), &rep.prefill),
        ("decode", cfg.decode.replicas.len(), &rep.decode),
    ] {
        let peak = p
            .replicas
            .iter()
            .map(|r| r.kv_peak_tokens)
            .max()
            .unwrap_or(0);
        let cap = p
            .replicas
            .iter()
            .map(|r| r.kv_capacity_tokens)
            .max()
            .unwrap_or(0);
        out += &format!(
            "{name:<8} {n:>8}  {:>11.3}  {:>11.2}  {:>12.1}  {peak} / {cap}\n",
            p.utilisation,
            p.time_avg_in_system,
            p.mean_sojourn_s * 1e3
        );
    }
    let t = &rep.transfer;
    let ms = |x: Option<f64>| x.map_or("-".into(), |v| format!("{:.2}", v * 1e3));
    out += &format!(
        "transfers {}  time mean {} ms  p99 {} ms  link wait mean {} ms  KV per request {} MB\n",
        t.transfers,
        ms(t.time.mean),
        ms(t.time.p99),
        ms(t.wait.mean),
        t.mean_bytes
            .map_or("-".into(), |b| format!("{:.2}", b / 1e6))
    );
    out
}

fn model_line(m: &DisaggPrediction) -> String {
    match m.overall.metrics() {
        Some(p) => format!(
            "tandem model: TTFT mean {:.1} ms  p99 {:.1} ms  TPOT mean {:.2} ms  transfer mean {:.2} ms  decode pool ρ {:.3}",
            p.ttft_mean_s * 1e3,
            p.ttft_p99_s * 1e3,
            p.tpot_mean_s * 1e3,
            m.transfer_mean_s * 1e3,
            m.decode.rho
        ),
        None => format!("tandem model: {}", m.overall),
    }
}
