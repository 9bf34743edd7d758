//! A scene: the interactive views' pictures as a list of lines, rectangles, text and images in
//! pixel units. One scene is written two ways: as SVG here (with `data-` attributes that the
//! views' script reads, and `<title>` tooltips), and as PNG by `paint`. The views compute their
//! scene once, so the exported files show what the notebook shows.

use std::fmt::Write as _;

use plotters::style::RGBColor;

use attention_lab::html;

use crate::colormap::INK;
use crate::error::PlotError;
use crate::font::{text_size, TITLE_SIZE};

/// Pixels around every view's picture.
pub(crate) const MARGIN: f64 = 10.0;

/// Where a text's anchor point is, horizontally.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Anchor {
    Start,
    Middle,
    End,
}

/// The `data-` attributes of an item: names and small whole numbers only, never user text.
pub(crate) type Data = Vec<(&'static str, usize)>;

/// One thing drawn.
#[derive(Debug, Clone)]
pub(crate) enum Item {
    /// A straight line, `opacity` in [0, 1]; `values` are `data-` attributes of numbers the
    /// Rust side wrote (a weight, a strength), never user text.
    Line {
        from: (f64, f64),
        to: (f64, f64),
        colour: RGBColor,
        opacity: f64,
        width: f64,
        data: Data,
        values: Vec<(&'static str, String)>,
        hidden: bool,
    },
    /// A rectangle, filled and/or outlined; `tip` is shown on hover (SVG `<title>`).
    Rect {
        at: (f64, f64),
        size: (f64, f64),
        fill: Option<RGBColor>,
        stroke: Option<RGBColor>,
        data: Data,
        tip: Option<String>,
    },
    /// One line of text, vertically centred on `at`.
    Text {
        at: (f64, f64),
        text: String,
        size: f64,
        colour: RGBColor,
        anchor: Anchor,
        class: Option<&'static str>,
        data: Data,
        tip: Option<String>,
    },
    /// A small RGB raster drawn at `size`, one block of pixels per cell (a heatmap panel).
    Raster {
        at: (f64, f64),
        size: (f64, f64),
        cells: ndarray::Array2<RGBColor>,
        data: Data,
        tip: Option<String>,
    },
    /// Items shown or hidden together.
    Group {
        class: &'static str,
        data: Data,
        hidden: bool,
        items: Vec<Item>,
    },
}

/// One line of black text, vertically centred on `at`.
pub(crate) fn text(at: (f64, f64), t: &str, size: f64, anchor: Anchor) -> Item {
    Item::Text {
        at,
        text: t.to_string(),
        size,
        colour: INK,
        anchor,
        class: None,
        data: vec![],
        tip: None,
    }
}

/// Adds the title, if any, at `(x, y)` (its top left); returns where what follows starts and
/// the width the picture needs for it (from 0, a margin after it).
pub(crate) fn title_item(
    items: &mut Vec<Item>,
    title: &Option<String>,
    (x, y): (f64, f64),
) -> Result<(f64, f64), PlotError> {
    match title {
        Some(t) => {
            let at = (x, y + 12.0);
            items.push(text(at, t, TITLE_SIZE, Anchor::Start).tagged("alab-title", vec![]));
            Ok((y + 30.0, x + MARGIN + text_size(t, TITLE_SIZE)?.0 as f64))
        }
        None => Ok((y, 0.0)),
    }
}

impl Item {
    /// The text given a class and `data-` attributes, by which the views' script finds it.
    pub(crate) fn tagged(mut self, name: &'static str, attributes: Data) -> Item {
        if let Item::Text { class, data, .. } = &mut self {
            *class = Some(name);
            data.extend(attributes);
        }
        self
    }
}

/// A picture as items on a `width` x `height` canvas, with `data-` attributes for its root,
/// shown `scale` times as large in a notebook and an SVG file (the `viewBox` stays the
/// canvas).
#[derive(Debug, Clone)]
pub(crate) struct Scene {
    pub(crate) width: f64,
    pub(crate) height: f64,
    pub(crate) scale: f64,
    pub(crate) data: Vec<(&'static str, String)>,
    pub(crate) items: Vec<Item>,
}

/// A number as SVG writes it: at most two decimals, no trailing zeros (byte-stable).
pub(crate) fn num(x: f64) -> String {
    let s = format!("{:.2}", x);
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.into()
    }
}

/// A colour as `#rrggbb`.
pub(crate) fn hex(c: RGBColor) -> String {
    format!("#{:02x}{:02x}{:02x}", c.0, c.1, c.2)
}

/// The SVG font size of text drawn at plotters `size` (plotters writes size / 1.24).
pub(crate) fn svg_font_size(size: f64) -> String {
    num(size / 1.24)
}

fn write_data(out: &mut String, data: &Data) {
    for (name, value) in data {
        let _ = write!(out, " data-{name}=\"{value}\"");
    }
}

fn write_tip(out: &mut String, tip: &Option<String>) {
    if let Some(t) = tip {
        let _ = write!(out, "<title>{}</title>", xml_text(t));
    }
}

/// Text for an XML text node: escaped, and the characters XML forbids (control characters
/// but tab and line ends, U+FFFE, U+FFFF) shown as U+FFFD, so any token keeps the SVG valid.
pub(crate) fn xml_text(text: &str) -> String {
    let allowed = |c: char| !matches!(c, '\u{0}'..='\u{8}' | '\u{b}' | '\u{c}' | '\u{e}'..='\u{1f}' | '\u{fffe}' | '\u{ffff}');
    html::escape(
        &text
            .chars()
            .map(|c| if allowed(c) { c } else { '\u{fffd}' })
            .collect::<String>(),
    )
}

impl Scene {
    /// The scene as an SVG element, `class` on the root (`None` for a file of its own).
    pub(crate) fn to_svg(&self, class: Option<&str>) -> String {
        let (w, h) = (num(self.width), num(self.height));
        let (sw, sh) = (num(self.width * self.scale), num(self.height * self.scale));
        let mut out = format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{sw}\" height=\"{sh}\" \
             viewBox=\"0 0 {w} {h}\" font-family=\"sans-serif\""
        );
        if let Some(c) = class {
            let _ = write!(out, " class=\"{c}\"");
        }
        for (name, value) in &self.data {
            let _ = write!(out, " data-{name}=\"{}\"", html::escape(value));
        }
        out.push_str(">\n<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n");
        for item in &self.items {
            write_item(&mut out, item);
        }
        out.push_str("</svg>\n");
        out
    }
}

#[allow(
    clippy::too_many_lines,
    reason = "one match arm per kind of item: the match is the SVG writer's table"
)]
fn write_item(out: &mut String, item: &Item) {
    match item {
        Item::Line {
            from,
            to,
            colour,
            opacity,
            width,
            data,
            values,
            hidden,
        } => {
            let _ = write!(
                out,
                "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"{}\" \
                 stroke-opacity=\"{:.3}\"",
                num(from.0),
                num(from.1),
                num(to.0),
                num(to.1),
                hex(*colour),
                num(*width),
                opacity
            );
            write_data(out, data);
            for (name, value) in values {
                let _ = write!(out, " data-{name}=\"{}\"", html::escape(value));
            }
            if *hidden {
                out.push_str(" display=\"none\"");
            }
            out.push_str("/>\n");
        }
        Item::Rect {
            at,
            size,
            fill,
            stroke,
            data,
            tip,
        } => {
            let _ = write!(
                out,
                "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"",
                num(at.0),
                num(at.1),
                num(size.0),
                num(size.1),
                fill.map_or("none".into(), hex)
            );
            if let Some(s) = stroke {
                let _ = write!(out, " stroke=\"{}\"", hex(*s));
            }
            write_data(out, data);
            if tip.is_some() {
                out.push('>');
                write_tip(out, tip);
                out.push_str("</rect>\n");
            } else {
                out.push_str("/>\n");
            }
        }
        Item::Text {
            at,
            text,
            size,
            colour,
            anchor,
            class,
            data,
            tip,
        } => {
            let anchor = match anchor {
                Anchor::Start => "start",
                Anchor::Middle => "middle",
                Anchor::End => "end",
            };
            let _ = write!(
                out,
                "<text x=\"{}\" y=\"{}\" font-size=\"{}\" fill=\"{}\" text-anchor=\"{anchor}\" \
                 dominant-baseline=\"central\"",
                num(at.0),
                num(at.1),
                svg_font_size(*size),
                hex(*colour)
            );
            if let Some(c) = class {
                let _ = write!(out, " class=\"{c}\"");
            }
            write_data(out, data);
            out.push('>');
            write_tip(out, tip);
            out.push_str(&xml_text(text));
            out.push_str("</text>\n");
        }
        Item::Raster {
            at,
            size,
            cells,
            data,
            tip,
        } => {
            let _ = write!(
                out,
                "<image x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" preserveAspectRatio=\"none\" \
                 image-rendering=\"pixelated\" style=\"image-rendering:pixelated\" href=\"{}\"",
                num(at.0),
                num(at.1),
                num(size.0),
                num(size.1),
                png_data_uri(cells)
            );
            write_data(out, data);
            out.push('>');
            write_tip(out, tip);
            out.push_str("</image>\n");
        }
        Item::Group {
            class,
            data,
            hidden,
            items,
        } => {
            let _ = write!(out, "<g class=\"{class}\"");
            write_data(out, data);
            if *hidden {
                out.push_str(" display=\"none\"");
            }
            out.push_str(">\n");
            for item in items {
                write_item(out, item);
            }
            out.push_str("</g>\n");
        }
    }
}

/// An SVG document as an `<img>` whose source is the SVG itself in a `data:` URI.
///
/// Why not the `<svg>` element inline: JupyterLab 4 sanitises the HTML of untrusted outputs
/// (every notebook reopened from disk) and removes `<svg>` elements, leaving their text as
/// loose words; it keeps `<img>` with `data:` sources. The views' script turns the image back
/// into the live SVG in trusted output.
pub(crate) fn svg_img(svg: &str, class: &str, alt: &str) -> String {
    format!(
        "<img class=\"{class}\" alt=\"{}\" src=\"data:image/svg+xml;base64,{}\"/>",
        html::escape(alt).replace('"', "&quot;"),
        base64(svg.trim_end().as_bytes())
    )
}

/// Bytes in standard base64, as `data:` URIs and the views' script read them.
pub(crate) fn base64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The cells as a PNG (one pixel a cell) in a `data:` URI; the browser scales it up.
fn png_data_uri(cells: &ndarray::Array2<RGBColor>) -> String {
    let (rows, cols) = cells.dim();
    let rgb: Vec<u8> = cells.iter().flat_map(|c| [c.0, c.1, c.2]).collect();
    let mut bytes = Vec::new();
    {
        let mut encoder = png::Encoder::new(&mut bytes, cols as u32, rows as u32);
        encoder.set_color(png::ColorType::Rgb);
        encoder.set_depth(png::BitDepth::Eight);
        // Writing to a Vec cannot fail; a 0-sized raster is never made (views check shapes).
        if let Ok(mut writer) = encoder.write_header() {
            let _ = writer.write_image_data(&rgb);
        }
    }
    format!("data:image/png;base64,{}", base64(&bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_written_short_and_the_same_each_time() {
        assert_eq!(num(12.0), "12");
        assert_eq!(num(12.5), "12.5");
        assert_eq!(num(1.0 / 3.0), "0.33");
        assert_eq!(num(-0.001), "0");
        assert_eq!(hex(RGBColor(0, 114, 178)), "#0072b2");
    }

    #[test]
    fn text_is_escaped_and_data_attributes_are_numbers() {
        let scene = Scene {
            width: 10.0,
            height: 10.0,
            scale: 1.0,
            data: vec![],
            items: vec![Item::Text {
                at: (1.0, 2.0),
                text: "<script>\"é\"</script>".into(),
                size: 16.0,
                colour: RGBColor(0, 0, 0),
                anchor: Anchor::End,
                class: Some("alab-q"),
                data: vec![("q", 3)],
                tip: Some("a & b".into()),
            }],
        };
        let svg = scene.to_svg(None);
        assert!(
            svg.contains("&lt;script&gt;\"é\"&lt;/script&gt;</text>"),
            "{svg}"
        );
        assert!(svg.contains("<title>a &amp; b</title>"), "{svg}");
        assert!(svg.contains(" data-q=\"3\""), "{svg}");
        assert!(!svg.contains("<script"), "{svg}");
    }

    #[test]
    fn characters_xml_forbids_become_replacement_characters() {
        assert_eq!(
            xml_text("a\u{0}b\u{1b}c\td\u{ffff}"),
            "a\u{fffd}b\u{fffd}c\td\u{fffd}"
        );
        assert_eq!(xml_text("<é>"), "&lt;é&gt;");
    }
}
