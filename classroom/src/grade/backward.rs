//! Judging the backward parts of a `--backward` sheet: (e) `dW_O` and each `dZ_i`, (f) each
//! head's `dA_i` and `dS_i`, (g) each head's `dQ_i`, `dK_i`, `dV_i`, `dW_Q`, `dW_K`, `dW_V`,
//! as the forward parts are judged (tolerance, carried forward, named mistakes). A backward
//! answer of another shape is judged (wrong), not refused, so that a transposed one is named.

use attention_lab::check::step::{Step, DK, DQ, DSCORES, DV, DW, DWEIGHTS, DWO, DZ};
use attention_lab::prelude::MultiHeadOutput;
use attention_lab_io::error::Result;
use attention_lab_io::problem;
use ndarray::s;

use super::answers::{Key, Submission};
use super::mark::{Check, Mark, Verdict};
use super::M;

/// A step of part (g): name, answer, reference, own inputs, the key's inputs, whether the
/// own inputs were right, and the step.
type GStep<'a> = (
    &'static str,
    &'a M,
    &'a M,
    Vec<&'a M>,
    Vec<&'a M>,
    bool,
    Step,
);

/// Whether the mark of `matrix` is right.
fn right(marks: &[Mark], matrix: &str) -> bool {
    marks
        .iter()
        .any(|m| m.matrix == matrix && m.verdict == Verdict::Right)
}

/// The marks of the backward parts, after the forward ones (`marks`, whose verdicts say
/// which of the student's own inputs were right). Nothing when the key has no `G`.
///
/// # Errors
/// A backward sheet's submission without `"backward"`, or with another number of heads.
#[allow(
    clippy::too_many_lines,
    reason = "one check per gradient in the order a student works them, each with its classifier; the sequence is the marking scheme"
)]
pub(super) fn grade_backward(
    key: &Key,
    solution: &MultiHeadOutput,
    sub: &Submission,
    marks: &[Mark],
) -> Result<Vec<Mark>> {
    let Some(grads) = key.problem().gradients(solution)? else {
        return Ok(Vec::new());
    };
    let Some(mine) = &sub.backward else {
        return Err(problem!(
            "\"backward\" is missing: the sheet asks for the backward pass"
        ));
    };
    let h = solution.heads.len();
    if mine.heads.len() != h {
        return Err(problem!(
            "\"backward\": {} heads answered, the sheet has {h}",
            mine.heads.len()
        ));
    }
    let g = key.g.as_ref().expect("gradients need G");
    let p = key.precision;
    let sub_f = &sub.answers;
    let mut out: Vec<Mark> = Vec::new();
    let judged = |check: Check<'_>, out: &mut Vec<Mark>| out.push(check.mark(p));
    judged(
        Check {
            part: "e".into(),
            matrix: "dW_O".into(),
            inputs: "Z".into(),
            answer: &mine.dwo,
            reference: grads.grad.dwo.as_ref().expect("the sheet has W_O"),
            own: vec![&sub_f.concat, g],
            own_right: right(marks, "Z"),
            given: vec![&solution.concat, g],
            step: DWO,
        },
        &mut out,
    );
    let mut start = 0;
    let wo_rows: Vec<M> = solution
        .heads
        .iter()
        .map(|head| {
            let width = head.z.ncols();
            let rows = key.wo.slice(s![start..start + width, ..]).to_owned();
            start += width;
            rows
        })
        .collect();
    for (n, rows) in wo_rows.iter().enumerate() {
        judged(
            Check {
                part: "e".into(),
                matrix: format!("dZ_{}", n + 1),
                inputs: String::new(),
                answer: &mine.heads[n][0],
                reference: &grads.dz[n],
                own: vec![g, rows],
                own_right: true,
                given: vec![g, rows],
                step: DZ,
            },
            &mut out,
        );
    }
    for n in 0..h {
        let i = n + 1;
        let (a, w, ref_g) = (&mine.heads[n], &solution.heads[n], &grads.grad.heads[n]);
        let own_h = &sub_f.heads[n];
        let ok = |out: &[Mark], name: &str| right(marks, name) || right(out, name);
        let dz_v = ok(&out, &format!("dZ_{i}")) && ok(&out, &format!("V_{i}"));
        judged(
            Check {
                part: format!("f{i}"),
                matrix: format!("dA_{i}"),
                inputs: format!("dZ_{i} and V_{i}"),
                answer: &a[1],
                reference: &ref_g.dweights,
                own: vec![&a[0], &own_h.v],
                own_right: dz_v,
                given: vec![&grads.dz[n], &w.v],
                step: DWEIGHTS,
            },
            &mut out,
        );
        let a_da = ok(&out, &format!("A_{i}")) && ok(&out, &format!("dA_{i}"));
        judged(
            Check {
                part: format!("f{i}"),
                matrix: format!("dS_{i}"),
                inputs: format!("A_{i} and dA_{i}"),
                answer: &a[2],
                reference: &ref_g.dscores,
                own: vec![&own_h.weights, &a[1]],
                own_right: a_da,
                given: vec![&w.weights, &ref_g.dweights],
                step: DSCORES,
            },
            &mut out,
        );
    }
    for n in 0..h {
        let i = n + 1;
        let (a, w, ref_g) = (&mine.heads[n], &solution.heads[n], &grads.grad.heads[n]);
        let own_h = &sub_f.heads[n];
        let ok = |out: &[Mark], name: &str| right(marks, name) || right(out, name);
        let ds = ok(&out, &format!("dS_{i}"));
        let steps: [GStep<'_>; 3] = [
            (
                "dQ",
                &a[3],
                &ref_g.dq,
                vec![&a[2], &own_h.k],
                vec![&ref_g.dscores, &w.k],
                ds && ok(&out, &format!("K_{i}")),
                DQ,
            ),
            (
                "dK",
                &a[4],
                &ref_g.dk,
                vec![&a[2], &own_h.q],
                vec![&ref_g.dscores, &w.q],
                ds && ok(&out, &format!("Q_{i}")),
                DK,
            ),
            (
                "dV",
                &a[5],
                &ref_g.dv,
                vec![&own_h.weights, &a[0]],
                vec![&w.weights, &grads.dz[n]],
                ok(&out, &format!("A_{i}")) && ok(&out, &format!("dZ_{i}")),
                DV,
            ),
        ];
        for (name, answer, reference, own, given, own_right, step) in steps {
            let inputs = own_inputs(name, i);
            judged(
                Check {
                    part: format!("g{i}"),
                    matrix: format!("{name}_{i}"),
                    inputs,
                    answer,
                    reference,
                    own,
                    own_right,
                    given,
                    step,
                },
                &mut out,
            );
        }
        for (m, (letter, reference)) in [("Q", &ref_g.dwq), ("K", &ref_g.dwk), ("V", &ref_g.dwv)]
            .into_iter()
            .enumerate()
        {
            let upstream = format!("d{letter}_{i}");
            let own_right = ok(&out, &upstream);
            judged(
                Check {
                    part: format!("g{i}"),
                    matrix: format!("dW_{letter}^({i})"),
                    inputs: upstream,
                    answer: &a[6 + m],
                    reference,
                    own: vec![&key.x, &a[3 + m]],
                    own_right,
                    given: vec![&key.x, [&ref_g.dq, &ref_g.dk, &ref_g.dv][m]],
                    step: DW,
                },
                &mut out,
            );
        }
    }
    Ok(out)
}

/// The inputs of `dQ`, `dK` and `dV`, named for the carried-forward text.
fn own_inputs(name: &str, i: usize) -> String {
    match name {
        "dQ" => format!("dS_{i} and K_{i}"),
        "dK" => format!("dS_{i} and Q_{i}"),
        _ => format!("A_{i} and dZ_{i}"),
    }
}
