//! Discrete distributions as lists of atoms `(weight, time)`: the sum of two independent
//! ones (every pair's sum, merged in order and kept to at most 256 atoms), their CDF and
//! quantiles. The tandem model of a disaggregated deployment adds its stages' waits with them.

/// The distribution of the sum of two independent atom lists, kept to at most 256 atoms
/// (merged in order of value, each merged atom at its group's mean).
pub(super) fn convolve(a: &[(f64, f64)], b: &[(f64, f64)]) -> Vec<(f64, f64)> {
    PAIRS.with(|pairs| {
        let mut all = pairs.borrow_mut();
        pair_sums(a, b, &mut all);
        reduce(&all)
    })
}

thread_local! {
    /// The pairs of the last convolution (65,536 of two reduced lists): kept, as
    /// allocating and touching a new megabyte per convolution cost as much as filling it.
    static PAIRS: std::cell::RefCell<Vec<(f64, f64)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// Every pair's (product of weights, sum of times) with a positive weight, ordered by
/// time and, between equal times, as listed (by a's index, then b's): a stable sort of
/// the pairs. Adding the same time to a sorted list keeps it sorted, so when `b` is
/// sorted each of a's atoms gives a sorted run of pairs, and when `a` is (or, sorted, its
/// order among equal sums stays as listed) each of b's does; the fewer runs are merged
/// instead of sorting all the pairs.
fn pair_sums(a: &[(f64, f64)], b: &[(f64, f64)], all: &mut Vec<(f64, f64)>) {
    all.clear();
    all.reserve(a.len() * b.len());
    let sorted = |x: &[(f64, f64)]| x.windows(2).all(|w| w[0].1.total_cmp(&w[1].1).is_le());
    let runs = if a.len() > 1 && b.len() > 1 && a.iter().chain(b).all(|x| x.1.is_finite()) {
        let b_sorted = sorted(b);
        if b_sorted && a.len() <= b.len() {
            Some(Runs::Rows)
        } else if sorted(a) {
            Some(Runs::Columns((0..a.len()).collect()))
        } else if b_sorted {
            Some(columns_of_sorted(a, b).unwrap_or(Runs::Rows))
        } else {
            None
        }
    } else {
        None
    };
    let Some(runs) = runs else {
        for &(wa, ta) in a {
            for &(wb, tb) in b {
                if wa * wb > 0.0 {
                    all.push((wa * wb, ta + tb));
                }
            }
        }
        all.sort_by(|x, y| x.1.total_cmp(&y.1));
        return;
    };
    let nb = b.len();
    // The k-th pair (i, j) of a run.
    let (n_runs, run_len) = match &runs {
        Runs::Rows => (a.len(), nb),
        Runs::Columns(order) => (nb, order.len()),
    };
    let pair = |run: usize, k: usize| match &runs {
        Runs::Rows => (run, k),
        Runs::Columns(order) => (order[k], run),
    };
    // The run's first pair of positive weight from its k-th on.
    let head = |run: usize, mut k: usize| -> Option<Head> {
        while k < run_len {
            let (i, j) = pair(run, k);
            if a[i].0 * b[j].0 > 0.0 {
                return Some(Head {
                    key: order_key(a[i].1 + b[j].1),
                    pos: (i * nb + j) as u64,
                    run: run as u32,
                    k: k as u32,
                });
            }
            k += 1;
        }
        None
    };
    // A binary min-heap of the runs' heads.
    let mut heap: Vec<Head> = (0..n_runs).filter_map(|r| head(r, 0)).collect();
    for k in (0..heap.len() / 2).rev() {
        sift_down(&mut heap, k);
    }
    while let Some(&h) = heap.first() {
        let (i, j) = pair(h.run as usize, h.k as usize);
        all.push((a[i].0 * b[j].0, a[i].1 + b[j].1));
        match head(h.run as usize, h.k as usize + 1) {
            Some(next) => heap[0] = next,
            None => {
                let last = heap.pop().expect("a head");
                if heap.is_empty() {
                    break;
                }
                heap[0] = last;
            }
        }
        sift_down(&mut heap, 0);
    }
}

/// How [`pair_sums`] splits the pairs into sorted runs.
enum Runs {
    /// One per atom of `a`, along `b`.
    Rows,
    /// One per atom of `b`, along `a` in this order.
    Columns(Vec<usize>),
}

/// Columns along `a` sorted by time, if no two of its atoms that `b`'s times make equal
/// would change places (possible only through rounding).
fn columns_of_sorted(a: &[(f64, f64)], b: &[(f64, f64)]) -> Option<Runs> {
    let mut order: Vec<usize> = (0..a.len()).collect();
    order.sort_by(|&x, &y| a[x].1.total_cmp(&a[y].1));
    let keeps = order.windows(2).all(|w| {
        w[0] < w[1]
            || b.iter()
                .all(|&(_, tb)| (a[w[0]].1 + tb).total_cmp(&(a[w[1]].1 + tb)).is_lt())
    });
    keeps.then_some(Runs::Columns(order))
}

/// A run's next pair in [`pair_sums`]' merge.
#[derive(Clone, Copy)]
struct Head {
    /// The sum's time as an integer of the same order ([`f64::total_cmp`]'s).
    key: u64,
    /// Its place in the pairs as listed.
    pos: u64,
    run: u32,
    k: u32,
}

/// [`f64::total_cmp`]'s order as an unsigned integer.
fn order_key(t: f64) -> u64 {
    let b = t.to_bits();
    if b >> 63 == 1 {
        !b
    } else {
        b | 1 << 63
    }
}

/// Restores the min-heap order (by time, then place) below `k`.
fn sift_down(heap: &mut [Head], mut k: usize) {
    let before = |x: &Head, y: &Head| (x.key, x.pos) < (y.key, y.pos);
    loop {
        let l = 2 * k + 1;
        if l >= heap.len() {
            return;
        }
        let c = if l + 1 < heap.len() && before(&heap[l + 1], &heap[l]) {
            l + 1
        } else {
            l
        };
        if !before(&heap[c], &heap[k]) {
            return;
        }
        heap.swap(c, k);
        k = c;
    }
}

/// Sorted atoms kept to at most 256: groups of equal mass, finer in the upper tail
/// (edges 1 − (1 − i/M)²), each at its group's mean.
fn reduce(all: &[(f64, f64)]) -> Vec<(f64, f64)> {
    const MAX: usize = 256;
    if all.len() <= MAX {
        return all.to_vec();
    }
    let total: f64 = all.iter().map(|x| x.0).sum();
    let mut out = Vec::with_capacity(MAX);
    let (mut w, mut wt, mut cum) = (0.0, 0.0, 0.0);
    let mut g = 1usize;
    let edge = |g: usize| total * (1.0 - (1.0 - g as f64 / MAX as f64).powi(2));
    for &(x, t) in all {
        w += x;
        wt += x * t;
        cum += x;
        if cum >= edge(g) && g < MAX {
            out.push((w, wt / w));
            w = 0.0;
            wt = 0.0;
            g += 1;
        }
    }
    if w > 0.0 {
        out.push((w, wt / w));
    }
    out
}

/// P(X ≤ t) of sorted or unsorted atoms.
pub(super) fn cdf_at(a: &[(f64, f64)], t: f64) -> f64 {
    let total: f64 = a.iter().map(|x| x.0).sum::<f64>().max(1e-300);
    a.iter().filter(|x| x.1 <= t).map(|x| x.0).sum::<f64>() / total
}

/// p50, p95 and p99 of atoms, linear between neighbouring atoms' mid-masses.
pub(super) fn quantiles(a: &[(f64, f64)]) -> [f64; 3] {
    if a.is_empty() {
        // No distribution: reported as an error by the non-finite check.
        return [f64::NAN; 3];
    }
    let mut v = a.to_vec();
    v.sort_by(|x, y| x.1.total_cmp(&y.1));
    let total: f64 = v.iter().map(|x| x.0).sum::<f64>().max(1e-300);
    let mut mids = Vec::with_capacity(v.len());
    let mut cum = 0.0;
    for x in &v {
        mids.push((cum + x.0 / 2.0) / total);
        cum += x.0;
    }
    [0.5, 0.95, 0.99].map(|u| {
        let i = mids.partition_point(|&m| m < u);
        if i == 0 {
            v[0].1
        } else if i >= v.len() {
            v[v.len() - 1].1
        } else {
            let f = (u - mids[i - 1]) / (mids[i] - mids[i - 1]).max(1e-300);
            v[i - 1].1 + f * (v[i].1 - v[i - 1].1)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_pcg::Pcg64;

    /// The pairs with a positive weight, stably sorted by time.
    fn stable_sort(a: &[(f64, f64)], b: &[(f64, f64)]) -> Vec<(f64, f64)> {
        let mut all = Vec::new();
        for &(wa, ta) in a {
            for &(wb, tb) in b {
                if wa * wb > 0.0 {
                    all.push((wa * wb, ta + tb));
                }
            }
        }
        all.sort_by(|x, y| x.1.total_cmp(&y.1));
        all
    }

    fn bits(v: &[(f64, f64)]) -> Vec<(u64, u64)> {
        v.iter().map(|x| (x.0.to_bits(), x.1.to_bits())).collect()
    }

    /// `n` atoms at times on a grid of tenths: their sums tie exactly, and some tie only
    /// after rounding (0.1 + 0.2 against 0.3); some weights are 0.
    fn list(rng: &mut Pcg64, n: usize, sort: bool) -> Vec<(f64, f64)> {
        let mut v: Vec<(f64, f64)> = (0..n)
            .map(|_| {
                let w = if rng.random_range(0..8) == 0 {
                    0.0
                } else {
                    rng.random_range(0.1..1.0)
                };
                (w, f64::from(rng.random_range(0..12u32)) * 0.1)
            })
            .collect();
        if sort {
            v.sort_by(|x, y| x.1.total_cmp(&y.1));
        }
        v
    }

    #[test]
    fn merged_pairs_are_the_stable_sort_of_the_pairs() {
        let mut rng = Pcg64::seed_from_u64(11);
        let mut out = Vec::new();
        for _ in 0..300 {
            // Times on a grid of tenths: sums tie exactly, and some tie only after
            // rounding (0.1 + 0.2 against 0.3); some weights are 0.
            let (na, nb) = (rng.random_range(1..40), rng.random_range(1..40));
            for (sa, sb) in [(false, false), (true, false), (false, true), (true, true)] {
                let (a, b) = (list(&mut rng, na, sa), list(&mut rng, nb, sb));
                pair_sums(&a, &b, &mut out);
                assert_eq!(bits(&out), bits(&stable_sort(&a, &b)), "{a:?} {b:?}");
            }
        }
    }

    #[test]
    fn a_sorted_list_whose_sums_would_change_places_is_not_merged_by_columns() {
        // 0.3 sorts before 0.30000000000000004, but adding 0.7 to either gives 1.0: by
        // columns along a sorted, the two sums would come out in the wrong order.
        let a = [(0.5, 0.30000000000000004), (0.5, 0.3), (0.5, 0.0)];
        let b = [(0.5, 0.0), (0.5, 0.7)];
        assert!(columns_of_sorted(&a, &b).is_none());
        let mut out = Vec::new();
        pair_sums(&a, &b, &mut out);
        assert_eq!(bits(&out), bits(&stable_sort(&a, &b)));
    }
}
