//! `validate --replay DIR`: a recorded run predicted again by this build's models, from
//! what the run recorded as data (`run_args.json`, the microbenchmarks, the traces and the
//! measured summaries), with no server.

use super::predict::{predict_and_report, Measured};
use super::server::{length_cap, server_model};
use super::{ValidateArgs, ValidateReport};
use crate::fit;
use crate::microbench::MicrobenchResult;
use anyhow::{bail, Context};
use engine::fleet::RouterKind;
use engine::metrics::Summary;
use engine::workload::TraceRequest;
use serde_json::Value;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// What a replay reads of the run it replays.
pub const RECORDED_ARGS: &str = "run_args.json";

/// The arguments that describe a run's server and workload. A replay takes them from the
/// recording ([`RECORDED_ARGS`]), so it simulates the server and draws the saturation
/// estimate the run had, whatever its own command line says.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RecordedArgs {
    pub scale: f64,
    pub max_len: u32,
    pub seed: u64,
    pub budget: u32,
    pub slots: Option<u32>,
    pub kv_tokens: Option<u64>,
    /// The fleet measured through `--balancer` (1 replica: the `--url` server itself).
    #[serde(default = "one")]
    pub replicas: u32,
    #[serde(default)]
    pub router: RouterKind,
}

fn one() -> u32 {
    1
}

impl RecordedArgs {
    pub fn of(a: &ValidateArgs) -> RecordedArgs {
        RecordedArgs {
            scale: a.scale,
            max_len: a.max_len,
            seed: a.seed,
            budget: a.budget,
            slots: a.slots,
            kv_tokens: a.kv_tokens,
            replicas: a.replicas,
            router: a
                .router
                .as_deref()
                .and_then(RouterKind::parse)
                .unwrap_or_default(),
        }
    }

    /// `a` with these in place of its own (its `--router`, if given, stays: a recorded
    /// fleet may be predicted behind another router).
    pub fn apply(self, a: &ValidateArgs) -> ValidateArgs {
        ValidateArgs {
            scale: self.scale,
            max_len: self.max_len,
            seed: self.seed,
            budget: self.budget,
            slots: self.slots,
            kv_tokens: self.kv_tokens,
            replicas: self.replicas,
            router: a.router.clone().or_else(|| Some(self.router.name())),
            ..a.clone()
        }
    }

    /// As command-line flags.
    pub fn flags(&self) -> String {
        let mut s = format!(
            "--scale {} --max-len {} --seed {} --budget {}",
            self.scale, self.max_len, self.seed, self.budget
        );
        if let Some(n) = self.slots {
            let _ = write!(s, " --slots {n}");
        }
        if let Some(k) = self.kv_tokens {
            let _ = write!(s, " --kv-tokens {k}");
        }
        if self.replicas > 1 {
            let _ = write!(
                s,
                " --replicas {} --router {}",
                self.replicas,
                self.router.name()
            );
        }
        s
    }

    pub(super) fn write(&self, dir: &Path) -> anyhow::Result<()> {
        let p = dir.join(RECORDED_ARGS);
        std::fs::write(&p, serde_json::to_string_pretty(self)?)
            .with_context(|| format!("writing {}", p.display()))
    }

    /// From `dir`'s [`RECORDED_ARGS`].
    ///
    /// # Errors
    /// `dir` has none (a run recorded before there was one: write it, see the message),
    /// or it is not one.
    pub fn read(dir: &Path) -> anyhow::Result<RecordedArgs> {
        let p = dir.join(RECORDED_ARGS);
        let text = std::fs::read_to_string(&p).with_context(|| {
            format!(
                "reading {}: a replay takes the server and workload the run was recorded with \
                 from it; for a run without one, write the flags it was run with, e.g. \
                 {{\"scale\": 0.25, \"max_len\": 512, \"seed\": 0, \"budget\": 512, \"slots\": null, \"kv_tokens\": null}}",
                p.display()
            )
        })?;
        serde_json::from_str(&text)
            .with_context(|| format!("{} is not a {RECORDED_ARGS}", p.display()))
    }
}

/// `--replay DIR`: re-fits DIR's microbenchmarks and re-simulates its traces against its
/// measurements, for the server and workload DIR was recorded with.
///
/// # Errors
/// DIR is not a `validate` run or has no [`RECORDED_ARGS`]; file errors.
pub(super) fn replay(
    args: &ValidateArgs,
    dir: &Path,
    command: &str,
) -> anyhow::Result<ValidateReport> {
    let rec = read_recorded(dir)?;
    // The server and workload the run was recorded with, not this command's.
    let recorded = RecordedArgs::read(dir)?;
    eprintln!(
        "replaying {}: recorded with {}",
        dir.display(),
        recorded.flags()
    );
    // the report's workload line: the recorded traces' length
    let args = &ValidateArgs {
        requests: rec.measured[0].1.len(),
        ..recorded.apply(args)
    };
    RecordedArgs::of(args).write(&args.out)?;
    let model = server_model(args, &rec.meta)?;
    let cap = length_cap(args, &model);
    eprintln!(
        "replaying {}: {} rates, re-fitting its microbenchmarks",
        dir.display(),
        rec.measured.len()
    );
    predict_and_report(
        args,
        command,
        &model,
        cap,
        (&rec.pre, &rec.post),
        rec.beside.as_ref(),
        rec.measured,
    )
}

/// What a finished `validate` directory recorded.
struct Recorded {
    meta: Value,
    pre: MicrobenchResult,
    post: MicrobenchResult,
    /// The microbenchmark beside busy neighbours, if the run made one.
    beside: Option<MicrobenchResult>,
    /// (rate, trace, measured summary, later rounds' summaries), by rate.
    measured: Vec<Measured>,
}

/// Reads a `validate` output directory: the two microbenchmarks, and per `rate-<r>/` its
/// `summary.json` and the trace `sim/trace-<r>.json`.
fn read_recorded(dir: &Path) -> anyhow::Result<Recorded> {
    let json = |p: PathBuf| -> anyhow::Result<Value> {
        let text =
            std::fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))?;
        serde_json::from_str(&text).with_context(|| format!("{} is not JSON", p.display()))
    };
    let mb = |name: &str| -> anyhow::Result<MicrobenchResult> {
        Ok(fit::read_microbench(&dir.join(name))?)
    };
    let (pre, post) = (mb("microbench_pre.json")?, mb("microbench_post.json")?);
    let beside = if dir.join(super::BESIDE).exists() {
        Some(mb(super::BESIDE)?)
    } else {
        None
    };
    let mut measured = Vec::new();
    let entries = std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))?;
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(r) = name.strip_prefix("rate-") else {
            continue;
        };
        let summary = json(e.path().join("summary.json"))?;
        // the nominal rate the trace was drawn at (the summary has the realised one)
        let rate = r
            .parse()
            .ok()
            .or_else(|| summary["arrival_rate_rps"].as_f64())
            .with_context(|| format!("{name}: no arrival rate"))?;
        let m: Summary = serde_json::from_value(summary["summary"].clone())
            .with_context(|| format!("{name}/summary.json: no summary"))?;
        let t: Vec<TraceRequest> =
            serde_json::from_value(json(dir.join("sim").join(format!("trace-{r}.json")))?)
                .with_context(|| format!("sim/trace-{r}.json is not a trace"))?;
        let mut repeats = Vec::new();
        for k in 2.. {
            let p = dir
                .join(format!("repeat-{k}"))
                .join(&name)
                .join("summary.json");
            if !p.exists() {
                break;
            }
            let v = json(p)?;
            repeats.push(
                serde_json::from_value(v["summary"].clone())
                    .with_context(|| format!("repeat-{k}/{name}/summary.json: no summary"))?,
            );
        }
        measured.push((rate, t, m, repeats));
    }
    if measured.is_empty() {
        bail!(
            "{}: no rate-<r>/ directories of a validate run",
            dir.display()
        );
    }
    measured.sort_by(|a, b| a.0.total_cmp(&b.0));
    Ok(Recorded {
        meta: pre.metadata.clone(),
        pre,
        post,
        beside,
        measured,
    })
}
