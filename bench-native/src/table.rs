//! Text and CSV output shared by the commands that print simulations: aligned columns, a
//! summary's table, request records.

use anyhow::Context;
use engine::metrics::Summary;

/// Writes `--records`: every request's record as a CSV.
///
/// # Errors
/// The file cannot be written.
pub fn write_records(
    path: &std::path::Path,
    records: &[engine::record::RequestRecord],
) -> anyhow::Result<()> {
    let mut s = String::from(engine::sweep::RECORD_COLUMNS);
    s.push('\n');
    s.push_str(&engine::sweep::records_csv(records, ""));
    std::fs::write(path, s).with_context(|| format!("writing {}", path.display()))
}

/// A human-readable table of a summary.
pub fn summary_table(s: &Summary) -> String {
    let ms = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{:.1}", v * 1e3));
    let mut rows: Vec<Vec<String>> = vec![["[ms]", "mean", "p50", "p95", "p99", "max"]
        .map(String::from)
        .to_vec()];
    for (name, d) in [
        ("TTFT", &s.ttft),
        ("TPOT", &s.tpot),
        ("E2E", &s.e2e),
        ("ITL max", &s.itl_max),
    ] {
        rows.push(vec![
            name.to_string(),
            ms(d.mean),
            ms(d.p50),
            ms(d.p95),
            ms(d.p99),
            ms(d.max),
        ]);
    }
    let mut out = aligned(&rows);
    out += &format!(
        "arrivals {}  completed {}  rejected {}  unfinished {}  window {:.1} s\n\
         goodput (completed) {:.3} req/s  output {:.1} tok/s  SLO goodput {:.3} req/s  blocking {:.4}  preemptions {}  stalls {}\n",
        s.arrivals,
        s.completed,
        s.rejected,
        s.unfinished,
        s.window_s,
        s.throughput_rps,
        s.output_tokens_per_s,
        s.slo_goodput_rps,
        s.blocking_probability,
        s.preemptions,
        s.stalls
    );
    out
}

/// `rows` as text columns: the first left-aligned, the rest right-aligned, each as wide as
/// its widest cell (at least 9 and 10 characters) so that no two cells ever touch.
pub fn aligned(rows: &[Vec<String>]) -> String {
    let n = rows.iter().map(Vec::len).max().unwrap_or(0);
    let width = |j: usize, min: usize| {
        rows.iter()
            .filter_map(|r| r.get(j))
            .map(|c| c.chars().count())
            .max()
            .unwrap_or(0)
            .max(min)
    };
    let first = width(0, 8) + 1;
    let rest: Vec<usize> = (1..n).map(|j| width(j, 8) + 2).collect();
    let mut out = String::new();
    for r in rows {
        for (j, c) in r.iter().enumerate() {
            if j == 0 {
                out += &format!("{c:<first$}");
            } else {
                out += &format!("{c:>w$}", w = rest[j - 1]);
            }
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::metrics::Dist;

    /// Overloaded runs have latencies of millions of ms: every cell keeps at least two
    /// spaces before it, whatever its width, and the columns stay aligned.
    #[test]
    fn table_columns_never_run_together() {
        let wide = |v: f64| Dist {
            n: 1,
            mean: Some(v),
            p50: Some(v * 0.9),
            p95: Some(v * 1.1),
            p99: Some(v * 1.2),
            max: Some(v * 1.3),
            ..Dist::default()
        };
        let s = Summary {
            ttft: wide(123_456_789.0),
            tpot: wide(1.0e-4),
            e2e: wide(9.87e12),
            itl_max: Dist::default(),
            ..Summary::default()
        };
        let t = summary_table(&s);
        let lines: Vec<&str> = t.lines().take(5).collect();
        let len = lines[0].len();
        for l in &lines {
            assert_eq!(l.len(), len, "ragged table:\n{t}");
        }
        // every header column ends where each of its cells ends, and cells never touch
        let ends = |l: &str| -> Vec<usize> {
            let b = l.as_bytes();
            (1..=b.len())
                .filter(|&i| b[i - 1] != b' ' && (i == b.len() || b[i] == b' '))
                .collect()
        };
        let head = ends(lines[0]);
        assert_eq!(head.len(), 6, "{t}");
        for l in &lines[1..] {
            let name_end = if l.starts_with("ITL max") { 2 } else { 1 };
            let e = ends(l);
            assert_eq!(&e[name_end..], &head[1..], "misaligned:\n{t}");
            let cells: Vec<&str> = l[9..].split_whitespace().collect();
            assert_eq!(cells.len(), 5, "cells ran together:\n{t}");
        }
        assert!(t.contains("9870000000000000.0"), "{t}");
        // aligned() itself: any width, no two cells touching
        let rows = vec![
            vec!["a".to_string(), "x".repeat(30), "1".into()],
            vec!["long-first-column".to_string(), "2".into(), "y".repeat(25)],
        ];
        let a = aligned(&rows);
        for l in a.lines() {
            assert_eq!(l.split_whitespace().count(), 3, "{a}");
        }
        let ls: Vec<&str> = a.lines().collect();
        assert_eq!(ls[0].len(), ls[1].len(), "{a}");
    }
}
