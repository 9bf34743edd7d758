//! The pictures' pixel geometry: checks that they can be drawn, then sizes a heatmap's cells,
//! panels, titles, labels and colour bar ([`Figure::size`], [`Figure::png_size`]), and a line
//! plot's axes, ticks and legend ([`LinePlot::size`], [`LinePlot::png_size`]).

use crate::error::PlotError;
use crate::figure::{ColourRange, Figure};
use crate::font::{
    register_font, text_size, LABEL_SIZE, PANEL_TITLE_SIZE, TICK_SIZE, TITLE_SIZE, VALUE_SIZE,
};
use crate::lines::LinePlot;
use crate::values::{finite_span, format_value, step_decimals, tick_step, ticks, ticks_at, zoom};

/// Matrices with at most this many rows and columns get their values written in the cells.
const MAX_VALUES_SIDE: usize = 12;
/// Lengths in pixels: around the figure, between panels (and before the colour bar), the
/// colour bar's width and its least height.
pub(crate) const MARGIN: i32 = 12;
pub(crate) const GAP: i32 = 24;
pub(crate) const BAR_WIDTH: i32 = 18;
const BAR_MIN_HEIGHT: i32 = 150;
/// The least cell side a figure shrinks its cells to, to fit its width.
const MIN_CELL: i32 = 12;
/// The least font size of a value written in a cell (plotters units: 12 px in SVG).
const MIN_TEXT_SIZE: f64 = 15.0;

/// Pixel geometry of a figure, computed once per drawing; `bar` is the colour bar's left,
/// top and height.
pub(crate) struct Layout {
    pub(crate) width: u32,
    pub(crate) height: u32,
    pub(crate) cell: i32,
    pub(crate) grid_columns: usize,
    pub(crate) title_h: i32,
    pub(crate) panel_title_h: i32,
    pub(crate) row_label_w: i32,
    pub(crate) col_labels_rotated: bool,
    pub(crate) panel_w: i32,
    pub(crate) panel_h: i32,
    pub(crate) value_size: Option<f64>,
    pub(crate) lo: f64,
    pub(crate) hi: f64,
    pub(crate) bar: Option<(i32, i32, i32)>,
}

impl Figure {
    /// The figure's size in pixels, width then height: the SVG's (PNG pictures are
    /// [`Figure::png_size`]).
    ///
    /// # Errors
    /// [`PlotError::EmptyMatrix`], [`PlotError::NoHeads`], [`PlotError::LabelCount`] or
    /// [`PlotError::BadRange`] when the figure cannot be drawn.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_plot::*;
    ///
    /// let (w, h) = heatmap(&array![[1.0, 0.0]]).size()?;
    /// assert!(w > h);
    /// # Ok::<(), PlotError>(())
    /// ```
    pub fn size(&self) -> Result<(u32, u32), PlotError> {
        let lay = self.layout()?;
        Ok((lay.width, lay.height))
    }

    /// The size in pixels of the figure's PNG pictures: [`Figure::size`] times
    /// [`Figure::png_scale`] times [`Figure::scale`] (rounded).
    ///
    /// # Errors
    /// As [`Figure::size`].
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_plot::*;
    ///
    /// let fig = heatmap(&array![[0.2, 0.8]]);
    /// let (w, h) = fig.size()?;
    /// assert_eq!(fig.png_size()?, (2 * w, 2 * h));
    /// # Ok::<(), PlotError>(())
    /// ```
    pub fn png_size(&self) -> Result<(u32, u32), PlotError> {
        let (w, h) = self.size()?;
        let zoom = zoom(self.png_scale, self.scale);
        Ok((w * zoom, h * zoom))
    }

    /// Checks the figure and computes its geometry.
    #[allow(
        clippy::too_many_lines,
        reason = "every check of the figure, then the geometry it allows, in the order the drawing reads them"
    )]
    pub(crate) fn layout(&self) -> Result<Layout, PlotError> {
        register_font()?;
        if self.panels.is_empty() {
            return Err(PlotError::NoHeads);
        }
        for (i, p) in self.panels.iter().enumerate() {
            let (rows, cols) = p.matrix.dim();
            if rows == 0 || cols == 0 {
                return Err(PlotError::EmptyMatrix {
                    panel: i + 1,
                    rows,
                    cols,
                });
            }
        }
        let (rows, cols) = self.panels.iter().fold((1, 1), |(r, c), p| {
            (r.max(p.matrix.nrows()), c.max(p.matrix.ncols()))
        });
        for p in &self.panels {
            check_labels("row", &self.row_labels, p.matrix.nrows())?;
            check_labels("column", &self.col_labels, p.matrix.ncols())?;
        }
        let (lo, hi) = self.colour_range()?;

        let many = self.panels.len() > 1;
        let default_cell = match self.cell {
            Some(c) => c as i32,
            None => {
                let budget = if many { 240.0 } else { 480.0 };
                (budget / rows.max(cols) as f64)
                    .round()
                    .clamp(MIN_CELL as f64, if many { 48.0 } else { 64.0 }) as i32
            }
        };
        let requested = self.columns.unwrap_or(4).min(self.panels.len()).max(1);

        let title_h = match &self.title {
            Some(t) => text_size(t, TITLE_SIZE)?.1 as i32 + 16,
            None => 0,
        };
        let title_w = match &self.title {
            Some(t) => text_size(t, TITLE_SIZE)?.0 as i32 + 2 * MARGIN,
            None => 0,
        };
        let panel_title_h = if self.panels.iter().any(|p| p.title.is_some()) {
            text_size("head", PANEL_TITLE_SIZE)?.1 as i32 + 10
        } else {
            0
        };
        let widest = |labels: &Option<Vec<String>>| -> Result<(i32, i32), PlotError> {
            let mut most = (0, 0);
            for l in labels.iter().flatten() {
                let (w, h) = text_size(l, LABEL_SIZE)?;
                most = (most.0.max(w as i32), most.1.max(h as i32));
            }
            Ok(most)
        };
        let (row_w, _) = widest(&self.row_labels)?;
        let row_label_w = if self.row_labels.is_some() {
            row_w + 10
        } else {
            0
        };
        let (col_w, col_h) = widest(&self.col_labels)?;
        let show_values = self
            .values
            .unwrap_or(rows <= MAX_VALUES_SIDE && cols <= MAX_VALUES_SIDE);
        let widest_value = if show_values {
            Some(self.widest_value()?)
        } else {
            None
        };
        let mut tick_w = 0;
        if self.colorbar {
            for t in ticks(lo, hi, self.decimals) {
                tick_w = tick_w.max(text_size(&t.1, TICK_SIZE)?.0 as i32);
            }
        }
        let tick_h = text_size("0", TICK_SIZE)?.1 as i32;

        // The grid with `grid_columns` panels a row of `cell`-pixel cells. Panels share their
        // labels: the rows' at the left of each grid row, the columns' under the panels with
        // no panel below.
        let geometry = |grid_columns: usize, cell: i32| -> Layout {
            let grid_rows = self.panels.len().div_ceil(grid_columns);
            let col_labels_rotated = col_w > cell - 4;
            let col_label_h = match (&self.col_labels, col_labels_rotated) {
                (None, _) => 0,
                (Some(_), false) => col_h + 10,
                (Some(_), true) => col_w + 10,
            };
            let panel_w = cols as i32 * cell;
            let panel_h = panel_title_h + rows as i32 * cell;
            let columns = grid_columns as i32;
            let grid_w = row_label_w + columns * panel_w + (columns - 1) * GAP;
            let grid_h = grid_rows as i32 * panel_h + (grid_rows as i32 - 1) * GAP + col_label_h;
            let value_size = widest_value.and_then(|(w, h)| value_size(cell, w, h));
            let top = MARGIN + title_h;
            let mut width = MARGIN + grid_w + MARGIN;
            let mut height = top + grid_h + MARGIN;
            let bar = self.colorbar.then(|| {
                let bar_top = top + panel_title_h;
                let span = grid_h - panel_title_h - col_label_h;
                let bar_h = span.max(BAR_MIN_HEIGHT);
                let bar_x = MARGIN + grid_w + GAP;
                width = bar_x + BAR_WIDTH + 10 + tick_w + MARGIN;
                height = height.max(bar_top + bar_h + tick_h + MARGIN);
                (bar_x, bar_top, bar_h)
            });
            Layout {
                width: width.max(title_w) as u32,
                height: height as u32,
                cell,
                grid_columns,
                title_h,
                panel_title_h,
                row_label_w,
                col_labels_rotated,
                panel_w,
                panel_h,
                value_size,
                lo,
                hi,
                bar,
            }
        };
        // The most panels a row, then the largest cells, that fit the width shown.
        let fits = |lay: &Layout| lay.width as f64 * self.scale <= self.max_width as f64;
        let least = if self.cell.is_some() {
            default_cell
        } else {
            default_cell.min(MIN_CELL)
        };
        for grid_columns in (1..=requested).rev() {
            for cell in (least..=default_cell).rev() {
                let lay = geometry(grid_columns, cell);
                if fits(&lay) {
                    return Ok(lay);
                }
            }
        }
        Ok(geometry(1, least))
    }

    /// The width and height of the widest and tallest value written in a cell, at
    /// `VALUE_SIZE`.
    fn widest_value(&self) -> Result<(u32, u32), PlotError> {
        let mut widest = 0;
        let mut tallest = 1;
        for p in &self.panels {
            for v in p.matrix.iter() {
                let (w, h) = text_size(&format_value(*v, self.decimals), VALUE_SIZE)?;
                widest = widest.max(w);
                tallest = tallest.max(h);
            }
        }
        Ok((widest, tallest))
    }

    /// The colour range, checked; auto ranges of equal values widen by 0.5 each side.
    fn colour_range(&self) -> Result<(f64, f64), PlotError> {
        let (lo, hi) = match self.range {
            ColourRange::Fixed(lo, hi) => (lo, hi),
            ColourRange::Auto => {
                finite_span(self.panels.iter().flat_map(|p| p.matrix.iter().copied()))
                    .unwrap_or((0.0, 1.0))
            }
        };
        if lo.is_finite() && hi.is_finite() && lo < hi {
            Ok((lo, hi))
        } else {
            Err(PlotError::BadRange { lo, hi })
        }
    }
}

/// The font size that fits values as wide and tall as these in a cell, if readable (12 px
/// and more).
fn value_size(cell: i32, widest: u32, tallest: u32) -> Option<f64> {
    let room = 0.8 * cell as f64;
    let fit = (room / widest.max(1) as f64)
        .min(0.45 * cell as f64 / tallest.max(1) as f64)
        .min(1.0);
    let size = VALUE_SIZE * fit;
    (size >= MIN_TEXT_SIZE).then_some(size)
}

fn check_labels(
    axis: &'static str,
    labels: &Option<Vec<String>>,
    expected: usize,
) -> Result<(), PlotError> {
    match labels {
        Some(l) if l.len() != expected => Err(PlotError::LabelCount {
            axis,
            labels: l.len(),
            expected,
        }),
        _ => Ok(()),
    }
}

/// Tick marks and labels reach this far from the axes; legend samples are this long.
pub(crate) const TICK_LENGTH: i32 = 5;
pub(crate) const SAMPLE_LENGTH: i32 = 24;

/// One axis of a line plot: the values at its ends (round numbers enclosing the data) and its
/// ticks, as the fraction of the way from `lo` and the label.
pub(crate) struct Scale {
    pub(crate) lo: f64,
    pub(crate) hi: f64,
    pub(crate) ticks: Vec<(f64, String)>,
}

impl Scale {
    /// The axis for these values: from the multiple of the tick step at or below the least
    /// finite one to the multiple at or above the largest; 0 to 1 when none is finite.
    fn over(values: impl Iterator<Item = f64>) -> Scale {
        let (lo, hi) = finite_span(values).unwrap_or((0.0, 1.0));
        let step = tick_step(lo, hi);
        let (lo, hi) = ((lo / step).floor() * step, (hi / step).ceil() * step);
        Scale {
            lo,
            hi,
            ticks: ticks_at(lo, hi, step, step_decimals(step)),
        }
    }

    /// Where `v` falls, as the fraction of the way from `lo` to `hi`.
    pub(crate) fn fraction(&self, v: f64) -> f64 {
        (v - self.lo) / (self.hi - self.lo)
    }
}

/// Pixel geometry of a line plot: the plotting area (`left`, `top`, `plot_w`, `plot_h`), the
/// axes, and the legend's left, top, width, height and height of an entry.
pub(crate) struct LinesLayout {
    pub(crate) width: u32,
    pub(crate) height: u32,
    pub(crate) title_h: i32,
    pub(crate) left: i32,
    pub(crate) top: i32,
    pub(crate) plot_w: i32,
    pub(crate) plot_h: i32,
    pub(crate) x: Scale,
    pub(crate) y: Scale,
    pub(crate) x_tick_h: i32,
    pub(crate) legend: (i32, i32, i32, i32, i32),
}

impl LinePlot {
    /// The plot's size in pixels, width then height: the SVG's (PNG pictures are
    /// [`LinePlot::png_size`]).
    ///
    /// # Errors
    /// [`PlotError::NoSeries`], [`PlotError::NoPoints`] or [`PlotError::SeriesLength`] when
    /// the plot cannot be drawn.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_plot::*;
    ///
    /// let (w, h) = line_plot(&[0.0, 1.0]).series("a", &[0.0, 1.0]).size()?;
    /// assert!(w > 480 && h > 300); // the plotting area and what surrounds it
    /// let err = line_plot(&[0.0, 1.0]).series("a", &[0.0]).size().unwrap_err();
    /// assert_eq!(err.to_string(), "series \"a\" has 1 values for 2 x values");
    /// # Ok::<(), PlotError>(())
    /// ```
    pub fn size(&self) -> Result<(u32, u32), PlotError> {
        let lay = self.layout()?;
        Ok((lay.width, lay.height))
    }

    /// The size in pixels of the plot's PNG pictures: [`LinePlot::size`] times
    /// [`LinePlot::png_scale`].
    ///
    /// # Errors
    /// As [`LinePlot::size`].
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_plot::*;
    ///
    /// let plot = line_plot(&[0.0, 1.0]).series("a", &[0.0, 1.0]);
    /// let (w, h) = plot.size()?;
    /// assert_eq!(plot.png_size()?, (2 * w, 2 * h));
    /// # Ok::<(), PlotError>(())
    /// ```
    pub fn png_size(&self) -> Result<(u32, u32), PlotError> {
        let (w, h) = self.size()?;
        Ok((w * self.png_scale, h * self.png_scale))
    }

    /// Checks the plot and computes its geometry.
    pub(crate) fn layout(&self) -> Result<LinesLayout, PlotError> {
        register_font()?;
        if self.series.is_empty() {
            return Err(PlotError::NoSeries);
        }
        if self.x.is_empty() {
            return Err(PlotError::NoPoints);
        }
        for s in &self.series {
            if s.y.len() != self.x.len() {
                return Err(PlotError::SeriesLength {
                    series: s.name.clone(),
                    values: s.y.len(),
                    expected: self.x.len(),
                });
            }
        }
        let x = Scale::over(self.x.iter().copied());
        let y = Scale::over(self.series.iter().flat_map(|s| s.y.iter().copied()));
        let (plot_w, plot_h) = (self.plot_size.0 as i32, self.plot_size.1 as i32);

        let title_h = match &self.title {
            Some(t) => text_size(t, TITLE_SIZE)?.1 as i32 + 16,
            None => 0,
        };
        let label_h = |label: &Option<String>| -> Result<i32, PlotError> {
            Ok(match label {
                Some(l) => text_size(l, LABEL_SIZE)?.1 as i32 + 8,
                None => 0,
            })
        };
        let tick_h = text_size("0", TICK_SIZE)?.1 as i32;
        let mut y_tick_w = 0;
        for (_, t) in &y.ticks {
            y_tick_w = y_tick_w.max(text_size(t, TICK_SIZE)?.0 as i32);
        }
        let left = MARGIN + label_h(&self.y_label)? + y_tick_w + TICK_LENGTH + 4;
        // Half a tick label above the plotting area: the top tick's label is centred on it.
        let top = MARGIN + title_h + tick_h / 2;
        let x_tick_h = TICK_LENGTH + 4 + tick_h;

        let mut name_w = 0;
        let mut entry_h = tick_h;
        for s in &self.series {
            let (w, h) = text_size(&s.name, LABEL_SIZE)?;
            name_w = name_w.max(w as i32);
            entry_h = entry_h.max(h as i32);
        }
        let entry_h = entry_h + 8;
        let legend_w = 8 + SAMPLE_LENGTH + 8 + name_w + 8;
        let legend_h = self.series.len() as i32 * entry_h + 8;
        let legend_x = left + plot_w + GAP;

        let mut width = legend_x + legend_w + MARGIN;
        let height = (top + plot_h + x_tick_h + label_h(&self.x_label)? + MARGIN)
            .max(top + legend_h + MARGIN);
        if let Some(t) = &self.title {
            width = width.max(text_size(t, TITLE_SIZE)?.0 as i32 + 2 * MARGIN);
        }
        Ok(LinesLayout {
            width: width as u32,
            height: height as u32,
            title_h,
            left,
            top,
            plot_w,
            plot_h,
            x,
            y,
            x_tick_h,
            legend: (legend_x, top, legend_w, legend_h, entry_h),
        })
    }
}
