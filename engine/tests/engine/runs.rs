//! What a run reports beyond its records: which other (B, K) it stands for, and its
//! time series.

use super::*;

/// A run that [`run_also_holds_for`] says stands for another (B, K) must be that run, record
/// for record, over every policy × KV mode × end rule × cost; and the rule must actually
/// apply where it should (reserve mode, B or K not binding), or a sweep would reuse nothing.
#[test]
fn a_run_stands_for_another_width_or_kv_only_when_it_is_identical() {
    use engine::sim::run_also_holds_for;
    let context_cost = context_linear_cost();
    let widths = [1, 2, 3, 4, 8, 16];
    let kvs = [1000, 2048, 4096, 8192, 65536];
    let mut held_elsewhere = Vec::new();
    for policy in Policy::ALL {
        let mut held = 0;
        for kv in [KvMode::Reserve, KvMode::Paged] {
            for cut in [false, true] {
                for (cost_name, cost) in [
                    ("default", CostModel::default()),
                    ("context", context_cost.clone()),
                ] {
                    for rate in [1.5, 6.0] {
                        let mut cfg = base(policy, kv, LengthDist::sharegpt(), rate);
                        cfg.horizon_s = 60.0;
                        cfg.cost = cost.clone();
                        if cut {
                            cfg.end = EndRule::Cut;
                            cfg.first_token = FirstToken::AfterFirstDecode;
                        }
                        if rate > 2.0 && cost_name == "context" {
                            cfg.server.admission = Admission::MaxInSystem { max_in_system: 10 };
                        }
                        let mut runs = Vec::new();
                        for &b in &widths {
                            for &k in &kvs {
                                let mut c = cfg.clone();
                                c.server.max_batch = b;
                                c.server.kv_tokens = k;
                                let rep = simulate(&c).unwrap();
                                runs.push((c, digest(&rep.records), rep));
                            }
                        }
                        for (a, da, ra) in &runs {
                            for (b, db, rb) in &runs {
                                let (wb, kb) = (b.server.max_batch, b.server.kv_tokens);
                                if !run_also_holds_for(&a.server, &ra.stats, wb, kb) {
                                    continue;
                                }
                                let label = format!(
                                    "{policy:?}/{kv:?}/cut={cut}/{cost_name}/λ={rate}: \
                                     B {} K {} stands for B {wb} K {kb}",
                                    a.server.max_batch, a.server.kv_tokens
                                );
                                assert_eq!(da, db, "{label}: records differ");
                                assert_eq!(ra.summary, rb.summary, "{label}");
                                assert_eq!(ra.timeseries, rb.timeseries, "{label}");
                                if a.server.max_batch != wb || a.server.kv_tokens != kb {
                                    assert_eq!(kv, KvMode::Reserve, "{label}: reserve mode only");
                                    assert_ne!(policy, Policy::LlamaCpp, "{label}");
                                    held += 1;
                                }
                            }
                        }
                    }
                }
            }
        }
        held_elsewhere.push((policy, held));
    }
    // Light runs (λ 1.5, a large K or B) stand for others under every policy it covers.
    for (policy, held) in held_elsewhere {
        assert_eq!(
            held > 20,
            policy != Policy::LlamaCpp,
            "{policy:?}: a run stood for another (B, K) {held} times"
        );
    }
}

/// The time series is the state at regular instants `i · horizon / points`: here checked
/// against the state rebuilt from the records (reserve mode, no preemption: a request
/// waits from its arrival until it is admitted, runs until it finishes, and holds its
/// reservation all that time). Long decode runs with no event inside must not skip
/// instants (B 16 at a low rate has runs of many instants).
#[test]
fn the_time_series_is_the_state_at_every_sampling_instant() {
    for (rate, b, kv, cut) in [
        (3.0, 4, 8192, false),
        (0.5, 16, 65536, false),
        (6.0, 8, 4096, true),
    ] {
        let mut cfg = SimConfig::reference(rate, b, kv);
        cfg.horizon_s = 200.0;
        cfg.keep_records = true;
        cfg.timeseries_points = 1000;
        if !cut {
            cfg.end = EndRule::Drain;
        }
        let label = format!("λ {rate} B {b} K {kv} cut {cut}");
        let r = simulate(&cfg).unwrap();
        let every = cfg.horizon_s / 1000.0;
        let end = r.stats.end_s;
        assert_eq!(
            r.timeseries.len(),
            (end / every).floor() as usize + 1,
            "{label}"
        );
        let accepted: Vec<_> = r
            .records
            .iter()
            .filter(|x| x.outcome != Outcome::Rejected)
            .collect();
        for (i, p) in r.timeseries.iter().enumerate() {
            let at = p.t_s;
            assert_eq!(at, i as f64 * every, "{label}: instant {i}");
            let waiting = accepted
                .iter()
                .filter(|x| x.arrival_s <= at && x.admitted_s.is_none_or(|a| a > at))
                .count();
            let running: Vec<_> = accepted
                .iter()
                .filter(|x| {
                    x.admitted_s.is_some_and(|a| a <= at) && x.finish_s.is_none_or(|f| f > at)
                })
                .collect();
            assert_eq!(p.waiting as usize, waiting, "{label}: waiting at {at}");
            assert_eq!(
                p.running as usize,
                running.len(),
                "{label}: running at {at}"
            );
            if !cut {
                // Completed requests generated their whole output: prompt + output is the
                // reservation they held from arrival to finish.
                let kv_used: u64 = accepted
                    .iter()
                    .filter(|x| x.arrival_s <= at && x.finish_s.is_some_and(|f| f > at))
                    .map(|x| x.prompt_tokens as u64 + x.output_tokens as u64)
                    .sum();
                assert_eq!(p.kv_used_tokens, kv_used, "{label}: KV at {at}");
            }
        }
    }
}
