//! `bench-native fit`: a microbenchmark → the engine's cost models.
//!
//! * `table`: the measured points as they are ([`engine::cost::TableCost`]).
//! * `linear`: `β0 + βp·prefill_tokens + βd·decode_seqs` ([`engine::cost::LinearCost`],
//!   `βkv = 0`: with one context length per stream count it is not identifiable), by least
//!   squares on relative error (each point weighted 1/latency, so the millisecond decode
//!   steps count as much as the long prefills), with coefficients kept ≥ 0 (active set).
//!
//! Output: `--out` (default `fit.json`) = `{"table": CostModel, "linear": CostModel,
//! "source", "residuals"}`, plus `<stem>.table.json` and `<stem>.linear.json`, each a bare
//! `CostModel` (serde tag `kind`) the engine loads directly.

use crate::microbench::MicrobenchResult;
use engine::cost::{BatchShape, CostModel, LinearCost, TableCost};
use serde::Serialize;
use serde_json::json;
use std::path::{Path, PathBuf};

const EXAMPLES: &str = "\
Examples:
  bench-native microbench --url http://127.0.0.1:8080 --out mb.json
  bench-native fit mb.json --out fit.json
  # fit.json = {\"table\": {\"kind\": \"table\", ...}, \"linear\": {\"kind\": \"linear\", ...}, ...};
  # fit.table.json and fit.linear.json hold one engine CostModel each.";

/// Arguments of `fit`.
#[derive(Debug, clap::Args)]
#[command(after_help = EXAMPLES)]
pub struct FitArgs {
    /// Microbenchmark JSON written by `bench-native microbench`.
    pub input: PathBuf,
    /// Output JSON with both models.
    #[arg(long, default_value = "fit.json")]
    pub out: PathBuf,
    /// Use the server's own prompt time for prefill instead of the client TTFT.
    #[arg(long)]
    pub server_prefill: bool,
}

/// Errors of a fit.
#[derive(Debug, thiserror::Error)]
pub enum FitError {
    #[error("{path}: {why}")]
    Input { path: PathBuf, why: String },
    #[error("not enough points: {0}")]
    TooFew(String),
    #[error("the fitted model is invalid: {0}")]
    Invalid(String),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Both fitted models and how well the linear one fits.
#[derive(Clone, Debug, Serialize)]
pub struct Fit {
    pub table: CostModel,
    pub linear: CostModel,
    /// Root-mean-square relative error of the linear model over the points.
    pub linear_rel_rms: f64,
    /// (kind, x, measured [s], linear [s]).
    pub residuals: Vec<(String, f64, f64, f64)>,
}

/// Solves the weighted least squares `min Σ w²(xβ − y)²` over the columns in `free`
/// (others fixed at 0) by the normal equations (Gaussian elimination, partial pivoting).
fn solve(rows: &[([f64; 3], f64, f64)], free: &[bool; 3]) -> Option<[f64; 3]> {
    let idx: Vec<usize> = (0..3).filter(|&i| free[i]).collect();
    let k = idx.len();
    let mut a = vec![vec![0.0; k + 1]; k];
    for (x, y, w) in rows {
        for (r, &i) in idx.iter().enumerate() {
            for (c, &j) in idx.iter().enumerate() {
                a[r][c] += w * w * x[i] * x[j];
            }
            a[r][k] += w * w * x[i] * y;
        }
    }
    for col in 0..k {
        let p = (col..k).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))?;
        if a[p][col].abs() < 1e-300 {
            return None;
        }
        a.swap(col, p);
        let pivot = a[col].clone();
        for (r, row) in a.iter_mut().enumerate() {
            if r != col {
                let f = row[col] / pivot[col];
                for (x, pv) in row.iter_mut().zip(&pivot).skip(col) {
                    *x -= f * pv;
                }
            }
        }
    }
    let mut beta = [0.0; 3];
    for (r, &i) in idx.iter().enumerate() {
        beta[i] = a[r][k] / a[r][r];
    }
    Some(beta)
}

/// Non-negative weighted least squares by dropping negative coefficients one at a time.
fn nonneg_fit(rows: &[([f64; 3], f64, f64)]) -> Option<[f64; 3]> {
    let mut free = [true; 3];
    loop {
        let beta = solve(rows, &free)?;
        match (0..3)
            .filter(|&i| free[i] && beta[i] < 0.0)
            .min_by(|&i, &j| beta[i].total_cmp(&beta[j]))
        {
            Some(i) => free[i] = false,
            None => return Some(beta),
        }
    }
}

/// Fits both models from a microbenchmark.
///
/// # Errors
/// [`FitError::TooFew`] without prefill or decode points; [`FitError::Invalid`] if the
/// result does not validate.
pub fn fit(mb: &MicrobenchResult, server_prefill: bool) -> Result<Fit, FitError> {
    let mut prefill: Vec<(f64, f64)> = mb
        .prefill
        .iter()
        .map(|p| {
            (
                p.prompt_tokens as f64,
                if server_prefill {
                    p.server_prompt_s.unwrap_or(p.latency_s)
                } else {
                    p.latency_s
                },
            )
        })
        .filter(|p| p.1.is_finite() && p.1 > 0.0)
        .collect();
    let mut decode: Vec<(f64, f64)> = mb
        .decode
        .iter()
        .map(|d| (d.streams as f64, d.step_s))
        .filter(|p| p.1.is_finite() && p.1 > 0.0)
        .collect();
    if prefill.is_empty() || decode.is_empty() {
        return Err(FitError::TooFew(format!(
            "{} prefill and {} decode points",
            prefill.len(),
            decode.len()
        )));
    }
    for pts in [&mut prefill, &mut decode] {
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        pts.dedup_by(|b, a| {
            if a.0 == b.0 {
                a.1 = (a.1 + b.1) / 2.0;
                true
            } else {
                false
            }
        });
    }
    let table = CostModel::Table(TableCost {
        decode: decode.clone(),
        prefill: prefill.clone(),
    });
    table
        .validate()
        .map_err(|e| FitError::Invalid(e.to_string()))?;

    let mut rows: Vec<([f64; 3], f64, f64)> = Vec::new();
    rows.extend(prefill.iter().map(|&(t, y)| ([1.0, t, 0.0], y, 1.0 / y)));
    rows.extend(decode.iter().map(|&(n, y)| ([1.0, 0.0, n], y, 1.0 / y)));
    if rows.len() < 3 {
        return Err(FitError::TooFew(format!(
            "{} points for 3 coefficients",
            rows.len()
        )));
    }
    let b =
        nonneg_fit(&rows).ok_or_else(|| FitError::Invalid("singular normal equations".into()))?;
    let linear = CostModel::Linear(LinearCost {
        beta0: b[0],
        beta_prefill: b[1],
        beta_decode: b[2],
        beta_kv: 0.0,
    });
    linear
        .validate()
        .map_err(|e| FitError::Invalid(e.to_string()))?;
    let mut residuals = Vec::new();
    let mut sq = 0.0;
    for &(t, y) in &prefill {
        let m = linear.iteration(&BatchShape {
            running: 1,
            prefill_tokens: t as u64,
            prefill_seqs: 1,
            ..BatchShape::default()
        });
        sq += ((m - y) / y).powi(2);
        residuals.push(("prefill_tokens".to_string(), t, y, m));
    }
    for &(n, y) in &decode {
        let m = linear.decode_step(n as u32, 0);
        sq += ((m - y) / y).powi(2);
        residuals.push(("decode_streams".to_string(), n, y, m));
    }
    Ok(Fit {
        table,
        linear,
        linear_rel_rms: (sq / residuals.len() as f64).sqrt(),
        residuals,
    })
}

/// Reads a microbenchmark JSON.
///
/// # Errors
/// [`FitError::Input`].
pub fn read_microbench(path: &Path) -> Result<MicrobenchResult, FitError> {
    let text = std::fs::read_to_string(path).map_err(|e| FitError::Input {
        path: path.into(),
        why: e.to_string(),
    })?;
    serde_json::from_str(&text).map_err(|e| FitError::Input {
        path: path.into(),
        why: format!("not a microbench JSON: {e}"),
    })
}

/// Writes `out` (both models) and `<stem>.table.json`, `<stem>.linear.json`.
///
/// # Errors
/// [`FitError::Io`].
pub fn write(f: &Fit, source: &Path, out: &Path) -> Result<Vec<PathBuf>, FitError> {
    let put = |path: PathBuf, v: serde_json::Value| -> Result<PathBuf, FitError> {
        let text = serde_json::to_string_pretty(&v).unwrap_or_default() + "\n";
        std::fs::write(&path, text).map_err(|source| FitError::Io {
            path: path.clone(),
            source,
        })?;
        Ok(path)
    };
    let stem = out.with_extension("");
    let both = json!({
        "table": f.table, "linear": f.linear, "source": source.display().to_string(),
        "linear_rel_rms": f.linear_rel_rms, "residuals": f.residuals,
        "note": "table and linear are engine::cost::CostModel values (serde tag \"kind\")",
    });
    Ok(vec![
        put(out.to_path_buf(), both)?,
        put(
            PathBuf::from(format!("{}.table.json", stem.display())),
            json!(f.table),
        )?,
        put(
            PathBuf::from(format!("{}.linear.json", stem.display())),
            json!(f.linear),
        )?,
    ])
}

pub fn execute(args: FitArgs) -> anyhow::Result<()> {
    let mb = read_microbench(&args.input)?;
    let f = fit(&mb, args.server_prefill)?;
    let files = write(&f, &args.input, &args.out)?;
    if let CostModel::Linear(l) = &f.linear {
        println!(
            "linear: beta0 {:.3} ms + {:.4} ms/prefill token + {:.3} ms/decode seq (relative RMS error {:.1} %)",
            l.beta0 * 1e3,
            l.beta_prefill * 1e3,
            l.beta_decode * 1e3,
            f.linear_rel_rms * 100.0
        );
    }
    for p in files {
        println!("wrote {}", p.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::microbench::{DecodePoint, PrefillPoint};

    fn mb() -> MicrobenchResult {
        let pre = |t: u32| PrefillPoint {
            prompt_tokens: t,
            latency_s: 0.002 + 4e-4 * t as f64,
            samples_s: vec![],
            server_prompt_s: None,
        };
        let dec = |n: u32| DecodePoint {
            streams: n,
            step_s: 0.002 + 0.0012 * n as f64,
            step_p50_s: 0.0,
            gaps: 10,
            context_tokens: 0.0,
        };
        MicrobenchResult {
            prefill: [32, 128, 512].map(pre).to_vec(),
            decode: [1, 2, 4, 8].map(dec).to_vec(),
            metadata: serde_json::Value::Null,
        }
    }

    #[test]
    fn recovers_exact_linear_coefficients() {
        let f = fit(&mb(), false).unwrap();
        let CostModel::Linear(l) = f.linear else {
            panic!()
        };
        assert!(
            (l.beta0 - 0.002).abs() < 1e-9
                && (l.beta_prefill - 4e-4).abs() < 1e-12
                && (l.beta_decode - 0.0012).abs() < 1e-9
        );
        assert!(f.linear_rel_rms < 1e-9);
        let back: CostModel = serde_json::from_value(json!(f.table)).unwrap();
        back.validate().unwrap();
    }

    #[test]
    fn negative_intercept_is_dropped() {
        let mut m = mb();
        for p in &mut m.prefill {
            p.latency_s = 4e-4 * p.prompt_tokens as f64;
        }
        for d in &mut m.decode {
            d.step_s = 0.0012 * d.streams as f64;
        }
        let f = fit(&m, false).unwrap();
        f.linear.validate().unwrap();
    }
}
