//! The KV block manager: a pool of `capacity / block_size` blocks, either reserved whole
//! at arrival (`reserve`, a loss system) or allocated as sequences grow (`paged`).
//! Invariants (checked in debug builds): used ≤ capacity, nothing freed twice, everything
//! released at the end of a drained run.

use crate::config::KvMode;

/// KV cache state. All sizes in blocks unless named `_tokens`.
#[derive(Clone, Debug)]
pub struct KvCache {
    mode: KvMode,
    block_size: u64,
    total_blocks: u64,
    used_blocks: u64,
    watermark_blocks: u64,
    peak_blocks: u64,
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
        }
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
