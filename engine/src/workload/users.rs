//! Closed-loop users (docs/model.md, Closed-loop users): U users, each sending its next
//! request a think time after its last answer ends, as `vllm bench serve
//! --max-concurrency` (with no think time) and GuideLLM's concurrent mode do.
//!
//! The requests are the workload's own, in the same order and with the same lengths as
//! the open-loop stream draws them (common random numbers); only their send times come
//! from the users. A conversation is one user's: its turns go out one after another, each
//! after the answer to the one before. Without conversations every request is a
//! conversation of one turn. The workload's arrival process sets no send time here: the
//! users do.

use super::{stream_rng, Conversations, Request, RequestStream, SharedTokens, Turn, Workload};
use crate::error::{non_negative, ConfigError};
use rand_pcg::Pcg64Mcg;

/// Salt of each user's think-time stream.
const USER_STREAM: u128 = 0x6a09_e667_f3bc_c908_bb67_ae85_84ca_a73b;

/// The requests of `users` closed-loop users; see the module docs.
#[derive(Debug)]
pub struct UserSource<'a> {
    stream: RequestStream<'a>,
    conversations: Option<Conversations>,
    think_s: f64,
    /// Each user's conversation under way, if it goes on.
    turns: Vec<Option<Turn>>,
    /// Each user's unit-mean gap before its next request, drawn when its last one was sent.
    gaps: Vec<f64>,
    rngs: Vec<Pcg64Mcg>,
    sent: u64,
}

impl<'a> UserSource<'a> {
    /// `users` users on `workload` for `seed`, thinking a mean `think_s` seconds
    /// (exponential; 0 sends at once) between an answer and the next request.
    ///
    /// # Errors
    /// As [`Workload::validate`]; `users` of 0; a negative or non-finite think time.
    pub fn new(
        workload: &'a Workload,
        seed: u64,
        users: u32,
        think_s: f64,
    ) -> Result<UserSource<'a>, ConfigError> {
        if users == 0 {
            return Err(ConfigError::OutOfRange {
                name: "users",
                value: 0.0,
                why: "must be at least 1",
            });
        }
        non_negative("think time", think_s)?;
        // The arrival process only paces the stream's draws: no horizon cuts it here.
        let stream = workload.stream(seed, f64::MAX)?;
        let conversations = match &workload.shared {
            Some(SharedTokens::Conversations { conversations, .. }) => Some(conversations.clone()),
            _ => None,
        };
        let n = users as usize;
        Ok(UserSource {
            stream,
            conversations,
            think_s,
            turns: (0..n).map(|_| None).collect(),
            gaps: vec![0.0; n],
            rngs: (0..n as u64)
                .map(|u| stream_rng(seed ^ u.wrapping_mul(0xbf58_476d_1ce4_e5b9), USER_STREAM))
                .collect(),
            sent: 0,
        })
    }

    /// Number of users.
    pub fn users(&self) -> usize {
        self.turns.len()
    }

    /// User `u`'s next request, sent at `t` [s]: the next turn of its conversation, or
    /// the first of a new one. `None` once the workload has no more (a trace's end).
    /// Requests are numbered in the order they are asked for.
    pub fn next(&mut self, u: usize, t: f64) -> Option<Request> {
        let mut r = match self.conversations.clone() {
            None => {
                let r = self.stream.next()?;
                self.gaps[u] = self.user_gap(u);
                r
            }
            Some(conv) => self.next_turn(u, t, &conv)?,
        };
        r.id = self.sent;
        r.arrival = t;
        self.sent += 1;
        Some(r)
    }

    /// How long user `u` thinks after the answer to its last request [s].
    pub fn think(&self, u: usize) -> f64 {
        self.gaps[u] * self.think_s
    }

    fn next_turn(&mut self, u: usize, t: f64, conv: &Conversations) -> Option<Request> {
        loop {
            let (mut turn, user, output) = match self.turns[u].take() {
                Some(mut turn) => {
                    let (p, o) = self.stream.next_turn_lengths(&mut turn);
                    (turn, p, o)
                }
                None => {
                    let r = self.stream.base()?;
                    (self.stream.start_conversation(t), r.prompt, r.output)
                }
            };
            turn.at = t.to_bits();
            // A conversation that has outgrown the context ends; the user starts another.
            let Some((req, gap)) = self.stream.take_turn(&mut turn, user, output, conv) else {
                continue;
            };
            self.gaps[u] = match gap {
                Some(g) => {
                    self.turns[u] = Some(turn);
                    g
                }
                None => self.user_gap(u),
            };
            return Some(req);
        }
    }

    /// A unit-mean exponential gap from user `u`'s own stream.
    fn user_gap(&mut self, u: usize) -> f64 {
        rand_distr::Distribution::sample(&rand_distr::Exp1, &mut self.rngs[u])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conversations() -> Workload {
        Workload {
            shared: Some(SharedTokens::Conversations {
                conversations: Conversations {
                    mean_turns: 3.0,
                    max_turns: 8,
                    think_s: 5.0,
                },
                system: None,
            }),
            ..Workload::default()
        }
    }

    #[test]
    fn one_user_sends_the_open_loop_requests_in_their_order() {
        let w = Workload::default();
        let open = w.generate(4, 100.0).unwrap();
        let mut users = UserSource::new(&w, 4, 1, 2.0).unwrap();
        for (i, o) in open.iter().enumerate() {
            let r = users.next(0, i as f64).unwrap();
            assert_eq!((r.id, r.prompt, r.output), (i as u64, o.prompt, o.output));
            assert_eq!(r.arrival, i as f64);
        }
    }

    #[test]
    fn a_users_conversation_has_the_open_loop_turns() {
        // One user talks through the conversations one by one: the same turns, with the
        // same lengths, as the open loop draws for each conversation.
        let w = conversations();
        let open = w.generate(6, 200.0).unwrap();
        let mut users = UserSource::new(&w, 6, 1, 1.0).unwrap();
        let closed: Vec<Request> = (0..40).map(|i| users.next(0, i as f64).unwrap()).collect();
        let mut convs = closed.iter().map(|r| r.conv).collect::<Vec<_>>();
        convs.dedup();
        assert!(convs.windows(2).all(|w| w[1] == w[0] + 1), "{convs:?}");
        for c in &convs[..convs.len() - 1] {
            let a: Vec<_> = open
                .iter()
                .filter(|r| r.conv == *c)
                .map(|r| (r.prompt, r.output))
                .collect();
            let b: Vec<_> = closed
                .iter()
                .filter(|r| r.conv == *c)
                .map(|r| (r.prompt, r.output))
                .collect();
            if !a.is_empty() {
                // The open loop may cut a conversation at its horizon; the closed loop never does.
                assert_eq!(a[..], b[..a.len()], "conversation {c}");
            }
        }
    }

    #[test]
    fn think_times_have_their_mean_and_zero_means_at_once() {
        let w = Workload::default();
        let mut users = UserSource::new(&w, 1, 3, 4.0).unwrap();
        let mut sum = 0.0;
        let n = 30_000;
        for i in 0..n {
            users.next(i % 3, i as f64).unwrap();
            sum += users.think(i % 3);
        }
        assert!((sum / n as f64 - 4.0).abs() < 0.15, "{}", sum / n as f64);
        let mut none = UserSource::new(&w, 1, 2, 0.0).unwrap();
        none.next(1, 0.0).unwrap();
        assert_eq!(none.think(1), 0.0);
    }

    #[test]
    fn bad_settings_are_errors() {
        let w = Workload::default();
        assert!(UserSource::new(&w, 1, 0, 1.0).is_err());
        assert!(UserSource::new(&w, 1, 2, -1.0).is_err());
        assert!(UserSource::new(&w, 1, 2, f64::NAN).is_err());
    }
}
