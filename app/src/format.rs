//! Numbers as people read them — the one place where the page turns a value into text,
//! in tables, chart axes, hovers and exports alike.
//!
//! * Latencies ([`latency`]): below 1 s in milliseconds, from 1 s on in seconds, always
//!   with three significant digits (8.27 ms, 31.7 ms, 412 ms, 1.24 s, 12.4 s); from
//!   1000 s on in whole seconds.
//! * Rates ([`req_per_s`], [`tok_per_s`]): at most three significant digits, no trailing
//!   zeros, and their unit ("0.5 req/s", "2410 tok/s").
//! * A metric's value ([`value`]): the metric's kind decides which of the above.

use crate::metric::Metric;

/// `x` with three significant digits, no exponent ("8.27", "31.7", "412", "1240").
///
/// # Examples
/// ```
/// assert_eq!(app::format::sig3(0.008274), "0.00827");
/// assert_eq!(app::format::sig3(9.996), "10.0");
/// ```
pub fn sig3(x: f64) -> String {
    if !x.is_finite() {
        return "—".into();
    }
    if x == 0.0 {
        return "0".into();
    }
    // Round first, then count the decimals on the rounded value, so 9.996 becomes
    // "10.0", not "10.00".
    let digits = |v: f64| v.abs().log10().floor() as i32;
    let scale = 10f64.powi(2 - digits(x));
    let r = (x * scale).round() / scale;
    let decimals = (2 - digits(r)).max(0) as usize;
    format!("{r:.decimals$}")
}

/// A latency [s] in the unit people read: ms below 1 s, s from 1 s on, three
/// significant digits; whole seconds from 1000 s.
pub fn latency(s: f64) -> String {
    if !s.is_finite() {
        return "—".into();
    }
    let ms = s * 1000.0;
    // What the value rounds to in ms decides the unit: 999.7 ms reads "1.00 s".
    if sig3(ms.abs()).parse::<f64>().unwrap_or(ms.abs()) < 1000.0 {
        format!("{} ms", sig3(ms))
    } else if s.abs() < 1000.0 {
        format!("{} s", sig3(s))
    } else {
        format!("{s:.0} s")
    }
}

/// [`sig3`] without trailing zeros after the point ("0.5", "4", "0.244"): rates read
/// as people type them.
fn sig3_trimmed(x: f64) -> String {
    let s = sig3(x);
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// A request rate [req/s]: "1.5 req/s", "0.244 req/s".
pub fn req_per_s(r: f64) -> String {
    format!("{} req/s", sig3_trimmed(r))
}

/// A token rate [tok/s], without prefixes: "2410 tok/s".
pub fn tok_per_s(r: f64) -> String {
    format!("{} tok/s", sig3_trimmed(r))
}

/// An arrival rate as the sweep names it (as typed: "0.5", "1.678"), for table keys.
pub fn rate_key(r: f64) -> String {
    crate::measured::fmt_rate(r)
}

/// A fraction as a percentage with three significant digits ("1.23 %").
pub fn percent(f: f64) -> String {
    format!("{} %", sig3(100.0 * f))
}

/// A value of metric `m` in its unit: latencies by [`latency`], throughputs in req/s,
/// the blocking probability and hit rates in %, preemptions per request as a plain number.
pub fn value(m: Metric, v: f64) -> String {
    if m.is_latency() {
        latency(v)
    } else {
        match m {
            Metric::Goodput | Metric::SloGoodput => req_per_s(v),
            Metric::Blocking | Metric::PrefixHitRate | Metric::PrefixBlockHitRate => percent(v),
            _ => sig3(v),
        }
    }
}

/// An axis tick of metric `m`: like [`value`], but a tick at zero is a bare "0".
pub fn tick(m: Metric, v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else {
        value(m, v)
    }
}

/// A signed difference of metric `m` (simulated − measured): "+4.10 ms", "−0.3 %".
pub fn difference(m: Metric, d: f64) -> String {
    let sign = if d < 0.0 { "−" } else { "+" };
    format!("{sign}{}", value(m, d.abs()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latencies_below_one_second_read_in_ms_with_three_digits() {
        assert_eq!(latency(0.008274), "8.27 ms");
        assert_eq!(latency(0.0317), "31.7 ms");
        assert_eq!(latency(0.41249), "412 ms");
        assert_eq!(latency(0.000123), "0.123 ms");
        assert_eq!(latency(0.0), "0 ms");
        assert_eq!(latency(0.1), "100 ms");
    }

    #[test]
    fn latencies_from_one_second_read_in_seconds() {
        assert_eq!(latency(1.2404), "1.24 s");
        assert_eq!(latency(9.87), "9.87 s");
        assert_eq!(latency(12.36), "12.4 s");
        assert_eq!(latency(123.4), "123 s");
        assert_eq!(latency(4321.0), "4321 s");
    }

    #[test]
    fn rounding_up_to_the_next_unit_changes_the_unit() {
        // 999.7 ms rounds to 1000 ms: it is 1.00 s.
        assert_eq!(latency(0.9997), "1.00 s");
        assert_eq!(latency(0.9994), "999 ms");
        assert_eq!(latency(9.996), "10.0 s");
        assert_eq!(sig3(99.96), "100");
        assert_eq!(sig3(0.0099996), "0.0100");
    }

    #[test]
    fn negative_and_non_finite_values_stay_readable() {
        assert_eq!(latency(-0.0042), "-4.20 ms");
        assert_eq!(latency(f64::NAN), "—");
        assert_eq!(sig3(f64::INFINITY), "—");
        assert_eq!(difference(Metric::MeanTpot, -0.0003), "−0.300 ms");
        assert_eq!(difference(Metric::MeanTtft, 0.25), "+250 ms");
    }

    #[test]
    fn rates_and_fractions_carry_their_units() {
        assert_eq!(req_per_s(1.5), "1.5 req/s");
        assert_eq!(req_per_s(4.0), "4 req/s");
        assert_eq!(tok_per_s(2412.7), "2410 tok/s");
        assert_eq!(value(Metric::Goodput, 0.24392), "0.244 req/s");
        assert_eq!(value(Metric::Blocking, 0.01234), "1.23 %");
        assert_eq!(value(Metric::P99Ttft, 2.0114), "2.01 s");
        assert_eq!(value(Metric::MeanTpot, 0.0244), "24.4 ms");
        assert_eq!(tick(Metric::MeanTpot, 0.0), "0");
        assert_eq!(rate_key(0.5), "0.5");
    }
}
