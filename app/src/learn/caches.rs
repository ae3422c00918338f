//! Lesson 9, "Caches": a prefix cache (vLLM's automatic prefix caching) over requests
//! that share system prompts, its hit rate against the cache's size and the prompts'
//! popularity, Che's approximation for an LRU cache checked against the simulation, and
//! what the hits do to TTFT (docs/model.md, Prefix caching).

use super::ci::{ms, Check};
use super::{fmt_num, pct, reading, series, sim, Control, LessonOutput};
use crate::chart::{Corner, XyPanel};
use crate::params::{Lengths, Params, SharedParams};
use engine::analytic::{predict_prefix_cache, PrefixPrediction};
use engine::config::{KvMode, PrefixCache};
use engine::metrics::Aggregate;

pub(super) const TEXT: &str = "Chat and agent requests often begin with the same system prompt. A prefix cache keeps the KV blocks of earlier prompts after their requests leave, keyed by their tokens and everything before them, and a request whose prompt begins the same way skips that prefill (vLLM's automatic prefix caching, SGLang's radix cache). The room is the KV memory the running requests leave free, and the least recently used block goes first. Che's approximation says how often an LRU cache of C blocks hits: each block stays for a characteristic time T after its last use, the root of Σᵢ (1 − exp(−λᵢT)) = C, so a block used at rate λᵢ hits with probability 1 − exp(−λᵢT). Here 16 system prompts of 512 tokens (32 blocks each) begin 90 % of the requests; each request adds 128 tokens of its own and 64 of output, which also take room in the cache once it leaves.";

pub(super) const TRY: &str = "Start at K = 16384 tokens with all 16 prompts equally popular (Zipf 0): the cache holds most of them and about three blocks in four hit. Shrink K to 8192: the running requests leave little room, every request's own blocks push the prompts out, and the hit rate falls — watch the mean TTFT rise toward the line without a cache. Now raise Zipf to 1.5: a few prompts take most of the requests, they stay cached even in a small cache, and the hit rate climbs back without a single extra byte of memory. Che's line follows the dots; where it misses, the check says why.";

/// KV capacity K [tokens]: the cache is what the running requests leave free.
const KS: &[f64] = &[6144.0, 8192.0, 12288.0, 16384.0, 24576.0, 32768.0];
const ZIPFS: &[f64] = &[0.0, 0.5, 1.0, 1.5, 2.0];

pub(super) const CONTROLS: &[Control] = &[
    Control {
        key: "K",
        label: "KV capacity K [tokens] (the cache's room)",
        steps: KS,
        default: 16384.0,
    },
    Control {
        key: "zipf",
        label: "prompt popularity (Zipf exponent; 0 = all alike)",
        steps: ZIPFS,
        default: 0.0,
    },
];

/// Arrival rate [req/s].
const RATE: f64 = 4.0;
const CURVE_SEEDS: u64 = 2;
const CHECK_SEEDS: u64 = 8;

/// Lesson 9's server and traffic: paged KV in 16-token blocks with the prefix cache on,
/// 16 system prompts of 512 tokens before 90 % of the requests, fixed lengths (Che's
/// model's scope), vLLM run rules.
pub(super) fn caches_params(k: u64, zipf: f64) -> Params {
    Params {
        rate: RATE,
        rates: vec![RATE],
        lengths: Lengths::Fixed,
        fixed_prompt: 128,
        fixed_output: 64,
        max_batch: 16,
        kv_mode: KvMode::Paged,
        kv_tokens: k,
        block_size: 16,
        prefix_cache: PrefixCache::Apc,
        shared: SharedParams {
            system: true,
            groups: 16,
            share: 0.9,
            tokens: 512,
            zipf,
            ..SharedParams::default()
        },
        reference_rules: false,
        horizon_s: 400.0,
        ..Params::default()
    }
}

/// One seed's block hit rate and mean TTFT [s].
fn one(p: &Params, seed: u64, runs: &mut u32) -> Result<(Option<f64>, Option<f64>), String> {
    let rep = sim(&p.sim_config(p.rate, seed), runs)?;
    let hit = rep.stats.prefix.as_ref().and_then(|x| x.block_hit_rate);
    Ok((hit, rep.summary.ttft.mean))
}

pub(super) fn run(k: f64, zipf: f64) -> Result<LessonOutput, String> {
    let mut runs = 0;
    let (mut s_hit, mut s_ttft, mut che_hit, mut che_ttft, mut off_ttft) =
        (vec![], vec![], vec![], vec![], vec![]);
    let mut chosen: Option<(Aggregate, Aggregate, Option<PrefixPrediction>)> = None;
    for &kk in KS {
        let p = caches_params(kk as u64, zipf);
        let seeds = if kk == k { CHECK_SEEDS } else { CURVE_SEEDS };
        let (mut h, mut t) = (Vec::new(), Vec::new());
        for seed in 0..seeds {
            let (a, b) = one(&p, seed, &mut runs)?;
            h.push(a);
            t.push(b);
        }
        let (hit, ttft) = (Aggregate::of(h), Aggregate::of(t));
        if let Some(m) = hit.mean {
            s_hit.push((kk, m));
        }
        if let Some(m) = ttft.mean {
            s_ttft.push((kk, m));
        }
        let che = predict_prefix_cache(&p.sim_config(p.rate, 0)).ok();
        if let Some(c) = &che {
            che_hit.push((kk, c.block_hit_rate));
            if let Some(x) = c.ttft_mean_s {
                che_ttft.push((kk, x));
            }
            if let Some(x) = c.ttft_mean_off_s {
                off_ttft.push((kk, x));
            }
        }
        if kk == k {
            chosen = Some((hit, ttft, che));
        }
    }
    let (hit, ttft, che) =
        chosen.ok_or_else(|| format!("K = {k} is not one of the lesson's steps"))?;
    let kf = fmt_num(k);
    let mut readings = vec![
        reading(
            "system prompts: 16 × 512 tokens",
            "512 blocks of 16 tokens (8192 tokens) to keep them all",
        ),
        reading(
            format!("block hit rate at K = {kf}"),
            format!(
                "{} simulated · {} Che",
                hit.mean.map(pct).unwrap_or_else(|| "—".into()),
                che.map(|c| pct(c.block_hit_rate))
                    .unwrap_or_else(|| "—".into())
            ),
        ),
        reading(
            format!("mean TTFT at K = {kf}"),
            format!(
                "{} simulated · {} Che + batching model · {} without a cache",
                ttft.mean.map(ms).unwrap_or_else(|| "—".into()),
                che.and_then(|c| c.ttft_mean_s)
                    .map(ms)
                    .unwrap_or_else(|| "—".into()),
                che.and_then(|c| c.ttft_mean_off_s)
                    .map(ms)
                    .unwrap_or_else(|| "—".into()),
            ),
        ),
    ];
    if let Some(c) = che {
        readings.push(reading(
            "Che: room for the cache · characteristic time T",
            format!(
                "{:.0} blocks · {}",
                c.cache_blocks,
                if c.characteristic_time_s.is_finite() {
                    format!("{:.1} s", c.characteristic_time_s)
                } else {
                    "∞ (everything fits)".into()
                }
            ),
        ));
    }
    let check = che.map(|c| {
        Check {
            what: format!("block hit rate at K = {kf}, Zipf {}", fmt_num(zipf)),
            sim: hit,
            formula: ("Che's approximation".into(), c.block_hit_rate),
            fmt: pct,
            why_not: Some(
                "Che's approximation is close, not exact: it treats each use of a prompt as independent of the others and gives the cache the mean room the running requests leave, which in the simulation varies from moment to moment; with this many requests the simulation's interval is narrower than that approximation's error of a point or two",
            ),
        }
        .verdict()
    });
    let vline = vec![(format!("K = {kf}"), k)];
    Ok(LessonOutput {
        panels: vec![
            XyPanel {
                x_desc: "KV capacity K [tokens]".into(),
                y_desc: "prefix-cache block hit rate".into(),
                series: vec![
                    series(
                        &format!("simulation ({CURVE_SEEDS} seeds; {CHECK_SEEDS} at the chosen K)"),
                        0,
                        s_hit,
                        false,
                        true,
                    ),
                    series("Che's approximation (LRU)", 1, che_hit, true, false),
                ],
                vlines: vline.clone(),
                x_log2: true,
                legend: Corner::LowerRight,
                ..XyPanel::default()
            },
            XyPanel {
                x_desc: "KV capacity K [tokens]".into(),
                y_desc: "mean TTFT [s]".into(),
                series: vec![
                    series("mean TTFT (simulation)", 0, s_ttft, false, true),
                    series("Che + batching model", 1, che_ttft, true, false),
                    series("batching model without a cache", 2, off_ttft, true, false),
                ],
                vlines: vline,
                x_log2: true,
                legend: Corner::UpperRight,
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
    fn caches_lesson_checks_che_and_popularity_raises_the_hit_rate() {
        let out = run(&LessonState::new(Lesson::Caches)).unwrap();
        let (_, text) = out.check.clone().unwrap();
        assert!(text.contains("Che's approximation"), "{text}");
        let hit = &out.panels[0].series;
        let at = |i: usize, x: f64| hit[i].points.iter().find(|p| p.0 == x).map(|p| p.1);
        // More room, more hits; and Che follows the simulation.
        let (small, large) = (at(0, 8192.0).unwrap(), at(0, 32768.0).unwrap());
        assert!(large > small + 0.1, "{small} → {large}");
        for x in [6144.0, 8192.0, 12288.0, 16384.0, 24576.0, 32768.0] {
            let (s, c) = (at(0, x).unwrap(), at(1, x).unwrap());
            eprintln!("K = {x}: simulation {s:.4}, Che {c:.4}");
            assert!((s - c).abs() < 0.03, "K = {x}: simulation {s}, Che {c}");
        }
        // A popular few prompts hit more in the same small cache.
        let mut skewed = LessonState::new(Lesson::Caches);
        assert!(skewed.set("zipf", "1.5") && skewed.set("K", "8192"));
        let z = run(&skewed).unwrap();
        let zs = z.panels[0].series[0]
            .points
            .iter()
            .find(|p| p.0 == 8192.0)
            .unwrap()
            .1;
        assert!(zs > small + 0.05, "Zipf 1.5 {zs} against Zipf 0 {small}");
    }
}
