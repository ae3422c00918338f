//! `bench-native compare` on a small grid (1 seed × 200 s): files, columns, and that the
//! batching model beats the reference chain on mean TTFT.

use bench_native::cli::{Cli, Command};
use clap::Parser;

fn column(header: &str, name: &str) -> usize {
    header
        .split(',')
        .position(|c| c == name)
        .unwrap_or_else(|| panic!("no column {name} in {header}"))
}

#[test]
fn the_batching_model_is_named_batching_and_ours_still_parses() {
    use bench_native::compare::ModelArg;
    for name in ["batching", "ours"] {
        let cli = Cli::try_parse_from(["bench-native", "compare", "--models", name]).unwrap();
        let Command::Compare(args) = cli.command else {
            panic!("parsed another subcommand")
        };
        assert_eq!(args.models, vec![ModelArg::Batching], "{name}");
        assert_eq!(
            engine::analytic::ModelKind::from(args.models[0]).as_str(),
            "batching"
        );
    }
}

#[test]
fn compare_writes_tables_and_the_batching_model_beats_the_chain() {
    let _cpu = crate::common::cpu_bound();
    let dir = crate::common::scratch_root().join(format!("kvqueue_compare_{}", std::process::id()));
    let out = dir.to_str().unwrap();
    let cli = Cli::try_parse_from([
        "bench-native",
        "compare",
        "--rates",
        "1,3",
        "--batches",
        "1,8",
        "--kv",
        "4096,16384",
        "--seeds",
        "0",
        "--horizon",
        "200",
        "--threads",
        "2",
        "--out",
        out,
        "--name",
        "small",
        "--noise-floor",
        "1-4",
    ])
    .unwrap();
    let Command::Compare(args) = cli.command else {
        panic!("parsed another subcommand")
    };
    bench_native::compare::execute(args).unwrap();

    let md = std::fs::read_to_string(dir.join("small.md")).unwrap();
    assert!(md.contains("Command: `"), "{md}");
    for m in [
        "reference_mmc",
        "reference_chain",
        "reference_ctmc",
        "batching",
        "simulator",
    ] {
        assert!(md.contains(&format!("| {m} |")), "{md}");
    }
    assert!(md.contains("averaged over 4 other seeds (1–4)"), "{md}");

    let csv = std::fs::read_to_string(dir.join("small.csv")).unwrap();
    let mut lines = csv.lines();
    let header = lines.next().unwrap();
    let (mi, ei, pi) = (
        column(header, "model"),
        column(header, "ttft_mean_mre"),
        column(header, "predicted"),
    );
    let mre = |model: &str| -> f64 {
        let row: Vec<&str> = csv
            .lines()
            .map(|l| l.split(',').collect::<Vec<_>>())
            .find(|r| r[mi] == model)
            .unwrap()
            .into_iter()
            .collect();
        assert_eq!(row[pi], "8", "{model} predicted every config: {csv}");
        row[ei].parse().unwrap()
    };
    let (batching, chain) = (mre("batching"), mre("reference_chain"));
    assert!(batching < chain, "batching {batching} vs chain {chain}");
    // The simulator on other seeds is scored like a model: a real, non-zero noise floor.
    let floor = mre("simulator");
    assert!(
        floor > 0.0 && floor < chain,
        "simulator {floor} vs chain {chain}"
    );

    let configs = std::fs::read_to_string(dir.join("small_configs.csv")).unwrap();
    let header = configs.lines().next().unwrap();
    for c in [
        "sim_ttft_mean_s",
        "model_ttft_mean_s",
        "err_ttft_mean_s",
        "err_kind_blocking",
        "status",
        "time_per_eval_s",
    ] {
        column(header, c);
    }
    // 8 configs × (4 models + the simulator on other seeds).
    assert_eq!(configs.lines().count(), 1 + 8 * 5);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn noise_floor_seeds_must_differ_from_the_yardstick() {
    let _cpu = crate::common::cpu_bound();
    let cli = Cli::try_parse_from([
        "bench-native",
        "compare",
        "--rates",
        "1",
        "--batches",
        "1",
        "--kv",
        "4096",
        "--seeds",
        "0-4",
        "--noise-floor",
        "3-9",
        "--horizon",
        "50",
        "--out",
        crate::common::scratch_root()
            .join("kvqueue_compare_overlap")
            .to_str()
            .unwrap(),
    ])
    .unwrap();
    let Command::Compare(args) = cli.command else {
        panic!("parsed another subcommand")
    };
    let e = bench_native::compare::execute(args)
        .unwrap_err()
        .to_string();
    assert!(e.contains("seed 3 is also a yardstick seed"), "{e}");
    assert!(e.contains("--noise-floor 5-204"), "{e}");
}
