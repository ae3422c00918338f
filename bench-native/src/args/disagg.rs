//! `--disagg P:D` and the link flags of `simulate`: a disaggregated deployment, a prefill
//! pool of P replicas and a decode pool of D behind the one `--router` (docs/model.md,
//! "Disaggregated prefill and decode").

use super::ArgError;
use clap::Args;
use engine::cost::CostModel;
use engine::disagg::{FirstTokenFrom, KvGeometry, Link};

/// The disaggregation flags of `simulate`.
#[derive(Clone, Debug, Default, Args)]
pub struct DisaggArgs {
    /// Prefill/decode disaggregation: P prefill and D decode replicas, each the server
    /// flags above (the decode pool paged; --decode-batch and --decode-kv set its own B
    /// and KV), --router choosing within each pool. Drained runs only (--drain).
    #[arg(long, value_name = "P:D", conflicts_with_all = ["replicas", "fleet"])]
    pub disagg: Option<String>,
    #[command(flatten)]
    pub link: LinkArgs,
    /// The model whose KV geometry sizes the transfers (a roofline model preset:
    /// Qwen2.5-1.5B, Qwen2.5-7B, Llama-3.1-8B, Llama-3.1-70B, Mistral-7B). Default: the
    /// roofline cost's model; required with any other cost.
    #[arg(long, value_name = "MODEL", requires = "disagg")]
    pub kv_geometry: Option<String>,
    /// The decode replicas' batch width B (default --batch).
    #[arg(long, value_name = "N", requires = "disagg")]
    pub decode_batch: Option<u32>,
    /// The decode replicas' KV capacity [tokens] (default the server's).
    #[arg(long, value_name = "TOKENS", requires = "disagg")]
    pub decode_kv: Option<u64>,
}

/// The link and first-token flags of a disaggregated deployment, for `simulate --disagg`
/// and `plan --disagg`.
#[derive(Clone, Debug, Default, Args)]
pub struct LinkArgs {
    /// The link from each prefill replica to the decode pool [Gb/s] (`inf`: the bytes
    /// take no time).
    #[arg(
        long,
        value_name = "GBPS",
        default_value_t = 100.0,
        requires = "disagg"
    )]
    pub link_gbps: f64,
    /// Latency added to every KV transfer [ms].
    #[arg(long, value_name = "MS", default_value_t = 0.0, requires = "disagg")]
    pub link_latency_ms: f64,
    /// Where the user's first token comes from: `decode` (the decode pool's first
    /// iteration after the transfer: vLLM's disaggregated proxy, Dynamo, SGLang) or
    /// `prefill` (the end of the prefill; the transfer delays the second token: DistServe).
    #[arg(
        long,
        value_name = "FROM",
        default_value = "decode",
        requires = "disagg"
    )]
    pub first_token: String,
}

/// Checked [`LinkArgs`]: bandwidth [bytes/s], latency [s] and the first token's source.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CheckedLink {
    pub bandwidth_bytes_per_s: f64,
    pub latency_s: f64,
    pub first_token: FirstTokenFrom,
}

impl LinkArgs {
    /// # Errors
    /// [`ArgError`] naming the flag: a bandwidth ≤ 0 or NaN, a negative or non-finite
    /// latency, an unknown first-token source.
    pub fn check(&self) -> Result<CheckedLink, ArgError> {
        let g = self.link_gbps;
        if g.is_nan() || g <= 0.0 {
            return Err(ArgError::range(
                "--link-gbps",
                "a number > 0 (or inf)",
                super::num(g),
            ));
        }
        let lat = self.link_latency_ms;
        if !(lat.is_finite() && lat >= 0.0) {
            return Err(ArgError::range(
                "--link-latency-ms",
                "a finite number >= 0",
                super::num(lat),
            ));
        }
        let first_token = FirstTokenFrom::parse(&self.first_token).ok_or_else(|| {
            ArgError::range("--first-token", "prefill or decode", &self.first_token)
        })?;
        Ok(CheckedLink {
            bandwidth_bytes_per_s: g * 1e9 / 8.0,
            latency_s: lat * 1e-3,
            first_token,
        })
    }
}

/// A checked `--disagg` setup.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Disagg {
    pub prefill: u32,
    pub decode: u32,
    pub link: Link,
    pub first_token: FirstTokenFrom,
}

impl DisaggArgs {
    /// The checked setup (None without `--disagg`); `cost` is the replicas' cost model.
    ///
    /// # Errors
    /// [`ArgError`] naming the flag: a malformed P:D or a pool of 0, a bandwidth ≤ 0 or
    /// NaN, a negative or non-finite latency, an unknown first-token source or model, no
    /// geometry for a cost that is not a roofline.
    pub fn resolve(&self, cost: &CostModel) -> Result<Option<Disagg>, ArgError> {
        let Some(pd) = &self.disagg else {
            return Ok(None);
        };
        let bad = || ArgError::range("--disagg", "P:D, two whole numbers >= 1 (e.g. 2:3)", pd);
        let (p, d) = pd.split_once(':').ok_or_else(bad)?;
        let (p, d): (u32, u32) = (
            p.trim().parse().map_err(|_| bad())?,
            d.trim().parse().map_err(|_| bad())?,
        );
        if p == 0 || d == 0 {
            return Err(bad());
        }
        let link = self.link.check()?;
        let geometry = match &self.kv_geometry {
            Some(m) => KvGeometry::of_model(m).ok_or_else(|| {
                ArgError::range(
                    "--kv-geometry",
                    "a roofline model preset (Qwen2.5-1.5B, Qwen2.5-7B, Llama-3.1-8B, \
                     Llama-3.1-70B, Mistral-7B)",
                    m,
                )
            })?,
            None => KvGeometry::of_cost(cost).ok_or_else(|| {
                ArgError::Conflict(
                    "--disagg: the KV transfers need the model's geometry: give --kv-geometry \
                     MODEL (e.g. Qwen2.5-1.5B) or a roofline cost (--cost roofline:GPU:MODEL)"
                        .into(),
                )
            })?,
        };
        Ok(Some(Disagg {
            prefill: p,
            decode: d,
            link: Link {
                bandwidth_bytes_per_s: link.bandwidth_bytes_per_s,
                latency_s: link.latency_s,
                geometry,
            },
            first_token: link.first_token,
        }))
    }
}
