//! Axis ranges and tick labels shared by the charts.

/// The top of an axis a little above the largest value `v` (1 when there is no data).
pub(super) fn nice_max(v: f64) -> f64 {
    if !(v.is_finite() && v > 0.0) {
        return 1.0;
    }
    v * 1.08
}

/// Tick labels of a count axis (requests, batch, queue): whole numbers only.
pub(super) fn count_label(v: &f64) -> String {
    if (v - v.round()).abs() < 1e-6 {
        format!("{v:.0}")
    } else {
        String::new()
    }
}

/// The top of a count axis: at least 1, whole numbers a little above the largest count.
pub(super) fn count_max(v: f64) -> f64 {
    nice_max(v.max(1.0)).ceil()
}

/// A time tick [s] with as few decimals as it needs ("100", "2.5").
pub(super) fn time_label(v: &f64) -> String {
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_drop_needless_decimals() {
        assert_eq!(time_label(&100.0), "100");
        assert_eq!(time_label(&2.5), "2.5");
        assert_eq!(count_label(&3.0), "3");
        assert_eq!(count_label(&2.5), "");
        assert_eq!(count_max(0.0), 2.0);
        assert_eq!(nice_max(f64::NAN), 1.0);
    }
}
