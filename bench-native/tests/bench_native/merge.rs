//! `merge` run as the binary: shards of a real sweep merge; a row cut short, a word or a
//! `NaN` where the writer writes numbers, a different header, an empty or header-only
//! file are each refused with the file, line and column, the exit code is not 0, and no
//! output is written.

use engine::sweep::{run_sweep, summary_csv, SweepSpec};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A fresh directory for one test.
fn scratch(name: &str) -> PathBuf {
    let d = crate::common::scratch_root().join(format!("kvq-merge-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Two shards' summary CSVs of a small real sweep.
fn shards() -> (String, String) {
    let mut s = SweepSpec::reference_default();
    s.rates = vec![1.0, 40.0];
    s.max_batches = vec![2];
    s.kv_tokens = vec![4096];
    s.seeds = vec![0, 1];
    s.base.horizon_s = 30.0;
    let a = run_sweep(&s, Some((0, 2)), &mut |_, _| true)
        .unwrap()
        .unwrap();
    let b = run_sweep(&s, Some((1, 2)), &mut |_, _| true)
        .unwrap()
        .unwrap();
    (summary_csv(&a, &s.base), summary_csv(&b, &s.base))
}

/// `merge` over `files` (name, text) written in `dir`: (exit code, stderr, output).
fn merge(dir: &Path, files: &[(&str, &str)]) -> (Option<i32>, String, Option<String>) {
    let out = dir.join("merged.csv");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_bench-native"));
    cmd.current_dir(dir).arg("merge");
    for (name, text) in files {
        std::fs::write(dir.join(name), text).unwrap();
        cmd.arg(name);
    }
    let o = cmd
        .arg("-o")
        .arg(&out)
        .output()
        .expect("start bench-native");
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
        std::fs::read_to_string(&out).ok(),
    )
}

#[test]
fn shards_of_a_sweep_merge() {
    let d = scratch("ok");
    let (a, b) = shards();
    let (code, err, out) = merge(&d, &[("b.csv", &b), ("a.csv", &a)]);
    assert_eq!(code, Some(0), "{err}");
    let out = out.expect("written");
    assert_eq!(out.lines().count(), 3, "{out}");
    assert!(
        out.lines().nth(1).unwrap().starts_with("1.0,2,4096,2,"),
        "{out}"
    );
    assert!(!d.join("merged.csv.partial").exists());
}

#[test]
fn shards_of_a_prefix_cache_sweep_merge_into_the_one_job_file() {
    let d = scratch("prefix");
    let sweep = |shard: Option<&str>, out: &str| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_bench-native"));
        c.current_dir(&d)
            .args(["sweep", "--rates", "1,2", "--batches", "8", "--kv", "8192"])
            .args(["--seeds", "0-1", "--horizon", "40", "--kv-mode", "paged"])
            .args(["--block-size", "16", "--system-prompt", "4:0.8:256"])
            .args(["--prefix-cache", "apc", "--out", out]);
        if let Some(s) = shard {
            c.args(["--shard", s]);
        }
        let o = c.output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        std::fs::read_to_string(d.join(out).join("sweep_summary.csv")).unwrap()
    };
    let (a, b, one) = (
        sweep(Some("0/2"), "a"),
        sweep(Some("1/2"), "b"),
        sweep(None, "one"),
    );
    assert!(one
        .lines()
        .next()
        .unwrap()
        .ends_with(engine::sweep::PREFIX_COLUMNS));
    let (code, err, out) = merge(&d, &[("b.csv", &b), ("a.csv", &a)]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        out.expect("written"),
        one,
        "byte for byte the one-job summary"
    );
    // A prefix-cache shard and a plain one do not merge.
    let (plain, _) = shards();
    std::fs::remove_file(d.join("merged.csv")).unwrap();
    let (code, err, out) = merge(&d, &[("a.csv", &a), ("plain.csv", &plain)]);
    assert_ne!(code, Some(0));
    assert!(err.contains("different headers") && out.is_none(), "{err}");
}

#[test]
fn bad_rows_are_named_and_nothing_is_written() {
    let d = scratch("bad");
    let (a, b) = shards();
    let row = b.lines().nth(1).unwrap();
    let cells: Vec<&str> = row.split(',').collect();
    // a cut-short row, `hello` for a number, `NaN` for a number, and a good row
    let short = cells[..10].join(",");
    let mut hello = cells.clone();
    hello[4] = "hello";
    let mut nan = cells.clone();
    nan[0] = "NaN";
    nan[12] = "inf";
    let bad = format!(
        "{}\n{short}\n{}\n{}\n",
        engine::sweep::summary_header(),
        hello.join(","),
        nan.join(",")
    );
    let (code, err, out) = merge(&d, &[("a.csv", &a), ("bad.csv", &bad)]);
    assert_ne!(code, Some(0), "{err}");
    assert!(out.is_none(), "a partial output was written");
    assert!(!d.join("merged.csv.partial").exists());
    for want in [
        "bad.csv:2: 10 columns, the header has 36",
        "bad.csv:3: column 5 (mean_ttft_mean): 'hello' is not empty nor a finite number >= 0",
        "bad.csv:4: column 1 (arrival_rate): 'NaN' is not a finite number >= 0",
        "bad.csv:4: column 13 (goodput_mean): 'inf'",
        "4 problem(s)",
    ] {
        assert!(err.contains(want), "missing `{want}` in:\n{err}");
    }
    assert!(!err.contains("a.csv:"), "{err}");
}

#[test]
fn empty_header_only_and_foreign_files_are_refused() {
    let d = scratch("empty");
    let (a, _) = shards();
    let header = format!("{}\n", engine::sweep::summary_header());
    for (name, text, want) in [
        ("empty.csv", "", "empty.csv: empty"),
        ("blank.csv", "\n\n", "blank.csv: empty"),
        ("head.csv", header.as_str(), "head.csv: header only"),
        (
            "other.csv",
            "rate,b,k\n1,2,3\n",
            "other.csv:1: not the sweep summary header",
        ),
    ] {
        let (code, err, out) = merge(&d, &[("a.csv", &a), (name, text)]);
        assert_ne!(code, Some(0), "{name}: {err}");
        assert!(err.contains(want), "{name}: missing `{want}` in:\n{err}");
        assert!(out.is_none(), "{name}: output written");
        // alone, too
        let (code, err, out) = merge(&d, &[(name, text)]);
        assert_ne!(code, Some(0), "{name} alone: {err}");
        assert!(out.is_none(), "{name} alone: output written");
    }
}

#[test]
fn an_existing_output_is_left_untouched_on_refusal() {
    let d = scratch("keep");
    std::fs::write(d.join("merged.csv"), "previous\n").unwrap();
    let (a, _) = shards();
    let bad = a.replacen(",reserve,", ",reserve,hello,", 1);
    let (code, _, out) = merge(&d, &[("bad.csv", &bad)]);
    assert_ne!(code, Some(0));
    assert_eq!(out.as_deref(), Some("previous\n"));
}
