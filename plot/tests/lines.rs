//! Line plots: the SVG's lines, their points, ticks, legend and labels; PNG size and colours;
//! error messages.
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is the test failing, as a failed assert is"
)]

use attention_lab::prelude::*;
use attention_lab_plot::*;

/// The series colours as the SVG writes them (matplotlib's tab10, in turn).
const BLUE: &str = "#1F77B4";
const ORANGE: &str = "#FF7F0E";
const GREEN: &str = "#2CA02C";

struct Line {
    stroke: String,
    points: Vec<(f64, f64)>,
}

struct Text {
    x: f64,
    y: f64,
    text: String,
}

struct Svg {
    lines: Vec<Line>,
    texts: Vec<Text>,
    width: f64,
    height: f64,
}

fn parse(svg: &str) -> Svg {
    let doc = roxmltree::Document::parse(svg).expect("the SVG is well-formed XML");
    let num = |n: &roxmltree::Node, a: &str| -> f64 { n.attribute(a).unwrap().parse().unwrap() };
    let lines = doc
        .descendants()
        .filter(|n| n.has_tag_name("polyline"))
        .map(|n| Line {
            stroke: n.attribute("stroke").unwrap().to_string(),
            points: n
                .attribute("points")
                .unwrap()
                .split_whitespace()
                .map(|p| {
                    let (x, y) = p.split_once(',').unwrap();
                    (x.parse().unwrap(), y.parse().unwrap())
                })
                .collect(),
        })
        .collect();
    let texts = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .map(|n| Text {
            x: num(&n, "x"),
            y: num(&n, "y"),
            text: n.text().unwrap_or("").trim().to_string(),
        })
        .collect();
    let root = doc.root_element();
    Svg {
        lines,
        texts,
        width: num(&root, "width"),
        height: num(&root, "height"),
    }
}

impl Svg {
    /// The lines drawn in `colour`: the series' (more than two points) and its legend sample.
    fn lines_of(&self, colour: &str) -> (Vec<&Line>, Vec<&Line>) {
        self.lines
            .iter()
            .filter(|l| l.stroke == colour)
            .partition(|l| l.points.len() > 2)
    }

    fn text(&self, text: &str) -> &Text {
        let mut found = self.texts.iter().filter(|t| t.text == text);
        let first = found.next().unwrap_or_else(|| panic!("no text {text:?}"));
        assert!(found.next().is_none(), "{text:?} written more than once");
        first
    }
}

fn positions(n: usize) -> Vec<f64> {
    (0..n).map(|p| p as f64).collect()
}

/// Dimensions 0 (a sine), 1 (its cosine) and 4 of the encoding of 50 positions, 16 wide.
fn encoding_plot() -> LinePlot {
    let pe = positional_encoding(50, 16);
    line_plot(&positions(50))
        .series("dimension 0", pe.column(0))
        .series("dimension 1", pe.column(1))
        .series("dimension 4", pe.column(4))
        .title("positional encoding")
        .x_label("position")
        .y_label("PE")
}

#[test]
fn each_series_is_one_line_through_all_its_points_and_one_legend_sample() {
    let svg = parse(&encoding_plot().to_svg());
    for colour in [BLUE, ORANGE, GREEN] {
        let (series, samples) = svg.lines_of(colour);
        assert_eq!(series.len(), 1, "{colour}: one line");
        assert_eq!(series[0].points.len(), 50, "{colour}: a point per position");
        assert_eq!(samples.len(), 1, "{colour}: one legend sample");
    }
    let in_series = svg.lines.iter().filter(|l| l.points.len() > 2).count();
    assert_eq!(in_series, 3, "no other line has more than two points");
}

#[test]
fn points_are_mapped_monotonically_and_evenly_into_the_plot() {
    let x = positions(11);
    let y: Vec<f64> = x.iter().map(|v| v * v).collect();
    let svg = parse(&line_plot(&x).series("x²", &y).to_svg());
    let (series, _) = svg.lines_of(BLUE);
    let points = &series[0].points;
    for pair in points.windows(2) {
        let ((x0, y0), (x1, y1)) = (pair[0], pair[1]);
        assert!(x1 > x0, "x grows to the right: {points:?}");
        assert!(y1 < y0, "a larger y is higher up: {points:?}");
    }
    // Equal steps of x are equal steps across (to the rounding of a pixel).
    let steps: Vec<f64> = points.windows(2).map(|p| p[1].0 - p[0].0).collect();
    assert!(
        steps.iter().all(|s| (s - steps[0]).abs() <= 1.0),
        "{steps:?}"
    );
    // y = x² is linear in its own scale: the step up grows as 2x + 1.
    let rises: Vec<f64> = points.windows(2).map(|p| p[0].1 - p[1].1).collect();
    for (k, rise) in rises.iter().enumerate() {
        let want = rises[0] * (2 * k + 1) as f64;
        assert!(
            (rise - want).abs() <= 2.0,
            "rise {k}: {rise} against {want}"
        );
    }
    for &(px, py) in points {
        assert!(px > 0.0 && px < svg.width && py > 0.0 && py < svg.height);
    }
}

#[test]
fn ticks_are_round_values_at_the_grid_lines_enclosing_the_data() {
    let svg = parse(&encoding_plot().to_svg());
    let (series, _) = svg.lines_of(BLUE);
    let points = &series[0].points;
    // The x axis runs 0 to 50 in tens; position 0 sits on tick "0".
    let x_labels: Vec<&Text> = ["0", "10", "20", "30", "40", "50"]
        .iter()
        .map(|t| svg.text(t))
        .collect();
    for pair in x_labels.windows(2) {
        assert!(
            pair[1].x > pair[0].x,
            "{} right of {}",
            pair[1].text,
            pair[0].text
        );
        assert_eq!(pair[1].y, pair[0].y, "x tick labels share a row");
    }
    assert!((x_labels[0].x - points[0].0).abs() <= 1.0);
    // Position 49 is 49/50 of the way to tick "50".
    let along = (points[49].0 - x_labels[0].x) / (x_labels[5].x - x_labels[0].x);
    assert!((along - 0.98).abs() < 0.01, "{along}");
    // The y axis runs -1 to 1 in halves; sin 0 = 0 sits on tick "0.0", cos 0 = 1 on "1.0".
    let y_labels: Vec<&Text> = ["1.0", "0.5", "0.0", "-0.5", "-1.0"]
        .iter()
        .map(|t| svg.text(t))
        .collect();
    for pair in y_labels.windows(2) {
        assert!(
            pair[1].y > pair[0].y,
            "{} below {}",
            pair[1].text,
            pair[0].text
        );
    }
    assert!((points[0].1 - svg.text("0.0").y).abs() <= 1.0);
    let (cosine, _) = svg.lines_of(ORANGE);
    assert!((cosine[0].points[0].1 - svg.text("1.0").y).abs() <= 1.0);
    // Every tick label is under or beside the plot, not inside it.
    let left = points[0].0;
    assert!(y_labels.iter().all(|t| t.x < left));
}

#[test]
fn the_legend_names_every_series_in_order_beside_its_colour() {
    let svg = parse(&encoding_plot().to_svg());
    let names = ["dimension 0", "dimension 1", "dimension 4"];
    let entries: Vec<&Text> = names.iter().map(|n| svg.text(n)).collect();
    for (k, (entry, colour)) in entries.iter().zip([BLUE, ORANGE, GREEN]).enumerate() {
        let (_, samples) = svg.lines_of(colour);
        let sample = &samples[0].points;
        assert_eq!(sample[0].1, sample[1].1, "a level sample");
        assert!(
            (sample[0].1 - entry.y).abs() <= 1.0,
            "{}: beside its sample",
            names[k]
        );
        assert!(entry.x > sample[1].0, "{}: right of its sample", names[k]);
        if k > 0 {
            assert!(
                entry.y > entries[k - 1].y,
                "{} below {}",
                names[k],
                names[k - 1]
            );
        }
    }
    // The legend is right of the plotting area.
    let (series, _) = svg.lines_of(BLUE);
    let right = series[0].points.iter().map(|p| p.0).fold(0.0, f64::max);
    assert!(entries.iter().all(|e| e.x > right));
    for label in ["positional encoding", "position", "PE"] {
        svg.text(label);
    }
}

#[test]
fn a_point_that_is_not_finite_breaks_its_line() {
    let x = positions(7);
    let lengths = |y: &[f64]| -> Vec<usize> {
        let svg = parse(&line_plot(&x).series("gap", y).to_svg());
        svg.lines
            .iter()
            .filter(|l| l.stroke == BLUE)
            .map(|l| l.points.len())
            .collect()
    };
    // Two runs of three points, then the legend sample.
    assert_eq!(
        lengths(&[0.0, 1.0, 2.0, f64::NAN, 4.0, 5.0, 6.0]),
        [3, 3, 2]
    );
    assert_eq!(
        lengths(&[0.0, 1.0, 2.0, 3.0, f64::INFINITY, 5.0, 6.0]),
        [4, 2, 2]
    );
    // A lone point between two gaps draws nothing.
    assert_eq!(
        lengths(&[0.0, 1.0, f64::NAN, 3.0, f64::NAN, 5.0, 6.0]),
        [2, 2, 2]
    );
}

#[test]
fn sizes_grow_with_the_plotting_area_and_pngs_are_scaled() {
    let plot = encoding_plot();
    let (w, h) = plot.size().unwrap();
    let (w2, h2) = plot.clone().plot_size(580, 350).size().unwrap();
    assert_eq!((w2 - w, h2 - h), (100, 50));
    let svg = parse(&plot.to_svg());
    assert_eq!((svg.width, svg.height), (w as f64, h as f64));
    let png = plot.clone().png_scale(1).to_png().unwrap();
    let decoder = png::Decoder::new(std::io::Cursor::new(png));
    let mut reader = decoder.read_info().unwrap();
    let mut rgb = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut rgb).unwrap();
    assert_eq!((info.width, info.height), (w, h));
    let has = |(r, g, b): (u8, u8, u8)| rgb.chunks(3).any(|p| p == [r, g, b]);
    assert!(has((31, 119, 180)) && has((255, 127, 14)) && has((44, 160, 44)));
}

#[test]
fn plots_that_cannot_be_drawn_are_errors_and_show_why() {
    let cases = [
        (
            line_plot(&[0.0, 1.0]),
            "a line plot needs at least one series",
        ),
        (
            line_plot(&[0.0, 1.0])
                .series("a", &[1.0, 2.0])
                .series("b", &[1.0]),
            "series \"b\" has 1 values for 2 x values",
        ),
        (
            line_plot(&Vec::<f64>::new()).series("a", &Vec::<f64>::new()),
            "cannot plot lines over no x values",
        ),
    ];
    for (plot, message) in cases {
        assert_eq!(plot.render_svg().unwrap_err().to_string(), message);
        assert!(plot.to_png().is_err() && plot.size().is_err());
        assert!(plot.to_svg().contains(&format!("plot error: {message}")));
    }
}

#[test]
fn constant_and_all_nan_series_still_get_an_axis() {
    let svg = parse(
        &line_plot(&[0.0, 1.0, 2.0])
            .series("flat", &[3.0, 3.0, 3.0])
            .to_svg(),
    );
    let (series, _) = svg.lines_of(BLUE);
    let ys: Vec<f64> = series[0].points.iter().map(|p| p.1).collect();
    assert!(ys.iter().all(|&y| y == ys[0]));
    // 3 widened by 0.5 each side, then to steps of 0.2: ticks 2.4 to 3.6, the line on 3.0.
    let (lo, hi) = (svg.text("2.4").y, svg.text("3.6").y);
    assert!((ys[0] - svg.text("3.0").y).abs() <= 1.0);
    assert!((ys[0] - (lo + hi) / 2.0).abs() <= 1.0);
    let nan = line_plot(&[0.0, 1.0]).series("nan", &[f64::NAN, f64::NAN]);
    let svg = parse(&nan.render_svg().unwrap());
    assert!(svg.lines_of(BLUE).0.is_empty());
}
