//! The engine workload the parameters describe (docs/model.md, Workload).

use super::{Arrivals, Lengths, Params};
use engine::workload::{ArrivalProcess, LengthDist, Workload};

impl Params {
    /// The engine workload at `rate`.
    pub fn workload(&self, rate: f64) -> Workload {
        let arrivals = match self.arrivals {
            Arrivals::Poisson => ArrivalProcess::Poisson { rate },
            Arrivals::Gamma => ArrivalProcess::Gamma {
                rate,
                burstiness: self.burstiness,
            },
            Arrivals::Deterministic => ArrivalProcess::Deterministic { rate },
        };
        let lengths = match self.lengths {
            Lengths::Lognormal => LengthDist::Lognormal {
                prompt_median: self.prompt_median,
                prompt_sigma: self.prompt_sigma,
                output_median: self.output_median,
                output_sigma: self.output_sigma,
            },
            Lengths::ShareGpt => LengthDist::sharegpt(),
            Lengths::Fixed => LengthDist::Fixed {
                prompt: self.fixed_prompt,
                output: self.fixed_output,
            },
            Lengths::Mixture => LengthDist::short_long_mix(),
        };
        self.trace_workload(
            rate,
            Workload {
                arrivals,
                lengths,
                max_model_len: None,
                shared: None,
            },
        )
    }
}
