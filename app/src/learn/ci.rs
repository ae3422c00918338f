//! The lessons' on-screen checks: a formula against the simulation's mean over seeds with
//! its 95 % confidence interval ([`engine::metrics::Aggregate`], Student t), passed when
//! the formula falls inside the interval. A check that is not expected to pass says why.

use engine::metrics::Aggregate;

/// A simulated quantity over seeds, and the formula's value for it.
#[derive(Clone, Debug)]
pub(crate) struct Check {
    /// What is compared ("mean wait at ρ = 0.8").
    pub what: String,
    pub sim: Aggregate,
    /// The formula's name and value.
    pub formula: (String, f64),
    /// How values are written.
    pub fmt: fn(f64) -> String,
    /// Why the formula may miss (shown when it does).
    pub why_not: Option<&'static str>,
}

impl Check {
    /// Whether the formula lies within the simulation's 95 % interval.
    pub fn inside(&self) -> bool {
        match (self.sim.mean, self.sim.ci95) {
            (Some(m), Some(h)) => (self.formula.1 - m).abs() <= h,
            _ => false,
        }
    }

    /// The check as the lesson shows it: passed, and its text.
    pub fn verdict(&self) -> (bool, String) {
        let f = self.fmt;
        let sim = match (self.sim.mean, self.sim.ci95) {
            (Some(m), Some(h)) => format!(
                "simulation {} ± {} (95 % interval over {} seeds)",
                f(m),
                f(h),
                self.sim.n
            ),
            (Some(m), None) => format!("simulation {} (one seed: no interval)", f(m)),
            _ => "no simulated value".to_string(),
        };
        let inside = self.inside();
        let tail = if inside {
            "inside the interval ✓".to_string()
        } else {
            match self.why_not {
                Some(w) => format!("outside the interval: {w}"),
                None => "outside the interval".to_string(),
            }
        };
        (
            inside,
            format!(
                "{}: {sim}; {} {}: {tail}",
                self.what,
                self.formula.0,
                f(self.formula.1)
            ),
        )
    }
}

/// Seconds as ms text.
pub(crate) fn ms(s: f64) -> String {
    let v = s * 1e3;
    if v.abs() >= 100.0 {
        format!("{v:.0} ms")
    } else {
        format!("{v:.1} ms")
    }
}

/// A fraction as a percentage with two decimals.
pub(crate) fn pct2(x: f64) -> String {
    format!("{:.2} %", 100.0 * x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_check_passes_inside_its_interval_and_explains_a_miss() {
        let sim = Aggregate::of([1.0, 1.2, 0.9, 1.1, 1.0].map(Some));
        let mut c = Check {
            what: "mean wait".into(),
            sim,
            formula: ("P–K".into(), 1.05),
            fmt: ms,
            why_not: Some("the formula ignores X"),
        };
        let (ok, text) = c.verdict();
        assert!(ok, "{text}");
        assert!(text.contains("± ") && text.contains("5 seeds"), "{text}");
        c.formula.1 = 2.0;
        let (ok, text) = c.verdict();
        assert!(!ok);
        assert!(
            text.ends_with("outside the interval: the formula ignores X"),
            "{text}"
        );
        c.sim = Aggregate::of([Some(1.0)]);
        assert!(!c.verdict().0, "one seed has no interval");
    }
}
