//! Files: [`Figure::save_svg`], [`Figure::save_png`] and the same for [`LinePlot`], written by the workspace's one writer,
//! `attention_lab_io::write` (a temporary file in the same folder, synced and renamed; through
//! symlinks; keeping the file's mode). The only module that writes files.

use std::path::Path;

use crate::error::PlotError;
use crate::figure::Figure;
use crate::head_view::HeadView;
use crate::lines::LinePlot;
use crate::model_view::ModelView;
use crate::neuron_view::NeuronView;
use crate::paint::{render_svg, to_png, Picture};

impl Figure {
    /// Writes the figure as an SVG file. The file is written under a temporary name in the
    /// same folder and then renamed, so an existing file is never left half-written.
    ///
    /// # Errors
    /// As [`Figure::render_svg`], and [`PlotError::Write`] (naming `path`) when the file
    /// cannot be written.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_plot::*;
    ///
    /// let path = std::env::temp_dir().join(format!("doc-{}.svg", std::process::id()));
    /// heatmap(&array![[0.3, 0.7]]).save_svg(&path)?;
    /// assert!(std::fs::read_to_string(&path).unwrap().starts_with("<svg"));
    /// # std::fs::remove_file(&path).unwrap();
    /// let err = heatmap(&array![[1.0]]).save_svg("/no/such/folder/w.svg").unwrap_err();
    /// assert!(err.to_string().starts_with("cannot write /no/such/folder/w.svg: "));
    /// # Ok::<(), PlotError>(())
    /// ```
    pub fn save_svg(&self, path: impl AsRef<Path>) -> Result<(), PlotError> {
        save_svg(self, path.as_ref())
    }

    /// Writes the figure as a PNG file ([`Figure::to_png`]), through a temporary name in the
    /// same folder and a rename.
    ///
    /// # Errors
    /// As [`Figure::to_png`], and [`PlotError::Write`] (naming `path`) when the file cannot be
    /// written.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_plot::*;
    ///
    /// let path = std::env::temp_dir().join(format!("doc-{}.png", std::process::id()));
    /// heatmap(&array![[0.3, 0.7]]).save_png(&path)?;
    /// assert!(std::fs::metadata(&path).unwrap().len() > 100);
    /// # std::fs::remove_file(&path).unwrap();
    /// # Ok::<(), PlotError>(())
    /// ```
    pub fn save_png(&self, path: impl AsRef<Path>) -> Result<(), PlotError> {
        save_png(self, path.as_ref())
    }
}

impl LinePlot {
    /// Writes the plot as an SVG file, through a temporary name in the same folder and a
    /// rename.
    ///
    /// # Errors
    /// As [`LinePlot::render_svg`], and [`PlotError::Write`] (naming `path`) when the file
    /// cannot be written.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_plot::*;
    ///
    /// let path = std::env::temp_dir().join(format!("doc-lines-{}.svg", std::process::id()));
    /// line_plot(&[0.0, 1.0]).series("a", &[0.0, 1.0]).save_svg(&path)?;
    /// assert!(std::fs::read_to_string(&path).unwrap().contains("<polyline"));
    /// # std::fs::remove_file(&path).unwrap();
    /// # Ok::<(), PlotError>(())
    /// ```
    pub fn save_svg(&self, path: impl AsRef<Path>) -> Result<(), PlotError> {
        save_svg(self, path.as_ref())
    }

    /// Writes the plot as a PNG file ([`LinePlot::to_png`]), through a temporary name in the
    /// same folder and a rename.
    ///
    /// # Errors
    /// As [`LinePlot::to_png`], and [`PlotError::Write`] (naming `path`) when the file cannot
    /// be written.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_plot::*;
    ///
    /// let path = std::env::temp_dir().join(format!("doc-lines-{}.png", std::process::id()));
    /// line_plot(&[0.0, 1.0]).series("a", &[0.0, 1.0]).save_png(&path)?;
    /// assert!(std::fs::metadata(&path).unwrap().len() > 100);
    /// # std::fs::remove_file(&path).unwrap();
    /// # Ok::<(), PlotError>(())
    /// ```
    pub fn save_png(&self, path: impl AsRef<Path>) -> Result<(), PlotError> {
        save_png(self, path.as_ref())
    }
}

/// The interactive views write the static picture of their selection.
macro_rules! save_view {
    ($($view:ty),*) => {$(
        impl $view {
            /// Writes the static picture of the current selection (the chosen query token and
            /// heads) as an SVG file, in the notebook's colours, through a temporary name in
            /// the same folder and a rename.
            ///
            /// # Errors
            /// As `to_svg`, and [`PlotError::Write`] (naming `path`) when the file cannot be
            /// written.
            ///
            /// ```
            /// use attention_lab::prelude::*;
            /// use attention_lab_plot::*;
            ///
            /// let path = std::env::temp_dir().join(format!("doc-view-{}.svg", std::process::id()));
            /// head_view_weights(&Array3::from_elem((1, 1, 1), 1.0), &["a"]).save_svg(&path)?;
            /// assert!(std::fs::read_to_string(&path).unwrap().starts_with("<svg"));
            /// # std::fs::remove_file(&path).unwrap();
            /// # Ok::<(), PlotError>(())
            /// ```
            pub fn save_svg(&self, path: impl AsRef<Path>) -> Result<(), PlotError> {
                write_atomically(path.as_ref(), self.to_svg()?.as_bytes())
            }

            /// Writes the static picture of the current selection as a PNG file (`to_png`),
            /// through a temporary name in the same folder and a rename.
            ///
            /// # Errors
            /// As `to_png`, and [`PlotError::Write`] (naming `path`) when the file cannot be
            /// written.
            ///
            /// ```
            /// use attention_lab::prelude::*;
            /// use attention_lab_plot::*;
            ///
            /// let path = std::env::temp_dir().join(format!("doc-view-{}.png", std::process::id()));
            /// head_view_weights(&Array3::from_elem((1, 1, 1), 1.0), &["a"]).save_png(&path)?;
            /// assert!(std::fs::metadata(&path).unwrap().len() > 100);
            /// # std::fs::remove_file(&path).unwrap();
            /// # Ok::<(), PlotError>(())
            /// ```
            pub fn save_png(&self, path: impl AsRef<Path>) -> Result<(), PlotError> {
                save_png(self, path.as_ref())
            }
        }
    )*};
}

save_view!(HeadView, ModelView, NeuronView);

/// Writes any picture as an SVG file.
pub(crate) fn save_svg<P: Picture>(picture: &P, path: &Path) -> Result<(), PlotError> {
    write_atomically(path, render_svg(picture)?.as_bytes())
}

/// Writes any picture as a PNG file.
pub(crate) fn save_png<P: Picture>(picture: &P, path: &Path) -> Result<(), PlotError> {
    write_atomically(path, &to_png(picture)?)
}

/// The workspace's one writer (attention_lab_io): atomic, through symlinks, keeping the mode.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), PlotError> {
    attention_lab_io::write(path, bytes).map_err(|source| PlotError::Write {
        path: path.to_path_buf(),
        source,
    })
}
