//! The font: DejaVu Sans, compiled in, registered with plotters once, and used to measure text
//! in both formats; the font sizes of each kind of text.

use std::sync::OnceLock;

use plotters::style::IntoFont;

use crate::error::PlotError;

/// The font for PNG text (and for measuring text in both formats), DejaVu Sans (see
/// assets/DejaVuSans-LICENSE.txt). SVG files name the family `sans-serif`.
static FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");
pub(crate) const FAMILY: &str = "sans-serif";
/// Font sizes in plotters units (an SVG `font-size` of size / 1.24 pixels).
pub(crate) const TITLE_SIZE: f64 = 22.0;
pub(crate) const PANEL_TITLE_SIZE: f64 = 18.0;
pub(crate) const LABEL_SIZE: f64 = 16.0;
pub(crate) const TICK_SIZE: f64 = 15.0;
pub(crate) const VALUE_SIZE: f64 = 16.0;

/// Registers the embedded font with plotters, once per process.
pub(crate) fn register_font() -> Result<(), PlotError> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = *REGISTERED.get_or_init(|| {
        plotters::style::register_font(FAMILY, plotters::style::FontStyle::Normal, FONT).is_ok()
    });
    if ok {
        Ok(())
    } else {
        Err(PlotError::Draw(
            "the embedded font DejaVu Sans is unreadable".into(),
        ))
    }
}

/// Width and height in pixels of `text` at `size`.
pub(crate) fn text_size(text: &str, size: f64) -> Result<(u32, u32), PlotError> {
    (FAMILY, size)
        .into_font()
        .box_size(text)
        .map_err(|e| PlotError::Draw(format!("cannot measure text {text:?}: {e}")))
}
