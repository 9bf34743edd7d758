//! Attention pictures: SVG structure (cells, labels, values, colour bar), PNG size and content,
//! and error messages.
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is the test failing, as a failed assert is"
)]

use std::path::Path;

use attention_lab::prelude::*;
use attention_lab_plot::*;

/// A rectangle of the SVG: x, y, width, height, fill.
#[derive(Debug, Clone, PartialEq)]
struct Rect {
    x: f64,
    y: f64,
    w: f64,
    h: f64,
    fill: String,
}

struct Svg {
    rects: Vec<Rect>,
    texts: Vec<String>,
    width: u32,
    height: u32,
}

fn parse(svg: &str) -> Svg {
    let doc = roxmltree::Document::parse(svg).expect("the SVG is well-formed XML");
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "svg");
    let num = |n: &roxmltree::Node, a: &str| -> f64 { n.attribute(a).unwrap().parse().unwrap() };
    let rects = doc
        .descendants()
        .filter(|n| n.has_tag_name("rect"))
        .map(|n| Rect {
            x: num(&n, "x"),
            y: num(&n, "y"),
            w: num(&n, "width"),
            h: num(&n, "height"),
            fill: n.attribute("fill").unwrap_or("none").to_string(),
        })
        .collect();
    let texts = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .map(|n| n.text().unwrap_or("").trim().to_string())
        .collect();
    Svg {
        rects,
        texts,
        width: num(&root, "width") as u32,
        height: num(&root, "height") as u32,
    }
}

/// The filled rectangles but the background: cells, then colour bar strips (those of the
/// rightmost column, when the figure has a colour bar), strips top to bottom.
fn cells_and_bar(svg: &Svg, with_bar: bool) -> (Vec<Rect>, Vec<Rect>) {
    let filled: Vec<Rect> = svg
        .rects
        .iter()
        .filter(|r| r.fill != "none" && r.w < svg.width as f64)
        .cloned()
        .collect();
    if !with_bar {
        return (filled, vec![]);
    }
    let bar_x = filled.iter().map(|r| r.x).fold(f64::MIN, f64::max);
    let (mut strips, cells): (Vec<Rect>, Vec<Rect>) =
        filled.into_iter().partition(|r| r.x == bar_x);
    strips.sort_by(|a, b| a.y.partial_cmp(&b.y).unwrap());
    (cells, strips)
}

fn cells(svg: &Svg) -> Vec<Rect> {
    cells_and_bar(svg, true).0
}

fn colour_bar(svg: &Svg) -> Vec<Rect> {
    cells_and_bar(svg, true).1
}

fn hex((r, g, b): (u8, u8, u8)) -> String {
    format!("#{r:02X}{g:02X}{b:02X}")
}

fn two_heads() -> MultiHeadOutput {
    let x = array![[1.0, 0.0, 1.0], [0.0, 2.0, 0.0], [1.0, 1.0, 1.0]];
    let heads = vec![
        Head::new(Array2::eye(3), Array2::eye(3), Array2::eye(3)).unwrap(),
        Head::new(Array2::eye(3), -Array2::eye(3), Array2::eye(3)).unwrap(),
    ];
    MultiHead::new(heads, None)
        .unwrap()
        .forward(&x, &Attend::new())
        .unwrap()
}

const TOKENS: [&str; 3] = ["Thinking", "Machines", "think"];

/// A layer of `n` heads over three tokens, each head with its own key scale.
fn heads(n: usize) -> MultiHeadOutput {
    let x = array![[1.0, 0.0, 1.0], [0.0, 2.0, 0.0], [1.0, 1.0, 1.0]];
    let heads = (1..=n)
        .map(|k| Head::new(Array2::eye(3), Array2::eye(3) * k as f64, Array2::eye(3)).unwrap())
        .collect();
    MultiHead::new(heads, None)
        .unwrap()
        .forward(&x, &Attend::new())
        .unwrap()
}

#[test]
fn heatmap_svg_has_one_cell_per_weight_with_labels_values_and_colour_bar() {
    let w = array![[0.7, 0.2, 0.1], [0.25, 0.5, 0.25], [0.0, 0.001, 0.999]];
    let svg = heatmap(&w)
        .labels(&TOKENS)
        .title("attention weights")
        .to_svg();
    let svg = parse(&svg);

    let cells = cells(&svg);
    assert_eq!(cells.len(), 9);
    // Row-major, top-left first; colours are viridis of the weight.
    let mut sorted = cells.clone();
    sorted.sort_by(|a, b| (a.y, a.x).partial_cmp(&(b.y, b.x)).unwrap());
    for (cell, v) in sorted.iter().zip(w.iter()) {
        assert_eq!(cell.fill, hex(viridis(*v)), "cell of {v}");
    }

    for t in TOKENS {
        let n = svg.texts.iter().filter(|s| *s == t).count();
        assert_eq!(n, 2, "{t} labels a row and a column");
    }
    for v in ["0.70", "0.20", "0.10", "0.25", "0.50", "0.00", "1.00"] {
        assert!(svg.texts.iter().any(|s| s == v), "value {v} is written");
    }
    assert!(svg.texts.iter().any(|s| s == "attention weights"));

    let bar = colour_bar(&svg);
    assert_eq!(bar.len(), 64);
    assert_eq!(
        bar[0].fill,
        hex(viridis(1.0 - 0.5 / 64.0)),
        "high end on top"
    );
    assert_eq!(bar[63].fill, hex(viridis(0.5 / 64.0)));
    for tick in ["0.00", "0.25", "0.50", "0.75", "1.00"] {
        assert!(svg.texts.iter().any(|s| s == tick), "tick {tick}");
    }
}

#[test]
fn value_text_is_white_on_dark_cells_and_black_on_light_cells() {
    let svg = heatmap(&array![[0.0, 1.0]]).colorbar(false).to_svg();
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let fill_of = |value: &str| {
        doc.descendants()
            .find(|n| n.has_tag_name("text") && n.text().map(str::trim) == Some(value))
            .and_then(|n| n.attribute("fill"))
            .unwrap()
            .to_string()
    };
    assert_eq!(fill_of("0.00"), "#FFFFFF");
    assert_eq!(fill_of("1.00"), "#000000");
}

#[test]
fn large_matrices_have_no_values_and_no_colour_bar_when_asked() {
    let w = Array2::from_shape_fn((13, 13), |(i, j)| ((i + j) % 5) as f64 / 4.0);
    let svg = parse(&heatmap(&w).colorbar(false).to_svg());
    let (cells, bar) = cells_and_bar(&svg, false);
    assert_eq!(cells.len(), 169);
    assert!(bar.is_empty() && cells.iter().all(|c| c.w == c.h));
    assert!(
        svg.texts.is_empty(),
        "no values above 12x12: {:?}",
        svg.texts
    );
    assert!(svg.rects.iter().all(|r| r.w != 18.0), "no colour bar");
    assert!(!svg.texts.iter().any(|s| s == "0.50"), "no ticks");

    let forced = parse(&heatmap(&w).values(true).to_svg());
    assert!(forced.texts.iter().any(|s| s == "0.75"));
}

#[test]
fn non_finite_weights_get_their_own_colour_and_text() {
    let w = array![[f64::NAN, f64::INFINITY], [f64::NEG_INFINITY, -0.0001]];
    let svg = parse(&heatmap(&w).to_svg());
    let cells = cells(&svg);
    assert_eq!(cells.len(), 4);
    for t in ["nan", "inf", "-inf", "0.00"] {
        assert!(svg.texts.iter().any(|s| s == t), "{t} is written");
    }
    let fills: Vec<&str> = cells.iter().map(|c| c.fill.as_str()).collect();
    assert!(fills.contains(&"#C8C8C8") && fills.contains(&"#E41A1C"));
    let viridis_like = |f: &str| (0..=255).any(|i| hex(viridis(i as f64 / 255.0)) == f);
    assert!(!viridis_like("#C8C8C8") && !viridis_like("#E41A1C"));
}

#[test]
fn auto_range_spans_the_scores() {
    let scores = array![[-1.5, 0.5], [2.5, 1.0]];
    let svg = parse(&heatmap(&scores).auto_range().to_svg());
    for tick in ["-1.00", "0.00", "1.00", "2.00"] {
        assert!(svg.texts.iter().any(|s| s == tick), "tick {tick}");
    }
    let fills: Vec<String> = cells(&svg).iter().map(|c| c.fill.clone()).collect();
    assert!(fills.contains(&hex(viridis(0.0))) && fills.contains(&hex(viridis(1.0))));
}

#[test]
fn heads_grid_has_one_panel_per_head() {
    let out = two_heads();
    let fig = heads_grid(&out, &TOKENS).title("two heads");
    let svg = parse(&fig.to_svg());
    assert_eq!(cells(&svg).len(), 2 * 9);
    for t in ["head 1", "head 2", "two heads"] {
        assert!(svg.texts.iter().any(|s| s == t), "{t}");
    }
    // Side by side, the panels share the row labels: once at the left, the columns' under each.
    for t in TOKENS {
        assert_eq!(svg.texts.iter().filter(|s| *s == t).count(), 3, "{t}");
    }
    for (k, head) in out.heads.iter().enumerate() {
        let v = format!("{:.2}", head.weights[[0, 0]]);
        assert!(svg.texts.contains(&v), "head {k} value {v}");
    }
    assert_eq!(colour_bar(&svg).len(), 64, "one shared colour bar");
    // Side by side by default, stacked with one column.
    let stacked = fig.clone().columns(1).size().unwrap();
    assert!(stacked.1 > svg.height && stacked.0 < svg.width);
}

#[test]
fn grids_of_1_to_8_heads_are_at_most_4_panels_wide_and_sized_to_fit() {
    // No title, labels or colour bar: margins of 12, gaps of 24, 3x3 panels of 64-pixel cells
    // alone and 48-pixel cells side by side, each grid row under a row of panel titles.
    let size = |n: usize| heads_grid(&heads(n), &[]).colorbar(false).size().unwrap();
    let (w1, h1) = size(1);
    assert_eq!(w1, 24 + 3 * 64);
    let title_h = h1 - 24 - 3 * 64;
    assert!((18..=40).contains(&title_h), "panel title row of {title_h}");
    for n in 2..=8usize {
        let (cols, rows) = (n.min(4) as u32, n.div_ceil(4) as u32);
        let width = 24 + cols * 3 * 48 + (cols - 1) * 24;
        let height = 24 + rows * (title_h + 3 * 48) + (rows - 1) * 24;
        assert_eq!(size(n), (width, height), "{n} heads");
    }
}

#[test]
fn grids_of_1_to_8_heads_draw_every_cell_inside_the_figure_without_overlap() {
    for n in 1..=8usize {
        let fig = heads_grid(&heads(n), &TOKENS).title("heads");
        let svg = parse(&fig.to_svg());
        assert_eq!(fig.size().unwrap(), (svg.width, svg.height), "{n} heads");
        assert_eq!(fig.png_size().unwrap(), (2 * svg.width, 2 * svg.height));
        let (cells, bar) = cells_and_bar(&svg, true);
        assert_eq!((cells.len(), bar.len()), (9 * n, 64), "{n} heads");
        for c in &cells {
            let inside = c.x >= 0.0 && c.y >= 0.0 && c.y + c.h <= svg.height as f64;
            assert!(inside && c.x + c.w < bar[0].x, "{n} heads: {c:?}");
        }
        for (i, a) in cells.iter().enumerate() {
            for b in &cells[i + 1..] {
                let apart =
                    a.x + a.w <= b.x || b.x + b.w <= a.x || a.y + a.h <= b.y || b.y + b.h <= a.y;
                assert!(apart, "{n} heads: {a:?} overlaps {b:?}");
            }
        }
        let distinct = |v: Vec<f64>| {
            v.iter()
                .map(|x| x.to_bits())
                .collect::<std::collections::HashSet<_>>()
                .len()
        };
        assert_eq!(distinct(cells.iter().map(|c| c.x).collect()), 3 * n.min(4));
        assert_eq!(
            distinct(cells.iter().map(|c| c.y).collect()),
            3 * n.div_ceil(4)
        );
        for k in 1..=n {
            let title = format!("head {k}");
            assert_eq!(
                svg.texts.iter().filter(|t| **t == title).count(),
                1,
                "{title}"
            );
        }
    }
}

/// Width and height from the IHDR chunk, and whether the pixels have several colours.
fn read_png(path: &Path) -> (u32, u32, usize) {
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    assert_eq!(&bytes[12..16], b"IHDR");
    let w = u32::from_be_bytes(bytes[16..20].try_into().unwrap());
    let h = u32::from_be_bytes(bytes[20..24].try_into().unwrap());
    let decoder = png::Decoder::new(std::io::Cursor::new(bytes));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let colours: std::collections::HashSet<&[u8]> = buf[..info.buffer_size()].chunks(3).collect();
    (w, h, colours.len())
}

#[test]
fn pngs_have_the_figure_size_and_many_colours() {
    let dir = tempfile::tempdir().unwrap();
    let w = array![[0.7, 0.2, 0.1], [0.25, 0.5, 0.25], [f64::NAN, 0.001, 0.999]];
    let figures = [
        (
            "heatmap.png",
            heatmap(&w).labels(&TOKENS).title("attention weights"),
        ),
        (
            "heads.png",
            heads_grid(&two_heads(), &TOKENS).title("two heads"),
        ),
    ];
    for (name, fig) in figures {
        let path = dir.path().join(name);
        fig.save_png(&path).unwrap();
        let (width, height, colours) = read_png(&path);
        assert_eq!((width, height), fig.png_size().unwrap(), "{name}");
        let (w, h) = fig.size().unwrap();
        assert_eq!((width, height), (2 * w, 2 * h), "{name}");
        assert!(colours > 50, "{name} has {colours} colours");
        let svg_path = dir.path().join(name.replace(".png", ".svg"));
        fig.save_svg(&svg_path).unwrap();
        assert_eq!(std::fs::read_to_string(&svg_path).unwrap(), fig.to_svg());
        // PLOT_TEST_KEEP=folder keeps the pictures, to look at them.
        if let Ok(keep) = std::env::var("PLOT_TEST_KEEP") {
            for p in [&path, &svg_path] {
                std::fs::copy(p, Path::new(&keep).join(p.file_name().unwrap())).unwrap();
            }
        }
    }
    // Only the two PNGs and two SVGs: no temporary files are left behind.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 4);
}

#[test]
fn saving_overwrites_an_existing_file_whole() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.svg");
    std::fs::write(&path, "x".repeat(1_000_000)).unwrap();
    let fig = heatmap(&array![[1.0]]);
    fig.save_svg(&path).unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), fig.to_svg());
}

#[test]
fn unwritable_paths_are_errors_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let fig = heatmap(&array![[0.5, 0.5]]);

    let missing = dir.path().join("no-such-folder").join("w.png");
    let err = fig.save_png(&missing).unwrap_err();
    assert!(matches!(err, PlotError::Write { .. }));
    let msg = err.to_string();
    assert!(
        msg.starts_with(&format!("cannot write {}: ", missing.display()))
            && msg.contains("No such file or directory"),
        "{msg}"
    );

    // A folder where the file should go: the rename fails and the folder stays.
    let folder = dir.path().join("taken.svg");
    std::fs::create_dir(&folder).unwrap();
    let msg = fig.save_svg(&folder).unwrap_err().to_string();
    assert!(
        msg.starts_with(&format!("cannot write {}: ", folder.display())),
        "{msg}"
    );
    assert!(folder.is_dir());
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "no temporary file left"
    );

    let msg = fig.save_svg("/").unwrap_err().to_string();
    assert_eq!(
        msg,
        "cannot write /: names a folder (ends with /); give a file name"
    );
}

#[test]
fn figures_that_cannot_be_drawn_are_errors_and_show_why() {
    let empty = heatmap(&Array2::zeros((0, 3)));
    let err = empty.render_svg().unwrap_err();
    assert_eq!(
        err.to_string(),
        "cannot plot an empty matrix: panel 1 is 0x3"
    );
    assert!(empty.to_png().is_err() && empty.size().is_err());
    let shown = parse(&empty.to_svg());
    assert_eq!(
        shown.texts,
        vec!["plot error: cannot plot an empty matrix: panel 1 is 0x3"]
    );

    let labels = heatmap(&array![[1.0, 0.0]]).col_labels(&["a", "b", "c"]);
    assert_eq!(
        labels.render_svg().unwrap_err().to_string(),
        "3 column labels for a matrix with 2 columns"
    );

    let range = heatmap(&array![[1.0]]).range(1.0, 1.0);
    assert_eq!(
        range.save_png("never-written.png").unwrap_err().to_string(),
        "colour range [1, 1] is not an increasing pair of finite numbers"
    );
    assert!(!Path::new("never-written.png").exists());

    let no_heads = MultiHeadOutput {
        heads: vec![],
        concat: Array2::zeros((0, 0)),
        output: None,
    };
    let msg = heads_grid(&no_heads, &[])
        .render_svg()
        .unwrap_err()
        .to_string();
    assert_eq!(msg, "cannot plot the heads of a layer without heads");
}

#[test]
fn evcxr_display_prints_the_svg_as_an_html_image_between_evcxr_markers() {
    if std::env::var_os("PLOT_TEST_EVCXR_CHILD").is_some() {
        heatmap(&array![[0.25, 0.75]])
            .col_labels(&["a", "b"])
            .evcxr_display();
        return;
    }
    // Run this test alone in a child process and read what it printed.
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "evcxr_display_prints_the_svg_as_an_html_image_between_evcxr_markers",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("PLOT_TEST_EVCXR_CHILD", "1")
        .output()
        .unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    // An <img> whose data: source is the SVG: what JupyterLab keeps in untrusted output.
    let head = "EVCXR_BEGIN_CONTENT text/html\n<img class=\"alab-figure\" alt=\"figure\" \
                src=\"data:image/svg+xml;base64,";
    let start = stdout.find(head).expect(&stdout) + head.len();
    let end = stdout.find("\"/>\nEVCXR_END_CONTENT\n").expect(&stdout);
    use base64::Engine as _;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(&stdout[start..end])
        .unwrap();
    let svg = parse(&String::from_utf8(bytes).unwrap());
    assert_eq!(cells(&svg).len(), 2);
    assert!(svg.texts.iter().any(|s| s == "0.75"));
}

/// The one writer (attention-lab-io): a symlink is written through and the mode is kept.
#[cfg(unix)]
#[test]
fn saving_writes_through_a_symlink_and_keeps_the_mode() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real.svg");
    std::fs::write(&real, "old").unwrap();
    std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o600)).unwrap();
    let link = dir.path().join("link.svg");
    std::os::unix::fs::symlink("real.svg", &link).unwrap();
    let fig = heatmap(&array![[1.0]]);
    fig.save_svg(&link).unwrap();
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(std::fs::read_to_string(&real).unwrap(), fig.to_svg());
    let mode = std::fs::metadata(&real).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
}

/// Twelve heads of 14 tokens, as notebook 008's layer grids.
fn twelve_heads_of_14() -> MultiHeadOutput {
    let x = Array2::from_shape_fn((14, 14), |(i, j)| ((i * 7 + j * 3) % 5) as f64 / 5.0);
    let heads = (0..12)
        .map(|h| {
            let q = Array2::from_shape_fn((14, 14), |(i, j)| ((i + j + h) % 3) as f64 - 1.0);
            Head::new(q, Array2::eye(14), Array2::eye(14)).unwrap()
        })
        .collect();
    MultiHead::new(heads, None)
        .unwrap()
        .forward(&x, &Attend::new())
        .unwrap()
}

const WORDS: [&str; 14] = [
    "[CLS]", "the", "cat", "sat", "on", "the", "mat", "because", "it", "was", "warm", "and",
    "soft", "[SEP]",
];

/// The smallest text of an SVG, in pixels as shown (its font sizes times the shown size over
/// the viewBox).
fn smallest_text_px(svg: &str) -> f64 {
    let doc = roxmltree::Document::parse(svg).unwrap();
    let root = doc.root_element();
    let shown: f64 = root.attribute("width").unwrap().parse().unwrap();
    let view_box = root.attribute("viewBox").unwrap_or_default();
    let drawn: f64 = view_box
        .split(' ')
        .nth(2)
        .and_then(|w| w.parse().ok())
        .unwrap();
    doc.descendants()
        .filter(|n| n.has_tag_name("text"))
        .map(|n| n.attribute("font-size").unwrap().parse::<f64>().unwrap() * shown / drawn)
        .fold(f64::INFINITY, f64::min)
}

#[test]
fn a_layers_twelve_heads_fit_the_output_area_with_readable_labels_at_each_scale() {
    let out = twelve_heads_of_14();
    for scale in [1.0, 1.5] {
        let fig = heads_grid(&out, &WORDS)
            .columns(6)
            .title("layer 0")
            .scale(scale);
        let svg = fig.to_svg();
        let parsed = parse(&svg);
        let shown = parsed.width as f64;
        assert!(shown <= 900.0, "scale {scale}: {shown} pixels wide");
        // 12 px at 100%, 18 at 150%: JupyterLab shows the picture as it is, no narrower.
        let least = smallest_text_px(&svg);
        assert!(least >= 12.0 * scale, "scale {scale}: text of {least} px");
        assert!(cells(&parsed).len() >= 12 * 14 * 14);
        let (w, h) = fig.size().unwrap();
        assert_eq!(
            fig.png_size().unwrap(),
            ((2.0 * scale) as u32 * w, (2.0 * scale) as u32 * h)
        );
    }
    // Wide enough, six panels a row as asked.
    let wide = heads_grid(&out, &WORDS).columns(6).max_width(3000);
    let parsed = parse(&wide.to_svg());
    let xs: std::collections::BTreeSet<u64> =
        cells(&parsed).iter().map(|c| c.x.to_bits()).collect();
    assert_eq!(xs.len(), 6 * 14);
}

#[test]
fn a_large_heatmap_shrinks_its_cells_to_fit_at_a_projectors_size() {
    let w = Array2::from_elem((14, 14), 1.0 / 14.0);
    let fig = heatmap(&w)
        .labels(&WORDS)
        .title("layer 0, head 3")
        .scale(1.5);
    let svg = fig.to_svg();
    assert!(parse(&svg).width as f64 <= 900.0);
    assert!(smallest_text_px(&svg) >= 18.0);
    let (w1, _) = heatmap(&w).labels(&WORDS).size().unwrap();
    assert!(
        w1 as f64 * 1.5 > 900.0,
        "the default is wider than fits at 150%"
    );
}
