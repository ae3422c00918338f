//! The colours of the charts: the simulation's blue, one colour per analytical model, one
//! per measured series, and the dark SLO lines; [`palette`] numbers them for the lessons.
//!
//! The colours are Okabe and Ito's colour-blind-safe set (and Tol's wine and indigo for
//! the measured series beyond it), so the lines stay apart for readers with any of the
//! common colour-vision deficiencies; measured series differ in marker shape as well.

use plotters::style::RGBColor;

/// The simulation's colour.
pub const SIM: RGBColor = RGBColor(0, 114, 178);

/// The analytical models' colours (a model keeps its slot whether or not others show).
pub const MODEL_COLORS: [RGBColor; 5] = [
    RGBColor(230, 159, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(86, 180, 233),
    RGBColor(153, 136, 34),
];

/// The measured series' colours, in the order the files were dropped.
pub const MEASURED_COLORS: [RGBColor; 4] = [
    RGBColor(213, 94, 0),
    RGBColor(0, 0, 0),
    RGBColor(136, 34, 85),
    RGBColor(51, 34, 136),
];

/// The SLO lines: dark and dashed, unlike the light solid gridlines.
pub const SLO_COLOR: RGBColor = RGBColor(40, 40, 40);

/// Colour `i` of the page's palette: 0 = simulation blue, then the model colours, then
/// the measured colours.
pub fn palette(i: u8) -> RGBColor {
    match i as usize {
        0 => SIM,
        i if i <= MODEL_COLORS.len() => MODEL_COLORS[i - 1],
        i => MEASURED_COLORS[(i - 1 - MODEL_COLORS.len()) % MEASURED_COLORS.len()],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_palette_runs_simulation_models_measured() {
        assert_eq!(palette(0), SIM);
        assert_eq!(palette(1), MODEL_COLORS[0]);
        assert_eq!(palette(6), MEASURED_COLORS[0]);
    }
}
