//! Whether the parameters can run: every run the page would start checked as the engine
//! will check it, plus the page's own limits (docs/model.md, Limits).

use super::AdmissionRule;
use super::{fmt_num, label, Invalid, Params, DETAIL_POINTS};
use engine::limits::Limits;
use engine::sweep::SweepSpec;

impl Params {
    /// Checks the parameters the way the engine will, plus the page's own limits.
    ///
    /// # Errors
    /// A readable message naming the fields by their labels on the page
    /// ([`page_message`]).
    pub fn validate(&self) -> Result<(), String> {
        self.check().map_err(|e| e.message)
    }

    /// [`Params::validate`], saying which field the problem is with.
    ///
    /// Every run the page would start is checked against the engine's policy
    /// (docs/model.md, Limits) before a job goes to a worker: each swept rate's and the
    /// chosen rate's configuration ([`SimConfig::validate`]), the worker's memory (it keeps
    /// every seed's requests for a rate: seeds × [`engine::SimConfig::expected_requests`] against
    /// [`Limits::max_requests_per_sweep`]), the sweep as a whole ([`SweepSpec::validate`])
    /// and the detail run (records and time series kept).
    ///
    /// # Errors
    /// The first problem found, with the URL key of its field when it has one.
    pub fn check(&self) -> Result<(), Invalid> {
        let at = |key: &'static str, message: String| Invalid {
            key: Some(key),
            message,
        };
        if self.rates.is_empty() {
            return Err(at(
                "rates",
                format!("{}: give at least one arrival rate", label("rates")),
            ));
        }
        if !(1..=50).contains(&self.seeds) {
            return Err(at(
                "seeds",
                format!("{} must be between 1 and 50", label("seeds")),
            ));
        }
        if self.trace.is_none() && !(self.horizon_s > 0.0 && self.horizon_s <= 100_000.0) {
            return Err(at("T", format!("{} must be in (0, 100000]", label("T"))));
        }
        self.check_trace()?;
        self.check_shared()?;
        let limits = Limits::default();
        let runs = || {
            self.rates
                .iter()
                .map(|&r| ("rates", r))
                .chain([("rate", self.rate)])
        };
        // Admitting everything first: the DP threshold is derived from this configuration,
        // on the page's own thread, so its sizes must be within bounds before.
        for (key, r) in runs() {
            let cfg = self.admit_all_config(r, 0);
            cfg.validate().map_err(|e| Invalid::engine(&e, key, r))?;
            let held = self.seeds as f64 * cfg.expected_requests();
            // NaN counts as over, as the engine counts it.
            if held.is_nan() || held > limits.max_requests_per_sweep {
                return Err(at(
                    key,
                    format!(
                        "{} = {}: {} seeds × ≈ {:.1e} requests each would hold ≈ {held:.1e} requests in memory, over the limit of {:.1e} (max_requests_per_sweep); lower the rate, {} or {}",
                        label(key),
                        fmt_num(r),
                        self.seeds,
                        cfg.expected_requests(),
                        limits.max_requests_per_sweep,
                        label("T"),
                        label("seeds"),
                    ),
                ));
            }
        }
        let sweep = SweepSpec {
            base: self.admit_all_config(self.rates[0], 0),
            rates: self.rates.clone(),
            max_batches: vec![self.max_batch],
            kv_tokens: vec![self.kv_tokens],
            seeds: (0..self.seeds as u64).collect(),
            reuse: true,
        };
        sweep
            .validate_with(&limits)
            .map_err(|e| Invalid::engine(&e, "rates", self.rates[0]))?;
        if self.admission == AdmissionRule::Dp {
            self.dp_threshold().map_err(|e| Invalid {
                key: Some("slo_ttft"),
                message: format!("threshold (DP) admission: {e}"),
            })?;
        }
        for (key, r) in runs() {
            self.sim_config(r, 0)
                .validate()
                .map_err(|e| Invalid::engine(&e, key, r))?;
        }
        let mut detail = self.sim_config(self.rate, 0);
        detail.keep_records = true;
        detail.timeseries_points = DETAIL_POINTS;
        detail
            .validate()
            .map_err(|e| Invalid::engine(&e, "rate", self.rate))
    }
}
