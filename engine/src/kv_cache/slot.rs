//! llama.cpp's slot prompt cache (docs/model.md, Slot cache), as `llama-server` keeps it
//! (`tools/server/server-context.cpp` of the llama.cpp that llama-cpp-python 0.3.36
//! vendors): every slot keeps the tokens of the last sequence it served — prompt and
//! generated tokens, all but the last sampled one — in its own share of the context. A
//! new request given that slot reuses the longest common prefix of those tokens and its
//! prompt (`get_common_prefix`), at most prompt − 1 tokens (the server evaluates at least
//! one), and prefills the rest. Which slot a request gets is the scheduler's
//! ([`crate::scheduler::LlamaCpp`]): by [`SIMILARITY`], else least recently used.
//!
//! Token identity comes from the workload's shared tokens
//! ([`crate::workload::SharedTokens`]): [`common_prefix`] turns two requests' labels into
//! the length of their common prefix in tokens.

use super::PrefixCounts;
use crate::workload::{Request, SharedTokens};

/// `--slot-prompt-similarity` of the vendored llama.cpp (`common.h`, 0.1): a request
/// takes the idle slot whose cached tokens share the largest fraction of its prompt, if
/// that fraction is above this (compared in `f32`, as the server does).
pub const SIMILARITY: f32 = 0.1;

/// Tokens every prompt begins with, whatever else it shares: the BOS token the
/// tokenizer adds (a slot that served anything reuses it).
pub const COMMON_TOKENS: u64 = 1;

/// Length of the common prefix [tokens] of `a`'s first `a_len` tokens (its prompt, then
/// what it generated) and `b`'s first `b_len` (its prompt, or prompt + generated after a
/// preemption), given what the workload says they share:
/// * the same request (re-admitted after a preemption): all of the shorter;
/// * the same conversation: all of the shorter (each turn resends the one before, its
///   answer included);
/// * the same system-prompt group: the system prompt;
/// * trace block ids: the leading ids they have in common, × the tokens per id;
/// * anything else: the BOS token ([`COMMON_TOKENS`]).
///
/// A group's or a trace's shared tokens lie within both prompts (never in an answer).
///
/// # Examples
/// ```
/// use engine::kv_cache::slot_common_prefix;
/// use engine::workload::{Request, SharedTokens, SystemPrompts};
/// let sp = SharedTokens::Prefixes {
///     system: SystemPrompts { groups: 2, share: 1.0, tokens: 100, zipf: 0.0 },
/// };
/// let r = |id, group| Request { id, arrival: 0.0, prompt: 164, output: 8, class: 0, group, conv: 0 };
/// assert_eq!(slot_common_prefix(Some(&sp), &r(0, 1), 171, &r(1, 1), 164), 100);
/// assert_eq!(slot_common_prefix(Some(&sp), &r(0, 1), 171, &r(1, 2), 164), 1);
/// ```
pub fn common_prefix(
    shared: Option<&SharedTokens>,
    a: &Request,
    a_len: u64,
    b: &Request,
    b_len: u64,
) -> u64 {
    let n = a_len.min(b_len);
    if n == 0 {
        return 0;
    }
    if a.id == b.id || (a.conv > 0 && a.conv == b.conv) {
        return n;
    }
    let prompts = (a.prompt.min(b.prompt) as u64).min(n);
    let shared_len = match shared {
        Some(SharedTokens::Blocks { blocks }) => {
            let (x, y) = (blocks.of(a.id as usize), blocks.of(b.id as usize));
            let same = x.iter().zip(y).take_while(|(p, q)| p == q).count() as u64;
            same * blocks.block_tokens as u64
        }
        Some(s) if a.group > 0 && a.group == b.group => s.system_tokens() as u64,
        _ => 0,
    };
    shared_len.min(prompts).max(COMMON_TOKENS.min(n))
}

/// One slot's cache.
#[derive(Clone, Copy, Debug, Default)]
struct Slot {
    /// The request whose tokens the slot holds (serving it, or served last).
    req: Option<Request>,
    /// Tokens cached once idle [tokens]; while busy, the tokens its request reused.
    tokens: u64,
    busy: bool,
}

/// Every slot's cache, with the lookup counts of the admissions.
#[derive(Clone, Debug)]
pub(crate) struct SlotTable {
    shared: Option<SharedTokens>,
    /// Block size [tokens]: reuse is rounded down to whole blocks (1 = token-exact).
    bs: u64,
    slots: Vec<Slot>,
    /// Tokens the idle slots hold, and the reused tokens the busy ones hold.
    pub(crate) idle_tokens: u64,
    pub(crate) held_tokens: u64,
    pub(crate) counts: PrefixCounts,
}

impl SlotTable {
    pub(crate) fn new(shared: Option<SharedTokens>, slots: usize, bs: u64) -> SlotTable {
        SlotTable {
            shared,
            bs: bs.max(1),
            slots: vec![Slot::default(); slots],
            idle_tokens: 0,
            held_tokens: 0,
            counts: PrefixCounts::default(),
        }
    }

    /// Common prefix [tokens] of idle slot `slot`'s cache and `r`'s first `target`
    /// tokens; `None` if the slot is busy or holds nothing (never served).
    pub(crate) fn common_prefix(&self, slot: usize, r: &Request, target: u32) -> Option<u64> {
        let s = self.slots.get(slot)?;
        let held = s.req.filter(|_| !s.busy && s.tokens > 0)?;
        Some(common_prefix(
            self.shared.as_ref(),
            &held,
            s.tokens,
            r,
            target as u64,
        ))
    }

    /// `r` takes idle slot `slot` to prefill `target` tokens: the tokens it reuses (the
    /// common prefix, at most `target − 1`, rounded down to whole blocks). The rest of
    /// the slot's cache is dropped (counted as evicted blocks).
    pub(crate) fn take(&mut self, slot: usize, r: &Request, target: u32) -> u64 {
        let bs = self.bs;
        let lcp = self.common_prefix(slot, r, target).unwrap_or(0);
        let hit = lcp.min(target.max(1) as u64 - 1) / bs * bs;
        let s = &mut self.slots[slot];
        let old = if s.busy { 0 } else { s.tokens };
        self.idle_tokens -= old;
        self.held_tokens += hit;
        *s = Slot {
            req: Some(*r),
            tokens: hit,
            busy: true,
        };
        let c = &mut self.counts;
        c.lookups += 1;
        c.hit_lookups += u64::from(hit > 0);
        c.query_blocks += (target.max(1) as u64 - 1) / bs;
        c.hit_blocks += hit / bs;
        c.query_tokens += target as u64;
        c.hit_tokens += hit;
        c.evictions += old.div_ceil(bs) - hit / bs;
        hit
    }

    /// `r` leaves its slot with `kv_tokens` tokens computed: the slot keeps them. No-op
    /// for a request that holds no slot.
    pub(crate) fn release(&mut self, r: &Request, kv_tokens: u64) {
        let Some(s) = self
            .slots
            .iter_mut()
            .find(|s| s.busy && s.req.is_some_and(|q| q.id == r.id))
        else {
            return;
        };
        self.held_tokens -= s.tokens;
        s.tokens = kv_tokens;
        s.busy = false;
        self.idle_tokens += kv_tokens;
        let total = (self.idle_tokens + self.held_tokens).div_ceil(self.bs);
        self.counts.peak_cached_blocks = self.counts.peak_cached_blocks.max(total);
    }

    /// The counts' invariants: hits within the lookups, token sums as the slots say.
    pub(crate) fn check(&self) -> Result<(), String> {
        let idle: u64 = self
            .slots
            .iter()
            .filter(|s| !s.busy)
            .map(|s| s.tokens)
            .sum();
        let held: u64 = self.slots.iter().filter(|s| s.busy).map(|s| s.tokens).sum();
        if (idle, held) != (self.idle_tokens, self.held_tokens) {
            return Err(format!(
                "slots hold {idle} idle + {held} reused tokens, counted {} + {}",
                self.idle_tokens, self.held_tokens
            ));
        }
        let c = &self.counts;
        if c.hit_tokens > c.query_tokens || c.hit_lookups > c.lookups {
            return Err(format!("more hits than lookups: {c:?}"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::import::BlockIds;
    use crate::workload::SystemPrompts;

    fn req(id: u64, prompt: u32, group: u16, conv: u32) -> Request {
        Request {
            id,
            arrival: 0.0,
            prompt,
            output: 8,
            class: 0,
            group,
            conv,
        }
    }

    #[test]
    fn common_prefixes_follow_what_the_workload_shares() {
        let sp = SharedTokens::Prefixes {
            system: SystemPrompts {
                groups: 3,
                share: 1.0,
                tokens: 100,
                zipf: 0.0,
            },
        };
        let s = Some(&sp);
        // Same group: the system prompt, within both prompts.
        assert_eq!(
            common_prefix(s, &req(0, 150, 1, 0), 157, &req(1, 120, 1, 0), 120),
            100
        );
        assert_eq!(
            common_prefix(s, &req(0, 80, 1, 0), 87, &req(1, 120, 1, 0), 120),
            80
        );
        // Other group, no group, nothing shared: the BOS token.
        assert_eq!(
            common_prefix(s, &req(0, 150, 1, 0), 157, &req(1, 120, 2, 0), 120),
            1
        );
        assert_eq!(
            common_prefix(s, &req(0, 150, 0, 0), 157, &req(1, 120, 0, 0), 120),
            1
        );
        assert_eq!(
            common_prefix(None, &req(0, 150, 1, 0), 157, &req(1, 120, 1, 0), 120),
            1
        );
        // Nothing cached: nothing.
        assert_eq!(
            common_prefix(s, &req(0, 150, 1, 0), 0, &req(1, 120, 1, 0), 120),
            0
        );
        // A conversation's next turn resends the answer too; the same request its own.
        assert_eq!(
            common_prefix(s, &req(0, 150, 1, 4), 157, &req(1, 170, 1, 4), 170),
            157
        );
        assert_eq!(
            common_prefix(s, &req(0, 150, 1, 0), 140, &req(0, 155, 1, 0), 155),
            140
        );
        // Trace ids: two leading ids in common, 64 tokens each.
        let t = SharedTokens::Blocks {
            blocks: BlockIds {
                block_tokens: 64,
                offsets: vec![0, 3, 6],
                ids: vec![7, 8, 9, 7, 8, 5],
                shared: Vec::new(),
            },
        };
        assert_eq!(
            common_prefix(Some(&t), &req(0, 190, 0, 0), 197, &req(1, 180, 0, 0), 180),
            128
        );
    }

    #[test]
    fn a_slot_keeps_its_last_sequence_and_reuses_the_common_part() {
        let sp = SharedTokens::Prefixes {
            system: SystemPrompts {
                groups: 2,
                share: 1.0,
                tokens: 40,
                zipf: 0.0,
            },
        };
        let mut t = SlotTable::new(Some(sp.clone()), 2, 1);
        let a = req(0, 50, 1, 0);
        assert_eq!(t.common_prefix(0, &a, 50), None, "an empty slot");
        assert_eq!(t.take(0, &a, 50), 0);
        assert_eq!(t.common_prefix(0, &a, 50), None, "a busy slot");
        t.release(&a, 57);
        assert_eq!(t.idle_tokens, 57);
        // Same group: the 40 system tokens; the other 17 are dropped.
        let b = req(1, 60, 1, 0);
        assert_eq!(t.common_prefix(0, &b, 60), Some(40));
        assert_eq!(t.take(0, &b, 60), 40);
        assert_eq!((t.idle_tokens, t.held_tokens), (0, 40));
        t.release(&b, 67);
        // A prompt that is all cached still prefills its last token.
        let c = req(2, 40, 1, 0);
        assert_eq!(t.take(0, &c, 40), 39);
        t.release(&c, 47);
        t.check().unwrap();
        let k = t.counts;
        assert_eq!((k.lookups, k.hit_lookups), (3, 2));
        assert_eq!(k.query_tokens, 50 + 60 + 40);
        assert_eq!((k.hit_tokens, k.hit_blocks), (40 + 39, 40 + 39));
        assert_eq!(k.query_blocks, 49 + 59 + 39);
        // Dropped: 17 of A's tokens, then 67 − 39 of B's.
        assert_eq!(k.evictions, 17 + 28);
        assert_eq!(k.peak_cached_blocks, 67);
        // In blocks of 16, the 40 shared tokens are 2 whole blocks; the 67 cached
        // tokens were 5 blocks, of which 3 are dropped.
        let mut t = SlotTable::new(Some(sp), 1, 16);
        t.take(0, &a, 50);
        t.release(&a, 67);
        assert_eq!(t.take(0, &b, 60), 32);
        assert_eq!((t.counts.hit_blocks, t.counts.evictions), (2, 3));
        assert_eq!(t.counts.query_blocks, 3 + 3);
        assert_eq!(t.counts.peak_cached_blocks, 5);
    }
}
