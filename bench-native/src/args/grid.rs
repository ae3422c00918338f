//! The grid flags of `sweep` and `compare`: arrival rates × batch widths × KV capacities ×
//! seeds, with each subcommand's own default grid.

use super::{ArgError, LISTS};
use clap::Args;
use std::fmt;

/// The most seeds one `--seeds` may list (a range is expanded into a list): the engine's
/// bound for a sweep.
pub const MAX_SEEDS: u64 = engine::limits::MAX_SEEDS as u64;

/// Seeds: a range `0-4` or a list `1,5,9`, as given (shown back in messages as typed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seeds {
    pub seeds: Vec<u64>,
    text: String,
}

impl Seeds {
    /// Parses `0-4` (inclusive) or `1,5,9`. Used as clap's value parser, so its error is
    /// shown with the flag (`invalid value 'a-b' for '--seeds <SEEDS>': …`).
    ///
    /// # Errors
    /// A word that is not a whole number ≥ 0, an empty range, more than [`MAX_SEEDS`].
    pub fn parse(s: &str) -> Result<Seeds, String> {
        let seed = |x: &str| {
            x.trim()
                .parse::<u64>()
                .map_err(|_| format!("'{}' is not a seed (a whole number >= 0)", x.trim()))
        };
        let seeds = if let Some((a, b)) = s.split_once('-') {
            let (a, b) = (seed(a)?, seed(b)?);
            if b < a {
                return Err(format!("the range {a}-{b} is empty"));
            }
            let n = u128::from(b - a) + 1;
            if n > u128::from(MAX_SEEDS) {
                return Err(format!(
                    "the range {a}-{b} is {n} seeds; at most {MAX_SEEDS}"
                ));
            }
            (a..=b).collect()
        } else {
            let v = s.split(',').map(seed).collect::<Result<Vec<_>, _>>()?;
            if v.len() as u64 > MAX_SEEDS {
                return Err(format!("{} seeds; at most {MAX_SEEDS}", v.len()));
            }
            v
        };
        Ok(Seeds {
            seeds,
            text: s.to_string(),
        })
    }
}

impl fmt::Display for Seeds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// A subcommand's default grid (what runs with no grid flags).
#[derive(Clone, Copy, Debug)]
pub struct GridDefaults {
    pub rates: &'static [f64],
    pub batches: &'static [u32],
    pub kv: &'static [u64],
    /// Inclusive range.
    pub seeds: (u64, u64),
}

/// The grid flags. Unset flags take the subcommand's [`GridDefaults`] (listed in its
/// `--help`).
#[derive(Clone, Debug, Default, Args)]
pub struct GridArgs {
    /// Arrival rates [req/s], comma-separated (default: the grid below).
    #[arg(long, value_delimiter = ',')]
    pub rates: Option<Vec<f64>>,
    /// Batch widths B, comma-separated (default: the grid below).
    #[arg(long, value_delimiter = ',')]
    pub batches: Option<Vec<u32>>,
    /// KV capacities [tokens], comma-separated (default: the grid below).
    #[arg(long, value_delimiter = ',')]
    pub kv: Option<Vec<u64>>,
    /// Seeds: a range `0-4` or a list `1,5,9` (default: 0-4).
    #[arg(long, value_parser = Seeds::parse)]
    pub seeds: Option<Seeds>,
}

/// A checked grid: every value in range, every axis non-empty.
#[derive(Clone, Debug, PartialEq)]
pub struct Grid {
    pub rates: Vec<f64>,
    pub batches: Vec<u32>,
    pub kv: Vec<u64>,
    pub seeds: Vec<u64>,
    /// `--seeds` as typed (for messages).
    pub seeds_text: String,
}

impl GridArgs {
    /// The grid with `defaults` for unset flags; `rate_fixed` (a trace's own rate) replaces
    /// the rate axis, and then `--rates` must not be given.
    ///
    /// # Errors
    /// [`ArgError`] naming the flag: a rate not finite and > 0, B or K of 0, `--rates`
    /// with a trace.
    pub fn resolve(
        &self,
        defaults: &GridDefaults,
        rate_fixed: Option<f64>,
    ) -> Result<Grid, ArgError> {
        let rates = match (rate_fixed, &self.rates) {
            (Some(_), Some(_)) => {
                return Err(ArgError::Conflict(
                    "--rates does not apply to --arrivals trace: the trace's timestamps fix the arrival times"
                        .into(),
                ))
            }
            (Some(r), None) => vec![r],
            (None, Some(r)) => r.clone(),
            (None, None) => defaults.rates.to_vec(),
        };
        if let Some(r) = rates
            .iter()
            .find(|r| !(r.is_finite() && **r > 0.0 && **r <= engine::limits::MAX_RATE))
        {
            return Err(ArgError::range(
                LISTS.rate,
                "finite numbers > 0 and at most 1e9 [req/s]",
                super::num(*r),
            ));
        }
        let batches = self.batches.clone().unwrap_or(defaults.batches.to_vec());
        if batches.contains(&0) {
            return Err(ArgError::range(LISTS.batch, "at least 1 each", 0));
        }
        let kv = self.kv.clone().unwrap_or(defaults.kv.to_vec());
        if kv.contains(&0) {
            return Err(ArgError::range(LISTS.kv, "at least 1 token each", 0));
        }
        let (seeds, seeds_text) = match &self.seeds {
            Some(s) => (s.seeds.clone(), s.to_string()),
            None => (
                (defaults.seeds.0..=defaults.seeds.1).collect(),
                format!("{}-{}", defaults.seeds.0, defaults.seeds.1),
            ),
        };
        Ok(Grid {
            rates,
            batches,
            kv,
            seeds,
            seeds_text,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_parse_ranges_and_lists_and_refuse_the_rest() {
        assert_eq!(Seeds::parse("0-4").unwrap().seeds, vec![0, 1, 2, 3, 4]);
        assert_eq!(Seeds::parse("1,5").unwrap().seeds, vec![1, 5]);
        assert_eq!(Seeds::parse("1,5").unwrap().to_string(), "1,5");
        assert_eq!(Seeds::parse("4-1").unwrap_err(), "the range 4-1 is empty");
        assert_eq!(
            Seeds::parse("a-b").unwrap_err(),
            "'a' is not a seed (a whole number >= 0)"
        );
        assert_eq!(
            Seeds::parse("0-18446744073709551615").unwrap_err(),
            "the range 0-18446744073709551615 is 18446744073709551616 seeds; at most 10000"
        );
        assert!(Seeds::parse("0-9999").is_ok() && Seeds::parse("0-10000").is_err());
    }
}
