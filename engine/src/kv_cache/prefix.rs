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

#[derive(Clone, Copy, Debug)]
struct Entry {
    key: u64,
    /// Running requests holding the block (0: idle, in the LRU list).
    refs: u32,
    /// An anonymous run of this many idle blocks (not in the key map); 0 for a keyed block.
    anon: u32,
    prev: u32,
    next: u32,
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

/// The cache's table of keyed blocks.
#[derive(Clone, Debug, Default)]
pub(crate) struct PrefixTable {
    map: HashMap<u64, u32, BuildHasherDefault<KeyHasher>>,
    slots: Vec<Entry>,
    free_slots: Vec<u32>,
    /// LRU end (evicted first) and MRU end of the idle list.
    head: u32,
    tail: u32,
    /// Entries with refs = 0 / > 0.
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

    /// Looks `keys` up in order into [`PrefixTable::found`], stopping at the first miss;
    /// returns how many of the hits are idle (they take room when held). Changes nothing
    /// else.
    #[inline]
    pub(crate) fn find_prefix(&mut self, keys: impl Iterator<Item = u64>) -> u64 {
        self.found.clear();
        let mut idle = 0;
        for k in keys {
            match self.map.get(&k) {
                Some(&i) => {
                    idle += u64::from(self.slots[i as usize].refs == 0);
                    self.found.push(i);
                }
                None => break,
            }
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
    pub(crate) fn contains(&self, key: u64) -> bool {
        self.map.contains_key(&key)
    }

    /// Adds `key` as a live block held once (a holder's own block, just computed), if
    /// absent; returns whether it was added.
    pub(crate) fn insert_live(&mut self, key: u64) -> bool {
        let next = self.next_slot();
        match self.map.entry(key) {
            std::collections::hash_map::Entry::Occupied(_) => false,
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(next);
                self.fill(next, key, 1);
                self.live += 1;
                self.note_peak();
                true
            }
        }
    }

    /// Adds `key` as an idle block at the most recently used end (a leaving holder's own
    /// block), if absent.
    pub(crate) fn insert_idle(&mut self, key: u64) {
        let next = self.next_slot();
        if let std::collections::hash_map::Entry::Vacant(v) = self.map.entry(key) {
            v.insert(next);
            self.fill(next, key, 0);
            self.push_mru(next);
            self.idle += 1;
            self.note_peak();
        }
    }

    /// The slot the next [`PrefixTable::fill`] takes.
    #[inline]
    fn next_slot(&self) -> u32 {
        match self.free_slots.last() {
            Some(&i) => i,
            None => self.slots.len() as u32,
        }
    }

    /// Takes slot `i` (from [`PrefixTable::next_slot`]) for `key`.
    #[inline]
    fn fill(&mut self, i: u32, key: u64, refs: u32) {
        let taken = self.alloc(key, refs);
        debug_assert_eq!(taken, i);
    }

    /// Drops one hold on `key`'s block; the last one makes it idle (most recently used).
    /// Returns whether it became idle.
    pub(crate) fn unhold(&mut self, key: u64) -> bool {
        let Some(&i) = self.map.get(&key) else {
            debug_assert!(false, "a held block is in the table");
            return false;
        };
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
        let i = self.alloc(0, 0);
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
            let (key, anon) = (e.key, e.anon);
            self.unlink(i);
            if anon == 0 {
                self.map.remove(&key);
            }
            self.free_slots.push(i);
        }
        self.idle -= done;
        self.counts.evictions += done;
        done
    }

    /// Evicts the least recently used idle block. Returns false if none is idle.
    #[cfg(test)]
    pub(crate) fn evict_lru(&mut self) -> bool {
        self.evict(1) == 1
    }

    fn alloc(&mut self, key: u64, refs: u32) -> u32 {
        let e = Entry {
            key,
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
    /// holds exactly the entries no one holds, in a consistent chain, and the counts
    /// agree with the entries. Returns what is wrong, if anything.
    pub(crate) fn check(&self) -> Result<(), String> {
        let (mut n, mut keyed, mut steps) = (0u64, 0u64, 0u64);
        let mut i = self.head;
        let mut prev = NIL;
        while i != NIL {
            let e = &self.slots[i as usize];
            if e.refs != 0 {
                return Err(format!("block {:#x} is both free (idle) and held", e.key));
            }
            if e.prev != prev {
                return Err("idle list broken".into());
            }
            if e.anon == 0 {
                if self.map.get(&e.key) != Some(&i) {
                    return Err("idle block missing from the key map".into());
                }
                keyed += 1;
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
        let live = self
            .map
            .values()
            .filter(|&&i| self.slots[i as usize].refs > 0)
            .count() as u64;
        if live != self.live || self.map.len() as u64 != self.live + keyed {
            return Err(format!(
                "{live} held blocks found, {} counted ({} keys, {} idle)",
                self.live,
                self.map.len(),
                self.idle
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
            t.insert_idle(k);
        }
        assert_eq!((t.idle, t.live), (3, 0));
        // Holding 1 takes it out of the idle list; releasing it makes it the most recent.
        assert_eq!(t.find_prefix([1u64, 2, 9, 3].into_iter()), 2);
        assert_eq!(t.found.len(), 2);
        assert_eq!(t.hold_found(), 2);
        assert_eq!((t.idle, t.live), (1, 2));
        t.check().unwrap();
        assert!(!t.unhold(1) || t.idle == 2);
        assert!(t.unhold(2));
        // Order now: 3, 1, 2.
        assert!(t.evict_lru());
        assert!(!t.contains(3));
        assert!(t.evict_lru());
        assert!(!t.contains(1) && t.contains(2));
        t.insert_live(7);
        assert!(t.evict_lru());
        assert!(!t.evict_lru(), "7 is held");
        t.check().unwrap();
        assert_eq!(t.counts.evictions, 3);
        assert_eq!(t.counts.peak_cached_blocks, 3);
        // Anonymous runs: evicted block by block, in their LRU place.
        t.insert_anon(3);
        t.insert_idle(8);
        t.insert_anon(2);
        assert_eq!(t.idle, 6);
        assert_eq!(t.evict(2), 2);
        t.check().unwrap();
        assert_eq!(t.evict(2), 2);
        assert!(!t.contains(8), "the run of 3 went, then 8");
        assert_eq!(t.evict(5), 2, "only the last run is left");
        assert_eq!(t.idle, 0);
        t.check().unwrap();
    }
}
