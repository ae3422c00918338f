//! From a lesson's setting to the Watch view: the server(s) each lesson simulates at the
//! chosen control values, as the calculator's parameters at their chosen rate.

use super::burstiness::burstiness_params;
use super::caches::caches_params;
use super::disagg::disagg_params;
use super::loss_delay::loss_delay_params;
use super::variance::{rate_at, variance_params};
use super::{batching_params, hol_params, kv_params, utilisation_params, Lesson, LessonState};
use crate::params::Params;
use engine::analytic::capacity_bounds;
use engine::config::{KvMode, Policy};

/// One server of a lesson to watch.
#[derive(Clone, Debug, PartialEq)]
pub struct WatchLink {
    pub label: String,
    pub params: Params,
}

fn link(label: impl Into<String>, params: Params, rate: f64) -> WatchLink {
    WatchLink {
        label: label.into(),
        params: Params { rate, ..params },
    }
}

/// The servers of `state`'s lesson at its control values.
pub fn watch_links(state: &LessonState) -> Vec<WatchLink> {
    let v = |i: usize| state.values.get(i).copied().unwrap_or(0.0);
    match state.lesson {
        Lesson::Utilisation => vec![link("watch this server", utilisation_params(), v(0))],
        Lesson::Batching => {
            let p = batching_params(v(0) as u32);
            let mu = capacity_bounds(&p.sim_config(1.0, 0))
                .map(|b| b.compute_rps)
                .unwrap_or(1.0);
            vec![link("watch this server just past capacity", p, 1.25 * mu)]
        }
        Lesson::KvMemory => vec![
            link(
                "watch the reserve server",
                kv_params(v(0) as u64, KvMode::Reserve),
                v(1),
            ),
            link(
                "watch the paged server",
                kv_params(v(0) as u64, KvMode::Paged),
                v(1),
            ),
        ],
        Lesson::HeadOfLine => vec![
            link(
                "watch whole-prompt prefill",
                hol_params(Policy::Continuous, v(0) as u32),
                v(1),
            ),
            link(
                "watch chunked prefill",
                hol_params(Policy::Chunked, v(0) as u32),
                v(1),
            ),
        ],
        Lesson::Variance => {
            let mut out = vec![link(
                "watch fixed outputs",
                variance_params(0.0),
                rate_at(0.0, v(1)),
            )];
            if v(0) > 0.0 {
                out.push(link(
                    "watch lognormal outputs",
                    variance_params(v(0)),
                    rate_at(v(0), v(1)),
                ));
            }
            out
        }
        Lesson::LossDelay => vec![
            link(
                "watch the reserve (loss) server",
                loss_delay_params(KvMode::Reserve, v(0)),
                v(0),
            ),
            // The Watch view runs the calculator's parameters, which have no waiting room:
            // the paged server is watched with an unlimited one.
            link(
                "watch the paged (delay) server, unlimited room",
                loss_delay_params(KvMode::Paged, v(0)),
                v(0),
            ),
        ],
        Lesson::Burstiness => {
            let p = burstiness_params(v(0), v(1));
            let r = p.rate;
            vec![link("watch this server", p, r)]
        }
        // The Watch view shows one server: under random routing a replica is one server
        // with a Poisson stream at ρ.
        Lesson::Caches => vec![link(
            "watch this server and its prefix cache",
            caches_params(v(0) as u64, v(1)),
            caches_params(v(0) as u64, v(1)).rate,
        )],
        // One replica of the aggregated fleet, at a quarter of the stream.
        Lesson::Disagg => {
            let p = disagg_params(v(1) as u32);
            let r = super::disagg::fleet_rate(&p, v(0));
            vec![link(
                "watch one replica of the aggregated fleet, at a quarter of the rate",
                p,
                r / 4.0,
            )]
        }
        Lesson::Routing => vec![link(
            "watch one replica under random routing",
            variance_params(1.0),
            rate_at(1.0, v(1)),
        )],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_lesson_links_to_a_server_that_runs() {
        for l in Lesson::ALL {
            let links = watch_links(&LessonState::new(l));
            assert!(!links.is_empty(), "{l:?}");
            for k in links {
                k.params
                    .check()
                    .unwrap_or_else(|e| panic!("{l:?} {}: {}", k.label, e.message));
                let tape = crate::watch::record(&k.params, 40, 0)
                    .unwrap_or_else(|e| panic!("{l:?} {}: {e}", k.label));
                assert_eq!(tape.records.len(), 40);
            }
        }
    }
}
