//! Automatic prefix caching (docs/model.md, Prefix caching), as vLLM does it: every full
//! KV block is named by a key that stands for its tokens and everything before them
//! ([`crate::workload::shared::block_key`]). A block that running requests hold is
//! *live* (reference-counted); when the last holder leaves, its block stays in the cache
//! *idle*, still counted as free room, until that room is taken: then idle blocks are
//! evicted least recently used first. An admission looks its prompt's full blocks up in
//! order and stops at the first miss; the hits need no prefill.
//!
//! A key is a chain and an index in it ([`crate::workload::shared::block_chain`]), and a
//! request's blocks come in long runs of one chain (a trace block id's, a conversation's),
//! so the table works on *pieces*: a chain and a range of indices. Each chain keeps its
//! blocks' reference counts in one array by index, found through a hash map once per
//! piece. The LRU order of the idle blocks is an intrusive doubly linked list of *runs*:
//! consecutive blocks of one chain that went idle one after the other, last index first
//! (as a leaving request returns them), so a run is evicted from its top index down and
//! a piece is returned, held or evicted at the cost of a loop over its counts plus O(1)
//! per run it touches. Holding blocks in the middle of a run splits it in two, in place.
//! Blocks that only their own request could ever find (past what it shares with others,
//! [`crate::workload::shared::shared_blocks`]) leave a finished request as one
//! *anonymous* run in the idle list: they take room and LRU places like any cached
//! block, at O(1) per request.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Chain bases are well mixed or carry their label in the high bits: one folded multiply
/// spreads either over every bit a hash table reads.
#[derive(Default)]
pub(crate) struct KeyHasher(u64);

impl Hasher for KeyHasher {
    #[inline]
    fn finish(&self) -> u64 {
        let p = (self.0 as u128).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        (p as u64) ^ ((p >> 64) as u64)
    }
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ b as u64;
        }
    }
    #[inline]
    fn write_u64(&mut self, x: u64) {
        self.0 = x;
    }
}

const NIL: u32 = u32::MAX;

/// The reference count of a block not in the table.
const ABSENT: u32 = u32::MAX;

/// A piece of a request's blocks: the chain ([`crate::workload::shared::block_chain`])
/// and the block indices `lo..hi` in it.
pub(crate) type Piece = (u64, u64, u64);

/// A run of idle blocks in the LRU list: blocks `lo..hi` of chain `chain`, evicted from
/// `hi − 1` down; or, with `chain` NIL, an anonymous run of `hi − lo` blocks.
#[derive(Clone, Copy, Debug)]
struct Run {
    chain: u32,
    lo: u64,
    hi: u64,
    prev: u32,
    next: u32,
}

/// The cached blocks of one chain: reference counts by index from `j0` (ABSENT: not
/// cached), and the idle runs that hold its idle blocks.
#[derive(Clone, Debug, Default)]
struct Chain {
    base: u64,
    j0: u64,
    refs: Vec<u32>,
    present: u64,
    runs: Vec<u32>,
}

impl Chain {
    /// The counts of blocks `lo..hi` clipped to the array, and the index of the first.
    #[inline]
    fn window(&self, lo: u64, hi: u64) -> (u64, &[u32]) {
        let n = self.refs.len() as u64;
        let a = lo.saturating_sub(self.j0).min(n);
        let b = hi.saturating_sub(self.j0).min(n);
        (self.j0 + a, &self.refs[a as usize..b as usize])
    }

    /// Makes the array cover blocks `lo..hi`; returns the slice of their counts.
    fn cover(&mut self, lo: u64, hi: u64) -> &mut [u32] {
        if self.refs.is_empty() {
            self.j0 = lo;
        }
        if lo < self.j0 {
            let more = (self.j0 - lo) as usize;
            self.refs.splice(0..0, std::iter::repeat_n(ABSENT, more));
            self.j0 = lo;
        }
        let end = (hi - self.j0) as usize;
        if end > self.refs.len() {
            self.refs.resize(end, ABSENT);
        }
        &mut self.refs[(lo - self.j0) as usize..end]
    }
}

/// Applies `go_idle` to the counts of blocks `lo..` (`refs`), last block first, and
/// appends the spans of consecutive blocks for which it returned true to `spans`, highest
/// first (the order in which they go idle); returns how many blocks it returned true for.
#[inline]
fn spans_of(
    refs: &mut [u32],
    lo: u64,
    spans: &mut Vec<(u64, u64)>,
    mut go_idle: impl FnMut(&mut u32) -> bool,
) -> u64 {
    let mut n = 0;
    // The open span's top (exclusive), if any.
    let mut top = None;
    for k in (0..refs.len()).rev() {
        let j = lo + k as u64;
        if go_idle(&mut refs[k]) {
            n += 1;
            top.get_or_insert(j + 1);
        } else if let Some(t) = top.take() {
            spans.push((j + 1, t));
        }
    }
    if let Some(t) = top {
        spans.push((lo, t));
    }
    n
}

/// Counts of the lookups made at admissions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PrefixCounts {
    /// Admissions that looked their prompt up (re-admissions after preemption included).
    pub lookups: u64,
    /// Admissions that hit at least one block.
    pub hit_lookups: u64,
    /// Full prompt blocks looked up (those within the first prompt − 1 tokens).
    pub query_blocks: u64,
    /// Of them, blocks found (and not prefilled).
    pub hit_blocks: u64,
    /// Prompt tokens to prefill at those admissions, before the cache.
    pub query_tokens: u64,
    /// Prompt tokens the hits skipped (hit blocks × block size).
    pub hit_tokens: u64,
    /// Idle blocks evicted to make room.
    pub evictions: u64,
    /// Most blocks in the cache (live + idle) at once.
    pub peak_cached_blocks: u64,
}

impl std::ops::Add for PrefixCounts {
    type Output = PrefixCounts;

    /// The counts of two caches together (a fleet's replicas): sums, and the peak as the
    /// sum of the peaks (an upper bound on the fleet's peak at any one instant).
    fn add(self, o: PrefixCounts) -> PrefixCounts {
        PrefixCounts {
            lookups: self.lookups + o.lookups,
            hit_lookups: self.hit_lookups + o.hit_lookups,
            query_blocks: self.query_blocks + o.query_blocks,
            hit_blocks: self.hit_blocks + o.hit_blocks,
            query_tokens: self.query_tokens + o.query_tokens,
            hit_tokens: self.hit_tokens + o.hit_tokens,
            evictions: self.evictions + o.evictions,
            peak_cached_blocks: self.peak_cached_blocks + o.peak_cached_blocks,
        }
    }
}

/// Blocks found by a lookup: blocks `lo..hi` of chain slot `chain`, `idle` of them idle.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Found {
    chain: u32,
    lo: u64,
    hi: u64,
    idle: u64,
}

/// The cache's table of keyed blocks: chains by base (a hash map, looked up once per
/// piece), each an array of reference counts by index, and the LRU list of idle runs.
#[derive(Clone, Debug, Default)]
pub(crate) struct PrefixTable {
    chain_of: HashMap<u64, u32, BuildHasherDefault<KeyHasher>>,
    chains: Vec<Chain>,
    free_chains: Vec<u32>,
    /// The chain last looked up (base, slot): consecutive pieces often share a chain.
    memo: Option<(u64, u32)>,
    runs: Vec<Run>,
    free_runs: Vec<u32>,
    /// LRU end (evicted first) and MRU end of the idle list.
    head: u32,
    tail: u32,
    /// Blocks with refs = 0 (in the idle list, anonymous runs counted in full) / > 0.
    pub(crate) idle: u64,
    pub(crate) live: u64,
    /// Spans of blocks going idle together, kept between calls.
    spans: Vec<(u64, u64)>,
    /// Pieces found by the last [`PrefixTable::find_prefix`], and their blocks.
    found: Vec<Found>,
    pub(crate) found_blocks: u64,
    pub(crate) counts: PrefixCounts,
}

impl PrefixTable {
    pub(crate) fn new() -> PrefixTable {
        PrefixTable {
            head: NIL,
            tail: NIL,
            ..PrefixTable::default()
        }
    }

    /// The chain slot of `base`, if it has cached blocks.
    #[inline]
    fn chain(&mut self, base: u64) -> Option<u32> {
        if let Some((b, c)) = self.memo {
            if b == base {
                return Some(c);
            }
        }
        let c = *self.chain_of.get(&base)?;
        self.memo = Some((base, c));
        Some(c)
    }

    /// The chain slot of `base`, made if absent (its arrays reused from a dropped chain).
    fn chain_or_new(&mut self, base: u64) -> u32 {
        if let Some(c) = self.chain(base) {
            return c;
        }
        let c = match self.free_chains.pop() {
            Some(c) => {
                let ch = &mut self.chains[c as usize];
                ch.base = base;
                ch.j0 = 0;
                ch.present = 0;
                c
            }
            None => {
                self.chains.push(Chain {
                    base,
                    ..Chain::default()
                });
                (self.chains.len() - 1) as u32
            }
        };
        self.chain_of.insert(base, c);
        self.memo = Some((base, c));
        c
    }

    /// Looks `pieces` up in order, block by block, stopping at the first miss; the hits
    /// go to [`PrefixTable::found_blocks`] (and are remembered for
    /// [`PrefixTable::hold_found`]). Returns how many of the hits are idle (they take
    /// room when held). Changes nothing else.
    #[inline]
    pub(crate) fn find_prefix(&mut self, pieces: impl Iterator<Item = Piece>) -> u64 {
        self.found.clear();
        self.found_blocks = 0;
        let mut idle = 0;
        for (base, lo, hi) in pieces {
            if lo >= hi {
                continue;
            }
            let Some(c) = self.chain(base) else {
                break;
            };
            let (first, refs) = self.chains[c as usize].window(lo, hi);
            if first != lo {
                break;
            }
            let mut n = 0u64;
            let mut n_idle = 0u64;
            for &r in refs {
                if r == ABSENT {
                    break;
                }
                n += 1;
                n_idle += u64::from(r == 0);
            }
            if n > 0 {
                self.found.push(Found {
                    chain: c,
                    lo,
                    hi: lo + n,
                    idle: n_idle,
                });
                self.found_blocks += n;
                idle += n_idle;
            }
            if lo + n < hi {
                break;
            }
        }
        idle
    }

    /// Holds every block [`PrefixTable::find_prefix`] found; returns how many were idle.
    pub(crate) fn hold_found(&mut self) -> u64 {
        let mut woke = 0;
        for n in 0..self.found.len() {
            let f = self.found[n];
            let ch = &mut self.chains[f.chain as usize];
            for r in &mut ch.refs[(f.lo - ch.j0) as usize..(f.hi - ch.j0) as usize] {
                *r += 1;
            }
            if f.idle > 0 {
                self.take_from_runs(f.chain, f.lo, f.hi);
                woke += f.idle;
            }
        }
        self.idle -= woke;
        self.live += woke;
        woke
    }

    /// Takes blocks `a..b` of chain `c` out of its idle runs (they are held now): a run
    /// they cover goes, one they cut keeps its place, and one they split leaves its top
    /// part in its place and its bottom part right after it.
    fn take_from_runs(&mut self, c: u32, a: u64, b: u64) {
        let mut k = 0;
        while k < self.chains[c as usize].runs.len() {
            let i = self.chains[c as usize].runs[k];
            let Run { lo, hi, .. } = self.runs[i as usize];
            if hi <= a || lo >= b {
                k += 1;
                continue;
            }
            if a <= lo && hi <= b {
                self.unlink(i);
                self.free_runs.push(i);
                self.chains[c as usize].runs.swap_remove(k);
                continue;
            }
            if a <= lo {
                self.runs[i as usize].lo = b;
            } else if hi <= b {
                self.runs[i as usize].hi = a;
            } else {
                self.runs[i as usize].lo = b;
                let n = self.alloc(c, lo, a);
                self.insert_after(i, n);
                self.chains[c as usize].runs.push(n);
            }
            k += 1;
        }
    }

    /// Adds the blocks of `pieces` as live blocks held once (a holder's own blocks, just
    /// computed), in order, up to the first one already in the table; returns how many
    /// were added.
    pub(crate) fn insert_live(&mut self, pieces: impl Iterator<Item = Piece>) -> u64 {
        let mut added = 0;
        for (base, lo, hi) in pieces {
            if lo >= hi {
                continue;
            }
            let c = self.chain_or_new(base);
            let ch = &mut self.chains[c as usize];
            let mut n = 0;
            for r in ch.cover(lo, hi) {
                if *r != ABSENT {
                    break;
                }
                *r = 1;
                n += 1;
            }
            ch.present += n;
            added += n;
            if lo + n < hi {
                break;
            }
        }
        self.live += added;
        self.note_peak();
        added
    }

    /// Adds the blocks of `piece` not in the table as idle blocks at the most recently
    /// used end, its last block first (a leaving holder's own blocks).
    pub(crate) fn insert_idle(&mut self, (base, lo, hi): Piece) {
        if lo >= hi {
            return;
        }
        let c = self.chain_or_new(base);
        let mut spans = std::mem::take(&mut self.spans);
        spans.clear();
        let refs = self.chains[c as usize].cover(lo, hi);
        let n = spans_of(refs, lo, &mut spans, |r| {
            if *r == ABSENT {
                *r = 0;
                true
            } else {
                false
            }
        });
        self.chains[c as usize].present += n;
        for &(a, b) in &spans {
            self.push_mru_span(c, a, b);
        }
        self.spans = spans;
        self.idle += n;
        self.note_peak();
    }

    /// Drops one hold on each block of `piece`, its last block first; those that lose
    /// their last holder become idle (most recently used). Returns how many did.
    pub(crate) fn unhold(&mut self, (base, lo, hi): Piece) -> u64 {
        if lo >= hi {
            return 0;
        }
        let Some(c) = self.chain(base) else {
            debug_assert!(false, "held blocks are in the table");
            return 0;
        };
        let mut spans = std::mem::take(&mut self.spans);
        spans.clear();
        let ch = &mut self.chains[c as usize];
        let refs = &mut ch.refs[(lo - ch.j0) as usize..(hi - ch.j0) as usize];
        let n = spans_of(refs, lo, &mut spans, |r| {
            debug_assert!(*r != 0 && *r != ABSENT, "unhold of a block not held");
            *r -= 1;
            *r == 0
        });
        for &(a, b) in &spans {
            self.push_mru_span(c, a, b);
        }
        self.spans = spans;
        self.live -= n;
        self.idle += n;
        n
    }

    /// Blocks `lo..hi` of chain `c` go idle at the most recently used end, the last one
    /// first: they extend the last run if that run's bottom block is `hi` of the same
    /// chain.
    #[inline]
    fn push_mru_span(&mut self, c: u32, lo: u64, hi: u64) {
        let t = self.tail;
        if t != NIL {
            let run = &mut self.runs[t as usize];
            if run.chain == c && run.lo == hi {
                run.lo = lo;
                return;
            }
        }
        let i = self.alloc(c, lo, hi);
        self.push_mru(i);
        self.chains[c as usize].runs.push(i);
    }

    /// Adds `n` idle blocks no other request can find, as one run at the most recently
    /// used end (a finished request's own blocks).
    pub(crate) fn insert_anon(&mut self, n: u64) {
        if n == 0 {
            return;
        }
        let n = n.min(u32::MAX as u64);
        let i = self.alloc(NIL, 0, n);
        self.push_mru(i);
        self.idle += n;
        self.note_peak();
    }

    /// Evicts up to `n` idle blocks, least recently used first; returns how many.
    pub(crate) fn evict(&mut self, n: u64) -> u64 {
        let mut done = 0;
        while done < n {
            let i = self.head;
            if i == NIL {
                break;
            }
            let Run { chain, lo, hi, .. } = self.runs[i as usize];
            let k = (hi - lo).min(n - done);
            done += k;
            if chain != NIL {
                let ch = &mut self.chains[chain as usize];
                let j0 = ch.j0;
                ch.refs[(hi - k - j0) as usize..(hi - j0) as usize].fill(ABSENT);
                ch.present -= k;
            }
            if k < hi - lo {
                self.runs[i as usize].hi = hi - k;
                break;
            }
            self.unlink(i);
            self.free_runs.push(i);
            if chain != NIL {
                let ch = &mut self.chains[chain as usize];
                if let Some(at) = ch.runs.iter().position(|&r| r == i) {
                    ch.runs.swap_remove(at);
                }
                if ch.present == 0 {
                    self.drop_chain(chain);
                }
            }
        }
        self.idle -= done;
        self.counts.evictions += done;
        done
    }

    /// Removes chain `c`, which has no blocks left; its arrays are kept for reuse.
    fn drop_chain(&mut self, c: u32) {
        let ch = &mut self.chains[c as usize];
        debug_assert!(ch.present == 0 && ch.runs.is_empty());
        ch.refs.clear();
        let base = ch.base;
        self.chain_of.remove(&base);
        self.free_chains.push(c);
        if self.memo.is_some_and(|m| m.1 == c) {
            self.memo = None;
        }
    }

    fn alloc(&mut self, chain: u32, lo: u64, hi: u64) -> u32 {
        let e = Run {
            chain,
            lo,
            hi,
            prev: NIL,
            next: NIL,
        };
        match self.free_runs.pop() {
            Some(i) => {
                self.runs[i as usize] = e;
                i
            }
            None => {
                self.runs.push(e);
                (self.runs.len() - 1) as u32
            }
        }
    }

    fn note_peak(&mut self) {
        let n = self.idle + self.live;
        if n > self.counts.peak_cached_blocks {
            self.counts.peak_cached_blocks = n;
        }
    }

    fn push_mru(&mut self, i: u32) {
        let t = self.tail;
        {
            let e = &mut self.runs[i as usize];
            e.prev = t;
            e.next = NIL;
        }
        if t == NIL {
            self.head = i;
        } else {
            self.runs[t as usize].next = i;
        }
        self.tail = i;
    }

    /// Links run `n` into the list right after run `i`.
    fn insert_after(&mut self, i: u32, n: u32) {
        let next = self.runs[i as usize].next;
        {
            let e = &mut self.runs[n as usize];
            e.prev = i;
            e.next = next;
        }
        self.runs[i as usize].next = n;
        if next == NIL {
            self.tail = n;
        } else {
            self.runs[next as usize].prev = n;
        }
    }

    fn unlink(&mut self, i: u32) {
        let Run { prev, next, .. } = self.runs[i as usize];
        if prev == NIL {
            self.head = next;
        } else {
            self.runs[prev as usize].next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            self.runs[next as usize].prev = prev;
        }
        let e = &mut self.runs[i as usize];
        e.prev = NIL;
        e.next = NIL;
    }

    /// The table's invariants, walked in full (tests and debug checks): the idle runs
    /// hold exactly the blocks no one holds, once each, in a consistent list, every
    /// chain is where the map says, and the counts agree. Returns what is wrong, if
    /// anything.
    pub(crate) fn check(&self) -> Result<(), String> {
        let (mut n, mut steps) = (0u64, 0u64);
        let mut covered: HashMap<u32, Vec<bool>> = HashMap::new();
        let mut i = self.head;
        let mut prev = NIL;
        while i != NIL {
            let e = &self.runs[i as usize];
            if e.prev != prev {
                return Err("idle list broken".into());
            }
            if e.lo >= e.hi {
                return Err("empty idle run".into());
            }
            if e.chain != NIL {
                let ch = &self.chains[e.chain as usize];
                if self.chain_of.get(&ch.base) != Some(&e.chain) || !ch.runs.contains(&i) {
                    return Err("an idle run's chain does not list it".into());
                }
                let cov = covered
                    .entry(e.chain)
                    .or_insert_with(|| vec![false; ch.refs.len()]);
                for j in e.lo..e.hi {
                    let k = j.checked_sub(ch.j0).map(|k| k as usize);
                    match k {
                        Some(k) if k < ch.refs.len() && ch.refs[k] == 0 && !cov[k] => {
                            cov[k] = true;
                        }
                        _ => {
                            return Err(format!(
                                "block {j} of chain {} is in an idle run but not idle, or twice",
                                e.chain
                            ))
                        }
                    }
                }
            }
            n += e.hi - e.lo;
            steps += 1;
            if steps > self.runs.len() as u64 {
                return Err("idle list has a cycle".into());
            }
            prev = i;
            i = e.next;
        }
        if prev != self.tail {
            return Err("idle list tail wrong".into());
        }
        if n != self.idle {
            return Err(format!("{n} idle blocks listed, {} counted", self.idle));
        }
        let (mut live, mut keyed) = (0u64, 0u64);
        for (&base, &c) in &self.chain_of {
            let ch = &self.chains[c as usize];
            if ch.base != base {
                return Err("chain map broken".into());
            }
            let mut present = 0;
            for (k, &r) in ch.refs.iter().enumerate() {
                if r == ABSENT {
                    continue;
                }
                if r == 0 && !covered.get(&c).is_some_and(|cov| cov[k]) {
                    return Err(format!(
                        "block {} of chain {c} is idle but in no idle run",
                        ch.j0 + k as u64
                    ));
                }
                present += 1;
                keyed += 1;
                live += u64::from(r > 0);
            }
            if present != ch.present || present == 0 {
                return Err("chain count wrong".into());
            }
            for &i in &ch.runs {
                if self.runs[i as usize].chain != c {
                    return Err("a chain lists another chain's run".into());
                }
            }
        }
        if live != self.live {
            return Err(format!(
                "{live} held blocks found, {} counted ({keyed} keyed)",
                self.live
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl PrefixTable {
        /// Whether block `j` of chain `base` is in the table.
        fn contains(&mut self, base: u64, j: u64) -> bool {
            self.chain(base).is_some_and(|c| {
                let (first, refs) = self.chains[c as usize].window(j, j + 1);
                first == j && refs.first().is_some_and(|&r| r != ABSENT)
            })
        }

        /// The idle blocks in eviction order, an anonymous one as `None`.
        fn lru_order(&self) -> Vec<Option<(u64, u64)>> {
            let mut out = Vec::new();
            let mut i = self.head;
            while i != NIL {
                let e = self.runs[i as usize];
                for j in (e.lo..e.hi).rev() {
                    out.push((e.chain != NIL).then(|| (self.chains[e.chain as usize].base, j)));
                }
                i = e.next;
            }
            out
        }
    }

    fn one(base: u64, j: u64) -> Piece {
        (base, j, j + 1)
    }

    #[test]
    fn idle_blocks_go_least_recently_used_first() {
        let mut t = PrefixTable::new();
        for k in 1..=3 {
            t.insert_idle(one(k, 0));
        }
        assert_eq!((t.idle, t.live), (3, 0));
        // Holding 1 takes it out of the idle list; releasing it makes it the most recent.
        assert_eq!(
            t.find_prefix([1u64, 2, 9, 3].into_iter().map(|k| one(k, 0))),
            2
        );
        assert_eq!(t.found_blocks, 2);
        assert_eq!(t.hold_found(), 2);
        assert_eq!((t.idle, t.live), (1, 2));
        t.check().unwrap();
        assert_eq!(t.unhold(one(1, 0)), 1);
        assert_eq!(t.unhold(one(2, 0)), 1);
        // Order now: 3, 1, 2.
        assert_eq!(t.evict(1), 1);
        assert!(!t.contains(3, 0));
        assert_eq!(t.evict(1), 1);
        assert!(!t.contains(1, 0) && t.contains(2, 0));
        assert_eq!(t.insert_live(std::iter::once(one(7, 0))), 1);
        assert_eq!(t.evict(1), 1);
        assert_eq!(t.evict(1), 0, "7 is held");
        t.check().unwrap();
        assert_eq!(t.counts.evictions, 3);
        assert_eq!(t.counts.peak_cached_blocks, 3);
        // Anonymous runs: evicted block by block, in their LRU place.
        t.insert_anon(3);
        t.insert_idle(one(8, 5));
        t.insert_idle(one(8, 3));
        t.insert_anon(2);
        assert_eq!(t.idle, 7);
        assert_eq!(t.evict(2), 2);
        t.check().unwrap();
        assert_eq!(t.evict(2), 2);
        assert!(
            !t.contains(8, 5) && t.contains(8, 3),
            "the run of 3 went, then (8, 5)"
        );
        assert_eq!(t.evict(1), 1);
        t.check().unwrap();
        assert_eq!(t.evict(5), 2, "only the last run is left");
        assert_eq!(t.idle, 0);
        t.check().unwrap();
    }

    #[test]
    fn a_run_held_in_the_middle_splits_in_place() {
        let mut t = PrefixTable::new();
        t.insert_idle((1, 0, 10));
        t.insert_idle(one(2, 0));
        assert_eq!(t.find_prefix([(1, 0, 2), (1, 2, 6)].into_iter()), 6);
        // Held: 0..6 (found); then blocks 2..6 given back, and 0..2 kept.
        t.hold_found();
        t.check().unwrap();
        assert_eq!(t.unhold((1, 3, 6)), 3);
        t.check().unwrap();
        let order: Vec<_> = t.lru_order().into_iter().flatten().collect();
        let want: Vec<(u64, u64)> = [9, 8, 7, 6]
            .into_iter()
            .map(|j| (1, j))
            .chain([(2, 0), (1, 5), (1, 4), (1, 3)])
            .collect();
        assert_eq!(order, want);
        // Holding 7 splits the first run: 9, 8 stay first, 6 comes right after.
        assert_eq!(t.find_prefix([(1, 0, 3), (1, 3, 8)].into_iter()), 5);
        assert_eq!(t.found_blocks, 8);
        t.hold_found();
        t.check().unwrap();
        assert_eq!(
            t.lru_order(),
            vec![Some((1, 9)), Some((1, 8)), Some((2, 0))]
        );
    }

    #[cfg(not(target_arch = "wasm32"))]
    /// The same operations on a table of single blocks, one LRU entry per block.
    #[derive(Default)]
    struct Naive {
        refs: std::collections::HashMap<(u64, u64), u32>,
        lru: Vec<Option<(u64, u64)>>,
    }

    #[cfg(not(target_arch = "wasm32"))]
    impl Naive {
        fn blocks(pieces: &[Piece]) -> impl Iterator<Item = (u64, u64)> + '_ {
            pieces
                .iter()
                .flat_map(|&(b, lo, hi)| (lo..hi).map(move |j| (b, j)))
        }
        fn find(&self, pieces: &[Piece]) -> Vec<(u64, u64)> {
            Naive::blocks(pieces)
                .take_while(|k| self.refs.contains_key(k))
                .collect()
        }
        fn hold(&mut self, keys: &[(u64, u64)]) {
            for k in keys {
                let r = self.refs.get_mut(k).unwrap();
                if *r == 0 {
                    self.lru.retain(|x| *x != Some(*k));
                }
                *r += 1;
            }
        }
        fn insert_live(&mut self, pieces: &[Piece]) -> Vec<(u64, u64)> {
            let mut added = Vec::new();
            for k in Naive::blocks(pieces) {
                if self.refs.contains_key(&k) {
                    break;
                }
                self.refs.insert(k, 1);
                added.push(k);
            }
            added
        }
        fn insert_idle(&mut self, (b, lo, hi): Piece) {
            for j in (lo..hi).rev() {
                if let std::collections::hash_map::Entry::Vacant(e) = self.refs.entry((b, j)) {
                    e.insert(0);
                    self.lru.push(Some((b, j)));
                }
            }
        }
        fn unhold(&mut self, k: (u64, u64)) {
            let r = self.refs.get_mut(&k).unwrap();
            *r -= 1;
            if *r == 0 {
                self.lru.push(Some(k));
            }
        }
        fn evict(&mut self, n: usize) {
            let n = n.min(self.lru.len());
            for k in self.lru.drain(..n).flatten() {
                self.refs.remove(&k);
            }
        }
    }

    #[cfg(not(target_arch = "wasm32"))]
    #[derive(Clone, Debug)]
    enum Op {
        Admit(Vec<(u64, u64)>),
        Register(Vec<(u64, u64)>),
        Leave(usize),
        Idle(u64, u64, u64),
        Anon(u64),
        Evict(u64),
    }

    #[cfg(not(target_arch = "wasm32"))]
    /// A request's pieces: chains in turn over consecutive block indices.
    fn pieces(spec: &[(u64, u64)]) -> Vec<Piece> {
        let mut j = 0;
        spec.iter()
            .map(|&(b, n)| {
                j += n;
                (b, j - n, j)
            })
            .collect()
    }

    #[cfg(not(target_arch = "wasm32"))]
    /// Held blocks as pieces, in order: consecutive blocks of one chain as one.
    fn as_pieces(keys: &[(u64, u64)]) -> Vec<Piece> {
        let mut out: Vec<Piece> = Vec::new();
        for &(b, j) in keys {
            match out.last_mut() {
                Some(last) if last.0 == b && last.2 == j => last.2 += 1,
                _ => out.push(one(b, j)),
            }
        }
        out
    }

    #[cfg(not(target_arch = "wasm32"))]
    mod props {
        use super::*;
        use proptest::prelude::*;

        fn op() -> impl Strategy<Value = Op> {
            let spec = proptest::collection::vec((0u64..4, 1u64..6), 1..4);
            prop_oneof![
                3 => spec.clone().prop_map(Op::Admit),
                3 => spec.prop_map(Op::Register),
                3 => (0usize..8).prop_map(Op::Leave),
                2 => (0u64..4, 0u64..10, 1u64..6).prop_map(|(b, lo, n)| Op::Idle(b, lo, lo + n)),
                1 => (1u64..4).prop_map(Op::Anon),
                2 => (1u64..8).prop_map(Op::Evict),
            ]
        }

        proptest! {
            #[test]
            fn runs_keep_the_order_of_single_blocks(ops in proptest::collection::vec(op(), 1..80)) {
                let mut t = PrefixTable::new();
                let mut naive = Naive::default();
                let mut holders: Vec<Vec<(u64, u64)>> = Vec::new();
                for op in ops {
                    match op {
                        Op::Admit(spec) => {
                            let p = pieces(&spec);
                            let keys = naive.find(&p);
                            let idle = keys.iter().filter(|k| naive.refs[k] == 0).count() as u64;
                            prop_assert_eq!(t.find_prefix(p.iter().copied()), idle);
                            prop_assert_eq!(t.found_blocks, keys.len() as u64);
                            prop_assert_eq!(t.hold_found(), idle);
                            naive.hold(&keys);
                            holders.push(keys);
                        }
                        Op::Register(spec) => {
                            let p = pieces(&spec);
                            let keys = naive.insert_live(&p);
                            prop_assert_eq!(t.insert_live(p.iter().copied()), keys.len() as u64);
                            holders.push(keys);
                        }
                        Op::Leave(i) => {
                            if !holders.is_empty() {
                                let keys = holders.swap_remove(i % holders.len());
                                let p = as_pieces(&keys);
                                for &piece in p.iter().rev() {
                                    t.unhold(piece);
                                }
                                for &k in keys.iter().rev() {
                                    naive.unhold(k);
                                }
                            }
                        }
                        Op::Idle(b, lo, hi) => {
                            t.insert_idle((b, lo, hi));
                            naive.insert_idle((b, lo, hi));
                        }
                        Op::Anon(n) => {
                            t.insert_anon(n);
                            naive.lru.extend(std::iter::repeat_n(None, n as usize));
                        }
                        Op::Evict(n) => {
                            let want = n.min(naive.lru.len() as u64);
                            prop_assert_eq!(t.evict(n), want);
                            naive.evict(n as usize);
                        }
                    }
                    prop_assert_eq!(t.check(), Ok(()));
                    prop_assert_eq!(t.lru_order(), naive.lru.clone());
                    let live = naive.refs.values().filter(|&&r| r > 0).count() as u64;
                    prop_assert_eq!((t.idle, t.live), (naive.lru.len() as u64, live));
                }
            }
        }
    }
}
