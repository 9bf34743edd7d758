//! The line plot and its builder: [`line_plot`], [`LinePlot::series`] and the methods that
//! set the title, axis labels and sizes. As for heatmaps, only what to draw lives here: its
//! geometry is in `layout`, its drawing in `paint`, its files in `output`.

use ndarray::ArrayView1;

/// One line: its name in the legend and its y values, one per x value.
#[derive(Debug, Clone)]
pub(crate) struct Series {
    pub(crate) name: String,
    pub(crate) y: Vec<f64>,
}

/// A picture of one or more series of y against x, with axes, ticks, a legend and a title;
/// made by [`line_plot`], shown inline by evcxr, written by [`LinePlot::save_svg`] and
/// [`LinePlot::save_png`].
///
/// Series are coloured in turn from a palette of ten (matplotlib's `tab10`). A point whose x
/// or y is NaN or infinite is left out and breaks its line. A plot without series, or a
/// series whose length is not x's, is an error: the `Result` methods return it and
/// [`LinePlot::to_svg`] (so the notebook display) draws the message instead.
///
/// ```
/// use attention_lab::prelude::*;
/// use attention_lab_plot::*;
///
/// let pe = positional_encoding(20, 8);
/// let position: Vec<f64> = (0..20).map(|p| p as f64).collect();
/// let plot = line_plot(&position)
///     .series("dimension 0", pe.column(0))
///     .series("dimension 2", pe.column(2))
///     .x_label("position")
///     .title("positional encoding");
/// let svg = plot.to_svg();
/// assert!(svg.contains("dimension 2") && svg.contains("position"));
/// ```
#[derive(Debug, Clone)]
pub struct LinePlot {
    pub(crate) x: Vec<f64>,
    pub(crate) series: Vec<Series>,
    pub(crate) title: Option<String>,
    pub(crate) x_label: Option<String>,
    pub(crate) y_label: Option<String>,
    pub(crate) plot_size: (u32, u32),
    pub(crate) png_scale: u32,
}

/// A line plot over the points `x` (a slice, a `Vec`, an `Array1` or a view such as a
/// column of a matrix); add lines with [`LinePlot::series`].
///
/// ```
/// use attention_lab::prelude::*;
/// use attention_lab_plot::*;
///
/// let x = array![0.0, 1.0, 2.0];
/// let svg = line_plot(&x).series("y = x²", &[0.0, 1.0, 4.0]).to_svg();
/// assert!(svg.matches("<polyline").count() >= 2); // the line and its legend sample
/// ```
pub fn line_plot<'a>(x: impl Into<ArrayView1<'a, f64>>) -> LinePlot {
    LinePlot {
        x: x.into().to_vec(),
        series: Vec::new(),
        title: None,
        x_label: None,
        y_label: None,
        plot_size: (480, 300),
        png_scale: 2,
    }
}

impl LinePlot {
    /// Adds a line of `y` against the plot's x, named `name` in the legend; `y` has one value
    /// per x value.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_plot::*;
    ///
    /// let m = array![[0.0, 1.0], [1.0, 0.0], [2.0, -1.0]];
    /// let plot = line_plot(m.column(0)).series("column 1", m.column(1));
    /// assert!(plot.to_svg().contains("column 1"));
    /// ```
    pub fn series<'a>(mut self, name: &str, y: impl Into<ArrayView1<'a, f64>>) -> LinePlot {
        self.series.push(Series {
            name: name.to_string(),
            y: y.into().to_vec(),
        });
        self
    }

    /// Sets the plot's title, drawn above it.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_plot::*;
    ///
    /// let plot = line_plot(&[0.0, 1.0]).series("a", &[1.0, 2.0]).title("PE(pos, 2i)");
    /// assert!(plot.to_svg().contains("PE(pos, 2i)"));
    /// ```
    pub fn title(mut self, title: &str) -> LinePlot {
        self.title = Some(title.to_string());
        self
    }

    /// Names the x axis, below its tick labels.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_plot::*;
    ///
    /// let plot = line_plot(&[0.0, 1.0]).series("a", &[1.0, 2.0]).x_label("position");
    /// assert!(plot.to_svg().contains("position"));
    /// ```
    pub fn x_label(mut self, label: &str) -> LinePlot {
        self.x_label = Some(label.to_string());
        self
    }

    /// Names the y axis, upright at its left.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_plot::*;
    ///
    /// let plot = line_plot(&[0.0, 1.0]).series("a", &[1.0, 2.0]).y_label("value");
    /// assert!(plot.to_svg().contains("value"));
    /// ```
    pub fn y_label(mut self, label: &str) -> LinePlot {
        self.y_label = Some(label.to_string());
        self
    }

    /// The size in pixels of the plotting area inside the axes (480 x 300 by default; each
    /// side from 50 to 4000); the picture adds the title, ticks, labels and legend around it.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_plot::*;
    ///
    /// let plot = line_plot(&[0.0, 1.0]).series("a", &[1.0, 2.0]);
    /// let (w, h) = plot.clone().plot_size(400, 200).size()?;
    /// let (wider, _) = plot.plot_size(500, 200).size()?;
    /// assert_eq!((wider - w, h > 200), (100, true));
    /// # Ok::<(), PlotError>(())
    /// ```
    pub fn plot_size(mut self, width: u32, height: u32) -> LinePlot {
        self.plot_size = (width.clamp(50, 4000), height.clamp(50, 4000));
        self
    }

    /// Sets how many times larger than the SVG (in pixels per side) PNG pictures are: 2 by
    /// default, from 1 to 8.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_plot::*;
    ///
    /// let plot = line_plot(&[0.0, 1.0]).series("a", &[1.0, 2.0]).png_scale(3);
    /// let (w, h) = plot.size()?;
    /// assert_eq!(plot.png_size()?, (3 * w, 3 * h));
    /// # Ok::<(), PlotError>(())
    /// ```
    pub fn png_scale(mut self, scale: u32) -> LinePlot {
        self.png_scale = scale.clamp(1, 8);
        self
    }
}
