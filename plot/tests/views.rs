//! The interactive views, read back as XML: one line a pair and head with the weight as its
//! opacity, masked pairs absent, tokens as text (never markup), selections in the exported
//! files, PNGs in the same colours, and the errors.
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is the test failing, as a failed assert is"
)]

use attention_lab::prelude::*;
use attention_lab_plot::*;

/// A line of a head view: head, query, key, opacity, the weight it carries, where it starts
/// and ends vertically, hidden.
#[derive(Debug, Clone, PartialEq)]
struct Line {
    h: usize,
    q: usize,
    k: usize,
    opacity: f64,
    weight: f64,
    ys: (f64, f64),
    colour: String,
    hidden: bool,
}

fn lines(svg: &str) -> Vec<Line> {
    let doc = roxmltree::Document::parse(svg).expect("the SVG is well-formed XML");
    let data = |n: &roxmltree::Node, a: &str| -> usize { n.attribute(a).unwrap().parse().unwrap() };
    let number = |n: &roxmltree::Node, a: &str| -> f64 { n.attribute(a).unwrap().parse().unwrap() };
    doc.descendants()
        .filter(|n| n.has_tag_name("line") && n.attribute("data-h").is_some())
        .map(|n| Line {
            h: data(&n, "data-h"),
            q: data(&n, "data-q"),
            k: data(&n, "data-k"),
            opacity: number(&n, "stroke-opacity"),
            weight: number(&n, "data-w"),
            ys: (number(&n, "y1"), number(&n, "y2")),
            colour: n.attribute("stroke").unwrap().to_string(),
            hidden: n.attribute("display") == Some("none"),
        })
        .collect()
}

/// The texts of elements with this class, in order.
fn texts(svg: &str, class: &str) -> Vec<String> {
    let doc = roxmltree::Document::parse(svg).unwrap();
    doc.descendants()
        .filter(|n| n.has_tag_name("text") && n.attribute("class") == Some(class))
        .map(|n| {
            n.children()
                .filter(|c| c.is_text())
                .map(|c| c.text().unwrap())
                .collect()
        })
        .collect()
}

/// The SVG of a view's HTML: a style, an `<img>` whose `data:` source is the SVG, a script.
fn svg_of(html: &str) -> String {
    use base64::Engine as _;
    let src = "src=\"data:image/svg+xml;base64,";
    let from = html.find(src).expect("the HTML holds the picture") + src.len();
    let to = from + html[from..].find('"').unwrap();
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(&html[from..to])
        .unwrap();
    String::from_utf8(bytes).unwrap()
}

/// Notebook 000's layer: two heads over "Thinking Machines".
fn layer_000() -> MultiHeadOutput {
    let x = array![[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]];
    let w = |a: f64| Array2::from_shape_fn((4, 3), |(i, j)| a + 0.3 * i as f64 + 0.1 * j as f64);
    let layer = MultiHead::new(
        vec![
            Head::new(w(0.1), w(0.3), w(0.7)).unwrap(),
            Head::new(w(0.2), w(0.4), w(0.9)).unwrap(),
        ],
        None,
    )
    .unwrap();
    layer.forward(&x, &Attend::new()).unwrap()
}

/// Three heads over five tokens of random weights, softer than 000's.
fn layer_random(n: usize, heads: usize) -> MultiHeadOutput {
    let mut rng = np::RandomState::new(7);
    let x: Array2<f64> = rng.randn((n, 6)).unwrap() * 0.5;
    let wq: Array2<f64> = rng.randn((6, 6)).unwrap();
    let wk: Array2<f64> = rng.randn((6, 6)).unwrap();
    let wv: Array2<f64> = rng.randn((6, 6)).unwrap();
    MultiHead::split(&wq, &wk, &wv, heads, None)
        .unwrap()
        .forward(&x, &Attend::new())
        .unwrap()
}

#[test]
fn one_line_a_pair_and_head_carrying_its_weight_its_opacity_from_a_floor() {
    let out = layer_random(5, 3);
    let tokens = ["x1", "x2", "x3", "x4", "x5"];
    let html = head_view(&out, &tokens).to_html();
    let got = lines(&svg_of(&html));
    assert_eq!(got.len(), 3 * 5 * 5);
    for l in &got {
        let w = out.heads[l.h].weights[[l.q, l.k]];
        assert!(
            (l.weight - w).abs() <= 5e-5 || (l.weight / w - 1.0).abs() < 5e-3,
            "{l:?} against {w}"
        );
        // Three heads shown: each fainter than alone, never under the floor.
        assert!(
            (l.opacity - line_opacity(w, 3)).abs() <= 5e-4,
            "{l:?} against {w}"
        );
        assert!(l.opacity >= 0.08 / 3f64.sqrt() - 5e-4 && l.opacity < line_opacity(w, 1));
        // Under the least weight (0.001 by default) a line is there for its box, never shown.
        assert_eq!(l.hidden, w < 1e-3, "{l:?}");
    }
    // Every (head, query, key) once.
    let mut keys: Vec<_> = got.iter().map(|l| (l.h, l.q, l.k)).collect();
    keys.dedup();
    assert_eq!(keys.len(), 75);
    assert_eq!(texts(&svg_of(&html), "alab-q"), tokens);
    assert_eq!(texts(&svg_of(&html), "alab-k"), tokens);
    assert_eq!(
        texts(&svg_of(&html), "alab-head"),
        ["head 1", "head 2", "head 3"]
    );
}

/// An encoder layer's worth of heads: 12 heads over 13 tokens, head 3 diffuse (every weight
/// 1/13) and head 4 nearly all on one key (the others 1e-62).
fn twelve_heads(n: usize) -> Array3<f64> {
    Array3::from_shape_fn((12, n, n), |(h, q, k)| match h {
        3 => 1.0 / n as f64,
        4 => {
            if k == 0 {
                1.0 - 1e-62 * (n - 1) as f64
            } else {
                1e-62
            }
        }
        _ => {
            let raw =
                |k: usize| ((h + 1) as f64 * 0.7 * ((q as f64) - (k as f64)).abs().sqrt()).exp();
            let sum: f64 = (0..n).map(|j| 1.0 / raw(j)).sum();
            1.0 / raw(k) / sum
        }
    })
}

#[test]
fn no_head_hides_another_and_no_two_share_a_colour() {
    let n = 13;
    let weights = twelve_heads(n);
    let tokens: Vec<String> = (0..n).map(|i| format!("t{i}")).collect();
    // By default only the weights of 0.001 and more draw a line: not head 4's 1e-62.
    let default = lines(&head_view_weights(&weights, &tokens).to_svg().unwrap());
    assert_eq!(
        default.len(),
        weights.iter().filter(|&&w| w >= 1e-3).count()
    );
    assert!(default.iter().all(|l| weights[[l.h, l.q, l.k]] >= 1e-3));
    assert!(!default.iter().any(|l| l.h == 4 && l.k != 0));
    let all_weights = head_view_weights(&weights, &tokens).min_weight(0.0);
    let got = lines(&all_weights.to_svg().unwrap());
    // With min_weight(0), every pair of every head is drawn, the 1e-62 ones included.
    assert_eq!(got.len(), 12 * n * n);
    assert!(got.iter().all(|l| l.opacity >= 0.08 / 12f64.sqrt() - 5e-4));
    // One colour a head, twelve colours.
    let mut colours = std::collections::BTreeMap::new();
    for l in &got {
        assert_eq!(colours.entry(l.h).or_insert(l.colour.clone()), &l.colour);
    }
    let distinct: std::collections::BTreeSet<_> = colours.values().collect();
    assert_eq!(distinct.len(), 12);
    // Lines of one pair never lie on each other: each head's own ends.
    let mut ends = std::collections::BTreeSet::new();
    for l in &got {
        let key = (l.q, l.k, (l.ys.0 * 100.0) as i64, (l.ys.1 * 100.0) as i64);
        assert!(ends.insert(key), "{l:?} lies on another head's line");
    }
}

#[test]
fn diffuse_and_tiny_weights_keep_their_lines_in_every_layer_the_model_view_carries() {
    let n = 13;
    let weights = twelve_heads(n);
    let attentions = Array4::from_shape_fn((2, 12, n, n), |(_, h, q, k)| weights[[h, q, k]]);
    let tokens: Vec<String> = (0..n).map(|i| format!("t{i}")).collect();
    let svg = svg_of(&model_view(&attentions, &tokens).to_html());
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let carried = doc.root_element().attribute("data-weights").unwrap();
    use base64::Engine as _;
    for layer in carried.split(',') {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(layer)
            .unwrap();
        assert_eq!(bytes.len(), 12 * n * n * 3);
        // No weight above 0 rounds to no line: every strength byte is at least 1.
        assert!(bytes.chunks(3).all(|c| c[0] >= 1), "a line was erased");
        // The weight itself, to 0.3%, 1e-62 included.
        let w = |h: usize, q: usize, k: usize| {
            let c = &bytes[3 * ((h * n + q) * n + k)..];
            2f64.powf((u16::from_be_bytes([c[1], c[2]]) as f64 - 65535.0) / 256.0)
        };
        assert!((w(4, 2, 5) / 1e-62 - 1.0).abs() < 3e-3, "{}", w(4, 2, 5));
        assert!((w(3, 0, 0) * n as f64 - 1.0).abs() < 3e-3);
    }
}

#[test]
fn at_the_projector_size_labels_are_at_least_16_pixels() {
    let weights = twelve_heads(5);
    let tokens = ["a", "b", "c", "d", "e"];
    let svg = head_view_weights(&weights, &tokens)
        .scale(1.5)
        .to_svg()
        .unwrap();
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let root = doc.root_element();
    let number = |n: &roxmltree::Node, a: &str| -> f64 { n.attribute(a).unwrap().parse().unwrap() };
    let view_w: f64 = root
        .attribute("viewBox")
        .unwrap()
        .split(' ')
        .nth(2)
        .unwrap()
        .parse()
        .unwrap();
    let zoom = number(&root, "width") / view_w;
    assert!((zoom - 1.5).abs() < 1e-2);
    for t in doc.descendants().filter(|n| n.has_tag_name("text")) {
        let px = number(&t, "font-size") * zoom;
        assert!(px >= 16.0, "{:?} is {px} px", t.text());
    }
}

#[test]
fn twelve_heads_and_the_open_layer_fit_a_1366_by_768_screen() {
    // JupyterLab at 1366 x 768 with its file browser open leaves 914 x 647 pixels to a cell's
    // output (measured by e2e/lab.test.mjs).
    for n in [13, 20] {
        let weights = twelve_heads(n);
        let attentions = Array4::from_shape_fn((6, 12, n, n), |(_, h, q, k)| weights[[h, q, k]]);
        let tokens: Vec<String> = (0..n).map(|i| format!("token{i}")).collect();
        let svg = svg_of(&model_view(&attentions, &tokens).to_html());
        let doc = roxmltree::Document::parse(&svg).unwrap();
        let size = |a: &str| -> f64 { doc.root_element().attribute(a).unwrap().parse().unwrap() };
        assert!(
            size("width") <= 940.0 && size("height") <= 600.0,
            "{n} tokens: {} x {}",
            size("width"),
            size("height")
        );
    }
}

#[test]
fn tokens_are_shown_without_their_tokenizers_marks() {
    let weights = Array3::from_elem((1, 4, 4), 0.25);
    let svg = head_view_weights(&weights, &["[CLS]", "Ġthe", "▁cat", "##s"])
        .to_svg()
        .unwrap();
    assert_eq!(texts(&svg, "alab-q"), ["[CLS]", "the", "cat", "·s"]);
    for (raw, shown) in [
        ("Ġ", "Ġ"),
        ("##", "##"),
        ("hello</w>", "hello"),
        ("ĠĊ", "↵"),
        ("naïve", "naïve"),
    ] {
        assert_eq!(pretty_token(raw), shown);
    }
}

#[test]
fn every_layer_sentence_pairs_and_the_tiny_weights_neuron_bar() {
    let attentions =
        Array4::from_shape_fn(
            (3, 2, 4, 4),
            |(l, h, q, k)| if (l + h + q) % 4 == k { 1.0 } else { 0.0 },
        );
    let tokens = ["a1", "a2", "b1", "b2"];
    let svg = svg_of(
        &head_view_layers(&attentions, &tokens)
            .layer(2)
            .sentence_b(2)
            .to_html(),
    );
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let root = doc.root_element();
    assert_eq!(
        root.attribute("data-weights").unwrap().split(',').count(),
        3
    );
    assert_eq!(root.attribute("data-layer"), Some("2"));
    assert_eq!(root.attribute("data-b"), Some("2"));
    // The file draws layer 2.
    let file = lines(
        &head_view_layers(&attentions, &tokens)
            .layer(2)
            .to_svg()
            .unwrap(),
    );
    assert!(file.iter().all(|l| (2 + l.h + l.q) % 4 == l.k));
    // A weight of 1e-62 is written as such, and gets no bar.
    let x = array![[1.0, 0.0], [0.0, 1.0]];
    let wq = array![[14.0, 0.0], [0.0, 14.0]];
    let out = MultiHead::split(&wq, &wq, &Array2::eye(2), 1, None)
        .unwrap()
        .forward(&x, &Attend::new())
        .unwrap();
    let tiny = out.heads[0].weights[[0, 1]];
    assert!(tiny > 0.0 && tiny < 1e-30, "{tiny}");
    let svg = neuron_view(&out, 0, &["a", "b"]).to_svg().unwrap();
    assert!(svg.contains(&format!(">{tiny:.2e}<")), "{svg}");
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let bars = doc
        .descendants()
        .filter(|n| n.has_tag_name("rect") && n.attribute("fill") == Some("#0072b2"))
        .count();
    assert_eq!(bars, 1, "only the weight near 1 has a bar");
}

#[test]
fn the_same_input_gives_the_same_bytes_and_views_have_no_ids() {
    let out = layer_000();
    let a = head_view(&out, &["Thinking", "Machines"]).to_html();
    let b = head_view(&out, &["Thinking", "Machines"]).to_html();
    assert_eq!(a, b);
    assert!(!a.contains(" id="), "views find themselves without ids");
    assert!(a.len() < 24_000, "a few KB: {}", a.len());
    assert!(
        !a.contains("http") || !a.contains("src=\"http"),
        "nothing from the network"
    );
}

#[test]
fn token_text_is_text_never_markup() {
    let weights = Array3::from_elem((1, 3, 3), 1.0 / 3.0);
    let tokens = [
        "<script>alert(1)</script>",
        "\"quoted\" & 'single'",
        "naïve 東京 🙂",
    ];
    let view = head_view_weights(&weights, &tokens);
    for svg in [view.to_svg().unwrap(), svg_of(&view.to_html())] {
        assert_eq!(texts(&svg, "alab-q"), tokens);
        assert_eq!(texts(&svg, "alab-k"), tokens);
        let doc = roxmltree::Document::parse(&svg).unwrap();
        assert!(!doc.descendants().any(|n| n.has_tag_name("script")));
    }
    // The one script is the view's own, after the picture; the tokens are nowhere in the
    // HTML itself (they travel inside the picture's data: URI).
    let html = view.to_html();
    assert_eq!(html.matches("<script>").count(), 1);
    assert!(html.find("<script>").unwrap() > html.find("alab-picture").unwrap());
    assert!(!html.contains("alert(1)"));
}

#[test]
fn masked_pairs_draw_no_line_and_a_fully_masked_query_is_struck_through() {
    let out = layer_random(4, 2);
    let mut rng = np::RandomState::new(3);
    let x: Array2<f64> = rng.randn((4, 6)).unwrap();
    let w: Array2<f64> = rng.randn((6, 6)).unwrap();
    let layer = MultiHead::split(&w, &w, &w, 2, None).unwrap();
    let causal = layer
        .forward(&x, &Attend::new().mask(&Mask::causal(4)))
        .unwrap();
    let got = lines(
        &head_view(&causal, &["a", "b", "c", "d"])
            .min_weight(0.0)
            .to_svg()
            .unwrap(),
    );
    assert_eq!(got.len(), 2 * (1 + 2 + 3 + 4));
    assert!(got.iter().all(|l| l.k <= l.q));
    // Query 2 may see nothing.
    let blocked = Array2::from_shape_fn((4, 4), |(i, j)| i == 2 || j == 3);
    let masked = layer
        .forward(&x, &Attend::new().mask(&Mask::from_blocked(&blocked)))
        .unwrap();
    let svg = head_view(&masked, &["a", "b", "c", "d"])
        .min_weight(0.0)
        .to_svg()
        .unwrap();
    let got = lines(&svg);
    assert!(got.iter().all(|l| l.q != 2 && l.k != 3));
    assert_eq!(got.len(), 2 * 3 * 3);
    assert!(svg.contains("no key has a weight above 0 (masked, or not a number)"));
    let _ = out;
}

#[test]
fn cross_attention_has_its_own_key_tokens() {
    let weights = Array3::from_shape_fn(
        (2, 2, 3),
        |(h, q, k)| if (q + k + h) % 3 == 0 { 1.0 } else { 0.0 },
    );
    let svg = head_view_weights(&weights, &["dec 1", "dec 2"])
        .keys(&["enc 1", "enc 2", "enc 3"])
        .to_svg()
        .unwrap();
    assert_eq!(texts(&svg, "alab-k"), ["enc 1", "enc 2", "enc 3"]);
    assert_eq!(lines(&svg).len(), 4);
    let err = head_view_weights(&weights, &["dec 1", "dec 2"])
        .to_svg()
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "expected 3 key tokens (one a column of the weights), got 2"
    );
}

#[test]
fn the_export_shows_the_selection_and_the_notebook_hides_the_rest() {
    let out = layer_random(5, 3);
    let tokens = ["x1", "x2", "x3", "x4", "x5"];
    let view = head_view(&out, &tokens).heads(&[2]).query(1);
    let file = lines(&view.to_svg().unwrap());
    assert_eq!(file.len(), 5);
    assert!(file.iter().all(|l| l.h == 2 && l.q == 1));
    let html = view.to_html();
    let page = lines(&svg_of(&html));
    assert_eq!(page.len(), 75);
    let shown: Vec<_> = page.iter().filter(|l| !l.hidden).cloned().collect();
    assert_eq!(shown, file);
    // Only heads[2], named "head 3" as in heads_grid, is in the file's legend.
    assert_eq!(texts(&view.to_svg().unwrap(), "alab-head"), ["head 3"]);
}

#[test]
fn long_inputs_keep_each_querys_largest_weights() {
    let n = 600;
    let out = layer_random(n, 3);
    let tokens: Vec<String> = (0..n).map(|i| format!("t{i}")).collect();
    let svg = head_view(&out, &tokens).to_svg().unwrap();
    let got = lines(&svg);
    let k = 12_000 / (n * 3);
    assert!(
        got.len() <= 12_000 && got.len() >= n * 3 * k - 10,
        "{}",
        got.len()
    );
    assert!(svg.contains(&format!("each query's {k} largest weights a head")));
    // The kept lines are the row's largest.
    for l in got.iter().take(50) {
        let row = out.heads[l.h].weights.row(l.q);
        let bigger = row.iter().filter(|&&w| w > row[l.k]).count();
        assert!(bigger < k, "{l:?}");
    }
    let two = lines(&head_view(&out, &tokens).top_k(2).to_svg().unwrap());
    assert_eq!(two.len(), n * 3 * 2);
}

#[test]
fn bad_selections_and_shapes_are_errors_that_say_what() {
    let weights = Array3::from_elem((2, 2, 2), 0.5);
    let msg = |v: HeadView| v.to_svg().unwrap_err().to_string();
    assert_eq!(
        msg(head_view_weights(&weights, &["a", "b"]).heads(&[2])),
        "there is no head 2: they are 0 to 1"
    );
    assert_eq!(
        msg(head_view_weights(&weights, &["a", "b"]).query(5)),
        "there is no query token 5: they are 0 to 1"
    );
    assert_eq!(
        msg(head_view_weights(&weights, &["a", "b"]).top_k(0)),
        "top_k must be at least 1"
    );
    assert_eq!(
        msg(head_view_weights(&weights, &["a"])),
        "expected 2 query tokens (one a row of the weights), got 1"
    );
    assert_eq!(
        msg(head_view_weights(&Array3::zeros((0, 2, 2)), &["a", "b"])),
        "cannot plot the heads of a layer without heads"
    );
    assert_eq!(
        msg(head_view_weights(&Array3::zeros((1, 0, 0)), &[] as &[&str])),
        "cannot draw attention weights of shape 0x0"
    );
    // The notebook shows the message instead of a view.
    let html = head_view_weights(&weights, &["a"]).to_html();
    assert!(
        svg_of(&html).contains("plot error: expected 2 query tokens"),
        "{html}"
    );
}

#[test]
fn pngs_are_the_svgs_picture_twice_as_large_in_the_same_colours() {
    let out = layer_000();
    let view = head_view(&out, &["Thinking", "Machines"]);
    let svg = view.to_svg().unwrap();
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let width: u32 = doc
        .root_element()
        .attribute("width")
        .unwrap()
        .parse()
        .unwrap();
    let height: u32 = doc
        .root_element()
        .attribute("height")
        .unwrap()
        .parse()
        .unwrap();
    let png = view.to_png().unwrap();
    let decoder = png::Decoder::new(std::io::Cursor::new(png));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!((info.width, info.height), (2 * width, 2 * height));
    // The legend's swatches are there in the heads' colours (Okabe-Ito blue and orange).
    let pixels: Vec<&[u8]> = buf[..info.buffer_size()].chunks(3).collect();
    for colour in [[0u8, 114, 178], [230, 159, 0]] {
        assert!(pixels.iter().any(|p| *p == colour), "{colour:?}");
    }
}

#[test]
fn the_model_view_has_a_panel_a_head_and_layer_and_opens_one() {
    let attentions =
        Array4::from_shape_fn(
            (2, 3, 4, 4),
            |(l, h, q, k)| if (l + h + q) % 4 == k { 1.0 } else { 0.0 },
        );
    let tokens = ["a", "b", "c", "d"];
    let view = model_view(&attentions, &tokens).select(1, 2);
    let html = view.to_html();
    let svg = &svg_of(&html);
    let doc = roxmltree::Document::parse(svg).unwrap();
    let panels: Vec<(usize, usize)> = doc
        .descendants()
        .filter(|n| n.has_tag_name("image"))
        .map(|n| {
            (
                n.attribute("data-l").unwrap().parse().unwrap(),
                n.attribute("data-h").unwrap().parse().unwrap(),
            )
        })
        .collect();
    assert_eq!(panels.len(), 6);
    assert_eq!(panels[5], (1, 2));
    // The head view below draws layer 1, head 2: one line a query.
    let got = lines(svg);
    assert_eq!(got.len(), 4);
    for l in &got {
        assert_eq!((l.h, (1 + 2 + l.q) % 4), (2, l.k));
    }
    assert!(svg.contains(">layer 1, head 3<"));
    // The script's data: per layer heads x tokens x tokens bytes.
    let weights = doc.root_element().attribute("data-weights").unwrap();
    assert_eq!(weights.split(',').count(), 2);
    let err = model_view(&attentions, &tokens)
        .select(0, 3)
        .to_svg()
        .unwrap_err();
    assert_eq!(err.to_string(), "there is no head 3: they are 0 to 2");
}

#[test]
fn the_neuron_view_writes_the_lessons_steps() {
    let out = layer_random(3, 2);
    let head = &out.heads[1];
    let svg = neuron_view(&out, 1, &["a", "b", "c"])
        .query(2)
        .to_svg()
        .unwrap();
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let all: Vec<String> = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .map(|n| {
            n.children()
                .filter(|c| c.is_text())
                .map(|c| c.text().unwrap())
                .collect()
        })
        .collect();
    for j in 0..3 {
        let dot = head.q.row(2).dot(&head.k.row(j));
        let scaled = dot / (head.k.ncols() as f64).sqrt();
        assert!((scaled - head.scores[[2, j]]).abs() < 1e-12);
        for v in [dot, scaled, head.weights[[2, j]]] {
            assert!(all.contains(&format!("{v:.4}")), "{v:.4} in {all:?}");
        }
    }
    // z's cells carry the head's output row as tips.
    for (d, z) in head.z.row(2).iter().enumerate() {
        assert!(
            svg.contains(&format!("<title>z[{d}] = {z:.4}</title>")),
            "z[{d}]"
        );
    }
    // The notebook holds every query of every head, the others hidden.
    let html = neuron_view(&out, 1, &["a", "b", "c"]).query(2).to_html();
    let svg = svg_of(&html);
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let groups: Vec<(&str, bool)> = doc
        .descendants()
        .filter(|n| n.attribute("class") == Some("alab-neuron-q"))
        .map(|n| {
            (
                n.attribute("data-h").unwrap(),
                n.attribute("display") == Some("none"),
            )
        })
        .collect();
    assert_eq!(
        groups,
        [
            ("0", true),
            ("0", true),
            ("0", true),
            ("1", true),
            ("1", true),
            ("1", false)
        ]
    );
}

#[test]
fn views_are_written_atomically_and_errors_name_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = layer_000();
    let view = head_view(&out, &["Thinking", "Machines"]);
    let svg = dir.path().join("heads.svg");
    let png = dir.path().join("heads.png");
    view.save_svg(&svg).unwrap();
    view.save_png(&png).unwrap();
    assert_eq!(
        std::fs::read_to_string(&svg).unwrap(),
        view.to_svg().unwrap()
    );
    assert_eq!(std::fs::read(&png).unwrap(), view.to_png().unwrap());
    let err = view
        .save_svg(dir.path().join("no/such/heads.svg"))
        .unwrap_err();
    assert!(err.to_string().starts_with(&format!(
        "cannot write {}",
        dir.path().join("no/such/heads.svg").display()
    )));
}

#[test]
fn a_very_long_input_draws_as_svg_and_refuses_a_png_that_would_exhaust_memory() {
    let n = 3000;
    let weights = Array3::from_shape_fn(
        (1, n, n),
        |(_, q, k)| if k <= q { 1.0 / (q + 1) as f64 } else { 0.0 },
    );
    let tokens: Vec<String> = (0..n).map(|i| format!("t{i}")).collect();
    let view = head_view_weights(&weights, &tokens);
    let svg = view.to_svg().unwrap();
    assert!(lines(&svg).len() <= 12_000);
    let err = view.to_png().unwrap_err();
    assert!(
        err.to_string()
            .contains("is more than 50 million pixels: lower png_scale, or draw fewer tokens"),
        "{err}"
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("long.png");
    assert!(view.save_png(&path).is_err());
    assert!(!path.exists(), "nothing is written");
}

#[test]
fn the_model_view_is_for_self_attention_and_carries_weights_only_when_small() {
    let cross = Array4::from_elem((1, 1, 2, 3), 1.0 / 3.0);
    let err = model_view(&cross, &["a", "b"]).to_svg().unwrap_err();
    assert!(err.to_string().starts_with("the model view draws self-attention (as many keys as queries), but the weights have 2 queries and 3 keys"), "{err}");
    let carried = |n: usize| {
        let attentions = Array4::from_elem((2, 2, n, n), 1.0 / n as f64);
        let tokens: Vec<String> = (0..n).map(|i| format!("t{i}")).collect();
        let html = model_view(&attentions, &tokens).to_html();
        let svg = svg_of(&html);
        let doc = roxmltree::Document::parse(&svg).unwrap();
        doc.root_element()
            .attribute("data-weights")
            .map(|w| w.len())
    };
    // 2 layers of 2 heads x 4 x 4 weights, 3 bytes each, in base64, a comma between.
    assert_eq!(carried(4), Some(2 * (2 * 4 * 4 * 3 * 4 / 3) + 1));
    // 2 x 2 x 600 x 600 bytes is past 1 MiB: the grid and the picked panel only.
    assert_eq!(carried(600), None);
}

#[test]
fn tokens_with_characters_xml_forbids_keep_the_svg_valid() {
    let weights = Array3::from_elem((1, 2, 2), 0.5);
    let svg = head_view_weights(&weights, &["a\u{0}b", "\u{1b}[31m"])
        .to_svg()
        .unwrap();
    assert_eq!(texts(&svg, "alab-q"), ["a\u{fffd}b", "\u{fffd}[31m"]);
}

#[test]
fn the_neuron_view_carries_every_layer_and_head_for_its_menus_when_small() {
    let first = layer_random(3, 2);
    let second = layer_random(3, 2);
    let tokens = ["a", "b", "c"];
    let html = neuron_view_layers([&first, &second], &tokens)
        .select(1, 0)
        .query(2)
        .to_html();
    let svg = svg_of(&html);
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let groups: Vec<(String, bool)> = doc
        .descendants()
        .filter(|n| n.attribute("class") == Some("alab-neuron-q"))
        .map(|n| {
            let d = |a: &str| n.attribute(a).unwrap().to_string();
            (
                format!("{} {} {}", d("data-l"), d("data-h"), d("data-q")),
                n.attribute("display") == Some("none"),
            )
        })
        .collect();
    assert_eq!(groups.len(), 2 * 2 * 3);
    let shown: Vec<&str> = groups
        .iter()
        .filter(|g| !g.1)
        .map(|g| g.0.as_str())
        .collect();
    assert_eq!(shown, ["1 0 2"]);
    // Each head's bars in its own colour: head 2 of layer 0 is orange.
    let bar_fill = format!(
        "#{:02x}{:02x}{:02x}",
        head_colour(1).0,
        head_colour(1).1,
        head_colour(1).2
    );
    assert!(svg.contains(&bar_fill));
    // The file holds the picked head's picked query only.
    let file = neuron_view_layers([&first, &second], &tokens)
        .select(1, 1)
        .to_svg()
        .unwrap();
    assert_eq!(file.matches("class=\"alab-neuron-q\"").count(), 1);
    assert!(file.contains("data-l=\"1\" data-h=\"1\" data-q=\"0\""));
}
