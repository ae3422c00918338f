//! A sweep sharded as a job array on a real single-node Slurm (`scripts/slurm.sh`,
//! `scripts/sweep-array.sbatch`), merged, equals the same sweep on one machine byte for
//! byte.

use crate::common::{free_port, live, repo_root};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The cluster of one test, stopped by the PIDs its daemons wrote (also on a panic).
struct Cluster {
    dir: PathBuf,
    conf: PathBuf,
}

impl Cluster {
    fn start(dir: &Path) -> Cluster {
        let out = Command::new("bash")
            .arg(repo_root().join("scripts/slurm.sh"))
            .arg("start")
            .arg(dir)
            .arg(free_port().to_string())
            .arg(free_port().to_string())
            .output()
            .expect("running scripts/slurm.sh");
        assert!(
            out.status.success(),
            "slurm did not start (scripts/setup.sh slurm installs it): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Cluster {
            dir: dir.to_path_buf(),
            conf: dir.join("slurm.conf"),
        }
    }

    fn cmd(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        c.env("SLURM_CONF", &self.conf);
        c
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(repo_root().join("scripts/slurm.sh"))
            .arg("stop")
            .arg(&self.dir)
            .status();
    }
}

const GRID: [&str; 9] = [
    "--rates",
    "1,3,5",
    "--batches",
    "4,8",
    "--kv",
    "4096,8192",
    "--seeds",
    "0-2",
    "--horizon",
];

#[test]
#[ignore = "live: needs slurm-wlm and munge (scripts/setup.sh slurm)"]
fn a_sweep_sharded_over_a_slurm_job_array_merges_to_the_one_machine_sweep() {
    let _live = live();
    let bin = env!("CARGO_BIN_EXE_bench-native");
    let dir = crate::common::scratch_root().join(format!("kvq-slurm-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let cluster = Cluster::start(&dir.join("cluster"));
    let out = dir.join("array");
    let started = Instant::now();
    let submit = cluster
        .cmd("sbatch")
        .args(["--parsable", "--array=0-3", "--chdir"])
        .arg(&dir)
        .env("BENCH_NATIVE", bin)
        .arg(repo_root().join("scripts/sweep-array.sbatch"))
        .arg(&out)
        .args(GRID)
        .arg("200")
        .output()
        .expect("sbatch");
    assert!(
        submit.status.success(),
        "sbatch: {}",
        String::from_utf8_lossy(&submit.stderr)
    );
    let job = String::from_utf8_lossy(&submit.stdout).trim().to_string();
    loop {
        let q = cluster
            .cmd("squeue")
            .args(["-h", "-j", &job])
            .output()
            .expect("squeue");
        if q.status.success() && q.stdout.is_empty() {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(180),
            "job array {job} still queued after 180 s"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    let shards: Vec<PathBuf> = (0..4)
        .map(|i| out.join(format!("shard-{i}/sweep_summary.csv")))
        .collect();
    for s in &shards {
        assert!(
            s.is_file(),
            "{} missing; task logs in {}",
            s.display(),
            dir.display()
        );
    }
    let merged = dir.join("merged.csv");
    let st = Command::new(bin)
        .arg("merge")
        .args(&shards)
        .arg("-o")
        .arg(&merged)
        .status()
        .unwrap();
    assert!(st.success(), "merge");
    let single = dir.join("single");
    let st = Command::new(bin)
        .args(["sweep", "--threads", "1", "--out"])
        .arg(&single)
        .args(GRID)
        .arg("200")
        .status()
        .unwrap();
    assert!(st.success(), "one-machine sweep");
    let a = std::fs::read(&merged).unwrap();
    let b = std::fs::read(single.join("sweep_summary.csv")).unwrap();
    assert!(a.len() > 100, "a real summary");
    assert!(
        a == b,
        "merged job array differs from the one-machine sweep"
    );
    drop(cluster);
    let _ = std::fs::remove_dir_all(&dir);
}
