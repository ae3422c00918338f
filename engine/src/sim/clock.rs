//! Time over runs of decode iterations: the global decode clock behind the lazy per-token
//! bookkeeping of the decode set (see [`super`]'s module docs), the anchor of a jumped run
//! of identical decode iterations, and the exact search for its iteration boundaries.

use crate::num::max_f64;
use crate::scheduler::Seq;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// A run of identical decode iterations: iteration `i` of it ends at `t0 + i·d`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Anchor {
    pub(super) t0: f64,
    pub(super) d: f64,
    pub(super) iters: u64,
    pub(super) epoch: u64,
}

/// The global decode clock behind the lazy per-token bookkeeping (see the event loop's
/// module docs, [`super`]).
///
/// A *tick* is an iteration in which the decode set decodes. Members of the decode set
/// hold their per-token fields as of tick [`Seq::tick0`]; [`DecodeClock::sync`] brings a
/// member up to date from the clock's prefix count of stalls and its suffix maxima of gaps.
#[derive(Debug, Default)]
pub(super) struct DecodeClock {
    /// Ticks so far.
    pub(super) ticks: u64,
    /// End of the last tick [s].
    pub(super) last_t: f64,
    /// Ticks whose gap exceeded the stall threshold, since the start (a prefix count).
    pub(super) stall_ticks: u64,
    /// Suffix maxima of the tick gaps: `(last tick of a stretch, gap)`, ticks increasing
    /// and gaps strictly decreasing, so the largest gap among the ticks after `t` is the
    /// first entry whose tick is after `t` (a monotonic stack).
    pub(super) gaps: Vec<(u64, f64)>,
    /// Finish ticks of the decode set's members as [`finish_key`]`(tick, admit_seq)`,
    /// earliest first; equal ticks pop in admission order, the running set's order.
    pub(super) finish: BinaryHeap<Reverse<u128>>,
}

/// A finish-heap entry: ordered by tick, then admission number, in one integer.
#[inline]
pub(super) fn finish_key(tick: u64, admit_seq: u64) -> u128 {
    (tick as u128) << 64 | admit_seq as u128
}

impl DecodeClock {
    /// The decode set's earliest finish tick.
    #[inline]
    pub(super) fn next_finish(&self) -> Option<u64> {
        self.finish.peek().map(|e| (e.0 >> 64) as u64)
    }

    /// Records the gap of the ticks since the last record up to `last` (`n` of them, all
    /// with the same gap [s]).
    #[inline]
    pub(super) fn push_gaps(&mut self, last: u64, n: u64, gap: f64, stall_threshold: f64) {
        if gap > stall_threshold {
            self.stall_ticks += n;
        }
        while self.gaps.last().is_some_and(|&(_, g)| g <= gap) {
            self.gaps.pop();
        }
        self.gaps.push((last, gap));
    }

    /// Largest gap among the ticks after `tick` [s], if there were any.
    #[inline]
    pub(super) fn max_gap_after(&self, tick: u64) -> Option<f64> {
        let i = self.gaps.partition_point(|&(t, _)| t <= tick);
        self.gaps.get(i).map(|&(_, g)| g)
    }

    /// Brings a decode-set member's per-token fields up to the current tick.
    #[inline]
    pub(super) fn sync(&self, s: &mut Seq) {
        let n = self.ticks - s.tick0;
        if n == 0 {
            return;
        }
        s.generated += n as u32;
        s.kv_tokens += n;
        s.stalls += (self.stall_ticks - s.stall0) as u32;
        if let Some(g) = self.max_gap_after(s.tick0) {
            if g > s.max_gap {
                s.max_gap = g;
            }
        }
        s.last_token = self.last_t;
        s.tick0 = self.ticks;
        s.stall0 = self.stall_ticks;
    }

    /// Makes `s`, which has just emitted the token of the current tick individually, a
    /// member of the decode set.
    #[inline]
    pub(super) fn join(&mut self, s: &mut Seq) {
        s.tick0 = self.ticks;
        s.stall0 = self.stall_ticks;
        self.finish.push(Reverse(finish_key(
            self.ticks + s.remaining() as u64,
            s.admit_seq,
        )));
    }
}

/// A count as f64: the same number as `x as f64` for every count below 2^63, but one
/// signed conversion instruction on x86-64 instead of the unsigned sequence.
#[inline]
pub(super) fn count_f64(x: u64) -> f64 {
    debug_assert!(x < 1 << 63);
    x as i64 as f64
}

/// Emits one token at `t`.
#[inline]
pub(super) fn emit(s: &mut Seq, t: f64, stall_threshold: f64) {
    if s.first_token.is_nan() {
        s.first_token = t;
    } else {
        let gap = t - s.last_token;
        if gap > s.max_gap {
            s.max_gap = gap;
        }
        if gap > stall_threshold {
            s.stalls += 1;
        }
    }
    s.last_token = t;
    s.generated += 1;
}

/// Smallest i in 1..=k with at(i) ≥ t (k if none). `guess` is a closed-form estimate; the
/// answer is found by stepping from it, so it is exact whatever the rounding.
pub(super) fn first_boundary_at_or_after(
    at: &impl Fn(u64) -> f64,
    t: f64,
    k: u64,
    guess: f64,
) -> u64 {
    if at(k) < t {
        return k;
    }
    let mut i = if guess.is_finite() {
        (max_f64(guess.ceil(), 1.0) as u64).min(k)
    } else {
        1
    };
    while i > 1 && at(i - 1) >= t {
        i -= 1;
    }
    while at(i) < t {
        i += 1;
    }
    i
}

/// Largest i in 1..=k with at(i) ≤ t (requires at(1) ≤ t), stepping from `guess`.
pub(super) fn last_boundary_at_or_before(
    at: &impl Fn(u64) -> f64,
    t: f64,
    k: u64,
    guess: f64,
) -> u64 {
    if at(k) <= t {
        return k;
    }
    let mut i = if guess.is_finite() {
        (max_f64(guess.floor(), 1.0) as u64).min(k)
    } else {
        1
    };
    while i < k && at(i + 1) <= t {
        i += 1;
    }
    while i > 1 && at(i) > t {
        i -= 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boundaries_are_exact_whatever_the_guess() {
        let (t0, d, done) = (0.1, 0.0065, 7u64);
        let at = |i: u64| t0 + (done + i) as f64 * d;
        for t in [0.1, 0.15, 0.1455, 0.3, 1.0, 5.0] {
            for guess in [0.0, 1.0, 3.7, 50.0, f64::NAN, 1e9] {
                let k = 200;
                let want = (1..=k).find(|&i| at(i) >= t).unwrap_or(k);
                assert_eq!(
                    first_boundary_at_or_after(&at, t, k, guess),
                    want,
                    "t={t} guess={guess}"
                );
                if at(1) <= t {
                    let want = (1..=k).rev().find(|&i| at(i) <= t).unwrap();
                    assert_eq!(
                        last_boundary_at_or_before(&at, t, k, guess),
                        want,
                        "t={t} guess={guess}"
                    );
                }
            }
        }
    }
}
