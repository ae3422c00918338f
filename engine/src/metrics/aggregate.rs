//! Aggregation of one metric across seeds: mean, population std (as the reference study
//! reports) and a Student-t 95 % confidence interval (sample std).

use serde::{Deserialize, Serialize};

/// One metric over seeds. Missing values (e.g. no completions) are skipped and `n` says
/// how many seeds contributed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Aggregate {
    /// Seeds that contributed.
    pub n: u32,
    pub mean: Option<f64>,
    /// Population standard deviation (ddof = 0).
    pub std: Option<f64>,
    /// Half-width of the 95 % Student-t CI of the mean (sample std, ddof = 1).
    pub ci95: Option<f64>,
}

impl Aggregate {
    pub fn of(values: impl IntoIterator<Item = Option<f64>>) -> Aggregate {
        let xs: Vec<f64> = values
            .into_iter()
            .flatten()
            .filter(|x| x.is_finite())
            .collect();
        let n = xs.len();
        if n == 0 {
            return Aggregate::default();
        }
        let mean = xs.iter().sum::<f64>() / n as f64;
        let ss = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>();
        let std = (ss / n as f64).sqrt();
        let ci95 = (n > 1)
            .then(|| student_t_975(n - 1) * (ss / (n - 1) as f64).sqrt() / (n as f64).sqrt());
        Aggregate {
            n: n as u32,
            mean: Some(mean),
            std: Some(std),
            ci95,
        }
    }
}

/// The 97.5 % quantile of Student's t with `df` degrees of freedom.
pub fn student_t_975(df: usize) -> f64 {
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    match df {
        0 => f64::INFINITY,
        1..=30 => T[df - 1],
        // Cornish–Fisher expansion around the normal quantile; < 1e-3 off beyond 30 df.
        _ => {
            let z = 1.959_964;
            let d = df as f64;
            z + (z * z * z + z) / (4.0 * d)
                + (5.0 * z.powi(5) + 16.0 * z.powi(3) + 3.0 * z) / (96.0 * d * d)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn population_std_and_ci() {
        let a = Aggregate::of([Some(1.0), Some(2.0), Some(3.0), None]);
        assert_eq!(a.n, 3);
        assert_eq!(a.mean, Some(2.0));
        assert!((a.std.unwrap() - (2.0f64 / 3.0).sqrt()).abs() < 1e-12);
        assert!((a.ci95.unwrap() - 4.303 * 1.0 / 3f64.sqrt()).abs() < 1e-9);
        assert_eq!(Aggregate::of([None]).mean, None);
        assert!((student_t_975(60) - 2.000).abs() < 2e-3);
    }
}
