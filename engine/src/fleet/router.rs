//! Routers: how a fleet's front end picks a server for each request (docs/model.md,
//! "Fleets"). Each sees only what a real router could: what it has sent each server and
//! not yet seen finish, the tokens it has seen streamed back, and the KV use a server
//! reports.

use crate::sim::ServerView;
use crate::workload::{stream_rng, Request};
use rand::Rng;
use rand_pcg::Pcg64Mcg;
use serde::{Deserialize, Serialize};

/// The router of a fleet (`--router`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RouterKind {
    /// Server i mod N for the i-th request (nginx's and HAProxy's `roundrobin`).
    #[default]
    RoundRobin,
    /// A server drawn uniformly at random.
    Random,
    /// The server with the fewest requests sent and not yet finished (nginx
    /// `least_conn`, HAProxy `leastconn`, Vidur's LOR); ties go round-robin.
    LeastOutstanding,
    /// The server with the least outstanding tokens: prompt + output − streamed, over the
    /// requests sent to it and not yet finished (join the shortest queue by work).
    LeastTokens,
    /// `d` servers drawn at random, the least outstanding of them (power of d choices).
    PowerOfD { d: u32 },
    /// The server with the lowest KV-cache use as it last reported (paged servers only);
    /// ties by outstanding requests.
    KvAware,
    /// Prefix affinity: consistent (rendezvous) hashing on what a request shares — its
    /// conversation, else its system-prompt group — so requests that share a prefix go to
    /// the server that has it cached, as llm-d's prefix scorer aims to; requests that share
    /// nothing go to the server with the fewest outstanding. Not in [`RouterKind::ALL`].
    PrefixAffinity,
}

impl RouterKind {
    /// Every router, with power of d at d = 2.
    pub const ALL: [RouterKind; 6] = [
        RouterKind::RoundRobin,
        RouterKind::Random,
        RouterKind::LeastOutstanding,
        RouterKind::LeastTokens,
        RouterKind::PowerOfD { d: 2 },
        RouterKind::KvAware,
    ];

    /// The name the CLI and the page use (`power_of_2` for d = 2).
    pub fn name(self) -> String {
        match self {
            RouterKind::RoundRobin => "round_robin".into(),
            RouterKind::Random => "random".into(),
            RouterKind::LeastOutstanding => "least_outstanding".into(),
            RouterKind::LeastTokens => "least_tokens".into(),
            RouterKind::PowerOfD { d } => format!("power_of_{d}"),
            RouterKind::KvAware => "kv_aware".into(),
            RouterKind::PrefixAffinity => "prefix_affinity".into(),
        }
    }

    /// Parses [`RouterKind::name`] and the usual aliases (`rr`, `lor`, `least_conn`,
    /// `jsq`, `p2c`).
    pub fn parse(s: &str) -> Option<RouterKind> {
        let s = s.trim().to_ascii_lowercase().replace('-', "_");
        Some(match s.as_str() {
            "round_robin" | "rr" | "roundrobin" => RouterKind::RoundRobin,
            "random" => RouterKind::Random,
            "least_outstanding" | "lor" | "least_conn" | "leastconn" => {
                RouterKind::LeastOutstanding
            }
            "least_tokens" | "jsq" | "jsq_tokens" => RouterKind::LeastTokens,
            "p2c" => RouterKind::PowerOfD { d: 2 },
            "kv_aware" | "kv" => RouterKind::KvAware,
            "prefix_affinity" | "prefix" | "affinity" => RouterKind::PrefixAffinity,
            other => {
                let d = other.strip_prefix("power_of_")?.parse().ok()?;
                RouterKind::PowerOfD { d }
            }
        })
    }

    /// Whether the router reads what the servers report at every iteration, so it sees a
    /// server change within a run of iterations, not only when the server is moved: least
    /// tokens reads the tokens streamed back, KV-aware the KV use a server reports.
    pub fn reads_streams(self) -> bool {
        matches!(self, RouterKind::LeastTokens | RouterKind::KvAware)
    }

    /// Whether the router reads the servers' KV use (KV-aware).
    pub fn reads_kv(self) -> bool {
        self == RouterKind::KvAware
    }

    /// Whether the router looks at the servers' state (round-robin and random do not, so
    /// their servers run undisturbed).
    pub fn looks(self) -> bool {
        !matches!(self, RouterKind::RoundRobin | RouterKind::Random)
    }

    pub(crate) fn build(self, seed: u64) -> Box<dyn Route> {
        let rng = || stream_rng(seed, ROUTER_STREAM);
        match self {
            RouterKind::RoundRobin => Box::new(RoundRobin { next: 0 }),
            RouterKind::Random => Box::new(Random { rng: rng() }),
            RouterKind::LeastOutstanding => {
                Box::new(LeastBy::new(|v: &ServerView| (v.outstanding, 0)))
            }
            // Its keys change at every server's every iteration (the tokens streamed):
            // found by a scan at each pick rather than kept as they change.
            RouterKind::LeastTokens => Box::new(LeastBy::scanning(|v: &ServerView| {
                (v.work_tokens, v.outstanding)
            })),
            RouterKind::PowerOfD { d } => Box::new(PowerOfD {
                d: d as usize,
                rng: rng(),
                picks: Vec::new(),
            }),
            RouterKind::PrefixAffinity => Box::new(PrefixAffinity {
                fallback: LeastBy::new(|v: &ServerView| (v.outstanding, 0)),
            }),
            // Used fraction as a 32.32 fixed-point number, so keys compare exactly.
            RouterKind::KvAware => Box::new(LeastBy::new(|v: &ServerView| {
                let used = ((v.kv_used_blocks as u128) << 32) / v.kv_total_blocks.max(1) as u128;
                (used as u64, v.outstanding)
            })),
        }
    }
}

/// The random stream of a fleet's router, independent of the workload's streams (so
/// every router sees the same requests).
const ROUTER_STREAM: u128 = 0x726f_7574_6572_5f73_7472_6561_6d5f_3031;

/// One routing policy. `look(i)` is server i as the router sees it at the request's
/// arrival (looking costs the simulator work, so routers look only where they must).
pub(crate) trait Route {
    fn pick(&mut self, r: &Request, n: usize, look: &mut dyn FnMut(usize) -> ServerView) -> usize;

    /// Whether [`Route::pick`] always looks at every server, so a caller may move them all
    /// first and call [`Route::pick_all`] instead.
    fn looks_at_all(&self) -> bool {
        false
    }

    /// Server `i`'s view is now `v`. A caller of [`Route::pick_all`] tells the router
    /// every server's view before its first call and every change after, so a router may
    /// keep what it needs of them in its own form.
    fn view_changed(&mut self, _i: usize, _v: &ServerView) {}

    /// [`Route::pick`] given every server's view, as `look` would return it.
    fn pick_all(&mut self, r: &Request, views: &[ServerView]) -> usize {
        self.pick(r, views.len(), &mut |i| views[i])
    }
}

struct RoundRobin {
    next: usize,
}

impl Route for RoundRobin {
    fn pick(&mut self, _: &Request, n: usize, _: &mut dyn FnMut(usize) -> ServerView) -> usize {
        let i = self.next % n;
        self.next = i + 1;
        i
    }
}

struct Random {
    rng: Pcg64Mcg,
}

impl Route for Random {
    fn pick(&mut self, _: &Request, n: usize, _: &mut dyn FnMut(usize) -> ServerView) -> usize {
        self.rng.random_range(0..n)
    }
}

/// The server of least `key`, scanning from the one after the last pick so that ties go
/// round-robin.
struct LeastBy<K> {
    next: usize,
    key: K,
    /// Each server's key packed into one number of the same order
    /// (`major << MINOR_BITS | minor`), or [`WIDE`] when it does not fit, as
    /// [`Route::view_changed`] last told.
    packed: Vec<u64>,
    /// How many entries of `packed` are [`WIDE`].
    wide: usize,
    /// The least of `packed` and the servers that have it (`levels[0]`) and, when `two`,
    /// the next key up and its servers (`levels[1]`), kept as keys change while no key is
    /// wide: when the servers of least key all leave it, the next key up is the least.
    /// `stale` when the least is not known; [`Route::pick_all`] then rebuilds both.
    levels: [Level; 2],
    two: bool,
    stale: bool,
    /// Whether picks scan every packed key instead (no levels kept).
    scan: bool,
}

/// The servers whose packed key is `key`: a bit each, and how many they are.
#[derive(Default)]
struct Level {
    key: u64,
    bits: Vec<u64>,
    members: usize,
}

impl Level {
    /// Only server `i` (a bit `bit` in word `c`) has `key`.
    fn only(&mut self, key: u64, c: usize, bit: u64) {
        self.key = key;
        self.bits.fill(0);
        self.bits[c] = bit;
        self.members = 1;
    }

    fn add(&mut self, c: usize, bit: u64) {
        self.bits[c] |= bit;
        self.members += 1;
    }

    fn remove(&mut self, c: usize, bit: u64) {
        self.bits[c] &= !bit;
        self.members -= 1;
    }
}

/// Bits of a packed key's minor part.
const MINOR_BITS: u32 = 24;
/// A key too large to pack.
const WIDE: u64 = u64::MAX;

/// `(major, minor)` as one number of the same order, or [`WIDE`] when it does not fit
/// (every packed key is below [`WIDE`]).
#[inline]
fn pack((major, minor): (u64, u64)) -> u64 {
    if major < (1 << (64 - MINOR_BITS)) - 1 && minor < 1 << MINOR_BITS {
        major << MINOR_BITS | minor
    } else {
        WIDE
    }
}

impl<K> LeastBy<K> {
    fn new(key: K) -> LeastBy<K> {
        LeastBy {
            next: 0,
            key,
            packed: Vec::new(),
            wide: 0,
            levels: Default::default(),
            two: false,
            stale: true,
            scan: false,
        }
    }

    /// [`LeastBy::new`] picking by a scan of every packed key, for keys that change
    /// between nearly every two picks, where keeping the least as they change costs more
    /// than finding it.
    fn scanning(key: K) -> LeastBy<K> {
        LeastBy {
            scan: true,
            ..LeastBy::new(key)
        }
    }

    /// The first server of least packed key from `start` on, wrapping round, by a scan:
    /// the least in four independent lanes, then the first server that has it.
    fn scan_least_from(&self, start: usize) -> usize {
        let mut lanes = [WIDE; 4];
        let chunks = self.packed.chunks_exact(4);
        let rest = chunks.remainder();
        for c in chunks {
            for (m, &k) in lanes.iter_mut().zip(c) {
                *m = (*m).min(k);
            }
        }
        let least = rest
            .iter()
            .fold(lanes.into_iter().fold(WIDE, u64::min), |m, &k| m.min(k));
        let (head, tail) = self.packed.split_at(start);
        match tail.iter().position(|&k| k == least) {
            Some(j) => start + j,
            None => head
                .iter()
                .position(|&k| k == least)
                .expect("some server has the least key"),
        }
    }

    /// The least packed key and the next key up, each with the servers that have it, from
    /// the keys (one pass).
    fn rebuild(&mut self) {
        let words = self.packed.len().div_ceil(64);
        for level in &mut self.levels {
            level.bits.clear();
            level.bits.resize(words, 0);
        }
        let [first, second] = &mut self.levels;
        let (mut k0, mut k1) = (WIDE, WIDE);
        let (mut m0, mut m1) = (0, 0);
        for (c, chunk) in self.packed.chunks(64).enumerate() {
            let (mut b0, mut b1) = (0u64, 0u64);
            for (j, &k) in chunk.iter().enumerate() {
                if k > k1 {
                    continue;
                }
                let bit = 1 << j;
                if k < k0 {
                    // The least so far becomes the next key up.
                    (k1, m1, b1) = (k0, m0, b0);
                    (k0, m0, b0) = (k, 1, bit);
                    if c > 0 {
                        second.bits[..c].copy_from_slice(&first.bits[..c]);
                        first.bits[..c].fill(0);
                    }
                } else if k == k0 {
                    b0 |= bit;
                    m0 += 1;
                } else if k < k1 {
                    (k1, m1, b1) = (k, 1, bit);
                    if c > 0 {
                        second.bits[..c].fill(0);
                    }
                } else {
                    b1 |= bit;
                    m1 += 1;
                }
            }
            first.bits[c] = b0;
            second.bits[c] = b1;
        }
        (first.key, first.members) = (k0, m0);
        (second.key, second.members) = (k1, m1);
        self.two = m1 > 0;
        self.stale = false;
    }

    /// The first server of least key from `start` on, wrapping round.
    fn first_least_from(&self, start: usize) -> usize {
        let at_least = &self.levels[0].bits;
        let (c0, j0) = (start / 64, start % 64);
        let from = at_least[c0] & (u64::MAX << j0);
        if from != 0 {
            return c0 * 64 + from.trailing_zeros() as usize;
        }
        for c in (c0 + 1..at_least.len()).chain(0..=c0) {
            let bits = at_least[c];
            if bits != 0 {
                return c * 64 + bits.trailing_zeros() as usize;
            }
        }
        unreachable!("some server has the least key")
    }
}

impl<K: Fn(&ServerView) -> (u64, u64)> Route for LeastBy<K> {
    fn pick(&mut self, _: &Request, n: usize, look: &mut dyn FnMut(usize) -> ServerView) -> usize {
        let start = self.next % n;
        let mut best = start;
        let mut best_key = (self.key)(&look(start));
        for j in 1..n {
            let i = (start + j) % n;
            let k = (self.key)(&look(i));
            if k < best_key {
                best = i;
                best_key = k;
            }
        }
        self.next = best + 1;
        best
    }

    fn looks_at_all(&self) -> bool {
        true
    }

    #[inline]
    fn view_changed(&mut self, i: usize, v: &ServerView) {
        if i >= self.packed.len() {
            self.wide += i + 1 - self.packed.len();
            self.packed.resize(i + 1, WIDE);
            self.stale = true;
        }
        let k = pack((self.key)(v));
        let old = self.packed[i];
        self.wide = self.wide + usize::from(k == WIDE) - usize::from(old == WIDE);
        self.packed[i] = k;
        if self.scan || self.stale || k == old {
            return;
        }
        let (c, bit) = (i / 64, 1u64 << (i % 64));
        // Server i leaves its old key's level, if known.
        if old == self.levels[0].key {
            if k < old && self.levels[0].members == 1 {
                // It alone had the least key and goes lower: still the least, and the
                // next key up stays the next.
                self.levels[0].key = k;
                return;
            }
            self.levels[0].remove(c, bit);
            if self.levels[0].members == 0 {
                if !self.two {
                    // The new least is unknown.
                    self.stale = true;
                    return;
                }
                self.levels.swap(0, 1);
                self.two = false;
            }
        } else if self.two && old == self.levels[1].key {
            self.levels[1].remove(c, bit);
            self.two = self.levels[1].members > 0;
        }
        // And joins its new key's, if known.
        if k < self.levels[0].key {
            // The old least is the next key up, with all its servers.
            self.levels.swap(0, 1);
            self.two = true;
            self.levels[0].only(k, c, bit);
        } else if k == self.levels[0].key {
            self.levels[0].add(c, bit);
        } else if self.two {
            if k < self.levels[1].key {
                self.levels[1].only(k, c, bit);
            } else if k == self.levels[1].key {
                self.levels[1].add(c, bit);
            }
        }
    }

    /// The same scan as [`Route::pick`]: from `start` to the end, then from 0, the first
    /// least key winning. On packed keys: the first server in that order among those of
    /// least key (kept as keys change); else keys compared as one 128-bit number (the
    /// same order).
    fn pick_all(&mut self, _: &Request, views: &[ServerView]) -> usize {
        let start = self.next % views.len();
        let best = if self.wide == 0 && self.packed.len() == views.len() {
            if self.scan {
                self.scan_least_from(start)
            } else {
                if self.stale {
                    self.rebuild();
                }
                self.first_least_from(start)
            }
        } else {
            self.stale = true;
            let key = |v: &ServerView| {
                let (a, b) = (self.key)(v);
                u128::from(a) << 64 | u128::from(b)
            };
            let (head, tail) = views.split_at(start);
            let (mut best, mut best_key) = (start, key(&tail[0]));
            for (i, v) in tail.iter().enumerate().skip(1) {
                let k = key(v);
                if k < best_key {
                    (best, best_key) = (start + i, k);
                }
            }
            for (i, v) in head.iter().enumerate() {
                let k = key(v);
                if k < best_key {
                    (best, best_key) = (i, k);
                }
            }
            best
        };
        self.next = best + 1;
        best
    }
}

struct PrefixAffinity<K> {
    fallback: LeastBy<K>,
}

/// splitmix64's finaliser.
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

impl<K: Fn(&ServerView) -> (u64, u64)> Route for PrefixAffinity<K> {
    fn pick(&mut self, r: &Request, n: usize, look: &mut dyn FnMut(usize) -> ServerView) -> usize {
        let key = if r.conv > 0 {
            mix(u64::from(r.conv) | 1 << 40)
        } else if r.group > 0 {
            mix(u64::from(r.group) | 2 << 40)
        } else {
            return self.fallback.pick(r, n, look);
        };
        // Rendezvous hashing: the server with the highest weight for this key, so a
        // key moves only when its server leaves.
        (0..n)
            .max_by_key(|&i| mix(key ^ mix(i as u64 + 1)))
            .unwrap_or(0)
    }
}

struct PowerOfD {
    d: usize,
    rng: Pcg64Mcg,
    picks: Vec<usize>,
}

impl Route for PowerOfD {
    fn pick(&mut self, _: &Request, n: usize, look: &mut dyn FnMut(usize) -> ServerView) -> usize {
        // d distinct servers (all of them when d ≥ n), by a partial Fisher–Yates draw.
        let d = self.d.min(n);
        self.picks.clear();
        self.picks.extend(0..n);
        for j in 0..d {
            let k = self.rng.random_range(j..n);
            self.picks.swap(j, k);
        }
        let mut best = self.picks[0];
        let mut best_key = look(best).outstanding;
        for &i in &self.picks[1..d] {
            let k = look(i).outstanding;
            if k < best_key {
                best = i;
                best_key = k;
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    /// `pick_all` on the keys a router keeps picks what `pick`'s scan of every view
    /// picks, through ties, keys that rise and fall, several words of servers, and keys
    /// too wide to pack.
    #[test]
    fn pick_all_on_kept_keys_is_the_scan() {
        let r = Request {
            id: 0,
            arrival: 0.0,
            prompt: 1,
            output: 1,
            class: 0,
            group: 0,
            conv: 0,
        };
        for n in [2, 5, 64, 65, 130] {
            for kind in [RouterKind::LeastOutstanding, RouterKind::LeastTokens] {
                let mut rng = Pcg64Mcg::seed_from_u64(n as u64);
                let mut views = vec![ServerView::default(); n];
                let (mut kept, mut scan) = (kind.build(1), kind.build(1));
                for (i, v) in views.iter().enumerate() {
                    kept.view_changed(i, v);
                }
                for _ in 0..3000 {
                    for _ in 0..rng.random_range(0..4) {
                        let i = rng.random_range(0..n);
                        views[i].outstanding = rng.random_range(0..4);
                        views[i].work_tokens = if rng.random_range(0..50) == 0 {
                            1 << 41
                        } else {
                            rng.random_range(0..6)
                        };
                        kept.view_changed(i, &views[i]);
                    }
                    let best = kept.pick_all(&r, &views);
                    assert_eq!(best, scan.pick(&r, n, &mut |i| views[i]), "{kind:?}, {n}");
                    views[best].outstanding += 1;
                    views[best].work_tokens += 2;
                    kept.view_changed(best, &views[best]);
                }
            }
        }
    }
}
