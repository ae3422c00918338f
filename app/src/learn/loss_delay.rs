//! Lesson 6, "Loss or delay": the same traffic offered to a server whose KV holds c
//! requests, once as a loss system (reserve KV: a request that does not fit is refused —
//! Erlang B) and once as a delay system (paged KV: it waits in a queue of a given room —
//! M/M/c/K, and Erlang C when the room is unlimited).
//!
//! Every request's KV fits one block here, so the KV holds exactly c requests whatever
//! their lengths; every iteration costs the same, so a request's service time is its
//! output length × the iteration time, whatever else runs (c independent servers).

use super::ci::{ms, pct2, Check};
use super::{fmt_num, mean_of, reading, series, sim, Control, LessonOutput};
use crate::chart::{Corner, XyPanel};
use crate::params::{Cost, Lengths, Params};
use engine::analytic::{erlang_b, Mmc, Mmck};
use engine::config::{KvMode, Policy};
use engine::metrics::Aggregate;
use engine::record::Outcome;
use engine::sim::SimReport;

pub(super) const TEXT: &str = "A server whose KV holds c requests is, to queueing theory, c servers. What happens to the next request when all c are busy decides which theory applies. A reserve server refuses it: a loss system, whose refusal probability is Erlang B — and Erlang B depends on the service time only through its mean, so it holds for any lengths. A paged server lets it wait: a delay system, which is M/M/c/K when the waiting room holds K − c and Erlang C when the room is unlimited. Here c = 8, every request fits one KV block and every iteration costs the same, so each request takes its output length × 2 ms, about 1 s on average, spread like an exponential (c_s² ≈ 1).";

pub(super) const TRY: &str = "At λ = 6 req/s (6 Erlangs on 8 servers) the reserve server refuses about one request in eight, while the paged server with unlimited room refuses none and makes the unlucky third wait a few hundred ms. Shrink the room to 1: the paged server refuses a few percent and waits less — between the two theories, as M/M/c/K says. Now push λ to 9, past the 8 req/s the servers can do: the loss system just refuses more, the unlimited queue grows without bound, and only a finite room keeps the wait finite.";

/// Slots c, the block that holds any one request [tokens], the iteration [s].
pub(super) const SLOTS: u32 = 8;
const BLOCK: u32 = 16384;
const ITERATION_S: f64 = 0.002;
/// Mean output [tokens] (mean service time = 1 s) and its lognormal σ (c_s² = 1).
const MEAN_OUTPUT: f64 = 500.0;
const SIGMA: f64 = 0.832_555;

const RATES: &[f64] = &[2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 7.5, 8.0, 9.0];
/// Waiting room K − c; 0 stands for unlimited.
const ROOMS: &[f64] = &[0.0, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0];

pub(super) const CONTROLS: &[Control] = &[
    Control {
        key: "rate",
        label: "arrival rate λ [req/s]",
        steps: RATES,
        default: 6.0,
    },
    Control {
        key: "room",
        label: "paged waiting room K − c (0 = unlimited)",
        steps: ROOMS,
        default: 0.0,
    },
];

/// Seeds behind each point of the chart, and behind the checks at the chosen setting.
const CURVE_SEEDS: u64 = 2;
const CHECK_SEEDS: u64 = 10;
const HORIZON_S: f64 = 1500.0;

/// Lesson 6's server in `mode` at `rate` (the paged queue's room is set on the engine's
/// configuration: the page's parameters have none).
pub(super) fn loss_delay_params(mode: KvMode, rate: f64) -> Params {
    Params {
        policy: Policy::Continuous,
        max_batch: 64,
        kv_mode: mode,
        kv_tokens: u64::from(SLOTS) * u64::from(BLOCK),
        block_size: BLOCK,
        lengths: Lengths::Lognormal,
        prompt_median: 32.0,
        prompt_sigma: 0.0,
        output_median: MEAN_OUTPUT / (SIGMA * SIGMA / 2.0).exp(),
        output_sigma: SIGMA,
        cost: Cost::Linear,
        beta0: ITERATION_S,
        beta_prefill: 0.0,
        beta_decode: 0.0,
        reference_rules: false,
        horizon_s: HORIZON_S,
        rate,
        ..Params::default()
    }
}

/// The engine configuration: [`loss_delay_params`] with the paged queue's room.
fn config(mode: KvMode, room: u32, rate: f64, seed: u64) -> engine::SimConfig {
    let mut cfg = loss_delay_params(mode, rate).sim_config(rate, seed);
    if mode == KvMode::Paged && room > 0 {
        cfg.server.queue_cap = Some(room);
    }
    cfg.keep_records = true;
    cfg
}

/// What one run shows: refused fraction, mean holding time (arrival → finish) and mean
/// wait (arrival → admitted) of the accepted [s].
fn measure(rep: &SimReport) -> (f64, Option<f64>, Option<f64>) {
    let done = || {
        rep.records
            .iter()
            .filter(|r| r.outcome == Outcome::Completed)
    };
    (
        rep.summary.blocking_probability,
        mean_of(done().filter_map(|r| r.finish_s.map(|f| f - r.arrival_s))),
        mean_of(done().filter_map(|r| r.admitted_s.map(|a| a - r.arrival_s))),
    )
}

/// Mean service time (admitted → finish) of the accepted [s].
fn service(rep: &SimReport) -> Option<f64> {
    mean_of(
        rep.records
            .iter()
            .filter(|r| r.outcome == Outcome::Completed)
            .filter_map(|r| Some(r.finish_s? - r.admitted_s?)),
    )
}

/// The models at `rate` with mean service `es` [s]: Erlang B refusal; the paged server's
/// refusal and mean wait (M/M/c/K for a finite room, Erlang C's M/M/c when unlimited;
/// None when unstable).
fn models(rate: f64, es: f64, room: u32) -> (Option<f64>, Option<(f64, f64)>) {
    let b = erlang_b(SLOTS, rate * es).ok();
    let delay = if room == 0 {
        Mmc::new(rate, 1.0 / es, SLOTS)
            .ok()
            .and_then(|m| m.mean_wait().ok())
            .map(|w| (0.0, w))
    } else {
        Mmck::new(rate, 1.0 / es, SLOTS, SLOTS + room)
            .ok()
            .and_then(|m| {
                let p = m.blocking();
                let w = m.mean_queue() / (rate * (1.0 - p));
                w.is_finite().then_some((p, w))
            })
    };
    (b, delay)
}

pub(super) fn run(rate: f64, room: f64) -> Result<LessonOutput, String> {
    let room = room as u32;
    let mut runs = 0;
    let room_name = if room == 0 {
        "unlimited".to_string()
    } else {
        room.to_string()
    };
    let (mut s_block, mut s_pblock, mut m_b, mut m_pblock) = (vec![], vec![], vec![], vec![]);
    let (mut s_wait, mut m_wait) = (vec![], vec![]);
    let mut chosen = None;
    for &r in RATES {
        let seeds = if r == rate { CHECK_SEEDS } else { CURVE_SEEDS };
        let mut res = Vec::new();
        let mut pag = Vec::new();
        for seed in 0..seeds {
            res.push(measure(&sim(
                &config(KvMode::Reserve, room, r, seed),
                &mut runs,
            )?));
            let rep = sim(&config(KvMode::Paged, room, r, seed), &mut runs)?;
            let m = measure(&rep);
            let unstable = rep.stats.unstable;
            pag.push((m.0, m.2, service(&rep), unstable));
        }
        let block = Aggregate::of(res.iter().map(|x| Some(x.0)));
        let hold = Aggregate::of(res.iter().map(|x| x.1));
        let pblock = Aggregate::of(pag.iter().map(|x| Some(x.0)));
        let wait = Aggregate::of(pag.iter().map(|x| x.1));
        let es = Aggregate::of(pag.iter().map(|x| x.2)).mean.unwrap_or(1.0);
        let unstable = pag.iter().any(|x| x.3);
        // Erlang B with the measured mean holding time (insensitivity: only the mean
        // counts); the queue's models with the measured mean service time.
        let b = models(r, hold.mean.unwrap_or(es), room).0;
        let delay_es = models(r, es, room).1;
        if let Some(b) = b {
            m_b.push((r, b));
        }
        if let Some(v) = block.mean {
            s_block.push((r, v));
        }
        if room > 0 {
            if let Some(v) = pblock.mean {
                s_pblock.push((r, v));
            }
            if let Some((p, _)) = delay_es {
                m_pblock.push((r, p));
            }
        }
        // A run that never drains has no finite mean wait to show.
        if !unstable {
            if let Some(v) = wait.mean {
                s_wait.push((r, v));
            }
        }
        if let Some((_, w)) = delay_es {
            m_wait.push((r, w));
        }
        if r == rate {
            chosen = Some((block, hold, pblock, wait, es, b, delay_es, unstable));
        }
    }
    let (block, hold, pblock, wait, es, b, delay, unstable) =
        chosen.ok_or_else(|| format!("λ = {rate} is not one of the lesson's steps"))?;
    let a = rate * hold.mean.unwrap_or(es);
    let mut readings = vec![
        reading(
            "offered load a = λ × mean holding time",
            format!("{a:.2} Erlangs on c = {SLOTS} servers"),
        ),
        reading(
            "reserve (loss): refused",
            format!(
                "{} simulated · {} Erlang B",
                block.mean.map(pct2).unwrap_or_default(),
                b.map(pct2).unwrap_or_else(|| "—".into())
            ),
        ),
        reading(
            format!("paged (delay, room {room_name}): refused"),
            format!(
                "{} simulated · {} {}",
                pblock.mean.map(pct2).unwrap_or_default(),
                delay.map(|d| pct2(d.0)).unwrap_or_else(|| "—".into()),
                if room == 0 {
                    "(nobody is refused)"
                } else {
                    "M/M/c/K"
                }
            ),
        ),
        reading(
            format!("paged (delay, room {room_name}): mean wait"),
            if unstable {
                "grows for as long as requests come: λ ≥ c × μ and the room is unlimited".into()
            } else {
                format!(
                    "{} simulated · {} {}",
                    wait.mean.map(ms).unwrap_or_default(),
                    delay.map(|d| ms(d.1)).unwrap_or_else(|| "unstable".into()),
                    if room == 0 { "Erlang C" } else { "M/M/c/K" }
                )
            },
        ),
        reading("mean service time (admitted → finish)", ms(es)),
    ];
    let mut checks = Vec::new();
    if let Some(b) = b {
        checks.push(Check {
            what: format!("refused by the reserve server at λ = {}", fmt_num(rate)),
            sim: block,
            formula: ("Erlang B".into(), b),
            fmt: pct2,
            why_not: None,
        });
    }
    let why = "Erlang C and M/M/c/K assume exponential service times; these lognormal outputs have the same mean and c_s² but not the same shape, and a request admitted between two iterations waits up to one more (2 ms)";
    match delay {
        Some((_, w)) if !unstable => checks.push(Check {
            what: format!("mean wait at the paged server (room {room_name})"),
            sim: wait,
            formula: (if room == 0 { "Erlang C" } else { "M/M/c/K" }.into(), w),
            fmt: ms,
            why_not: Some(why),
        }),
        _ => readings.push(reading(
            "note",
            "λ ≥ c × μ: with an unlimited room there is no steady state, so no formula to check the wait against",
        )),
    }
    let verdicts: Vec<(bool, String)> = checks.iter().map(Check::verdict).collect();
    let check = Some((
        verdicts.iter().all(|v| v.0),
        verdicts
            .iter()
            .map(|v| v.1.clone())
            .collect::<Vec<_>>()
            .join(" · "),
    ));
    let mut block_series = vec![
        series("reserve: refused (simulation)", 0, s_block, false, true),
        series("Erlang B", 1, m_b, true, false),
    ];
    if room > 0 {
        block_series.push(series(
            &format!("paged, room {room}: refused (simulation)"),
            6,
            s_pblock,
            false,
            true,
        ));
        block_series.push(series(
            &format!("M/M/c/K, K = c + {room}"),
            2,
            m_pblock,
            true,
            false,
        ));
    }
    Ok(LessonOutput {
        panels: vec![
            XyPanel {
                x_desc: "arrival rate λ [req/s]".into(),
                y_desc: "fraction refused".into(),
                series: block_series,
                vlines: vec![
                    (format!("c × μ = {SLOTS}"), f64::from(SLOTS)),
                    (format!("λ = {}", fmt_num(rate)), rate),
                ],
                x_from_zero: true,
                legend: Corner::UpperLeft,
                ..XyPanel::default()
            },
            XyPanel {
                x_desc: "arrival rate λ [req/s]".into(),
                y_desc: "paged: mean wait [s]".into(),
                series: vec![
                    series(
                        &format!("paged, room {room_name}: mean wait (simulation)"),
                        6,
                        s_wait,
                        false,
                        true,
                    ),
                    series(
                        if room == 0 {
                            "Erlang C (M/M/c)"
                        } else {
                            "M/M/c/K"
                        },
                        2,
                        m_wait,
                        true,
                        false,
                    ),
                ],
                vlines: vec![(format!("λ = {}", fmt_num(rate)), rate)],
                x_from_zero: true,
                y_cap: Some(3.0),
                legend: Corner::UpperLeft,
                ..XyPanel::default()
            },
        ],
        readings,
        check,
        runs,
        ..LessonOutput::default()
    })
}

#[cfg(test)]
mod tests {
    use super::super::{run, Lesson, LessonState};

    #[test]
    fn loss_or_delay_checks_erlang_b_and_the_queue() {
        let out = run(&LessonState::new(Lesson::LossDelay)).unwrap();
        let (ok, text) = out.check.clone().unwrap();
        assert!(
            text.contains("Erlang B") && text.contains("Erlang C"),
            "{text}"
        );
        assert!(ok, "{text}");
        // Refusals grow with λ; the unlimited queue refuses nobody.
        let b = &out.panels[0].series[0].points;
        assert!(b.windows(2).all(|w| w[1].1 >= w[0].1 - 0.01), "{b:?}");
        let mut s = LessonState::new(Lesson::LossDelay);
        s.set("room", "2");
        let out = run(&s).unwrap();
        let (ok, text) = out.check.clone().unwrap();
        assert!(text.contains("M/M/c/K"), "{text}");
        assert!(ok, "{text}");
        assert_eq!(out.panels[0].series.len(), 4);
    }
}
