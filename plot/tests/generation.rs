//! The views of a model writing, read back: the next-token view's bars are the library's
//! sampling softmax, and the numbers its script carries give that softmax exactly at every
//! slider setting; the generation view carries every weight within its documented rounding,
//! wraps its text to its width and stays under a megabyte for the lesson's case; bad input is
//! a typed error; nothing comes from the network.
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is the test failing, as a failed assert is"
)]

use attention_lab::prelude::*;
use attention_lab_plot::*;

/// A small deterministic generator (xorshift64*), and normal draws from it.
struct Rng(u64);

impl Rng {
    fn uniform(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        ((self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    fn normal(&mut self) -> f64 {
        (-2.0 * self.uniform().ln()).sqrt() * (std::f64::consts::TAU * self.uniform()).cos()
    }
}

/// A language model's logits over SmolLM2's 49,152 tokens: mostly noise, a few strong
/// candidates, a tie among them, a masked token, each an f32 as a model computes it.
fn lm_logits(seed: u64) -> Vec<f64> {
    let mut rng = Rng(seed);
    let mut logits: Vec<f64> = (0..49_152)
        .map(|_| (2.5 * rng.normal()) as f32 as f64)
        .collect();
    for (id, l) in [
        (17, 14.25),
        (30_001, 13.5),
        (4, 13.0),
        (900, 12.0),
        (901, 12.0),
        (12, 11.0),
    ] {
        logits[id] = l;
    }
    logits[77] = f64::NEG_INFINITY;
    logits
}

fn table(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| match i % 3 {
            0 => format!("Ġw{i}"),
            1 => format!("p{i}"),
            _ => format!("Ċx{i}"),
        })
        .collect()
}

/// The library's sampling softmax (decoder/generate.rs, draw), written again here: the
/// largest logit out, divided by the temperature, the k largest kept (the first in id order
/// on a tie), normalised; for each top-k of `ks` (one sort a temperature).
fn softmaxes(logits: &[f64], t: f64, ks: &[Option<usize>]) -> Vec<Vec<f64>> {
    let top = logits.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let scaled: Vec<f64> = logits.iter().map(|l| (l - top) / t).collect();
    let mut order: Vec<usize> = (0..scaled.len()).collect();
    order.sort_by(|&a, &b| scaled[b].total_cmp(&scaled[a]).then(a.cmp(&b)));
    ks.iter()
        .map(|&k| {
            let mut s = scaled.clone();
            if let Some(k) = k.filter(|&k| k < s.len()) {
                for &i in &order[k..] {
                    s[i] = f64::NEG_INFINITY;
                }
            }
            let max = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = s.iter().map(|v| (v - max).exp()).collect();
            let total: f64 = e.iter().sum();
            e.iter().map(|v| v / total).collect()
        })
        .collect()
}

fn softmax(logits: &[f64], t: f64, k: Option<usize>) -> Vec<f64> {
    softmaxes(logits, t, &[k]).remove(0)
}

/// The `n` most probable ids, the lower id first on a tie.
fn most_probable(p: &[f64], n: usize) -> Vec<usize> {
    let by = |a: &usize, b: &usize| p[*b].total_cmp(&p[*a]).then(a.cmp(b));
    let mut ids: Vec<usize> = (0..p.len()).collect();
    ids.select_nth_unstable_by(n, by);
    ids.truncate(n);
    ids.sort_by(by);
    ids
}

/// The attribute `name` of the view's `<div>` (where the script's numbers are).
fn div_data(html: &str, name: &str) -> Option<String> {
    let tag = &html[..html.find('>').unwrap()];
    let key = format!(" data-{name}=\"");
    let from = tag.find(&key)? + key.len();
    Some(tag[from..from + tag[from..].find('"').unwrap()].to_string())
}

fn numbers(s: &str) -> Vec<f64> {
    if s.is_empty() {
        return vec![];
    }
    s.split(',')
        .map(|v| {
            if v == "-Infinity" {
                f64::NEG_INFINITY
            } else {
                v.parse().unwrap()
            }
        })
        .collect()
}

fn unbase64(s: &str) -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.decode(s).unwrap()
}

/// The SVG of a view's HTML: the `<img>`'s `data:` source.
fn svg_of(html: &str) -> String {
    let src = "src=\"data:image/svg+xml;base64,";
    let from = html.find(src).expect("the HTML holds the picture") + src.len();
    String::from_utf8(unbase64(
        &html[from..from + html[from..].find('"').unwrap()],
    ))
    .unwrap()
}

/// What the next-token script computes from the numbers it carries (generation.js,
/// nextToken's draw), written again in Rust: the shown rows' ids and probabilities.
fn script_rows(html: &str, t: f64, k: Option<usize>, rows: usize) -> Vec<(usize, f64)> {
    let top = numbers(&div_data(html, "top").unwrap())[0];
    let logits = numbers(&div_data(html, "logits").unwrap());
    let ids: Vec<usize> = numbers(&div_data(html, "ids").unwrap())
        .iter()
        .map(|&i| i as usize)
        .collect();
    let temps = numbers(&div_data(html, "temps").unwrap());
    let tails = numbers(&div_data(html, "tails").unwrap());
    let vocab: usize = div_data(html, "vocab").unwrap().parse().unwrap();
    let s: Vec<f64> = logits.iter().map(|l| (l - top) / t).collect();
    let mut order: Vec<usize> = (0..s.len()).collect();
    order.sort_by(|&a, &b| s[b].partial_cmp(&s[a]).unwrap().then(ids[a].cmp(&ids[b])));
    let every = k.is_none_or(|k| k >= vocab);
    let kept = if every {
        &order[..]
    } else {
        &order[..k.unwrap()]
    };
    let max = s[kept[0]];
    let mut z: f64 = kept.iter().map(|&i| (s[i] - max).exp()).sum();
    if every {
        let at = temps
            .iter()
            .position(|&x| x == t)
            .expect("the temperature is carried");
        z += tails[at];
    }
    kept.iter()
        .take(rows)
        .map(|&i| (ids[i], (s[i] - max).exp() / z))
        .collect()
}

/// The slider's temperatures, as the script makes them: Number((v * 0.05).toFixed(2)).
fn slider_temperatures() -> Vec<f64> {
    (2..=40)
        .map(|v| format!("{:.2}", v as f64 * 0.05).parse().unwrap())
        .collect()
}

#[test]
fn the_carried_logits_give_the_exact_softmax_at_every_slider_setting() {
    let logits = lm_logits(1);
    let tokens = table(logits.len());
    let html = next_token_view(&logits[..], &tokens).to_html();
    assert_eq!(numbers(&div_data(&html, "logits").unwrap()).len(), 100);
    let mut checked = 0;
    let ks = [
        None,
        Some(1),
        Some(2),
        Some(5),
        Some(19),
        Some(20),
        Some(21),
        Some(50),
        Some(99),
        Some(100),
    ];
    for t in slider_temperatures() {
        for (k, p) in ks.iter().zip(softmaxes(&logits, t, &ks)) {
            let k = *k;
            let got = script_rows(&html, t, k, 20);
            let want = most_probable(&p, 20.min(k.unwrap_or(20)));
            assert_eq!(
                got.iter().map(|r| r.0).collect::<Vec<_>>(),
                want,
                "T {t}, k {k:?}"
            );
            for &(id, q) in &got {
                assert!(
                    (q - p[id]).abs() <= 1e-12,
                    "T {t}, k {k:?}, id {id}: {q} against {}",
                    p[id]
                );
                assert_eq!(format!("{q:.3}"), format!("{:.3}", p[id]));
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 39 * 10);
    // The tie between ids 900 and 901 (logit 12) keeps 900 first, and top-k 4 keeps only it.
    let four = script_rows(&html, 1.0, Some(4), 20);
    assert_eq!(
        four.iter().map(|r| r.0).collect::<Vec<_>>(),
        [17, 30_001, 4, 900]
    );
}

/// A next-token view's rows read back from its SVG: label, bar width, printed probability,
/// hidden.
fn bars(svg: &str) -> Vec<(String, f64, String, bool)> {
    let doc = roxmltree::Document::parse(svg).expect("the SVG is well-formed XML");
    let words = |n: roxmltree::Node| -> String {
        n.children()
            .filter(|c| c.is_text())
            .map(|c| c.text().unwrap())
            .collect()
    };
    doc.descendants()
        .filter(|n| n.attribute("class") == Some("alab-row"))
        .map(|g| {
            let label = g
                .descendants()
                .find(|n| n.attribute("class") == Some("alab-tok"))
                .unwrap();
            let p = g
                .descendants()
                .find(|n| n.attribute("class") == Some("alab-p"))
                .unwrap();
            let bar = g.descendants().find(|n| n.has_tag_name("rect")).unwrap();
            (
                words(label),
                bar.attribute("width").unwrap().parse().unwrap(),
                words(p),
                g.attribute("display") == Some("none"),
            )
        })
        .collect()
}

#[test]
fn the_static_bars_are_the_softmax_at_the_defaults() {
    let logits = lm_logits(2);
    let tokens = table(logits.len());
    let p = softmax(&logits, 1.0, None);
    let mut order: Vec<usize> = (0..p.len()).collect();
    order.sort_by(|&a, &b| p[b].total_cmp(&p[a]).then(a.cmp(&b)));
    let view = next_token_view(&logits[..], &tokens);
    for svg in [view.to_svg().unwrap(), svg_of(&view.to_html())] {
        let got = bars(&svg);
        assert_eq!(got.len(), 20);
        for (r, (label, width, printed, hidden)) in got.iter().enumerate() {
            let id = order[r];
            assert_eq!(label, &pretty_token(&tokens[id]));
            assert_eq!(printed, &format!("{:.3}", p[id]));
            assert!(
                (width - 300.0 * p[id]).abs() <= 0.005,
                "{width} for {}",
                p[id]
            );
            assert!(!hidden);
        }
        let rest: f64 = order[20..].iter().map(|&i| p[i]).sum();
        assert!(
            svg.contains(&format!("the other 49,132 tokens: {rest:.3} in all")),
            "{rest}"
        );
        assert!(svg.contains("temperature 1.00 · top-k: all (49,152 tokens)"));
    }
    assert_eq!(
        view.probabilities()
            .unwrap()
            .iter()
            .map(|r| r.0)
            .collect::<Vec<_>>(),
        order[..20]
    );
    // Another temperature and top-k: the picture is that softmax too.
    let q = softmax(&logits, 0.7, Some(3));
    let got = bars(
        &next_token_view(&logits[..], &tokens)
            .temperature(0.7)
            .top_k(3)
            .to_svg()
            .unwrap(),
    );
    assert_eq!(
        got.iter().map(|b| b.2.clone()).collect::<Vec<_>>(),
        [17, 30_001, 4].map(|i| format!("{:.3}", q[i]))
    );
}

#[test]
fn top_k_1_is_a_single_bar_of_one() {
    let logits = lm_logits(3);
    let tokens = table(logits.len());
    let view = next_token_view(&logits[..], &tokens).top_k(1);
    assert_eq!(view.probabilities().unwrap(), [(17, 1.0)]);
    let got = bars(&view.to_svg().unwrap());
    assert_eq!(
        got,
        [("↵x17".to_string(), 300.0, "1.000".to_string(), false)]
    ); // token 17 is "Ċx17"
       // In the notebook the other rows wait hidden for the slider.
    let html = view.to_html();
    let page = bars(&svg_of(&html));
    assert_eq!(page.len(), 20);
    assert_eq!(page.iter().filter(|b| !b.3).count(), 1);
    assert_eq!(script_rows(&html, 1.0, Some(1), 20), [(17, 1.0)]);
    assert_eq!(div_data(&html, "k").unwrap(), "1");
    // A temperature the slider does not offer is carried too.
    let html = next_token_view(&logits[..], &tokens)
        .temperature(0.33)
        .to_html();
    let p = softmax(&logits, 0.33, None);
    for (id, q) in script_rows(&html, 0.33, None, 20) {
        assert!((q - p[id]).abs() < 1e-12);
    }
}

#[test]
fn a_small_vocabulary_is_carried_whole_and_ties_go_to_the_lower_id() {
    let logits = [1.0, 3.0, 3.0, 3.0, 0.0];
    let tokens = ["a", "b", "c", "d", "e"];
    let view = next_token_view(&logits[..], &tokens).top_k(2);
    assert_eq!(view.probabilities().unwrap(), [(1, 0.5), (2, 0.5)]);
    let html = next_token_view(&logits[..], &tokens).to_html();
    assert_eq!(
        div_data(&html, "tails")
            .unwrap()
            .split(',')
            .collect::<Vec<_>>(),
        vec!["0e0"; 39]
    );
    for t in slider_temperatures() {
        for k in [None, Some(1), Some(2), Some(3), Some(4), Some(5)] {
            let p = softmax(&logits, t, k);
            for (id, q) in script_rows(&html, t, k, 20) {
                assert!((q - p[id]).abs() < 1e-15, "{t} {k:?}");
            }
        }
    }
    assert_eq!(
        script_rows(&html, 1.0, Some(2), 20)
            .iter()
            .map(|r| r.0)
            .collect::<Vec<_>>(),
        [1, 2]
    );
}

/// Softmax rows for a generation: `steps` generated tokens after a prompt of `prompt`, each
/// with `layers` x `heads` rows over the tokens up to it; some heads sharp, one a sink on
/// token 0, some weights exactly 0.
fn generation(
    prompt: usize,
    steps: usize,
    layers: usize,
    heads: usize,
    seed: u64,
) -> GenerationSteps {
    let mut rng = Rng(seed);
    let tokens: Vec<String> = (0..prompt + steps)
        .map(|i| match i % 4 {
            0 => format!("Ġword{i}"),
            1 => format!("piece{i}"),
            2 => ",".to_string(),
            _ => format!("Ġthe{i}"),
        })
        .collect();
    let mut out = GenerationSteps::new(&tokens, prompt);
    for s in 0..steps {
        let keys = prompt + s + 1;
        let w = Array3::from_shape_fn((layers, heads, keys), |_| 0.0);
        let mut w = w;
        for l in 0..layers {
            for h in 0..heads {
                let sharp = 0.5 + 3.0 * ((l + h) % 4) as f64;
                let raw: Vec<f64> = (0..keys)
                    .map(|j| {
                        if h == 0 && j == 0 {
                            6.0
                        } else {
                            sharp * rng.normal()
                        }
                    })
                    .collect();
                let m = raw.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let total: f64 = raw.iter().map(|r| (r - m).exp()).sum();
                for j in 0..keys {
                    w[[l, h, j]] = (raw[j] - m).exp() / total;
                }
                if h == 1 {
                    w[[l, h, keys - 1]] += w[[l, h, 0]];
                    w[[l, h, 0]] = 0.0; // masked
                }
            }
        }
        out.push_step(&w);
    }
    out
}

#[test]
fn the_carried_weights_read_back_within_the_rounding() {
    let steps = generation(6, 5, 3, 4, 11);
    let html = generation_view(&steps).to_html();
    assert_eq!(div_data(&html, "layers").unwrap(), "0,1,2");
    assert_eq!(div_data(&html, "prompt").unwrap(), "6");
    assert_eq!(div_data(&html, "steps").unwrap(), "5");
    assert_eq!(div_data(&html, "heads").unwrap(), "4");
    let layers: Vec<Vec<u8>> = div_data(&html, "weights")
        .unwrap()
        .split(',')
        .map(unbase64)
        .collect();
    assert_eq!(layers.len(), 3);
    let mut zeros = 0;
    for (l, bytes) in layers.iter().enumerate() {
        // Steps x heads x keys, step s with 6 + s + 1 keys.
        let mut at = 0;
        for s in 0..5 {
            for h in 0..4 {
                for j in 0..6 + s + 1 {
                    let w = steps.weights[s][l][h][j];
                    let b = bytes[at];
                    at += 1;
                    let back = (b as f64 / 255.0).powi(2);
                    assert!(
                        (back - w).abs() <= w.sqrt() / 255.0 + 1.0 / 260_100.0,
                        "step {s} layer {l} head {h} key {j}: {w} read back as {back}"
                    );
                    assert_eq!(b == 0, w < (1.0_f64 / 510.0).powi(2), "{w}");
                    zeros += (b == 0) as usize;
                }
            }
        }
        assert_eq!(at, bytes.len());
    }
    assert!(zeros >= 3 * 5, "the masked weights are zeros: {zeros}");
}

/// The generation view's drawn weights: (token, head, opacity, stroke-width) of each line
/// that carries `data-t`.
fn shading(svg: &str) -> Vec<(usize, usize, f64, f64)> {
    let doc = roxmltree::Document::parse(svg).unwrap();
    let n = |n: &roxmltree::Node, a: &str| -> f64 { n.attribute(a).unwrap().parse().unwrap() };
    doc.descendants()
        .filter(|e| e.has_tag_name("line") && e.attribute("data-t").is_some())
        .map(|e| {
            (
                n(&e, "data-t") as usize,
                n(&e, "data-h") as usize,
                n(&e, "stroke-opacity"),
                n(&e, "stroke-width"),
            )
        })
        .collect()
}

#[test]
fn the_picture_draws_the_new_tokens_weights_in_each_heads_colour() {
    let steps = generation(6, 5, 3, 4, 12);
    let svg = generation_view(&steps).step(2).layer(1).to_svg().unwrap();
    let lines = shading(&svg);
    let row = |h: usize| &steps.weights[2][1][h];
    // Every head: one box a token up to the new one (token 8) and head, unless it rounds to 0.
    let mut want = 0;
    for h in 0..4 {
        for (j, &w) in row(h).iter().enumerate() {
            let b = (255.0 * w.sqrt()).round();
            if b == 0.0 {
                assert!(!lines.iter().any(|l| l.0 == j && l.1 == h));
                continue;
            }
            want += 1;
            let l = lines.iter().find(|l| l.0 == j && l.1 == h).unwrap();
            assert!((l.2 - b / 255.0).abs() <= 5e-4, "{l:?} for {w}");
        }
    }
    assert_eq!(lines.len(), want);
    assert!(lines.iter().all(|l| l.0 <= 8));
    let colour = |h: usize| {
        let (r, g, b) = head_colour(h);
        format!("stroke=\"#{r:02x}{g:02x}{b:02x}\"")
    };
    assert!((0..4).all(|h| svg.contains(&colour(h))));
    assert!(
        svg.contains("token 3 of 5: “word8” · layer 1 · all heads"),
        "{svg}"
    );
    // One head: its strip and its shade, nothing of the others.
    let one = shading(
        &generation_view(&steps)
            .step(2)
            .layer(1)
            .head(3)
            .to_svg()
            .unwrap(),
    );
    assert!(one.iter().all(|l| l.1 == 3));
    assert!(one.iter().any(|l| l.3 == 17.0) && one.iter().any(|l| l.3 == 5.0));
}

/// The view's token boxes: the root's `data-xs`, `data-ws`, `data-ys`.
fn places(svg: &str) -> Vec<(f64, f64, f64)> {
    let doc = roxmltree::Document::parse(svg).unwrap();
    let root = doc.root_element();
    let get = |a: &str| numbers(root.attribute(a).unwrap());
    let (xs, ws, ys) = (get("data-xs"), get("data-ws"), get("data-ys"));
    (0..xs.len()).map(|i| (xs[i], ws[i], ys[i])).collect()
}

fn width(svg: &str) -> f64 {
    svg.split("width=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn the_lessons_case_wraps_to_a_projectors_width_and_stays_under_a_megabyte() {
    let steps = generation(40, 24, 30, 9, 13);
    let view = generation_view(&steps);
    let html = view.to_html();
    eprintln!(
        "generation view, 40 + 24 tokens, 30 layers x 9 heads: {} bytes of HTML",
        html.len()
    );
    assert!(html.len() < 1_000_000, "{}", html.len());
    let carried: usize = div_data(&html, "weights")
        .unwrap()
        .split(',')
        .map(|l| unbase64(l).len())
        .sum();
    assert_eq!(carried, 30 * 9 * (24 * 41 + 24 * 23 / 2));
    let svg = svg_of(&html);
    assert_eq!(width(&svg), 600.0);
    let boxes = places(&svg);
    assert_eq!(boxes.len(), 64);
    assert!(
        boxes.iter().all(|b| b.0 >= 10.0 && b.0 + b.1 <= 610.0),
        "{boxes:?}"
    );
    let lines = boxes
        .iter()
        .map(|b| b.2.to_bits())
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    assert!(lines >= 3, "wrapped in {lines} lines");
    // A projector: 900 pixels wide, inside the output area of a 1366-pixel screen with the
    // file browser open (914 pixels).
    assert_eq!(width(&view.clone().scale(1.5).to_svg().unwrap()), 900.0);
    // Fewer layers, a smaller notebook: the layer shown and those asked for.
    let two = generation_view(&steps).layer(7).layers(&[0]).to_html();
    assert_eq!(div_data(&two, "layers").unwrap(), "0,7");
    assert!(two.len() < html.len() / 4, "{}", two.len());
    // The next-token view over 49,152 logits is a few KB.
    let logits = lm_logits(4);
    let next = next_token_view(&logits[..], &table(logits.len())).to_html();
    eprintln!(
        "next-token view over 49,152 logits: {} bytes of HTML",
        next.len()
    );
    assert!(next.len() < 40_000, "{}", next.len());
}

#[test]
fn past_the_budget_the_view_carries_the_layer_shown_or_nothing() {
    // 100 + 300 tokens over 4 layers of 9 heads: 9 x (300 x 101 + 300 x 299 / 2) = 676,350
    // bytes a layer, past 640 KiB: the picture alone.
    let steps = generation(100, 300, 4, 9, 14);
    let html = generation_view(&steps).to_html();
    assert_eq!(div_data(&html, "layers").unwrap(), "");
    assert!(svg_of(&html).contains("too large to carry: this step only"));
    // 40 + 60 tokens over 12 layers: 9 x (60 x 41 + 60 x 59 / 2) = 38,070 a layer; 12 fit, 20 not.
    let steps = generation(40, 60, 20, 9, 15);
    let html = generation_view(&steps).layer(5).to_html();
    assert_eq!(div_data(&html, "layers").unwrap(), "5");
    assert!(svg_of(&html).contains("layer 5 only (.layers() picks others)"));
    assert!(html.len() < 1_000_000);
}

#[test]
fn the_text_grows_step_by_step_and_a_newline_ends_a_line() {
    let mut steps = GenerationSteps::new(&["ĠHello", "Ġthere", "Ċ", "ĠHow", "Ġare"], 2);
    for s in 0..3 {
        let keys = 2 + s + 1;
        steps.push_step(&Array3::from_elem((1, 2, keys), 1.0 / keys as f64));
    }
    let file = generation_view(&steps).step(0).to_svg().unwrap();
    let doc = roxmltree::Document::parse(&file).unwrap();
    let words: Vec<String> = doc
        .descendants()
        .filter(|n| n.attribute("class") == Some("alab-word"))
        .map(|n| {
            n.children()
                .filter(|c| c.is_text())
                .map(|c| c.text().unwrap())
                .collect()
        })
        .collect();
    assert_eq!(words, ["Hello", "there", "↵"]);
    // The notebook holds every token, those not written yet hidden.
    let page = svg_of(&generation_view(&steps).step(0).to_html());
    let doc = roxmltree::Document::parse(&page).unwrap();
    let hidden: Vec<bool> = doc
        .descendants()
        .filter(|n| n.attribute("class") == Some("alab-tok"))
        .map(|n| n.attribute("display") == Some("none"))
        .collect();
    assert_eq!(hidden, [false, false, false, true, true]);
    // "How" starts the next line, after the newline.
    let boxes = places(&page);
    assert_eq!(boxes[3].0, 10.0);
    assert!(boxes[3].2 > boxes[2].2);
    // The prompt in grey, the model's tokens in black.
    assert!(page.contains("fill=\"#707070\"") && page.contains("fill=\"#000000\""));
}

#[test]
#[allow(
    clippy::too_many_lines,
    reason = "a table of bad inputs, one short paragraph each"
)]
fn bad_input_is_a_typed_error_that_says_what() {
    let good = generation(3, 2, 2, 2, 16);
    let msg = |s: &GenerationSteps| generation_view(s).to_svg().unwrap_err();
    // A step's weights of the wrong length.
    let mut short = good.clone();
    short.weights[1][1][0].pop();
    let err = msg(&short);
    assert!(
        matches!(
            err,
            GenerationError::KeyCount {
                step: 1,
                layer: 1,
                head: 0,
                keys: 4,
                expected: 5
            }
        ),
        "{err:?}"
    );
    assert_eq!(err.to_string(), "step 1, layer 1, head 0 has 4 weights, expected 5 (the prompt's tokens, the generated ones before it and itself)");
    // prompt_len past the tokens, or empty.
    for prompt_len in [0, 6] {
        let mut bad = good.clone();
        bad.prompt_len = prompt_len;
        assert!(
            matches!(msg(&bad), GenerationError::PromptLength { tokens: 5, .. }),
            "{prompt_len}"
        );
    }
    let mut bad = good.clone();
    bad.prompt_len = 5;
    assert_eq!(
        msg(&bad).to_string(),
        "no token follows the prompt: nothing was generated"
    );
    let mut bad = good.clone();
    bad.weights.pop();
    assert_eq!(
        msg(&bad).to_string(),
        "1 steps of weights for 2 generated tokens (one a generated token)"
    );
    let mut bad = good.clone();
    bad.weights[1].pop();
    assert!(matches!(
        msg(&bad),
        GenerationError::LayerCount {
            step: 1,
            layers: 1,
            expected: 2
        }
    ));
    let mut bad = good.clone();
    bad.weights[0][1].push(vec![0.25; 4]);
    assert!(matches!(
        msg(&bad),
        GenerationError::HeadCount {
            step: 0,
            layer: 1,
            heads: 3,
            expected: 2
        }
    ));
    for value in [f64::NAN, -0.1, 1.5] {
        let mut bad = good.clone();
        bad.weights[1][0][1][2] = value;
        assert!(
            matches!(
                msg(&bad),
                GenerationError::Weight {
                    step: 1,
                    layer: 0,
                    head: 1,
                    key: 2,
                    ..
                }
            ),
            "{value}"
        );
    }
    assert_eq!(
        generation_view(&good)
            .step(2)
            .to_svg()
            .unwrap_err()
            .to_string(),
        "there is no step 2: they are 0 to 1"
    );
    assert_eq!(
        generation_view(&good)
            .layer(2)
            .to_svg()
            .unwrap_err()
            .to_string(),
        "there is no layer 2: they are 0 to 1"
    );
    assert_eq!(
        generation_view(&good)
            .head(5)
            .to_svg()
            .unwrap_err()
            .to_string(),
        "there is no head 5: they are 0 to 1"
    );
    assert!(generation_view(&good).layers(&[9]).to_svg().is_err());
    assert!(generation_view(&GenerationSteps::default())
        .to_svg()
        .is_err());
    // The logits.
    let next = |l: &[f64]| next_token_view(l, &["a", "b", "c"]).to_svg().unwrap_err();
    assert!(matches!(next(&[]), GenerationError::EmptyLogits));
    assert!(matches!(
        next(&[0.0, f64::NAN, 1.0]),
        GenerationError::Logit { index: 1, .. }
    ));
    assert!(matches!(
        next(&[0.0, 1.0, f64::INFINITY]),
        GenerationError::Logit { index: 2, .. }
    ));
    assert_eq!(
        next(&[f64::NEG_INFINITY; 3]).to_string(),
        "every logit is -inf: no token can be drawn"
    );
    let logits = [1.0, 2.0, 3.0];
    let view = || next_token_view(&logits[..], &["a", "b", "c"]);
    for t in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        assert!(matches!(
            view().temperature(t).to_svg().unwrap_err(),
            GenerationError::Temperature(_)
        ));
    }
    assert!(matches!(
        view().top_k(0).to_svg().unwrap_err(),
        GenerationError::ZeroTopK
    ));
    assert_eq!(view().rows(0).probabilities().unwrap().len(), 1); // held to 1 to 100
                                                                  // A masked logit is fine: it has probability 0.
    let p = next_token_view(&[0.0, f64::NEG_INFINITY][..], &["a", "b"])
        .probabilities()
        .unwrap();
    assert_eq!(p, [(0, 1.0), (1, 0.0)]);
    // The notebook shows the message, never a panic.
    assert!(svg_of(&generation_view(&short).to_html())
        .contains("plot error: step 1, layer 1, head 0 has 4 weights"));
    assert!(svg_of(&next_token_view(&[f64::NAN][..], &["a"]).to_html())
        .contains("plot error: logit 0 is NaN"));
}

#[test]
fn nothing_comes_from_the_network_and_tokens_stay_text() {
    let steps = generation(5, 3, 2, 3, 17);
    let mut tricky = steps.clone();
    tricky.tokens[1] = "<script>alert(1)</script>".into();
    tricky.tokens[6] = "\"q\" & 'a'".into();
    let logits = lm_logits(5);
    let mut tokens = table(logits.len());
    tokens[17] = "<img src=x onerror=alert(2)>".into();
    for html in [
        generation_view(&tricky).to_html(),
        next_token_view(&logits[..], &tokens).to_html(),
    ] {
        for bad in [
            "http:", "https:", "<link", "src=\"//", "src='", "url(", "@import", "alert(",
        ] {
            assert!(!html.contains(bad), "{bad} in the HTML");
        }
        for (i, _) in html.match_indices("src=") {
            assert!(html[i..].starts_with("src=\"data:"), "{}", &html[i..i + 40]);
        }
        assert_eq!(html.matches("<script>").count(), 1);
        let svg = svg_of(&html);
        let doc = roxmltree::Document::parse(&svg).unwrap();
        assert!(!doc
            .descendants()
            .any(|n| n.has_tag_name("script") || n.has_tag_name("img")));
    }
    let svg = generation_view(&tricky).to_svg().unwrap();
    assert!(svg.contains(">&lt;script&gt;alert(1)&lt;/script&gt;</text>"));
    let svg = next_token_view(&logits[..], &tokens).to_svg().unwrap();
    assert!(svg.contains("&lt;img src=x onerror=alert(2)&gt;"));
}

#[test]
fn files_hold_the_static_picture_and_html_is_byte_stable() {
    let dir = tempfile::tempdir().unwrap();
    let steps = generation(4, 3, 2, 2, 18);
    let view = generation_view(&steps).head(1);
    let path = dir.path().join("gen.svg");
    view.save_svg(&path).unwrap();
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        view.to_svg().unwrap()
    );
    assert_eq!(view.to_html(), generation_view(&steps).head(1).to_html());
    let err = view
        .save_svg(dir.path().join("no/such/gen.svg"))
        .unwrap_err();
    assert!(matches!(
        err,
        GenerationError::Plot(PlotError::Write { .. })
    ));
}
