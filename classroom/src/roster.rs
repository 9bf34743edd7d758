//! `attention-lab exercise --roster FILE.csv --out DIR`: a sheet and a key for every student.
//!
//! Each student's seed comes from the course secret and the id ([`crate::student`]), so another
//! student's key cannot be rebuilt from an id. The seed is never printed on a sheet. The same
//! roster, secret and options give the same files, byte for byte.

use crate::answers::{matrix_json, Answers, BackwardAnswers};
use crate::exercise::{draw, sheet, Format, Layout, Options};
use crate::student::{read_roster, student_seed, Student};
use attention_lab_io::error::{io_problem, io_text, warn, write_file, Error, Result};
use attention_lab_io::problem;
use std::path::{Path, PathBuf};

/// The course secret from `--secret` or `--secret-file`.
fn secret(args: &Options) -> Result<Vec<u8>> {
    let secret = match (&args.secret, &args.secret_file) {
        (Some(s), _) => s.as_bytes().to_vec(),
        (None, Some(path)) => {
            let shown = path.display().to_string();
            let mut bytes = std::fs::read(path).map_err(|e| Error::io(&shown, "read", e))?;
            // An editor's final newline is not part of the secret.
            while bytes.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
                bytes.pop();
            }
            if bytes.is_empty() {
                return Err(Error::at(&shown, "the secret file is empty"));
            }
            bytes
        }
        (None, None) => {
            return Err(Error::at(
                "--roster",
                "needs the course secret: --secret SECRET or --secret-file FILE",
            ))
        }
    };
    if secret.is_empty() {
        return Err(Error::at("--secret", "the secret is empty"));
    }
    Ok(secret)
}

/// Writes every student's sheet and key; returns after the last file or the first failure.
///
/// # Errors
/// A bad roster or secret, or a file that cannot be written, in one line.
pub fn run(args: &Options) -> Result<()> {
    let Some(roster) = args.roster.as_deref() else {
        return Err(Error::at("--roster", "a class's sheets need a roster"));
    };
    let Some(out) = args.out.as_deref() else {
        return Err(Error::at(
            "--roster",
            "needs --out DIR for the sheets and keys",
        ));
    };
    let secret = secret(args)?;
    let students = read_roster(roster)?;
    let sheets = out.join("sheets");
    let keys = out.join("keys");
    for dir in [&sheets, &keys] {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir.display(), "create", e))?;
    }
    let mut tex_files = Vec::new();
    for student in &students {
        let seed = student_seed(&secret, &student.id);
        for (dir, answers) in [(&sheets, false), (&keys, true)] {
            for (format, ext) in [(Format::Md, "md"), (Format::Tex, "tex")] {
                let layout = Layout {
                    seed,
                    title: title(student, format),
                    answers,
                    format,
                    handout: true,
                };
                let text = sheet(args, &layout)?;
                let path = dir.join(format!("{}.{ext}", student.id));
                write(&path, &text)?;
                if format == Format::Tex {
                    tex_files.push(path);
                }
            }
        }
        write(
            &keys.join(format!("{}.json", student.id)),
            &key_json(args, student, seed)?,
        )?;
    }
    compile_pdfs(out, &tex_files)
}

fn write(path: &Path, text: &str) -> Result<()> {
    write_file(path, text.as_bytes())
}

/// The sheet's heading: the name (when given) and the id, never the seed.
fn title(student: &Student, format: Format) -> String {
    let name = match format {
        Format::Md => Some(student.name.clone()),
        // pdflatex's default fonts set Latin scripts; other names stay on the Markdown sheet.
        Format::Tex => Some(student.name.as_str())
            .filter(|n| n.chars().all(|c| (c as u32) <= 0x24F))
            .map(tex_text),
    }
    .filter(|n| !n.is_empty());
    match name {
        Some(name) => format!("Multi-head self-attention by hand: {name} ({})", student.id),
        None => format!("Multi-head self-attention by hand: {}", student.id),
    }
}

/// Text safe inside LaTeX (and harmless in Markdown): LaTeX's special characters escaped.
fn tex_text(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\textbackslash{}"),
            '{' | '}' | '$' | '&' | '#' | '_' | '%' => {
                out.push('\\');
                out.push(c);
            }
            '~' => out.push_str("\\textasciitilde{}"),
            '^' => out.push_str("\\textasciicircum{}"),
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// The machine-readable key: the student, the options, the given matrices and, under
/// `"solution"`, exactly what `solve --json` writes for them. A masked sheet's key also has
/// `"causal"` and `"padding"` after `"precision"`, and `"mask"` (the matrix added to the
/// scores, as in `solve --json`) after `"wo"`; an unmasked key has neither. A backward
/// sheet's key has `"g"` after `"wo"` and the gradients under `"solution"`'s `"backward"`.
fn key_json(args: &Options, student: &Student, seed: u32) -> Result<String> {
    let p = draw(args, seed)?;
    let out = p.solution()?;
    let list = |ms: &[ndarray::Array2<f64>]| -> Result<String> {
        let each: Vec<String> = ms.iter().map(matrix_json).collect::<Result<_>>()?;
        Ok(format!("[{}]", each.join(", ")))
    };
    let string = |s: &str| serde_json::Value::from(s).to_string();
    let (options, mask) = match &p.mask {
        Some(mask) => (
            format!(
                "\"causal\": {}, \"padding\": {}, ",
                args.causal, args.padding
            ),
            format!("\"mask\": {}, ", matrix_json(mask.additive())?),
        ),
        None => (String::new(), String::new()),
    };
    let mut solution = Answers::new(&out).with_mask(p.mask.as_ref());
    let mut g = String::new();
    if let (Some(given), Some(grads)) = (&p.g, p.gradients(&out)?) {
        g = format!("\"g\": {}, ", matrix_json(given)?);
        solution.backward = Some(BackwardAnswers::from(&grads));
    }
    Ok(format!(
        "{{\"student\": {}, \"name\": {}, \"seed\": {seed}, \"tokens\": {}, \"dim\": {}, \
         \"heads\": {}, \"dk\": {}, \"decimals\": {}, \"precision\": {}, {options}\"x\": {}, \
         \"wq\": {}, \"wk\": {}, \"wv\": {}, \"wo\": {}, {g}{mask}\"solution\": {}}}\n",
        string(&student.id),
        string(&student.name),
        args.tokens,
        args.dim,
        args.heads,
        args.dk,
        args.decimals,
        args.precision,
        matrix_json(&p.x)?,
        list(&p.wq)?,
        list(&p.wk)?,
        list(&p.wv)?,
        matrix_json(&p.wo)?,
        solution.to_json()?,
    ))
}

/// Compiles each .tex beside itself when pdflatex is on PATH; says once when it is not. A
/// sheet that fails is reported in one line and the others are still compiled.
fn compile_pdfs(out: &Path, tex_files: &[PathBuf]) -> Result<()> {
    // A build folder of our own: pdflatex's .aux and .log stay out of the handed-out folders.
    let builds = out.join(".build");
    let mut failed = 0;
    for tex in tex_files {
        let dir = tex.parent().unwrap_or(Path::new("."));
        let stem = tex
            .file_stem()
            .expect("a file")
            .to_string_lossy()
            .into_owned();
        let folder = dir.file_name().map_or("".into(), |d| d.to_string_lossy());
        let build = builds.join(format!("{folder}-{stem}"));
        std::fs::create_dir_all(&build).map_err(|e| Error::io(build.display(), "create", e))?;
        let run = std::process::Command::new("pdflatex")
            .args([
                "-interaction=nonstopmode",
                "-halt-on-error",
                "-output-directory",
            ])
            .arg(&build)
            .arg(tex)
            // The same PDF bytes on every run: no date or random id from the clock.
            .env("SOURCE_DATE_EPOCH", "0")
            .env("FORCE_SOURCE_DATE", "1")
            .stdin(std::process::Stdio::null())
            .output();
        let result = match run {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let _ = std::fs::remove_dir_all(&builds);
                warn("note: pdflatex is not on PATH; the sheets are written as .md and .tex only");
                return Ok(());
            }
            Err(e) => Err(problem!("cannot run pdflatex: {}", io_text(&e))),
            Ok(o) if !o.status.success() => Err(problem!(
                "pdflatex failed (see {}); the .md and .tex are written",
                build.join(format!("{stem}.log")).display()
            )),
            // Through the one writer: a PDF already there keeps its mode and its symlink.
            Ok(_) => std::fs::read(build.join(format!("{stem}.pdf")))
                .map_err(|e| Error::Input(io_problem("read the PDF", &e)))
                .and_then(|pdf| write_file(dir.join(format!("{stem}.pdf")), &pdf)),
        };
        match result {
            Ok(()) => {
                let _ = std::fs::remove_dir_all(&build);
            }
            Err(problem) => {
                failed += 1;
                warn(&format!("error: {}: {problem}", tex.display()));
            }
        }
    }
    // Empty once every sheet compiled; kept with the logs otherwise.
    let _ = std::fs::remove_dir(&builds);
    if failed > 0 {
        return Err(Error::at(
            out.display(),
            format!("{failed} of {} PDFs could not be made", tex_files.len()),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_depend_on_the_secret_and_the_id() {
        let a = student_seed(b"course secret", "s01");
        assert_ne!(a, student_seed(b"other secret", "s01"));
        assert_ne!(a, student_seed(b"course secret", "s02"));
        assert_eq!(a, student_seed(b"course secret", "s01"));
    }

    /// What the flags check for the command line, the library checks for any caller: an
    /// error naming the option, never a panic.
    #[test]
    fn options_the_flags_would_refuse_are_errors_naming_them() {
        let class = Options {
            roster: Some("class.csv".into()),
            secret: Some("s".into()),
            ..Options::default()
        };
        let no_out = run(&class).unwrap_err().to_string();
        assert!(no_out.starts_with("--roster: needs --out"), "{no_out}");
        for (bad, flag) in [
            (
                Options {
                    tokens: 0,
                    ..Options::default()
                },
                "--tokens: 0 is not in 1..=16",
            ),
            (
                Options {
                    heads: 9,
                    ..Options::default()
                },
                "--heads: 9 is not in 1..=8",
            ),
            (
                Options {
                    decimals: -1,
                    ..Options::default()
                },
                "--decimals: -1 is not in 0..=4",
            ),
            (
                Options {
                    dk: usize::MAX,
                    ..Options::default()
                },
                "--dk: 18446744073709551615",
            ),
        ] {
            let e = draw(&bad, 7).unwrap_err().to_string();
            assert!(e.starts_with(flag), "{e}");
        }
        assert!(draw(&Options::default(), 7).is_ok());
    }

    #[test]
    fn tex_text_escapes_specials() {
        assert_eq!(tex_text("a_b & 50%"), "a\\_b \\& 50\\%");
    }
}
