//! What a router reading a stepped server's reports sees of the decode run it has worked
//! out and not yet run: the tokens streamed back at each of the run's boundaries, and, in
//! paged mode, the KV blocks each of its iterations takes when it is scheduled.

use super::clock::{count_f64, last_boundary_at_or_before, Anchor};
use crate::scheduler::Seq;

/// A decode run of `k` iterations on `anchor` whose `n` sequences each stream a token at
/// every boundary.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Streaming {
    pub(super) anchor: Anchor,
    pub(super) k: u64,
    pub(super) n: u64,
}

impl Streaming {
    /// The end of the run's `i`-th iteration [s].
    #[inline]
    fn boundary(&self, i: u64) -> f64 {
        let a = self.anchor;
        a.t0 + count_f64(a.iters + i) * a.d
    }

    /// How many of the run's boundaries are at or before `t`.
    pub(crate) fn passed(&self, t: f64) -> u64 {
        let a = self.anchor;
        let at = |i: u64| self.boundary(i);
        if t < at(1) {
            return 0;
        }
        let guess = (t - a.t0) / a.d - count_f64(a.iters);
        last_boundary_at_or_before(&at, t, self.k, guess)
    }

    /// [`Streaming::passed`] at `t`, counted on from `passed` boundaries at an earlier
    /// instant (one step a boundary: few pass between two looks); returns the next
    /// boundary after `t` (∞ past the last).
    #[inline]
    pub(crate) fn pass_to(&self, passed: &mut u64, t: f64) -> f64 {
        while *passed < self.k {
            let next = self.boundary(*passed + 1);
            if next > t {
                return next;
            }
            *passed += 1;
        }
        f64::INFINITY
    }

    /// Tokens streamed at each boundary (one per sequence).
    pub(crate) fn per_boundary(&self) -> u64 {
        self.n
    }
}

/// The KV blocks a paged decode run takes as it goes, beyond those its sequences hold when
/// it is worked out (each already holds the block for its first iteration's token,
/// [`super::Sim::secure_decode_blocks`]): a sequence with `room` free token slots in its
/// blocks takes a block at the start of iteration `room + 1`, and another every
/// `block_size` iterations after, as vLLM's scheduler allocates a sequence's next slot
/// when it schedules the iteration. Worked out only when a router that reads KV use
/// first asks, so other runs pay nothing.
#[derive(Debug, Default)]
pub(super) struct KvGrowth {
    /// Whether the run changed since the sums were worked out.
    pub(super) stale: bool,
    block_size: u64,
    /// Sequences whose room is in 1..=block_size (every sequence [`super::Sim`] starts a
    /// run with; any other is summed one by one).
    regular: u64,
    /// `firsts[r]` (r < block_size): how many of those have taken a block once `r`
    /// boundaries are past, those whose room is at most `r`.
    firsts: Vec<u64>,
    /// The other sequences' token slots in their blocks, and tokens.
    odd: Vec<(u64, u64)>,
}

impl KvGrowth {
    /// Works out the sums for a run of `decoders` in blocks of `block_size` tokens.
    pub(super) fn work_out(&mut self, decoders: &[Box<Seq>], block_size: u64) {
        self.work_out_held(decoders.iter().map(|s| (s.blocks, s.kv_tokens)), block_size);
    }

    /// [`KvGrowth::work_out`] from each decoder's (blocks held, tokens in them).
    fn work_out_held(&mut self, held: impl Iterator<Item = (u64, u64)>, block_size: u64) {
        let bs = block_size.max(1);
        self.stale = false;
        self.block_size = bs;
        self.firsts.clear();
        self.firsts.resize(bs as usize, 0);
        self.odd.clear();
        let mut n = 0;
        for (blocks, tokens) in held {
            n += 1;
            let slots = blocks * bs;
            match slots.checked_sub(tokens) {
                Some(room) if (1..=bs).contains(&room) => {
                    self.firsts[(room % bs) as usize] += 1;
                }
                _ => self.odd.push((slots, tokens)),
            }
        }
        self.regular = n - self.odd.len() as u64;
        // Those of a whole block's room (counted at 0) take one only each whole period.
        self.firsts[0] = 0;
        for r in 1..bs as usize {
            self.firsts[r] += self.firsts[r - 1];
        }
    }

    /// Blocks taken by the time `passed` boundaries are past (iteration `passed + 1`
    /// scheduled).
    pub(super) fn after(&self, passed: u64) -> u64 {
        let bs = self.block_size;
        let (periods, r) = (passed / bs, passed % bs);
        let odd: u64 = self
            .odd
            .iter()
            .map(|&(slots, tokens)| (tokens + passed + 1).saturating_sub(slots).div_ceil(bs))
            .sum();
        periods * self.regular + self.firsts[r as usize] + odd
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Blocks a sequence holding `blocks` for `tokens` has taken once `passed` boundaries
    /// are past: those for `tokens + passed + 1` tokens, beyond what it held.
    fn one_by_one(blocks: u64, tokens: u64, bs: u64, passed: u64) -> u64 {
        (tokens + passed + 1).div_ceil(bs).saturating_sub(blocks)
    }

    #[test]
    fn growth_is_each_sequences_blocks_for_the_scheduled_iterations_token() {
        let mut g = KvGrowth::default();
        for bs in [1u64, 2, 16, 17] {
            // Every room of one block, an empty sequence (room 0) and rooms of more.
            let mut held: Vec<(u64, u64)> = (0..3 * bs)
                .map(|tokens| ((tokens + 1).div_ceil(bs), tokens))
                .collect();
            held.extend([(0, 0), (3, 5), (5, 1), (2, 2 * bs)]);
            g.work_out_held(held.iter().copied(), bs);
            for passed in 0..5 * bs + 3 {
                let want: u64 = held
                    .iter()
                    .map(|&(b, t)| one_by_one(b, t, bs, passed))
                    .sum();
                assert_eq!(g.after(passed), want, "block size {bs}, {passed} passed");
            }
        }
    }
}
