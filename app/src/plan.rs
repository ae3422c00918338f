//! The Plan view's state (plain Rust, tested natively): the cheapest fleet of identical
//! replicas that meets an SLO at a given traffic (`engine::plan`; docs/model.md,
//! Planning), its URL and its checks. What a worker computes for it is [`work`].
//!
//! The workload, the replicas' server settings, the SLO (TTFT and TPOT) and the model
//! (the roofline preset `llm`) are the calculator's [`Params`]; the view adds the
//! traffic, the candidates (GPUs with their prices, tensor-parallel degrees, routers),
//! the attainment target and the confirmation's size.

pub mod split;
pub mod work;

use crate::params::{fmt_num, page_message, Invalid, Params, FIELDS};
use engine::cost::roofline::{GPUS, MODELS};
use engine::disagg::FirstTokenFrom;
use engine::fleet::RouterKind;
use engine::plan::{default_price, DisaggPlan, Offer, PlanError, PlanSpec};
use engine::ConfigError;
use serde::{Deserialize, Serialize};

/// The Plan view's own URL keys (the rest are the calculator's).
pub const KEYS: [&str; 13] = [
    "prate", "profile", "gpus", "tp", "routers", "att", "fin", "pseeds", "pT", "disagg", "plink",
    "plat", "pfirst",
];

/// The most replicas the page plans a fleet with (the engine plans up to
/// [`engine::limits::MAX_REPLICAS`]; `bench-native plan --max-replicas` goes there).
pub const MAX_PLAN_REPLICAS: u32 = crate::fleet::MAX_PAGE_REPLICAS;

/// Most requests one simulated fleet size may take over all its seeds on the page (the
/// confirmation simulates several sizes per finalist; the CLI has no such bound).
pub const MAX_PLAN_REQUESTS: f64 = 1e6;

/// Tensor-parallel degrees the page offers.
pub const TP_CHOICES: [u32; 4] = [1, 2, 4, 8];

/// Routers the page offers (the KV-aware one needs paged servers; the CLI takes it).
pub const ROUTER_CHOICES: [RouterKind; 5] = [
    RouterKind::RoundRobin,
    RouterKind::Random,
    RouterKind::LeastOutstanding,
    RouterKind::LeastTokens,
    RouterKind::PowerOfD { d: 2 },
];

/// Replicas past each family's smallest count considered for the Pareto set.
pub const PARETO_EXTRA: u32 = 4;

/// Fraction of each GPU's memory the server uses (the CLI's `--mem-util` default).
pub const MEM_UTIL: f64 = 0.9;

/// The Plan view: the traffic, the candidates, the target and the confirmation's size.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlanState {
    /// The whole fleet's arrival rate [req/s] (the profile's peak when it has one).
    pub rate: f64,
    /// A piecewise rate profile, (hours, rate [req/s]) per segment; empty: none.
    pub profile: Vec<(f64, f64)>,
    /// Candidate GPUs with their prices [$ per GPU-hour], kept as given (a price of 0
    /// included, so the URL keeps what the user wrote while the page says what is wrong).
    pub offers: Vec<Offer>,
    pub tps: Vec<u32>,
    pub routers: Vec<RouterKind>,
    /// Fraction of requests that must meet the SLO.
    pub attainment: f64,
    /// How many of the model's cheapest fleets the simulator confirms.
    pub finalists: u32,
    /// Seeds per simulated fleet.
    pub seeds: u32,
    /// Horizon of each simulated fleet run [s].
    pub horizon_s: f64,
    /// Also plan disaggregated splits (tandem model, the finalists simulated).
    pub disagg: bool,
    /// The splits' link from each prefill replica [Gb/s] (infinite allowed).
    pub link_gbps: f64,
    /// Latency added to every KV transfer [ms].
    pub link_ms: f64,
    /// Where the user's first token of a split comes from.
    pub first_token: FirstTokenFrom,
}

impl Default for PlanState {
    /// 20 req/s over L4, A10G and H100 at their default prices, TP 1 and 2, round-robin
    /// and least outstanding, 90 %; the two cheapest confirmed over 2 seeds of 60 s.
    fn default() -> Self {
        PlanState {
            rate: 20.0,
            profile: Vec::new(),
            offers: ["L4", "A10G", "H100"]
                .into_iter()
                .map(|g| Offer {
                    gpu: g.into(),
                    usd_per_gpu_hour: default_price(g).unwrap_or(1.0),
                })
                .collect(),
            tps: vec![1, 2],
            routers: vec![RouterKind::RoundRobin, RouterKind::LeastOutstanding],
            attainment: 0.9,
            finalists: 2,
            seeds: 2,
            horizon_s: 60.0,
            disagg: false,
            link_gbps: 100.0,
            link_ms: 0.0,
            first_token: FirstTokenFrom::Decode,
        }
    }
}

/// `NAME:USD,…` (the price per GPU-hour; a missing price is the preset's default).
fn parse_offers(s: &str) -> Option<Vec<Offer>> {
    s.split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(|item| {
            let (name, price) = match item.split_once(':') {
                Some((n, p)) => (n.trim(), p.trim().parse::<f64>().ok()?),
                None => (item, default_price(item)?),
            };
            let gpu = GPUS.iter().find(|g| g.name.eq_ignore_ascii_case(name))?;
            Some(Offer {
                gpu: gpu.name.to_string(),
                usd_per_gpu_hour: price,
            })
        })
        .collect()
}

fn format_offers(o: &[Offer]) -> String {
    o.iter()
        .map(|o| format!("{}:{}", o.gpu, fmt_num(o.usd_per_gpu_hour)))
        .collect::<Vec<_>>()
        .join(",")
}

/// `HOURS:RATE,…`.
fn parse_profile(s: &str) -> Option<Vec<(f64, f64)>> {
    s.split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(|seg| {
            let (h, r) = seg.split_once(':')?;
            let (h, r) = (h.trim().parse().ok()?, r.trim().parse().ok()?);
            Some((h, r))
        })
        .collect()
}

fn list<T: std::str::FromStr>(s: &str) -> Option<Vec<T>> {
    s.split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(|x| x.parse().ok())
        .collect()
}

impl PlanState {
    /// The rate planned for: the profile's peak when there is one, else `rate`.
    pub fn peak(&self) -> f64 {
        if self.profile.is_empty() {
            self.rate
        } else {
            self.profile.iter().map(|s| s.1).fold(0.0, f64::max)
        }
    }

    /// Sets one of the view's own fields from its text; false when the text is not a
    /// value of the field (range checks are [`PlanState::check`]'s).
    fn set(&mut self, key: &str, v: &str) -> bool {
        let v = v.trim();
        let f = |v: &str| v.parse::<f64>().ok().filter(|x| x.is_finite());
        match key {
            "prate" => f(v).map(|x| self.rate = x).is_some(),
            "profile" => parse_profile(v).map(|p| self.profile = p).is_some(),
            "gpus" => parse_offers(v).map(|o| self.offers = o).is_some(),
            "tp" => list(v).map(|t| self.tps = t).is_some(),
            "routers" => v
                .split(',')
                .map(str::trim)
                .filter(|x| !x.is_empty())
                .map(RouterKind::parse)
                .collect::<Option<Vec<_>>>()
                .map(|r| self.routers = r)
                .is_some(),
            "att" => f(v).map(|x| self.attainment = x).is_some(),
            "fin" => v.parse().ok().map(|x| self.finalists = x).is_some(),
            "pseeds" => v.parse().ok().map(|x| self.seeds = x).is_some(),
            "pT" => f(v).map(|x| self.horizon_s = x).is_some(),
            "disagg" => matches!(v, "0" | "1")
                .then(|| self.disagg = v == "1")
                .is_some(),
            "plink" => v
                .parse::<f64>()
                .ok()
                .filter(|x| !x.is_nan())
                .map(|x| self.link_gbps = x)
                .is_some(),
            "plat" => f(v).map(|x| self.link_ms = x).is_some(),
            "pfirst" => FirstTokenFrom::parse(v)
                .map(|x| self.first_token = x)
                .is_some(),
            _ => false,
        }
    }

    /// One of the view's own fields as text (its URL value, commas unescaped).
    pub fn get(&self, key: &str) -> String {
        match key {
            "prate" => fmt_num(self.rate),
            "profile" => self
                .profile
                .iter()
                .map(|(h, r)| format!("{}:{}", fmt_num(*h), fmt_num(*r)))
                .collect::<Vec<_>>()
                .join(","),
            "gpus" => format_offers(&self.offers),
            "tp" => self
                .tps
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(","),
            "routers" => self
                .routers
                .iter()
                .map(|r| r.name())
                .collect::<Vec<_>>()
                .join(","),
            "att" => fmt_num(self.attainment),
            "fin" => self.finalists.to_string(),
            "pseeds" => self.seeds.to_string(),
            "pT" => fmt_num(self.horizon_s),
            "disagg" => (self.disagg as u8).to_string(),
            "plink" => fmt_num(self.link_gbps),
            "plat" => fmt_num(self.link_ms),
            "pfirst" => self.first_token.name().to_string(),
            _ => String::new(),
        }
    }

    /// Sets a field from the text typed; the message names the field when the text is
    /// not a value of it.
    ///
    /// # Errors
    /// "attainment: 'abc' is not a valid value".
    pub fn edited(&self, key: &str, text: &str) -> Result<PlanState, String> {
        let mut s = self.clone();
        if s.set(key, text) {
            Ok(s)
        } else {
            Err(format!("{}: '{text}' is not a valid value", label(key)))
        }
    }

    /// The URL query (without `?`): `view=plan`, the view's keys, then the calculator's.
    pub fn to_query(&self, params: &Params) -> String {
        let own: Vec<String> = KEYS
            .iter()
            .map(|k| format!("{k}={}", self.get(k).replace(',', "%2C")))
            .collect();
        format!("view=plan&{}&{}", own.join("&"), params.to_query())
    }

    /// Reads a Plan URL: its own keys, then the calculator's (from the vLLM preset when the
    /// URL names none). Values that are not values of their field are reported as
    /// `(key, text)` and left at their defaults.
    pub fn from_query(query: &str) -> (PlanState, Params, Vec<(String, String)>) {
        let query = query.trim_start_matches('?');
        let mut rest = Vec::new();
        let mut s = PlanState::default();
        let mut bad = Vec::new();
        for kv in query.split('&').filter(|x| !x.is_empty()) {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            if k == "view" {
                continue;
            }
            if KEYS.contains(&k) {
                let v = v
                    .replace("%2C", ",")
                    .replace("%2c", ",")
                    .replace("%3A", ":");
                if !s.set(k, &v) {
                    bad.push((k.to_string(), v));
                }
            } else {
                rest.push(kv);
            }
        }
        // Without a preset the replicas start as the vLLM preset's (the CLI's `plan`
        // examples use `--preset vllm-v1`), not as the reference study's B = 8 server.
        if !rest.iter().any(|kv| kv.starts_with("preset=")) {
            rest.insert(0, "preset=vllm-a10g");
        }
        let (params, _) = Params::from_query(&rest.join("&"));
        (s, params, bad)
    }

    /// The price of `gpu` if it is a candidate.
    pub fn price(&self, gpu: &str) -> Option<f64> {
        self.offers
            .iter()
            .find(|o| o.gpu == gpu)
            .map(|o| o.usd_per_gpu_hour)
    }

    /// The candidates with `gpu` added at `usd` (or removed, `usd` None).
    pub fn with_gpu(&self, gpu: &str, usd: Option<f64>) -> PlanState {
        let mut s = self.clone();
        match (usd, s.offers.iter().position(|o| o.gpu == gpu)) {
            (Some(p), Some(i)) => s.offers[i].usd_per_gpu_hour = p,
            (Some(p), None) => {
                // In the presets' order, so the URL does not depend on the clicks' order.
                s.offers.push(Offer {
                    gpu: gpu.into(),
                    usd_per_gpu_hour: p,
                });
                s.offers
                    .sort_by_key(|o| GPUS.iter().position(|g| g.name == o.gpu));
            }
            (None, Some(i)) => {
                s.offers.remove(i);
            }
            (None, None) => {}
        }
        s
    }

    /// The engine's plan at the peak rate: the calculator's workload, server and SLO
    /// under the view's candidates and target, each fleet simulated over the view's
    /// horizon.
    pub fn spec(&self, p: &Params) -> PlanSpec {
        let mut base = p.sim_config(self.peak(), 0);
        base.horizon_s = self.horizon_s;
        PlanSpec {
            base,
            model: p.llm.clone(),
            offers: self.offers.clone(),
            tps: self.tps.clone(),
            routers: self.routers.clone(),
            attainment: self.attainment,
            mem_util: MEM_UTIL,
            max_replicas: MAX_PLAN_REPLICAS,
        }
    }

    /// The disaggregated splits' settings.
    pub fn disagg_plan(&self) -> DisaggPlan {
        DisaggPlan {
            bandwidth_bytes_per_s: self.link_gbps * 1e9 / 8.0,
            latency_s: self.link_ms / 1e3,
            first_token: self.first_token,
        }
    }

    /// Checks the plan as the engine will, plus the page's own limits.
    ///
    /// # Errors
    /// The first problem, with the URL key of the field it is about (`price-GPU` for one
    /// GPU's price): no GPU, TP or router, a price, rate, SLO or attainment out of range,
    /// a profile segment that is not positive, a trace as the workload, a confirmation
    /// over the page's limits, or anything the engine refuses.
    pub fn check(&self, p: &Params) -> Result<(), Invalid> {
        let at = |key: &'static str, message: String| {
            Err(Invalid {
                key: Some(key),
                message,
            })
        };
        if self.offers.is_empty() {
            return at("gpus", "GPUs: pick at least one candidate GPU".into());
        }
        for o in &self.offers {
            if !(o.usd_per_gpu_hour.is_finite() && o.usd_per_gpu_hour > 0.0) {
                return at(
                    price_key(&o.gpu),
                    format!(
                        "{} price: must be > 0 [$ per GPU-hour], got {}",
                        o.gpu,
                        fmt_num(o.usd_per_gpu_hour)
                    ),
                );
            }
        }
        if self.tps.is_empty() {
            return at("tp", "tensor parallelism: pick at least one degree".into());
        }
        if self.routers.is_empty() {
            return at("routers", "routers: pick at least one router".into());
        }
        if self.profile.is_empty() && !(self.rate.is_finite() && self.rate > 0.0) {
            return at(
                "prate",
                format!("{} must be > 0, got {}", label("prate"), fmt_num(self.rate)),
            );
        }
        if let Some(s) = self.profile.iter().find(|s| !(s.0 > 0.0 && s.1 > 0.0)) {
            return at(
                "profile",
                format!(
                    "{}: every segment needs hours > 0 and a rate > 0, got {}:{}",
                    label("profile"),
                    fmt_num(s.0),
                    fmt_num(s.1)
                ),
            );
        }
        for key in ["slo_ttft", "slo_tpot"] {
            let v = if key == "slo_ttft" {
                p.slo_ttft_s
            } else {
                p.slo_tpot_s
            };
            if !(v.is_finite() && v > 0.0) {
                return at(
                    key,
                    format!("{} must be > 0, got {}", label(key), fmt_num(v)),
                );
            }
        }
        if !(self.attainment > 0.0 && self.attainment < 1.0) {
            return at(
                "att",
                format!(
                    "{} must be a fraction in (0, 1) (0.9 is 90 %), got {}",
                    label("att"),
                    fmt_num(self.attainment)
                ),
            );
        }
        if !(1..=10).contains(&self.finalists) {
            return at("fin", format!("{} must be 1 to 10", label("fin")));
        }
        if !(1..=10).contains(&self.seeds) {
            return at("pseeds", format!("{} must be 1 to 10", label("pseeds")));
        }
        if !(self.horizon_s > 0.0 && self.horizon_s <= 3600.0) {
            return at(
                "pT",
                format!(
                    "{} must be in (0, 3600], got {}",
                    label("pT"),
                    fmt_num(self.horizon_s)
                ),
            );
        }
        if self.disagg && (self.link_gbps.is_nan() || self.link_gbps <= 0.0) {
            return at(
                "plink",
                format!(
                    "{} must be > 0 (inf: the transfers take no time), got {}",
                    label("plink"),
                    fmt_num(self.link_gbps)
                ),
            );
        }
        if self.disagg && !(self.link_ms.is_finite() && self.link_ms >= 0.0) {
            return at(
                "plat",
                format!(
                    "{} must be a finite number >= 0, got {}",
                    label("plat"),
                    fmt_num(self.link_ms)
                ),
            );
        }
        if p.trace.is_some() {
            return Err(Invalid {
                key: None,
                message: "the Plan view does not replay a trace: remove it in the Calculator's Workload panel".into(),
            });
        }
        let spec = self.spec(p);
        spec.validate().map_err(|e| self.engine_error(&e))?;
        // Each fleet size the confirmation tries simulates its seeds at the peak rate.
        let work = f64::from(self.seeds) * spec.base.expected_requests();
        if work.is_nan() || work > MAX_PLAN_REQUESTS {
            return at(
                "pT",
                format!(
                    "{} seeds × ≈ {:.1e} requests per simulated fleet is over the page's limit of {MAX_PLAN_REQUESTS:.0e} requests; lower {}, {} or the rate",
                    self.seeds,
                    spec.base.expected_requests(),
                    label("pT"),
                    label("pseeds")
                ),
            );
        }
        Ok(())
    }

    /// An engine error of the plan, said with the page's labels and the field it is about.
    fn engine_error(&self, e: &PlanError) -> Invalid {
        let message = page_message(&e.to_string());
        let key = match e {
            PlanError::Empty(_) => Some("gpus"),
            PlanError::Range { name: "price", .. } => None,
            PlanError::Range {
                name: "attainment", ..
            } => Some("att"),
            PlanError::Range {
                name: "tensor parallelism",
                ..
            } => Some("tp"),
            PlanError::Unknown { what: "model", .. } => Some("llm"),
            PlanError::Unknown { .. } => Some("gpus"),
            PlanError::Config(
                ConfigError::NotPositive { name, .. }
                | ConfigError::Negative { name, .. }
                | ConfigError::Zero { name, .. }
                | ConfigError::OutOfRange { name, .. },
            ) => FIELDS.iter().find(|f| f.1 == Some(*name)).map(|f| f.0),
            PlanError::Config(_) => Some("prate"),
            _ => None,
        };
        Invalid { key, message }
    }
}

/// The field key of each GPU preset's price (not a URL key: prices are in `gpus`).
const PRICE_KEYS: [(&str, &str); 6] = [
    ("A10G", "price-A10G"),
    ("L4", "price-L4"),
    ("A100-40GB", "price-A100-40GB"),
    ("A100-80GB", "price-A100-80GB"),
    ("H100", "price-H100"),
    ("H200", "price-H200"),
];

/// The field key of one GPU's price (`gpus` for a GPU without its own field).
pub fn price_key(gpu: &str) -> &'static str {
    PRICE_KEYS
        .iter()
        .find(|(g, _)| *g == gpu)
        .map_or("gpus", |(_, k)| k)
}

/// The roofline models the view offers (the calculator's `llm`).
pub fn models() -> Vec<&'static str> {
    MODELS.iter().map(|m| m.name).collect()
}

/// The page label of one of the view's fields (else the calculator's).
pub fn label(key: &str) -> &str {
    match key {
        "prate" => "traffic λ [req/s]",
        "profile" => "rate profile HOURS:RATE,…",
        "gpus" => "GPUs",
        "tp" => "tensor parallelism",
        "routers" => "routers",
        "att" => "attainment (fraction meeting the SLO)",
        "fin" => "finalists simulated",
        "pseeds" => "seeds per simulated fleet",
        "pT" => "simulated horizon [s]",
        "disagg" => "also disaggregated splits",
        "plink" => "link per prefill replica [Gb/s]",
        "plat" => "link latency [ms]",
        "pfirst" => "first token from",
        "llm" => "model",
        k => crate::params::label(k),
    }
}

/// Whether a query asks for the Plan view (`view=plan`).
pub fn wants_plan(query: &str) -> bool {
    query
        .trim_start_matches('?')
        .split('&')
        .any(|kv| kv == "view=plan")
}

#[cfg(test)]
mod tests;
