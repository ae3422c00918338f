//! The colours of the charts: the simulation's blue, one colour per analytical model, one
//! per measured set, and the dark SLO lines; [`palette`] numbers them for the lessons.

use plotters::style::RGBColor;

/// The simulation's colour.
pub const SIM: RGBColor = RGBColor(31, 119, 180);

/// The analytical models' colours (a model keeps its slot whether or not others show).
pub const MODEL_COLORS: [RGBColor; 5] = [
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
];

/// The measured sets' colours, in the order the files were dropped.
pub const MEASURED_COLORS: [RGBColor; 3] = [
    RGBColor(214, 39, 40),
    RGBColor(23, 190, 207),
    RGBColor(188, 189, 34),
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
