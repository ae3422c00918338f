//! The workload: when requests arrive and how long they are.
//!
//! Arrival process and length distribution are separate, orthogonal pieces
//! ([`ArrivalProcess`], [`LengthDist`]). A [`Workload`] draws them from two independent
//! random streams derived from one seed, so for a given seed the lengths are identical
//! whatever the rate, and the arrival times of a renewal process are the same unit stream
//! scaled by 1/λ: **common random numbers** across every configuration of a sweep.

mod arrivals;
pub mod import;
mod lengths;
pub mod shared;
mod trace;
mod users;

pub use arrivals::{ArrivalProcess, TraceRequest};
pub use lengths::{LengthDist, LengthMoments, MixtureClass};
pub use shared::{Conversations, SharedTokens, SystemPrompts};
pub use trace::{parse_trace, read_any_trace, Position, ReadTrace, Trace, TraceError};
pub use users::UserSource;

use arrivals::GapSampler;
use lengths::LengthSampler;

use crate::error::{positive, ConfigError};
use rand::Rng;
use rand_pcg::Pcg64Mcg;
use serde::{Deserialize, Serialize};

/// One request offered to the server.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Request {
    /// Index in arrival order, from 0.
    pub id: u64,
    /// Arrival time [s].
    pub arrival: f64,
    /// Prompt length [tokens], ≥ 1.
    pub prompt: u32,
    /// Output length [tokens], ≥ 1.
    pub output: u32,
    /// Class label (mixtures and traces); 0 otherwise.
    pub class: u16,
    /// Shared system prompt: 0 none, g + 1 for group g ([`SharedTokens`]).
    #[serde(default, skip_serializing_if = "is_zero_u16")]
    pub group: u16,
    /// Conversation: 0 none, c + 1 for conversation c ([`SharedTokens::Conversations`]).
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub conv: u32,
}

fn is_zero_u16(x: &u16) -> bool {
    *x == 0
}

fn is_zero_u32(x: &u32) -> bool {
    *x == 0
}

impl Request {
    /// Prompt + output [tokens]: what the request occupies in KV at its end.
    pub fn total_tokens(&self) -> u64 {
        self.prompt as u64 + self.output as u64
    }
}

/// A request generator: arrival process × length distribution, with an optional
/// max-model-length cap.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Workload {
    pub arrivals: ArrivalProcess,
    pub lengths: LengthDist,
    /// If set, prompts are cut to `cap − 1` and outputs so that prompt + output ≤ cap
    /// [tokens] (what a server's `max_model_len` enforces).
    #[serde(default)]
    pub max_model_len: Option<u32>,
    /// Tokens the requests share (docs/model.md, Shared tokens); none if unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared: Option<SharedTokens>,
}

impl Default for Workload {
    /// The reference study's workload: Poisson 1 req/s, lognormal prompt (median 256, σ 0.55)
    /// and output (median 128, σ 0.70).
    fn default() -> Self {
        Workload {
            arrivals: ArrivalProcess::Poisson { rate: 1.0 },
            lengths: LengthDist::reference(),
            max_model_len: None,
            shared: None,
        }
    }
}

/// Salt that separates the arrival stream from the length stream of a seed.
const ARRIVAL_STREAM: u128 = 0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c834;
const LENGTH_STREAM: u128 = 0xd1b5_4a32_d192_ed03_8bb7_2f2c_4d1c_1f6b;
/// Salt of the shared-token draws (groups), and of each conversation's own stream.
const SHARED_STREAM: u128 = 0x2545_f491_4f6c_dd1d_9e6c_63d0_676a_9a99;
const CONV_STREAM: u128 = 0x7f4a_7c15_94d0_49bb_1331_11eb_bf58_476d;

pub(crate) fn stream_rng(seed: u64, salt: u128) -> Pcg64Mcg {
    // Pcg64Mcg is portable: identical natively and in wasm32.
    Pcg64Mcg::new((((seed as u128) << 64) | (seed as u128 ^ 0x5851_f42d_4c95_7f2d)) ^ salt | 1)
}

impl Workload {
    /// Checks every parameter; call before generating.
    ///
    /// # Errors
    /// The first invalid parameter, as a [`ConfigError`].
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.arrivals.validate()?;
        self.lengths.validate()?;
        if let Some(s) = &self.shared {
            s.validate()?;
        }
        if let Some(cap) = self.max_model_len {
            if cap < 2 {
                return Err(ConfigError::OutOfRange {
                    name: "max_model_len",
                    value: cap as f64,
                    why: "must be >= 2",
                });
            }
        }
        Ok(())
    }

    /// The same workload at another mean arrival rate [req/s] (renewal processes only;
    /// a trace keeps its timestamps).
    pub fn with_rate(&self, rate: f64) -> Workload {
        Workload {
            arrivals: self.arrivals.with_rate(rate),
            ..self.clone()
        }
    }

    /// Mean arrival rate [req/s] (of requests: conversations × expected turns).
    pub fn rate(&self) -> f64 {
        match &self.shared {
            Some(SharedTokens::Conversations { conversations, .. }) => {
                self.arrivals.rate() * conversations.expected_turns()
            }
            _ => self.arrivals.rate(),
        }
    }

    /// Streams the requests arriving in `[0, horizon]` for `seed`, lazily (constant memory).
    ///
    /// # Errors
    /// As [`Workload::validate`], and for a non-positive horizon.
    pub fn stream(&self, seed: u64, horizon: f64) -> Result<RequestStream<'_>, ConfigError> {
        self.validate()?;
        positive("horizon", horizon)?;
        Ok(RequestStream {
            workload: self,
            gaps: self.arrivals.gap_sampler(),
            lengths: self.lengths.sampler(),
            horizon,
            arrival_rng: stream_rng(seed, ARRIVAL_STREAM),
            length_rng: stream_rng(seed, LENGTH_STREAM),
            t: 0.0,
            next_id: 0,
            ticks: 0,
            shared_rng: stream_rng(seed, SHARED_STREAM),
            group_cdf: self
                .system_prompts()
                .map(SystemPrompts::cdf)
                .unwrap_or_default(),
            turns: std::collections::BinaryHeap::new(),
            starts: 0,
            turn_id: 0,
            pending_start: None,
            seed,
            base_done: false,
        })
    }

    /// All requests arriving in `[0, horizon]` for `seed`.
    ///
    /// # Errors
    /// As [`Workload::stream`].
    pub fn generate(&self, seed: u64, horizon: f64) -> Result<Vec<Request>, ConfigError> {
        Ok(self.stream(seed, horizon)?.collect())
    }

    /// The system prompts of [`Workload::shared`], if any.
    pub fn system_prompts(&self) -> Option<&SystemPrompts> {
        match &self.shared {
            Some(SharedTokens::Prefixes { system }) => Some(system),
            Some(SharedTokens::Conversations { system, .. }) => system.as_ref(),
            _ => None,
        }
    }

    fn cap(&self, prompt: u32, output: u32) -> (u32, u32) {
        match self.max_model_len {
            Some(cap) => {
                let p = prompt.min(cap - 1);
                (p, output.min(cap - p).max(1))
            }
            None => (prompt, output),
        }
    }
}

/// Lazy iterator over a workload's requests; see [`Workload::stream`].
#[derive(Debug)]
pub struct RequestStream<'a> {
    workload: &'a Workload,
    /// The arrival process's gap sampler (renewal processes only).
    gaps: Option<GapSampler>,
    lengths: LengthSampler<'a>,
    horizon: f64,
    arrival_rng: Pcg64Mcg,
    length_rng: Pcg64Mcg,
    t: f64,
    next_id: u64,
    ticks: u64,
    /// Group draws ([`SystemPrompts::draw`]), one pair per request (per conversation).
    shared_rng: Pcg64Mcg,
    group_cdf: Vec<f64>,
    /// Conversations: later turns waiting for their arrival, earliest first.
    turns: std::collections::BinaryHeap<std::cmp::Reverse<Turn>>,
    /// Conversations started, and turns emitted (the requests' ids).
    starts: u64,
    turn_id: u64,
    /// Conversations: the arrival process's next start, not yet due.
    pending_start: Option<Request>,
    seed: u64,
    /// The arrival process has passed the horizon.
    base_done: bool,
}

/// A conversation's next turn.
#[derive(Clone, Debug)]
pub(crate) struct Turn {
    /// Arrival [s] (bits of a non-negative float: ordered as the float).
    at: u64,
    conv: u32,
    group: u16,
    /// Turns so far.
    k: u32,
    /// Tokens of the conversation so far (its system prompt, prompts and answers).
    history: u64,
    rng: Pcg64Mcg,
}

impl PartialEq for Turn {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.conv) == (o.at, o.conv)
    }
}
impl Eq for Turn {}
impl PartialOrd for Turn {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Turn {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at, self.conv).cmp(&(o.at, o.conv))
    }
}

impl RequestStream<'_> {
    /// Conversations: the next turn in arrival order — a waiting turn, or the first turn
    /// of a conversation the arrival process starts.
    fn next_turn(&mut self, conv: &Conversations) -> Option<Request> {
        loop {
            // The arrival process's next start, held back while a waiting turn is earlier.
            if !self.base_done && self.pending_start.is_none() {
                match self.base() {
                    Some(r) => self.pending_start = Some(r),
                    None => self.base_done = true,
                }
            }
            let waiting = self.turns.peek().map(|t| f64::from_bits(t.0.at));
            let take_start = match (&self.pending_start, waiting) {
                (Some(r), Some(w)) => r.arrival <= w,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => return None,
            };
            let (mut turn, user, output) = if take_start {
                let r = self.pending_start.take().expect("just seen");
                let turn = self.start_conversation(r.arrival);
                (turn, r.prompt, r.output)
            } else {
                let std::cmp::Reverse(mut t) = self.turns.pop().expect("just seen");
                let (p, o) = self.next_turn_lengths(&mut t);
                (t, p, o)
            };
            let arrival = f64::from_bits(turn.at);
            let Some((req, gap)) = self.take_turn(&mut turn, user, output, conv) else {
                // The conversation has outgrown the context: it ends.
                continue;
            };
            if let Some(gap) = gap {
                let next = arrival + gap * conv.think_s;
                if next <= self.horizon {
                    turn.at = next.to_bits();
                    self.turns.push(std::cmp::Reverse(turn));
                }
            }
            return Some(req);
        }
    }

    /// A new conversation, its first turn at `at` [s]: its number, group and own stream.
    fn start_conversation(&mut self, at: f64) -> Turn {
        let c = self.starts;
        self.starts += 1;
        let group = self.draw_group();
        let system = if group > 0 {
            self.workload
                .shared
                .as_ref()
                .map_or(0, SharedTokens::system_tokens)
        } else {
            0
        };
        Turn {
            at: at.to_bits(),
            conv: (c % u32::MAX as u64) as u32 + 1,
            group,
            k: 0,
            history: system as u64,
            rng: stream_rng(
                self.seed ^ c.wrapping_mul(0x9e37_79b9_7f4a_7c15),
                CONV_STREAM,
            ),
        }
    }

    /// The request of `turn` (arriving at `turn.at`; the user's new message of `user`
    /// tokens, an answer of `output`), or `None` if the conversation has outgrown the
    /// context. With it, the unit-mean gap to the next turn if the conversation goes on
    /// (drawn from the conversation's own stream), and `turn` moved on to that turn.
    fn take_turn(
        &mut self,
        turn: &mut Turn,
        user: u32,
        output: u32,
        conv: &Conversations,
    ) -> Option<(Request, Option<f64>)> {
        let prompt = turn.history + user as u64;
        let fits = self
            .workload
            .max_model_len
            .is_none_or(|cap| prompt + output as u64 <= cap as u64);
        if !fits || prompt > u32::MAX as u64 / 2 {
            return None;
        }
        let id = self.turn_id;
        self.turn_id += 1;
        let req = Request {
            id,
            arrival: f64::from_bits(turn.at),
            prompt: prompt as u32,
            output,
            class: 0,
            group: turn.group,
            conv: turn.conv,
        };
        let go_on: f64 = turn.rng.random();
        let gap: f64 = rand_distr::Distribution::sample(&rand_distr::Exp1, &mut turn.rng);
        let more = turn.k + 1 < conv.max_turns && go_on < conv.go_on();
        if more {
            turn.history = prompt + output as u64;
        }
        Some((req, more.then_some(gap)))
    }

    /// The next turn of `turn`'s conversation: its user message and answer lengths.
    fn next_turn_lengths(&mut self, turn: &mut Turn) -> (u32, u32) {
        let (p, o, _) = self.lengths.sample(&mut turn.rng);
        turn.k += 1;
        (p, o)
    }

    /// A group label from the shared stream (0 without system prompts).
    fn draw_group(&mut self) -> u16 {
        match self.workload.system_prompts() {
            Some(sp) => sp.draw(&self.group_cdf, &mut self.shared_rng),
            None => 0,
        }
    }
}

impl Iterator for RequestStream<'_> {
    type Item = Request;

    fn next(&mut self) -> Option<Request> {
        match &self.workload.shared {
            Some(SharedTokens::Conversations { conversations, .. }) => {
                let c = conversations.clone();
                self.next_turn(&c)
            }
            Some(SharedTokens::Prefixes { system }) => {
                let mut r = self.base()?;
                r.group = self.draw_group();
                if r.group > 0 {
                    // The system prompt goes before the request's own prompt.
                    let p = (r.prompt as u64 + system.tokens as u64).min(u32::MAX as u64 / 2);
                    let (p, o) = self.workload.cap(p as u32, r.output);
                    (r.prompt, r.output) = (p, o);
                }
                Some(r)
            }
            _ => self.base(),
        }
    }
}

impl RequestStream<'_> {
    /// The next request of the arrival process and length distribution alone.
    fn base(&mut self) -> Option<Request> {
        let id = self.next_id;
        let (arrival, fixed) = match &self.workload.arrivals {
            ArrivalProcess::Timestamps { times } => (*times.get(id as usize)?, None),
            ArrivalProcess::Trace { requests } => {
                let r = requests.get(id as usize)?;
                (r.arrival, Some((r.prompt, r.output, r.class)))
            }
            ArrivalProcess::Deterministic { rate } => {
                self.ticks += 1;
                (self.ticks as f64 / rate, None)
            }
            _ => {
                let gaps = self
                    .gaps
                    .as_ref()
                    .expect("a renewal process has a gap sampler");
                self.t += gaps.sample(&mut self.arrival_rng);
                (self.t, None)
            }
        };
        if arrival > self.horizon {
            return None;
        }
        let (prompt, output, class) = match fixed {
            Some(f) => f,
            None => self.lengths.sample(&mut self.length_rng),
        };
        let (prompt, output) = self.workload.cap(prompt, output);
        self.next_id += 1;
        Some(Request {
            id,
            arrival,
            prompt,
            output,
            class,
            group: 0,
            conv: 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_random_numbers_across_rates() {
        let w1 = Workload::default().with_rate(1.0);
        let w2 = Workload::default().with_rate(4.0);
        let a = w1.generate(7, 100.0).unwrap();
        let b = w2.generate(7, 25.0).unwrap();
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(&b) {
            assert_eq!((x.prompt, x.output), (y.prompt, y.output));
            assert!((x.arrival - 4.0 * y.arrival).abs() < 1e-9);
        }
    }

    #[test]
    fn poisson_rate_and_reference_lengths() {
        let reqs = Workload::default()
            .with_rate(5.0)
            .generate(1, 20_000.0)
            .unwrap();
        let n = reqs.len() as f64;
        assert!((n / 20_000.0 - 5.0).abs() < 0.05, "rate {}", n / 20_000.0);
        let mean_p = reqs.iter().map(|r| r.prompt as f64).sum::<f64>() / n;
        let mean_o = reqs.iter().map(|r| r.output as f64).sum::<f64>() / n;
        // The shipped pairs' means: 297.8 and 163.5 (before flooring: floor lowers each by ~0.5).
        assert!((mean_p - 297.3).abs() < 3.0, "{mean_p}");
        assert!((mean_o - 163.0).abs() < 2.5, "{mean_o}");
    }

    #[test]
    fn a_request_stays_32_bytes() {
        // The event loop moves requests by value: the shared-token labels fit the padding.
        assert_eq!(std::mem::size_of::<Request>(), 32);
    }

    #[test]
    fn cap_applies() {
        let w = Workload {
            max_model_len: Some(300),
            ..Workload::default()
        };
        for r in w.generate(3, 200.0).unwrap() {
            assert!(r.total_tokens() <= 300 && r.prompt >= 1 && r.output >= 1);
        }
    }

    #[test]
    fn invalid_is_error() {
        assert!(Workload::default().with_rate(0.0).generate(0, 1.0).is_err());
        assert!(Workload::default()
            .with_rate(f64::NAN)
            .generate(0, 1.0)
            .is_err());
        assert!(Workload::default().generate(0, -1.0).is_err());
    }
}
