//! A dropped folder, or a zip of one: every run in it, with its metadata.
//!
//! The folders `bench-native run`, `server-sweep` and `validate` write hold one
//! directory per run (`rate-<λ>/`, possibly under one per server configuration), each
//! with `requests.csv` (one row per request), `summary.csv` and the `metadata.json` that
//! records the server, model and workload. Of each run the page reads the per-request
//! file where it is there and the summary where not, and takes its setup from
//! `metadata.json`; the runs' setups (and the folder above them) group them into series.
//! Files of vLLM `bench serve --save-result` (JSON) anywhere in the folder are read too.
//! CSVs in directories without `metadata.json` are not measurements of a run (`validate`
//! keeps its simulated requests in `sim/`) and are skipped, as is everything else.

use super::setup::Setup;
use super::{parse, Context, MeasuredError, MeasuredSet};
use std::collections::BTreeMap;
use std::io::Read;

/// One file of a dropped folder: its path inside the folder ("run/rate-1/requests.csv")
/// and its bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct FolderFile {
    pub path: String,
    pub bytes: Vec<u8>,
}

/// What reading a folder gave: the runs, and a line per file that could not be used.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FolderRead {
    pub sets: Vec<MeasuredSet>,
    pub problems: Vec<String>,
    /// Files that are not measurements (logs, simulated requests, reports).
    pub skipped: usize,
}

/// Files the bench-native tools write that are not a run's results.
const NOT_RESULTS: [&str; 6] = [
    "metadata.json",
    "summary.json",
    "run_args.json",
    "fit.json",
    "microbench.json",
    "package.json",
];

fn split(path: &str) -> (&str, &str) {
    match path.rsplit_once('/') {
        Some((dir, name)) => (dir, name),
        None => ("", path),
    }
}

/// The run's folder: the directory above a `rate-*` directory, else the directory.
fn run_folder(dir: &str) -> String {
    let (parent, last) = split(dir);
    if last.starts_with("rate-") && !parent.is_empty() {
        parent.to_string()
    } else {
        dir.to_string()
    }
}

/// Reads every run in `files` (the contents of one dropped folder or zip).
pub fn read(files: &[FolderFile], ctx: &Context) -> FolderRead {
    let mut out = FolderRead::default();
    let mut dirs: BTreeMap<&str, Vec<&FolderFile>> = BTreeMap::new();
    for f in files {
        dirs.entry(split(&f.path).0).or_default().push(f);
    }
    for (dir, list) in dirs {
        let named = |n: &str| list.iter().copied().find(|f| split(&f.path).1 == n);
        let meta = named("metadata.json").and_then(|m| {
            let v: serde_json::Value = serde_json::from_slice(&m.bytes).ok()?;
            Some(Setup::from_bench_native(&v))
        });
        let folder = run_folder(dir);
        let mut used = 0;
        if let Some(setup) = &meta {
            // The per-request file where it is there, the summary where not.
            if let Some(f) = named("requests.csv").or_else(|| named("summary.csv")) {
                // The results and the metadata beside them.
                used += 2;
                read_one(f, Some(setup), &folder, ctx, &mut out);
            }
        }
        for f in &list {
            let (_, name) = split(&f.path);
            let json = name.ends_with(".json") || name.ends_with(".jsonl");
            if json && !NOT_RESULTS.contains(&name) && is_vllm_result(&f.bytes) {
                used += 1;
                read_one(f, None, &folder, ctx, &mut out);
            }
        }
        out.skipped += list.len().saturating_sub(used);
    }
    out
}

/// Whether `bytes` look like a vLLM bench result (without parsing them twice over).
fn is_vllm_result(bytes: &[u8]) -> bool {
    let head = &bytes[..bytes.len().min(1 << 20)];
    let s = String::from_utf8_lossy(head);
    s.contains("\"mean_ttft_ms\"") || s.contains("\"p99_ttft_ms\"")
}

fn read_one(
    f: &FolderFile,
    meta: Option<&Setup>,
    folder: &str,
    ctx: &Context,
    out: &mut FolderRead,
) {
    let text = match std::str::from_utf8(&f.bytes) {
        Ok(t) => t,
        Err(_) => {
            out.problems
                .push(format!("{}: not a text file (UTF-8)", f.path));
            return;
        }
    };
    match parse(&f.path, text, ctx) {
        Ok(mut set) => {
            if let Some(m) = meta {
                set.setup = m.clone();
                // The run's intended rate, not the one estimated from its arrivals.
                if let (Some(r), [p]) = (m.rate, set.points.as_mut_slice()) {
                    p.rate = r;
                }
            }
            if !folder.is_empty() {
                set.setup.folder = Some(folder.to_string());
            }
            out.sets.push(set);
        }
        Err(e) => out.problems.push(format!("{}: {e}", f.path)),
    }
}

/// The files of a zip archive (directories left out, paths with `/`).
///
/// # Errors
/// A message naming what is wrong with the archive (not a zip, an entry compressed in a
/// way the page cannot read, an entry too large).
pub fn unzip(bytes: &[u8]) -> Result<Vec<FolderFile>, MeasuredError> {
    let mut z = zip::ZipArchive::new(std::io::Cursor::new(bytes))
        .map_err(|e| MeasuredError::NoPoints(format!("not a readable zip archive ({e})")))?;
    let mut files = Vec::new();
    let mut total = 0.0;
    for i in 0..z.len() {
        let mut e = z
            .by_index(i)
            .map_err(|e| MeasuredError::NoPoints(format!("zip entry {}: {e}", i + 1)))?;
        if e.is_dir() {
            continue;
        }
        let path = e.name().replace('\\', "/");
        total += e.size() as f64;
        super::check_size(total)?;
        let mut buf = Vec::with_capacity(e.size().min(1 << 26) as usize);
        e.read_to_end(&mut buf)
            .map_err(|err| MeasuredError::NoPoints(format!("{path}: {err}")))?;
        files.push(FolderFile { path, bytes: buf });
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measured::group;
    use engine::metrics::MetricsConfig;
    use std::io::Write;

    fn ctx() -> Context {
        Context {
            max_batch: 4,
            kv_tokens: 65536,
            metrics: MetricsConfig::default(),
        }
    }

    fn file(path: &str, text: &str) -> FolderFile {
        FolderFile {
            path: path.into(),
            bytes: text.as_bytes().to_vec(),
        }
    }

    fn metadata(rate: f64) -> String {
        format!(
            r#"{{"server_kind": "vllm", "model": "tiny", "kv": {{"tokens": 65536, "block_size": 128}},
               "run": {{"tool": "bench-native 0.1.0", "requests_scheduled": 40, "warmup_requests": 1,
                       "arrival_rate_rps": {rate}, "workload": {{"arrivals": {{"kind": "poisson", "rate": {rate}}}}}}}}}"#
        )
    }

    const REQUESTS: &str =
        "id,intended_send_s,ttft_s,tpot_s,e2e_s,prompt_tokens,completion_tokens,outcome\n\
        0,0.0,0.040,0.021,0.65,2,29,completed\n\
        1,2.0,0.035,0.020,0.78,1,37,completed\n\
        2,4.0,0.050,0.022,0.70,3,30,completed\n";

    /// The bench-native `validate` layout: runs under the folder, a repeat under
    /// `repeat-2/`, simulated requests in `sim/`, reports beside them.
    fn validate_folder() -> Vec<FolderFile> {
        let mut v = Vec::new();
        for (dir, rate) in [
            ("v/rate-0.25", 0.25),
            ("v/rate-0.5", 0.5),
            ("v/repeat-2/rate-0.25", 0.25),
        ] {
            v.push(file(&format!("{dir}/metadata.json"), &metadata(rate)));
            v.push(file(&format!("{dir}/requests.csv"), REQUESTS));
            v.push(file(&format!("{dir}/summary.json"), "{}"));
        }
        v.push(file("v/sim/requests-0.25.csv", REQUESTS));
        v.push(file("v/validate.md", "# report"));
        v.push(file("v/run_args.json", "{\"scale\": 0.25}"));
        v
    }

    #[test]
    fn a_validate_folder_is_its_runs_grouped_by_folder() {
        let r = read(&validate_folder(), &ctx());
        assert!(r.problems.is_empty(), "{:?}", r.problems);
        assert_eq!(r.sets.len(), 3, "{:#?}", r.sets);
        assert_eq!(
            r.skipped,
            3 + 1 + 2,
            "summaries, sim/, the report and run args"
        );
        let s = &r.sets[0];
        assert_eq!(s.name, "v/rate-0.25/requests.csv");
        assert_eq!(s.setup.prompts, Some(40));
        assert_eq!(s.setup.folder.as_deref(), Some("v"));
        let g = group(&r.sets);
        assert_eq!(g.len(), 2, "the repeat is its own series");
        assert_eq!(g[0].points.len(), 2);
        assert_eq!(g[0].name, "measured: vLLM · tiny · 40 prompts · v");
        assert_eq!(g[1].name, "measured: vLLM · tiny · 40 prompts · v/repeat-2");
    }

    #[test]
    fn a_zip_of_the_folder_reads_the_same() {
        let mut buf = Vec::new();
        {
            let mut w = zip::ZipWriter::new(std::io::Cursor::new(&mut buf));
            let opts = zip::write::SimpleFileOptions::default()
                .compression_method(zip::CompressionMethod::Deflated);
            for f in validate_folder() {
                w.start_file(f.path.as_str(), opts).unwrap();
                w.write_all(&f.bytes).unwrap();
            }
            w.finish().unwrap();
        }
        let files = unzip(&buf).unwrap();
        assert_eq!(files, validate_folder());
        assert_eq!(read(&files, &ctx()).sets.len(), 3);
        let bad = unzip(b"PK not really").unwrap_err().to_string();
        assert!(bad.contains("not a readable zip archive"), "{bad}");
    }

    #[test]
    fn vllm_results_in_a_folder_are_read_and_broken_ones_named() {
        let ok = r#"{"backend": "vllm", "model_id": "m", "num_prompts": 10, "request_rate": 1.0, "mean_ttft_ms": 30.0}"#;
        let broken = r#"{"request_rate": 1.0, "mean_ttft_ms": -3.0}"#;
        let r = read(
            &[file("sweep/r1.json", ok), file("sweep/r2.json", broken)],
            &ctx(),
        );
        assert_eq!(r.sets.len(), 1);
        assert_eq!(r.sets[0].setup.folder.as_deref(), Some("sweep"));
        assert_eq!(r.problems.len(), 1);
        assert!(
            r.problems[0].starts_with("sweep/r2.json: "),
            "{:?}",
            r.problems
        );
    }
}
