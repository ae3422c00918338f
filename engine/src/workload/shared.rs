//! Workloads with shared tokens (docs/model.md, Shared tokens): groups of requests that
//! begin with the same system prompt, multi-turn conversations whose every turn resends
//! the conversation so far, and trace block ids. What a request shares is named by
//! [`super::Request::group`] and [`super::Request::conv`] (or, for a trace, by its
//! block ids); [`block_key`] turns that into the key of each full KV block, as a prefix
//! cache keys blocks by their tokens and everything before them.

use super::import::BlockIds;
use crate::error::{positive, ConfigError};
use rand::Rng;
use serde::{Deserialize, Serialize};

/// System prompts shared by groups of requests.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SystemPrompts {
    /// Groups, each with its own system prompt (≥ 1).
    pub groups: u32,
    /// Share of requests (of conversations) that begin with a group's system prompt, in
    /// [0, 1]; the others share nothing.
    pub share: f64,
    /// System prompt length P [tokens], put before the request's own prompt.
    pub tokens: u32,
    /// Group popularity: group g (from 0) is chosen with probability ∝ 1/(g+1)^zipf
    /// (0: all equally likely).
    #[serde(default)]
    pub zipf: f64,
}

/// Multi-turn conversations: the arrival process starts conversations; turn k + 1
/// arrives an exponential think gap after turn k (open loop: it does not wait for the
/// answer). Each turn's new user message and answer are drawn from the workload's length
/// distribution; turn k's prompt is every earlier turn (prompts and answers) plus the new
/// message.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Conversations {
    /// Mean turns per conversation (≥ 1): geometric, capped at `max_turns`.
    pub mean_turns: f64,
    /// Most turns in a conversation (≥ 1).
    pub max_turns: u32,
    /// Mean gap between a turn's arrival and the next turn's [s] (> 0).
    pub think_s: f64,
}

/// What the requests of a workload share.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SharedTokens {
    /// Independent requests, some beginning with a group's system prompt.
    Prefixes { system: SystemPrompts },
    /// Conversations (optionally beginning with a group's system prompt).
    Conversations {
        conversations: Conversations,
        #[serde(default)]
        system: Option<SystemPrompts>,
    },
    /// A trace's block ids, index-aligned with its requests (Mooncake's `hash_ids`).
    Blocks { blocks: BlockIds },
}

impl SystemPrompts {
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        if self.groups == 0 || self.groups > u16::MAX as u32 {
            return Err(ConfigError::OutOfRange {
                name: "system prompt groups",
                value: self.groups as f64,
                why: "must be between 1 and 65535",
            });
        }
        if !(0.0..=1.0).contains(&self.share) {
            return Err(ConfigError::OutOfRange {
                name: "system prompt share",
                value: self.share,
                why: "must be in [0, 1]",
            });
        }
        if self.tokens == 0 {
            return Err(ConfigError::Zero {
                name: "system prompt tokens",
                value: 0,
            });
        }
        crate::error::non_negative("system prompt zipf exponent", self.zipf)?;
        Ok(())
    }

    /// Group popularity: the probability of each group, given a request has one.
    pub fn popularity(&self) -> Vec<f64> {
        let w: Vec<f64> = (0..self.groups)
            .map(|g| (g as f64 + 1.0).powf(-self.zipf))
            .collect();
        let sum: f64 = w.iter().sum();
        w.into_iter().map(|x| x / sum).collect()
    }

    /// Draws a request's group label: 0 (no system prompt) or 1 + the group. Two uniform
    /// draws, always, so the stream stays aligned whatever the parameters.
    pub(crate) fn draw(&self, cdf: &[f64], rng: &mut impl Rng) -> u16 {
        let (u, v): (f64, f64) = (rng.random(), rng.random());
        if u >= self.share {
            return 0;
        }
        let g = cdf.partition_point(|&c| c <= v).min(cdf.len() - 1);
        g as u16 + 1
    }

    /// The cumulative popularity, for [`SystemPrompts::draw`].
    pub(crate) fn cdf(&self) -> Vec<f64> {
        let mut acc = 0.0;
        self.popularity()
            .into_iter()
            .map(|p| {
                acc += p;
                acc
            })
            .collect()
    }
}

impl Conversations {
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        if !(self.mean_turns.is_finite() && self.mean_turns >= 1.0) {
            return Err(ConfigError::OutOfRange {
                name: "mean turns",
                value: self.mean_turns,
                why: "must be a finite number >= 1",
            });
        }
        crate::error::at_least_one("max turns", self.max_turns as u64)?;
        positive("think time", self.think_s)?;
        Ok(())
    }

    /// Probability that a conversation goes on after a turn (geometric turns).
    pub(crate) fn go_on(&self) -> f64 {
        1.0 - 1.0 / self.mean_turns
    }

    /// Expected turns per conversation (the geometric cut at `max_turns`).
    pub fn expected_turns(&self) -> f64 {
        let q = self.go_on();
        if q <= 0.0 {
            return 1.0;
        }
        (1.0 - q.powi(self.max_turns as i32)) / (1.0 - q)
    }
}

impl SharedTokens {
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        match self {
            SharedTokens::Prefixes { system } => system.validate(),
            SharedTokens::Conversations {
                conversations,
                system,
            } => {
                conversations.validate()?;
                system.as_ref().map_or(Ok(()), SystemPrompts::validate)
            }
            SharedTokens::Blocks { blocks } => {
                if blocks.block_tokens == 0 {
                    return Err(ConfigError::Zero {
                        name: "trace block tokens",
                        value: 0,
                    });
                }
                let ok = blocks.offsets.first() == Some(&0)
                    && blocks.offsets.windows(2).all(|w| w[0] <= w[1])
                    && blocks
                        .offsets
                        .last()
                        .is_some_and(|&e| e as usize == blocks.ids.len());
                if ok {
                    Ok(())
                } else {
                    Err(ConfigError::Parse {
                        what: "trace block ids",
                        why: "offsets must start at 0, not decrease and end at the id count".into(),
                    })
                }
            }
        }
    }

    /// The system prompt length [tokens] (0 if none).
    pub fn system_tokens(&self) -> u32 {
        match self {
            SharedTokens::Prefixes { system } => system.tokens,
            SharedTokens::Conversations {
                system: Some(s), ..
            } => s.tokens,
            _ => 0,
        }
    }
}

/// splitmix64's finaliser: a well-mixed 64-bit key.
#[inline]
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Key spaces, so that a group's, a conversation's, a request's own and a trace's
/// blocks never share a key.
const GROUP: u64 = 1 << 62;
const CONV: u64 = 2 << 62;
const OWN: u64 = 3 << 62;

/// The key of full block `j` (tokens `j·bs .. (j+1)·bs` of the sequence) of request
/// `id` with labels `group`, `conv` — equal keys iff equal tokens, up to the end of the
/// block (docs/model.md, Shared tokens):
/// * within the system prompt (`(j+1)·bs ≤ system`) of group g: the group's block j;
/// * a conversation's other blocks: the conversation's block j (every turn extends the
///   one before, so block j is the same tokens in every turn that has it);
/// * a trace request's prompt blocks: the id of the trace block that holds the block's
///   last token, and j;
/// * anything else: the request's own.
#[inline]
pub fn block_key(
    shared: Option<&SharedTokens>,
    id: u64,
    group: u16,
    conv: u32,
    j: u64,
    bs: u64,
) -> u64 {
    mix(block_chain(shared, id, group, conv, j, bs) ^ mix(j))
}

/// The chain block `j` belongs to: [`block_key`] is a function of (chain, j), and
/// blocks with equal keys have equal chains and indices. A group's system prompt, a
/// conversation, a trace block id and a request's own tokens are each one chain.
#[inline]
pub fn block_chain(
    shared: Option<&SharedTokens>,
    id: u64,
    group: u16,
    conv: u32,
    j: u64,
    bs: u64,
) -> u64 {
    block_chain_run(shared, id, group, conv, j, bs).0
}

/// The chain of block `j` ([`block_chain`]) and where its run ends: every block from `j`
/// up to, not including, the returned end [block index] has the same chain, so a
/// prefix cache can treat the run as one piece. The end is `u64::MAX` when the chain
/// never changes again.
#[inline]
pub fn block_chain_run(
    shared: Option<&SharedTokens>,
    id: u64,
    group: u16,
    conv: u32,
    j: u64,
    bs: u64,
) -> (u64, u64) {
    let end = (j + 1) * bs;
    match shared {
        Some(SharedTokens::Blocks { blocks }) => {
            let ids = blocks.of(id as usize);
            let bt = blocks.block_tokens.max(1) as u64;
            let m = (end - 1) / bt;
            match ids.get(m as usize) {
                // Blocks j' with (j' + 1)·bs ≤ (m + 1)·bt end within trace block m.
                Some(&h) => (mix(h as u64) & !(3 << 62), (m + 1) * bt / bs),
                None => (OWN | (id << 20), u64::MAX),
            }
        }
        Some(s) if group > 0 && end <= s.system_tokens() as u64 => {
            (GROUP | (group as u64) << 32, s.system_tokens() as u64 / bs)
        }
        _ if conv > 0 => (CONV | (conv as u64) << 24, u64::MAX),
        _ => (OWN | (id << 20), u64::MAX),
    }
}

/// How many leading full blocks of a request (labels as in [`block_key`]) can have a
/// key another request shares: those within its trace block ids, within its group's
/// system prompt, or all of a conversation's (`u64::MAX`). The blocks after them are the
/// request's own: only the request itself (after a preemption) can ever find them.
#[inline]
pub fn shared_blocks(
    shared: Option<&SharedTokens>,
    id: u64,
    group: u16,
    conv: u32,
    bs: u64,
) -> u64 {
    match shared {
        Some(SharedTokens::Blocks { blocks }) => {
            blocks.shared_len(id as usize) as u64 * blocks.block_tokens as u64 / bs
        }
        _ if conv > 0 => u64::MAX,
        Some(s) if group > 0 => s.system_tokens() as u64 / bs,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{LengthDist, Request, Workload};
    use std::collections::BTreeMap;

    fn system(groups: u32, share: f64) -> SystemPrompts {
        SystemPrompts {
            groups,
            share,
            tokens: 100,
            zipf: 0.0,
        }
    }

    fn conversations(rate: f64, system: Option<SystemPrompts>) -> Workload {
        Workload {
            shared: Some(SharedTokens::Conversations {
                conversations: Conversations {
                    mean_turns: 4.0,
                    max_turns: 10,
                    think_s: 5.0,
                },
                system,
            }),
            ..Workload::default().with_rate(rate)
        }
    }

    #[test]
    fn system_prompts_go_before_a_share_of_prompts_with_common_random_numbers() {
        let plain = Workload::default().with_rate(2.0);
        let w = Workload {
            shared: Some(SharedTokens::Prefixes {
                system: system(5, 0.3),
            }),
            ..plain.clone()
        };
        let a = w.generate(3, 5000.0).unwrap();
        let base = plain.generate(3, 5000.0).unwrap();
        assert_eq!(a.len(), base.len());
        let mut grouped = 0;
        for (r, b) in a.iter().zip(&base) {
            assert_eq!((r.id, r.arrival, r.output), (b.id, b.arrival, b.output));
            match r.group {
                0 => assert_eq!(r.prompt, b.prompt),
                g => {
                    assert!(g <= 5);
                    assert_eq!(r.prompt, b.prompt + 100);
                    grouped += 1;
                }
            }
        }
        let share = grouped as f64 / a.len() as f64;
        assert!((share - 0.3).abs() < 0.03, "{share}");
        // Another rate: the same labels, request by request.
        let fast = w.with_rate(8.0).generate(3, 1250.0).unwrap();
        assert!(fast
            .iter()
            .zip(&a)
            .all(|(x, y)| (x.group, x.prompt) == (y.group, y.prompt)));
    }

    #[test]
    fn each_turn_resends_the_conversation_so_far() {
        let w = conversations(0.5, Some(system(3, 1.0)));
        let reqs = w.generate(1, 4000.0).unwrap();
        assert!(reqs.windows(2).all(|p| p[0].arrival <= p[1].arrival));
        assert!(reqs.iter().enumerate().all(|(i, r)| r.id == i as u64));
        let mut by_conv: BTreeMap<u32, Vec<Request>> = BTreeMap::new();
        for r in &reqs {
            assert!(r.conv > 0 && r.group > 0);
            by_conv.entry(r.conv).or_default().push(*r);
        }
        let mut turns = 0;
        for turns_of in by_conv.values() {
            assert!(turns_of.len() <= 10);
            assert!(turns_of[0].prompt > 100, "starts with the system prompt");
            for p in turns_of.windows(2) {
                assert_eq!(p[0].group, p[1].group);
                // The earlier turn's prompt and answer, then a new message (≥ 1 token).
                assert!(p[1].prompt > p[0].prompt + p[0].output, "{p:?}");
            }
            turns += turns_of.len();
        }
        let mean = turns as f64 / by_conv.len() as f64;
        let want = Conversations {
            mean_turns: 4.0,
            max_turns: 10,
            think_s: 5.0,
        }
        .expected_turns();
        assert!((mean - want).abs() < 0.25, "{mean} vs {want}");
        // The rate counts requests.
        let rate = reqs.len() as f64 / 4000.0;
        assert!(
            (rate / w.rate() - 1.0).abs() < 0.1,
            "{rate} vs {}",
            w.rate()
        );
    }

    #[test]
    fn conversations_are_the_same_at_every_rate() {
        let per_conv = |rate: f64, horizon: f64| {
            let mut m: BTreeMap<u32, Vec<(u32, u32)>> = BTreeMap::new();
            for r in conversations(rate, None).generate(9, horizon).unwrap() {
                m.entry(r.conv).or_default().push((r.prompt, r.output));
            }
            m
        };
        let slow = per_conv(0.2, 2000.0);
        let fast = per_conv(0.8, 500.0);
        // Conversations that ended well before the horizon are complete in both.
        let mut same = 0;
        for c in 1..=50 {
            if let (Some(a), Some(b)) = (slow.get(&c), fast.get(&c)) {
                let n = a.len().min(b.len());
                assert_eq!(a[..n], b[..n], "conversation {c}");
                same += 1;
            }
        }
        assert!(same >= 40, "{same}");
    }

    #[test]
    fn block_keys_are_equal_exactly_for_equal_tokens() {
        let s = SharedTokens::Prefixes {
            system: system(2, 1.0),
        };
        let k = |id, group, conv, j| block_key(Some(&s), id, group, conv, j, 16);
        // 100 system tokens: blocks 0..6 are the group's (6·16 = 96 ≤ 100 < 112).
        for j in 0..6 {
            assert_eq!(k(1, 1, 0, j), k(2, 1, 0, j));
            assert_ne!(k(1, 1, 0, j), k(1, 2, 0, j));
        }
        assert_ne!(k(1, 1, 0, 6), k(2, 1, 0, 6));
        // A conversation's blocks past the system prompt are its own, in every turn.
        assert_eq!(k(1, 1, 7, 9), k(5, 1, 7, 9));
        assert_ne!(k(1, 1, 7, 9), k(1, 1, 8, 9));
        assert_ne!(k(1, 1, 7, 9), k(1, 1, 7, 10));
        // Trace ids: blocks of 16 within trace blocks of 64.
        let t = SharedTokens::Blocks {
            blocks: BlockIds {
                block_tokens: 64,
                offsets: vec![0, 2, 4],
                ids: vec![10, 11, 10, 12],
                shared: Vec::new(),
            },
        };
        let kt = |id, j| block_key(Some(&t), id, 0, 0, j, 16);
        for j in 0..4 {
            assert_eq!(kt(0, j), kt(1, j));
        }
        for j in 4..8 {
            assert_ne!(kt(0, j), kt(1, j));
        }
        assert_ne!(kt(0, 0), kt(0, 1));
        let _ = LengthDist::reference();
    }

    #[test]
    fn a_chain_run_has_one_chain() {
        let p = SharedTokens::Prefixes {
            system: system(2, 1.0),
        };
        let c = SharedTokens::Conversations {
            conversations: Conversations {
                mean_turns: 4.0,
                max_turns: 10,
                think_s: 5.0,
            },
            system: Some(system(2, 1.0)),
        };
        let t = SharedTokens::Blocks {
            blocks: BlockIds {
                block_tokens: 40,
                offsets: vec![0, 3, 6],
                ids: vec![1, 2, 3, 1, 2, 9],
                shared: Vec::new(),
            },
        };
        for (s, id, group, conv) in [
            (Some(&p), 0, 1, 0),
            (Some(&p), 3, 0, 0),
            (Some(&c), 1, 2, 5),
            (Some(&c), 1, 0, 5),
            (None, 4, 0, 0),
            (Some(&t), 0, 0, 0),
            (Some(&t), 1, 0, 0),
            (Some(&t), 7, 0, 0),
        ] {
            for bs in [1, 7, 16, 40, 64] {
                for j in 0..30 {
                    let (chain, end) = block_chain_run(s, id, group, conv, j, bs);
                    assert!(end > j);
                    let at = |j| block_chain(s, id, group, conv, j, bs);
                    assert_eq!(chain, at(j));
                    for k in j..end.min(j + 40) {
                        assert_eq!(at(k), chain, "{bs} {j} {k} {end}");
                    }
                    if end < j + 40 {
                        assert_ne!(at(end), chain, "{bs} {j} {end}");
                    }
                }
            }
        }
    }

    #[test]
    fn shared_blocks_end_where_own_keys_begin() {
        let same = |s: Option<&SharedTokens>, id, group, conv, j| {
            block_key(s, id, group, conv, j, 16) == block_key(s, id + 1, group, conv, j, 16)
        };
        let p = SharedTokens::Prefixes {
            system: system(2, 1.0),
        };
        let t = SharedTokens::Blocks {
            blocks: BlockIds {
                block_tokens: 64,
                offsets: vec![0, 3, 6],
                ids: vec![1, 2, 3, 1, 2, 3],
                shared: Vec::new(),
            },
        };
        for (s, group, conv) in [
            (Some(&p), 1, 0),
            (Some(&p), 0, 0),
            (None, 0, 0),
            (Some(&t), 0, 0),
        ] {
            let n = shared_blocks(s, 0, group, conv, 16);
            for j in 0..20 {
                assert_eq!(same(s, 0, group, conv, j), j < n, "{group} {conv} {j} {n}");
            }
        }
        assert_eq!(shared_blocks(Some(&p), 0, 1, 3, 16), u64::MAX);
    }

    #[test]
    fn invalid_shared_tokens_are_errors() {
        for bad in [system(0, 0.5), system(2, 1.5), system(2, f64::NAN)] {
            let w = Workload {
                shared: Some(SharedTokens::Prefixes { system: bad }),
                ..Workload::default()
            };
            assert!(w.validate().is_err());
        }
        let mut w = conversations(1.0, None);
        if let Some(SharedTokens::Conversations { conversations, .. }) = &mut w.shared {
            conversations.mean_turns = 0.5;
        }
        assert!(w.generate(0, 10.0).is_err());
    }
}
