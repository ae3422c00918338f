//! The KV block manager: a pool of `capacity / block_size` blocks, either reserved whole
//! at arrival (`reserve`, a loss system) or allocated as sequences grow (`paged`).
//! Invariants (checked in debug builds): used ≤ capacity, nothing freed twice, everything
//! released at the end of a drained run.
//!
//! With the prefix cache on ([`KvCache::with_prefix_cache`], paged only), full blocks
//! are also kept by key in [`prefix`]'s table: `used` counts the blocks running requests
//! hold (their own, and the cached ones they share, once each); blocks no one holds stay
//! cached, count as free, and are evicted least recently used first when the room is
//! taken (docs/model.md, Prefix caching).
//!
//! With llama.cpp's slot cache instead ([`KvCache::with_slot_cache`], the `llama_cpp`
//! policy), every slot keeps the tokens of the last sequence it served, in its own share
//! of the context ([`slot`]): they take none of the pool's room, and a request given the
//! slot reuses their common prefix with its prompt (docs/model.md, Slot cache).

mod prefix;
mod slot;

pub use prefix::PrefixCounts;
pub use slot::{common_prefix as slot_common_prefix, COMMON_TOKENS, SIMILARITY};

use crate::config::KvMode;
use crate::workload::shared::{block_chain_run, shared_blocks};
use crate::workload::{Request, SharedTokens};
use prefix::{Piece, PrefixTable};
use slot::SlotTable;

/// The prefix cache: what names the blocks, and the table of cached ones.
#[derive(Clone, Debug)]
struct Prefix {
    shared: Option<SharedTokens>,
    table: PrefixTable,
    /// Pieces of a leaving request, kept to walk them backwards.
    scratch: Vec<Piece>,
}

impl Prefix {
    /// Leading blocks of `r` another request may share ([`shared_blocks`]).
    #[inline]
    fn shareable(&self, r: &Request, bs: u64) -> u64 {
        shared_blocks(self.shared.as_ref(), r.id, r.group, r.conv, bs)
    }
}

/// Blocks `from..to` of `r` as pieces of one chain each ([`block_chain_run`]), in order.
#[inline]
fn pieces<'a>(
    shared: Option<&'a SharedTokens>,
    r: &'a Request,
    from: u64,
    to: u64,
    bs: u64,
) -> impl Iterator<Item = Piece> + 'a {
    let mut j = from;
    std::iter::from_fn(move || {
        if j >= to {
            return None;
        }
        let (chain, end) = block_chain_run(shared, r.id, r.group, r.conv, j, bs);
        let piece = (chain, j, end.min(to));
        j = piece.2;
        Some(piece)
    })
}

/// KV cache state. All sizes in blocks unless named `_tokens`.
#[derive(Clone, Debug)]
pub struct KvCache {
    mode: KvMode,
    block_size: u64,
    total_blocks: u64,
    used_blocks: u64,
    watermark_blocks: u64,
    peak_blocks: u64,
    /// The prefix cache, when on.
    prefix: Option<Box<Prefix>>,
    /// llama.cpp's slot cache, when on.
    slots: Option<Box<SlotTable>>,
}

impl KvCache {
    /// A pool of `kv_tokens / block_size` blocks; `watermark` is the fraction kept free at
    /// paged admission.
    pub fn new(mode: KvMode, kv_tokens: u64, block_size: u32, watermark: f64) -> KvCache {
        let block_size = block_size.max(1) as u64;
        let total_blocks = kv_tokens / block_size;
        let watermark_blocks = match mode {
            KvMode::Reserve => 0,
            KvMode::Paged => (watermark * total_blocks as f64).floor() as u64,
        };
        KvCache {
            mode,
            block_size,
            total_blocks,
            used_blocks: 0,
            watermark_blocks,
            peak_blocks: 0,
            prefix: None,
            slots: None,
        }
    }

    /// Turns the prefix cache on (paged mode; the configuration checks that), naming
    /// blocks by what `shared` says the requests share.
    pub fn with_prefix_cache(mut self, shared: Option<SharedTokens>) -> KvCache {
        self.prefix = Some(Box::new(Prefix {
            shared,
            table: PrefixTable::new(),
            scratch: Vec::new(),
        }));
        self
    }

    /// Turns llama.cpp's slot cache on for `slots` slots (paged mode and the `llama_cpp`
    /// policy; the configuration checks that), telling common prefixes by what `shared`
    /// says the requests share ([`slot_common_prefix`]).
    pub fn with_slot_cache(mut self, shared: Option<SharedTokens>, slots: u32) -> KvCache {
        self.slots = Some(Box::new(SlotTable::new(
            shared,
            slots as usize,
            self.block_size,
        )));
        self
    }

    /// Whether a prefix cache (automatic or per slot) is on.
    #[inline]
    pub fn prefix_on(&self) -> bool {
        self.prefix.is_some() || self.slots.is_some()
    }

    /// Whether llama.cpp's slot cache is on.
    #[inline]
    pub fn slot_cache_on(&self) -> bool {
        self.slots.is_some()
    }

    /// Blocks in the prefix cache that no request holds (free, but still cached); with
    /// the slot cache, the blocks of the idle slots' tokens.
    pub fn idle_cached_blocks(&self) -> u64 {
        match (&self.prefix, &self.slots) {
            (Some(p), _) => p.table.idle,
            (_, Some(s)) => s.idle_tokens.div_ceil(self.block_size),
            _ => 0,
        }
    }

    /// Blocks in the prefix cache that running requests hold; with the slot cache, the
    /// blocks the running requests reused from their slot.
    pub fn held_cached_blocks(&self) -> u64 {
        match (&self.prefix, &self.slots) {
            (Some(p), _) => p.table.live,
            (_, Some(s)) => s.held_tokens / self.block_size,
            _ => 0,
        }
    }

    /// The prefix cache's lookup counts, when on.
    pub fn prefix_counts(&self) -> Option<PrefixCounts> {
        match (&self.prefix, &self.slots) {
            (Some(p), _) => Some(p.table.counts),
            (_, Some(s)) => Some(s.counts),
            _ => None,
        }
    }

    /// Slot cache: the common prefix [tokens] of idle slot `slot`'s cached tokens and the
    /// first `target` tokens of `r`; `None` if the slot cache is off or the slot is busy
    /// or holds nothing.
    pub fn slot_common_prefix(&self, slot: usize, r: &Request, target: u32) -> Option<u64> {
        self.slots.as_ref()?.common_prefix(slot, r, target)
    }

    /// Slot cache: `r` takes idle slot `slot` to prefill `target` tokens. Its blocks are
    /// taken above the watermark as in paged admission (the slot's own share of the
    /// context holds its whole sequence); returns them and how many leading blocks it
    /// reuses from the slot's cache (their prefill is skipped). `None` (and nothing
    /// changed) if the blocks do not fit, or the slot cache is off.
    pub fn admit_slot(&mut self, slot: usize, r: &Request, target: u32) -> Option<(u64, u32)> {
        self.slots.as_ref()?;
        let need = self.blocks_for(target as u64);
        if !self.try_take_above_watermark(need) {
            return None;
        }
        let s = self.slots.as_deref_mut()?;
        let hit = s.take(slot, r, target) / self.block_size;
        Some((need, hit as u32))
    }

    /// Walks the prefix cache's table in full: no block both idle (free) and held, the
    /// counts consistent, cached blocks within capacity (with the slot cache: the slots'
    /// tokens as counted, hits within lookups). Returns what is wrong.
    ///
    /// # Errors
    /// A description of the first broken invariant.
    pub fn check_prefix(&self) -> Result<(), String> {
        if let Some(s) = &self.slots {
            return s.check();
        }
        let Some(p) = &self.prefix else {
            return Ok(());
        };
        p.table.check()?;
        if self.used_blocks + p.table.idle > self.total_blocks {
            return Err(format!(
                "{} blocks held + {} idle cached exceed the {} blocks",
                self.used_blocks, p.table.idle, self.total_blocks
            ));
        }
        if p.table.live > self.used_blocks {
            return Err(format!(
                "{} cached blocks held but only {} in use",
                p.table.live, self.used_blocks
            ));
        }
        Ok(())
    }

    /// Paged admission of request `r` to prefill `target` tokens: the blocks it will
    /// hold, and how many leading ones it found in the prefix cache (0 with the cache
    /// off). The lookup covers the full blocks within the first `target − 1` tokens, so
    /// at least one token is always prefilled (as vLLM does). The blocks come from the
    /// free room above the watermark, counting cached blocks no one holds as free
    /// (those it hits stop being free). `None` (and nothing changed) if they do not fit.
    /// Only a request that was `preempted` looks past the blocks it may share with others
    /// (its own blocks can be cached only then); the others count as looked up and missed.
    pub fn admit_paged(&mut self, r: &Request, target: u32, preempted: bool) -> Option<(u64, u32)> {
        let need = self.blocks_for(target as u64);
        let bs = self.block_size;
        let free = self.free_blocks();
        let wm = self.watermark_blocks;
        let Some(p) = self.prefix.as_deref_mut() else {
            return self.try_take_above_watermark(need).then_some((need, 0));
        };
        let max_hit = (target.max(1) as u64 - 1) / bs;
        let look = if preempted {
            max_hit
        } else {
            max_hit.min(p.shareable(r, bs))
        };
        // Only hits on held blocks take no room: when even hitting every held block
        // could not fit, the lookup can be skipped (a long queue retries its head at
        // every step).
        if need - look.min(p.table.live).min(need) + wm > free {
            return None;
        }
        let idle_hits = p
            .table
            .find_prefix(pieces(p.shared.as_ref(), r, 0, look, bs));
        let hits = p.table.found_blocks;
        let fresh = need - hits;
        if fresh + idle_hits + wm > free {
            return None;
        }
        let woke = p.table.hold_found();
        let c = &mut p.table.counts;
        c.lookups += 1;
        c.hit_lookups += u64::from(hits > 0);
        c.query_blocks += max_hit;
        c.hit_blocks += hits;
        c.query_tokens += target as u64;
        c.hit_tokens += hits * bs;
        self.used_blocks += woke;
        let taken = self.try_take(fresh);
        debug_assert!(taken, "checked against the free room");
        Some((need, hits as u32))
    }

    /// Prefix cache: a running request's newly computed full blocks (its first
    /// `kv_tokens` tokens) join the cache, held by it. `cached` counts its leading blocks
    /// in the cache and grows; a block another request computed meanwhile stays the
    /// request's own, and so do the ones after it. Nothing with the cache off.
    #[inline]
    pub fn register(&mut self, r: &Request, cached: &mut u32, kv_tokens: u64) {
        let bs = self.block_size;
        let Some(p) = self.prefix.as_deref_mut() else {
            return;
        };
        // Only blocks others may share: a request's own are found only after it leaves.
        let full = (kv_tokens / bs).min(p.shareable(r, bs));
        let from = *cached as u64;
        if from < full {
            let added = p
                .table
                .insert_live(pieces(p.shared.as_ref(), r, from, full, bs));
            *cached = (from + added) as u32;
        }
    }

    /// A request leaves (finished, or `preempted`) holding `blocks`, the first `cached`
    /// of them from the prefix cache, with `kv_tokens` tokens computed. With the cache
    /// on, its full blocks stay cached, idle once no one holds them, the last block first
    /// in line for eviction and block 0 last (as vLLM frees them); the rest is freed. A
    /// finished request's blocks that no other request can share stay as one anonymous
    /// run (they take room and LRU places, and nothing can find them). With the slot
    /// cache, its slot keeps its `kv_tokens` tokens and all its blocks are freed.
    pub fn release_request(
        &mut self,
        r: &Request,
        cached: u32,
        blocks: u64,
        kv_tokens: u64,
        preempted: bool,
    ) {
        let bs = self.block_size;
        if let Some(s) = self.slots.as_deref_mut() {
            // The slot keeps the computed tokens, in its own share of the context.
            s.release(r, kv_tokens);
            debug_assert!(s.check().is_ok(), "{:?}", s.check());
            self.release(blocks);
            return;
        }
        let Some(p) = self.prefix.as_deref_mut() else {
            self.release(blocks);
            return;
        };
        let cached = cached as u64;
        let full = (kv_tokens / bs).clamp(cached, blocks.max(cached));
        // Own blocks past the full ones hold nothing reusable; own full ones become idle
        // cached blocks unless the same key is cached already; held ones lose a holder.
        let mut freed = blocks - full;
        let keyed = if preempted {
            full
        } else {
            p.shareable(r, bs).clamp(cached, full)
        };
        p.table.insert_anon(full - keyed);
        freed += full - keyed;
        let mut walk = std::mem::take(&mut p.scratch);
        walk.clear();
        walk.extend(pieces(p.shared.as_ref(), r, cached, keyed, bs));
        for &piece in walk.iter().rev() {
            p.table.insert_idle(piece);
        }
        freed += keyed - cached;
        walk.clear();
        walk.extend(pieces(p.shared.as_ref(), r, 0, cached, bs));
        for &piece in walk.iter().rev() {
            freed += p.table.unhold(piece);
        }
        p.scratch = walk;
        self.release(freed);
        debug_assert!(
            self.total_blocks > 4096 || self.check_prefix().is_ok(),
            "{:?}",
            self.check_prefix()
        );
    }

    /// Blocks needed to hold `tokens` tokens.
    #[inline]
    pub fn blocks_for(&self, tokens: u64) -> u64 {
        tokens.div_ceil(self.block_size)
    }

    pub fn mode(&self) -> KvMode {
        self.mode
    }

    pub fn block_size(&self) -> u64 {
        self.block_size
    }

    pub fn total_blocks(&self) -> u64 {
        self.total_blocks
    }

    pub fn used_blocks(&self) -> u64 {
        self.used_blocks
    }

    pub fn free_blocks(&self) -> u64 {
        self.total_blocks - self.used_blocks
    }

    /// Highest number of blocks ever in use.
    pub fn peak_blocks(&self) -> u64 {
        self.peak_blocks
    }

    /// Takes `n` blocks if they fit.
    #[inline]
    pub fn try_take(&mut self, n: u64) -> bool {
        if n <= self.free_blocks() {
            self.used_blocks += n;
            self.peak_blocks = self.peak_blocks.max(self.used_blocks);
            if let Some(p) = self.prefix.as_deref_mut() {
                // Free room that cached blocks still occupy: evict them, LRU first.
                let over = (self.used_blocks + p.table.idle).saturating_sub(self.total_blocks);
                if over > 0 {
                    p.table.evict(over);
                }
            }
            true
        } else {
            false
        }
    }

    /// Takes `n` blocks if at least the watermark stays free afterwards (paged admission).
    #[inline]
    pub fn try_take_above_watermark(&mut self, n: u64) -> bool {
        if n + self.watermark_blocks <= self.free_blocks() {
            self.try_take(n)
        } else {
            false
        }
    }

    /// Returns `n` blocks to the pool.
    #[inline]
    pub fn release(&mut self, n: u64) {
        debug_assert!(
            n <= self.used_blocks,
            "KV release of {n} blocks with only {} in use",
            self.used_blocks
        );
        self.used_blocks -= n.min(self.used_blocks);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(not(target_arch = "wasm32"))]
    use proptest::prelude::*;

    #[cfg(not(target_arch = "wasm32"))]
    proptest! {
        #[test]
        fn never_over_capacity(ops in proptest::collection::vec((any::<bool>(), 0u64..40), 1..200)) {
            let mut kv = KvCache::new(KvMode::Paged, 1000, 16, 0.01);
            let mut held: Vec<u64> = Vec::new();
            for (take, n) in ops {
                if take {
                    if kv.try_take(n) { held.push(n); }
                } else if let Some(h) = held.pop() {
                    kv.release(h);
                }
                prop_assert!(kv.used_blocks() <= kv.total_blocks());
                prop_assert_eq!(kv.used_blocks(), held.iter().sum::<u64>());
            }
            for h in held { kv.release(h); }
            prop_assert_eq!(kv.used_blocks(), 0);
        }
    }

    #[test]
    fn watermark_and_rounding() {
        let mut kv = KvCache::new(KvMode::Paged, 1600, 16, 0.1);
        assert_eq!(kv.total_blocks(), 100);
        assert_eq!(kv.blocks_for(17), 2);
        assert!(!kv.try_take_above_watermark(91));
        assert!(kv.try_take_above_watermark(90));
        assert!(kv.try_take(10));
        assert!(!kv.try_take(1));
    }
}
