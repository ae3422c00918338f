//! An experiment, not part of the product: how fast can the default grid go with a loop
//! stripped down to the reference study's simulator alone (continuous batching, token-exact
//! reservations, the reference cost, first token after the first decode, cut at the
//! horizon), no scheduler trait, no records, no time series, no `Accumulator`? It keeps the
//! engine's event semantics — decode runs jumped in one step, the lazy decode clock for
//! ITL max and stalls, exact type-7 percentiles by selection — so its numbers agree with
//! the engine's; `check` compares every run (completed, rejected, stalls exactly; mean and
//! p99 TTFT, p99 E2E, TPOT and ITL max to 1e-9 relative).
//!
//! ```text
//! cargo run --release -p engine --example speed_floor -- 5          # time it 5 times
//! cargo run --release -p engine --example speed_floor -- 1 check    # compare with the engine
//! cargo run --release -p engine --example grid_timing -- 5 every    # the engine, interleave
//! ```
use engine::sweep::SweepSpec;
use engine::workload::Request;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::time::Instant;

const STALL_S: f64 = 0.05;

/// What the check compares.
struct Out {
    completed: u64,
    rejected: u64,
    stalls: u64,
    ttft_mean: f64,
    /// p99 of TTFT, E2E, TPOT, ITL max.
    p99: [f64; 4],
}

/// Per-request scratch, reused across the (B, K) of one stream.
struct Scratch {
    tick0: Vec<u64>,
    stall0: Vec<u64>,
    first_t: Vec<f64>,
}

/// Type-7 quantiles 0.5, 0.9, 0.95, 0.99, 0.999 of non-negative f64 bit patterns.
fn quantiles(v: &mut [i64]) -> [f64; 5] {
    let n = v.len();
    let mut out = [0.0; 5];
    if n == 0 {
        return out;
    }
    let mut from = 0;
    for (o, q) in out.iter_mut().zip([0.5, 0.9, 0.95, 0.99, 0.999]) {
        let pos = q * (n - 1) as f64;
        let lo = pos.floor() as usize;
        let frac = pos - lo as f64;
        if lo >= from {
            v[from..].select_nth_unstable(lo - from);
            from = lo;
        }
        let a = f64::from_bits(v[lo] as u64);
        let b = v[lo + 1..]
            .iter()
            .min()
            .map_or(a, |&k| f64::from_bits(k as u64));
        *o = a + (b - a) * frac;
    }
    out
}

fn run(reqs: &[Request], bmax: usize, kv: u64, h: f64, sc: &mut Scratch) -> Out {
    let factor = |b: usize| {
        if b <= 1 {
            1.0
        } else {
            1.0 + 0.22 * libm::pow((b - 1) as f64, 0.65)
        }
    };
    let fac: Vec<f64> = (0..=bmax).map(factor).collect();
    let decode: Vec<f64> = fac.iter().map(|f| 0.006 + 5.5e-4 * f).collect();
    let n = reqs.len();
    let mut waiting: VecDeque<u32> = VecDeque::new();
    let mut unprefilled: Vec<u32> = Vec::new();
    // Prefilled, first token at the next decode tick.
    let mut joiners: Vec<u32> = Vec::new();
    // (finish tick, admission number, request)
    let mut finish: BinaryHeap<Reverse<(u64, u64, u32)>> = BinaryHeap::new();
    let mut gaps: Vec<(u64, f64)> = Vec::new();
    let (mut used, mut running, mut admitted, mut rejected) = (0u64, 0usize, 0u64, 0u64);
    let (mut ticks, mut stall_ticks, mut last_tick_t) = (0u64, 0u64, 0.0f64);
    let (mut t, mut i) = (0.0f64, 0usize);
    let cap = (h * 10.0) as usize;
    let mut keys: [Vec<i64>; 4] = std::array::from_fn(|_| Vec::with_capacity(cap));
    let (mut ttft_sum, mut stalls) = (0.0, 0u64);
    // Admission at the arrival instant: reserve prompt + output, or refuse.
    let arrive = |r: &Request, used: &mut u64, waiting: &mut VecDeque<u32>| -> u64 {
        let need = r.prompt as u64 + r.output as u64;
        if *used + need <= kv {
            *used += need;
            waiting.push_back(r.id as u32);
            0
        } else {
            1
        }
    };
    loop {
        while i < n && reqs[i].arrival <= t {
            rejected += arrive(&reqs[i], &mut used, &mut waiting);
            i += 1;
        }
        while running < bmax {
            let Some(j) = waiting.pop_front() else { break };
            unprefilled.push(j);
            running += 1;
        }
        if running == 0 {
            if i >= n {
                break;
            }
            t = reqs[i].arrival;
            continue;
        }
        if !unprefilled.is_empty() {
            // One prefill iteration for all joiners; it stalls decoding.
            let tokens: u64 = unprefilled
                .iter()
                .map(|&j| reqs[j as usize].prompt as u64)
                .sum();
            let t_end = t + (0.004 + 8e-5 * tokens as f64 * fac[running]);
            if t_end > h {
                break;
            }
            while i < n && reqs[i].arrival < t_end {
                rejected += arrive(&reqs[i], &mut used, &mut waiting);
                i += 1;
            }
            joiners.append(&mut unprefilled);
            t = t_end;
            continue;
        }
        // A run of identical decode iterations, jumped.
        let d = decode[running];
        let t0 = t;
        let at = |m: u64| t0 + m as f64 * d;
        let mut k = finish.peek().map_or(u64::MAX, |e| e.0 .0 - ticks);
        if let Some(m) = joiners
            .iter()
            .map(|&j| reqs[j as usize].output as u64)
            .min()
        {
            k = k.min(m);
        }
        let k_max = k.max(1);
        let mut k = k_max;
        if at(1) > h {
            break;
        }
        if at(k) > h {
            k = (((h - t0) / d).floor() as u64).clamp(1, k_max);
            while k > 1 && at(k) > h {
                k -= 1;
            }
            while k < k_max && at(k + 1) <= h {
                k += 1;
            }
        }
        if running < bmax {
            // Refused arrivals do not end the run; the first admissible one does.
            while i < n && reqs[i].arrival < at(k) {
                let r = &reqs[i];
                if used + r.prompt as u64 + r.output as u64 > kv {
                    rejected += 1;
                    i += 1;
                    continue;
                }
                let mut m = (((r.arrival - t0) / d).ceil() as u64).clamp(1, k);
                while m > 1 && at(m - 1) >= r.arrival {
                    m -= 1;
                }
                while at(m) < r.arrival {
                    m += 1;
                }
                k = m;
                break;
            }
        }
        let t_end = at(k);
        while i < n && reqs[i].arrival < t_end {
            rejected += arrive(&reqs[i], &mut used, &mut waiting);
            i += 1;
        }
        ticks += 1;
        let gap = at(1) - last_tick_t;
        if running > joiners.len() {
            if gap > STALL_S {
                stall_ticks += 1;
            }
            while gaps.last().is_some_and(|&(_, g)| g <= gap) {
                gaps.pop();
            }
            gaps.push((ticks, gap));
        } else {
            gaps.clear();
        }
        for j in joiners.drain(..) {
            let ju = j as usize;
            sc.first_t[ju] = at(1);
            sc.tick0[ju] = ticks;
            sc.stall0[ju] = stall_ticks;
            finish.push(Reverse((ticks + reqs[ju].output as u64 - 1, admitted, j)));
            admitted += 1;
        }
        if k >= 2 {
            ticks += k - 1;
            if d > STALL_S {
                stall_ticks += k - 1;
            }
            while gaps.last().is_some_and(|&(_, g)| g <= d) {
                gaps.pop();
            }
            gaps.push((ticks, d));
        }
        last_tick_t = t_end;
        t = t_end;
        while let Some(&Reverse((tick, _, j))) = finish.peek() {
            if tick != ticks {
                break;
            }
            finish.pop();
            let ju = j as usize;
            let r = &reqs[ju];
            let p = gaps.partition_point(|&(tk, _)| tk <= sc.tick0[ju]);
            let max_gap = gaps.get(p).map_or(0.0, |x| x.1);
            stalls += stall_ticks - sc.stall0[ju];
            let ttft = sc.first_t[ju] - r.arrival;
            let e2e = t_end - r.arrival;
            ttft_sum += ttft;
            keys[0].push(ttft.to_bits() as i64);
            keys[1].push(e2e.to_bits() as i64);
            if r.output > 1 {
                keys[2].push(((e2e - ttft) / (r.output - 1) as f64).to_bits() as i64);
            }
            keys[3].push(max_gap.to_bits() as i64);
            used -= r.prompt as u64 + r.output as u64;
            running -= 1;
        }
    }
    // Arrivals up to the horizon are still admitted or refused.
    while i < n && reqs[i].arrival <= h {
        rejected += arrive(&reqs[i], &mut used, &mut waiting);
        i += 1;
    }
    let completed = keys[0].len() as u64;
    Out {
        completed,
        rejected,
        stalls,
        ttft_mean: ttft_sum / completed as f64,
        p99: std::array::from_fn(|m| quantiles(&mut keys[m])[3]),
    }
}

fn main() {
    let times: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let check = std::env::args().nth(2).as_deref() == Some("check");
    let spec = SweepSpec::reference_default();
    let h = spec.base.horizon_s;
    // Request streams are generated once per (rate, seed) and not timed (the engine's
    // sweep times their generation: about 2 % of its instructions).
    let streams: Vec<(f64, u64, Vec<Request>)> = spec
        .rates
        .iter()
        .flat_map(|&r| spec.seeds.iter().map(move |&s| (r, s)))
        .map(|(r, s)| {
            (
                r,
                s,
                spec.base.workload.with_rate(r).generate(s, h).unwrap(),
            )
        })
        .collect();
    let mut mismatches = 0;
    for _ in 0..times {
        let start = Instant::now();
        let mut completed = 0;
        for (rate, seed, reqs) in &streams {
            let n = reqs.len();
            let mut sc = Scratch {
                tick0: vec![0; n],
                stall0: vec![0; n],
                first_t: vec![0.0; n],
            };
            for &b in &spec.max_batches {
                for &k in &spec.kv_tokens {
                    let o = run(reqs, b as usize, k, h, &mut sc);
                    completed += o.completed;
                    if !check {
                        continue;
                    }
                    let e = engine::sim::simulate(&spec.config(*rate, b, k, *seed))
                        .unwrap()
                        .summary;
                    let close = |x: f64, y: Option<f64>| {
                        y.is_some_and(|y| (x - y).abs() <= 1e-9 * x.abs().max(1e-12))
                    };
                    let same = e.completed == o.completed
                        && e.rejected == o.rejected
                        && e.stalls == o.stalls
                        && close(o.ttft_mean, e.ttft.mean)
                        && close(o.p99[0], e.ttft.p99)
                        && close(o.p99[1], e.e2e.p99)
                        && close(o.p99[2], e.tpot.p99)
                        && close(o.p99[3], e.itl_max.p99);
                    if !same {
                        mismatches += 1;
                        println!("differs: λ {rate} B {b} K {k} seed {seed}");
                    }
                }
            }
        }
        println!(
            "stripped loop, default grid: {:.3} s ({completed} completed{})",
            start.elapsed().as_secs_f64(),
            if check { ", engine runs included" } else { "" }
        );
    }
    if check {
        println!(
            "{mismatches} of {} runs differ from the engine",
            spec.runs() * times
        );
    }
}
