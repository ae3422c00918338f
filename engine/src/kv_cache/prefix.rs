//! Automatic prefix caching (docs/model.md, Prefix caching), as vLLM does it: every full
//! KV block is named by a key that stands for its tokens and everything before them
//! ([`crate::workload::shared::block_key`]). A block that running requests hold is
//! *live* (reference-counted); when the last holder leaves, its block stays in the cache
//! *idle*, still counted as free room, until that room is taken: then idle blocks are
//! evicted least recently used first. An admission looks its prompt's full blocks up in
//! order and stops at the first miss; the hits need no prefill.
//!
//! The table is a slab of entries with an intrusive doubly linked LRU list of the idle
//! ones and a hash map from key to slot, so every operation is O(1) per block. Blocks
//! that only their own request could ever find (past what it shares with others,
//! [`crate::workload::shared::shared_blocks`]) leave a finished request as one
//! *anonymous* run in the idle list: they take room and LRU places like any cached
//! block, at O(1) per request.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Keys are already well mixed 64-bit values: hashing them again would only cost time.
#[derive(Default)]
pub(crate) struct KeyHasher(u64);

impl Hasher for KeyHasher {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
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

/// A block's name: its chain ([`crate::workload::shared::block_chain`]) and index in it.
pub(crate) type Key = (u64, u64);

#[derive(Clone, Copy, Debug)]
struct Entry {
    /// Chain slot and index in the chain (keyed blocks).
    chain: u32,
    j: u64,
    /// Running requests holding the block (0: idle, in the LRU list).
    refs: u32,
    /// An anonymous run of this many idle blocks (no key); 0 for a keyed block.
    anon: u32,
    prev: u32,
    next: u32,
}

/// The cached blocks of one chain, by index from `j0`.
#[derive(Clone, Debug, Default)]
struct Chain {
    base: u64,
    j0: u64,
    slots: Vec<u32>,
    present: u32,
}

impl Chain {
    #[inline]
    fn get(&self, j: u64) -> u32 {
        match j.checked_sub(self.j0) {
            Some(k) if (k as usize) < self.slots.len() => self.slots[k as usize],
            _ => NIL,
        }
    }

    fn set(&mut self, j: u64, i: u32) {
        if self.slots.is_empty() {
            self.j0 = j;
        }
        if j < self.j0 {
            let more = (self.j0 - j) as usize;
            self.slots.splice(0..0, std::iter::repeat_n(NIL, more));
            self.j0 = j;
        }
        let k = (j - self.j0) as usize;
        if k >= self.slots.len() {
            self.slots.resize(k + 1, NIL);
        }
        self.slots[k] = i;
    }
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

/// The cache's table of keyed blocks: chains by base (a hash map, looked up once per
/// run of blocks of one chain), each an array of block slots by index.
#[derive(Clone, Debug, Default)]
pub(crate) struct PrefixTable {
    chain_of: HashMap<u64, u32, BuildHasherDefault<KeyHasher>>,
    chains: Vec<Chain>,
    free_chains: Vec<u32>,
    /// The chain last looked up (base, slot): consecutive blocks mostly share a chain.
    memo: Option<(u64, u32)>,
    slots: Vec<Entry>,
    free_slots: Vec<u32>,
    /// LRU end (evicted first) and MRU end of the idle list.
    head: u32,
    tail: u32,
    /// Blocks with refs = 0 (in the idle list, anonymous runs counted in full) / > 0.
    pub(crate) idle: u64,
    pub(crate) live: u64,
    /// Slots found by the last [`PrefixTable::find_prefix`].
    pub(crate) found: Vec<u32>,
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

    /// The chain slot of `base`, made if absent.
    fn chain_or_new(&mut self, base: u64) -> u32 {
        if let Some(c) = self.chain(base) {
            return c;
        }
        let chain = Chain {
            base,
            ..Chain::default()
        };
        let c = match self.free_chains.pop() {
            Some(c) => {
                self.chains[c as usize] = chain;
                c
            }
            None => {
                self.chains.push(chain);
                (self.chains.len() - 1) as u32
            }
        };
        self.chain_of.insert(base, c);
        self.memo = Some((base, c));
        c
    }

    /// The slot of block `key`, or NIL.
    #[inline]
    fn slot(&mut self, key: Key) -> u32 {
        match self.chain(key.0) {
            Some(c) => self.chains[c as usize].get(key.1),
            None => NIL,
        }
    }

    /// Looks `keys` up in order into [`PrefixTable::found`], stopping at the first miss;
    /// returns how many of the hits are idle (they take room when held). Changes nothing
    /// else.
    #[inline]
    pub(crate) fn find_prefix(&mut self, keys: impl Iterator<Item = Key>) -> u64 {
        self.found.clear();
        let mut idle = 0;
        for k in keys {
            let i = self.slot(k);
            if i == NIL {
                break;
            }
            idle += u64::from(self.slots[i as usize].refs == 0);
            self.found.push(i);
        }
        idle
    }

    /// Holds every slot of [`PrefixTable::found`]; returns how many were idle.
    pub(crate) fn hold_found(&mut self) -> u64 {
        let mut woke = 0;
        for n in 0..self.found.len() {
            let i = self.found[n];
            if self.slots[i as usize].refs == 0 {
                self.unlink(i);
                self.idle -= 1;
                self.live += 1;
                woke += 1;
            }
            self.slots[i as usize].refs += 1;
        }
        woke
    }

    /// Whether `key` is in the table.
    #[cfg(test)]
    pub(crate) fn contains(&mut self, key: Key) -> bool {
        self.slot(key) != NIL
    }

    /// Adds `key` with `refs` holders, if absent; returns its slot, or NIL if present.
    fn insert(&mut self, key: Key, refs: u32) -> u32 {
        let c = self.chain_or_new(key.0);
        if self.chains[c as usize].get(key.1) != NIL {
            return NIL;
        }
        let i = self.alloc(refs);
        let e = &mut self.slots[i as usize];
        e.chain = c;
        e.j = key.1;
        let ch = &mut self.chains[c as usize];
        ch.set(key.1, i);
        ch.present += 1;
        i
    }

    /// Adds `key` as a live block held once (a holder's own block, just computed), if
    /// absent; returns whether it was added.
    pub(crate) fn insert_live(&mut self, key: Key) -> bool {
        if self.insert(key, 1) == NIL {
            return false;
        }
        self.live += 1;
        self.note_peak();
        true
    }

    /// Adds `key` as an idle block at the most recently used end (a leaving holder's own
    /// block), if absent.
    pub(crate) fn insert_idle(&mut self, key: Key) {
        let i = self.insert(key, 0);
        if i != NIL {
            self.push_mru(i);
            self.idle += 1;
            self.note_peak();
        }
    }

    /// Drops one hold on `key`'s block; the last one makes it idle (most recently used).
    /// Returns whether it became idle.
    pub(crate) fn unhold(&mut self, key: Key) -> bool {
        let i = self.slot(key);
        if i == NIL {
            debug_assert!(false, "a held block is in the table");
            return false;
        }
        let e = &mut self.slots[i as usize];
        debug_assert!(e.refs > 0, "unhold of an idle block");
        e.refs -= 1;
        if e.refs == 0 {
            self.live -= 1;
            self.idle += 1;
            self.push_mru(i);
            true
        } else {
            false
        }
    }

    /// Adds `n` idle blocks no other request can find, as one run at the most recently
    /// used end (a finished request's own blocks).
    pub(crate) fn insert_anon(&mut self, n: u64) {
        if n == 0 {
            return;
        }
        let i = self.alloc(0);
        self.slots[i as usize].anon = n.min(u32::MAX as u64) as u32;
        self.push_mru(i);
        self.idle += n.min(u32::MAX as u64);
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
            let e = &mut self.slots[i as usize];
            if e.anon as u64 > n - done {
                e.anon -= (n - done) as u32;
                done = n;
                break;
            }
            done += u64::from(e.anon.max(1));
            let (c, j, anon) = (e.chain, e.j, e.anon);
            self.unlink(i);
            if anon == 0 {
                self.drop_key(c, j);
            }
            self.free_slots.push(i);
        }
        self.idle -= done;
        self.counts.evictions += done;
        done
    }

    /// Removes block `j` from chain `c`, and the chain once empty.
    fn drop_key(&mut self, c: u32, j: u64) {
        let ch = &mut self.chains[c as usize];
        ch.set(j, NIL);
        ch.present -= 1;
        if ch.present == 0 {
            let base = ch.base;
            ch.slots = Vec::new();
            self.chain_of.remove(&base);
            self.free_chains.push(c);
            if self.memo.is_some_and(|m| m.1 == c) {
                self.memo = None;
            }
        }
    }

    /// Evicts the least recently used idle block. Returns false if none is idle.
    #[cfg(test)]
    pub(crate) fn evict_lru(&mut self) -> bool {
        self.evict(1) == 1
    }

    fn alloc(&mut self, refs: u32) -> u32 {
        let e = Entry {
            chain: NIL,
            j: 0,
            refs,
            anon: 0,
            prev: NIL,
            next: NIL,
        };
        match self.free_slots.pop() {
            Some(i) => {
                self.slots[i as usize] = e;
                i
            }
            None => {
                self.slots.push(e);
                (self.slots.len() - 1) as u32
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
            let e = &mut self.slots[i as usize];
            e.prev = t;
            e.next = NIL;
        }
        if t == NIL {
            self.head = i;
        } else {
            self.slots[t as usize].next = i;
        }
        self.tail = i;
    }

    fn unlink(&mut self, i: u32) {
        let Entry { prev, next, .. } = self.slots[i as usize];
        if prev == NIL {
            self.head = next;
        } else {
            self.slots[prev as usize].next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            self.slots[next as usize].prev = prev;
        }
        let e = &mut self.slots[i as usize];
        e.prev = NIL;
        e.next = NIL;
    }

    /// The table's invariants, walked in full (tests and debug checks): the idle list
    /// holds exactly the blocks no one holds, in a consistent chain, every keyed block is
    /// where its chain says, and the counts agree. Returns what is wrong, if anything.
    pub(crate) fn check(&self) -> Result<(), String> {
        let (mut n, mut steps) = (0u64, 0u64);
        let mut i = self.head;
        let mut prev = NIL;
        while i != NIL {
            let e = &self.slots[i as usize];
            if e.refs != 0 {
                return Err(format!(
                    "block {} of chain {} is both free (idle) and held",
                    e.j, e.chain
                ));
            }
            if e.prev != prev {
                return Err("idle list broken".into());
            }
            n += u64::from(e.anon.max(1));
            steps += 1;
            if steps > self.slots.len() as u64 {
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
            for (k, &i) in ch.slots.iter().enumerate() {
                if i == NIL {
                    continue;
                }
                let e = &self.slots[i as usize];
                if e.chain != c || e.j != ch.j0 + k as u64 || e.anon != 0 {
                    return Err("a keyed block is not where its chain says".into());
                }
                present += 1;
                keyed += 1;
                live += u64::from(e.refs > 0);
            }
            if present != ch.present || present == 0 {
                return Err("chain count wrong".into());
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

    #[test]
    fn idle_blocks_go_least_recently_used_first() {
        let mut t = PrefixTable::new();
        for k in 1..=3 {
            t.insert_idle((k, 0));
        }
        assert_eq!((t.idle, t.live), (3, 0));
        // Holding 1 takes it out of the idle list; releasing it makes it the most recent.
        assert_eq!(
            t.find_prefix([1u64, 2, 9, 3].into_iter().map(|k| (k, 0))),
            2
        );
        assert_eq!(t.found.len(), 2);
        assert_eq!(t.hold_found(), 2);
        assert_eq!((t.idle, t.live), (1, 2));
        t.check().unwrap();
        assert!(!t.unhold((1, 0)) || t.idle == 2);
        assert!(t.unhold((2, 0)));
        // Order now: 3, 1, 2.
        assert!(t.evict_lru());
        assert!(!t.contains((3, 0)));
        assert!(t.evict_lru());
        assert!(!t.contains((1, 0)) && t.contains((2, 0)));
        t.insert_live((7, 0));
        assert!(t.evict_lru());
        assert!(!t.evict_lru(), "7 is held");
        t.check().unwrap();
        assert_eq!(t.counts.evictions, 3);
        assert_eq!(t.counts.peak_cached_blocks, 3);
        // Anonymous runs: evicted block by block, in their LRU place.
        t.insert_anon(3);
        t.insert_idle((8, 5));
        t.insert_idle((8, 3));
        t.insert_anon(2);
        assert_eq!(t.idle, 7);
        assert_eq!(t.evict(2), 2);
        t.check().unwrap();
        assert_eq!(t.evict(2), 2);
        assert!(
            !t.contains((8, 5)) && t.contains((8, 3)),
            "the run of 3 went, then (8, 5)"
        );
        assert_eq!(t.evict(1), 1);
        t.check().unwrap();
        assert_eq!(t.evict(5), 2, "only the last run is left");
        assert_eq!(t.idle, 0);
        t.check().unwrap();
    }
}
