//! Every account's first password, issued by root at set-up: nobody can claim an account by
//! signing in first (JupyterHub's first-use authenticator would take whatever password came
//! first, the teacher's admin account included).
//!
//! Each password is made by Python's `secrets`, stored only as a bcrypt hash in the
//! authenticator's own password file (`state/passwords.dbm`, root's), and printed once, in the
//! handout of the run that issued it. An account keeps its password across restarts; a system
//! user made anew, or one named with `--new-password`, gets a new one. Anyone may change their
//! own at `/hub/auth/change-password`.
//!
//! ```
//! use attention_lab_hub::passwords::handout_line;
//! assert_eq!(handout_line(Some("abcd-efgh-jkmn")), "password abcd-efgh-jkmn");
//! assert_eq!(handout_line(None), "password handed out before");
//! ```

use crate::shared::Shared;
use attention_lab_io::error::{io_text, Result};
use attention_lab_io::problem;
use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};

/// Issues a password to each of `names` without one in the password file, and to each of
/// `renew`; returns the new passwords by name (written nowhere else).
///
/// # Errors
/// The hub's Python failing (its venv, the password file), in one line.
pub fn issue(shared: &Shared, names: &[&str], renew: &[&str]) -> Result<BTreeMap<String, String>> {
    let request = serde_json::json!({
        "dbm": shared.state().join("passwords.dbm"),
        "names": names,
        "renew": renew,
    });
    let python = shared.venv().join("bin/python");
    let mut child = Command::new(&python)
        .args(["-c", ISSUE_PY])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| problem!("{}: {}", python.display(), io_text(&e)))?;
    if let Some(mut stdin) = child.stdin.take() {
        // A failure here shows as the script's own error below.
        let _ = stdin.write_all(request.to_string().as_bytes());
    }
    let out = child
        .wait_with_output()
        .map_err(|e| problem!("{}: {}", python.display(), io_text(&e)))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        return Err(problem!(
            "cannot issue passwords in {}: {}",
            shared.state().join("passwords.dbm").display(),
            stderr.trim().lines().last().unwrap_or("no message")
        ));
    }
    serde_json::from_slice(&out.stdout)
        .map_err(|e| problem!("passwords: the hub's Python answered {e}"))
}

/// The end of a login's handout line: its new password, or that it was given before.
pub fn handout_line(password: Option<&str>) -> String {
    match password {
        Some(password) => format!("password {password}"),
        None => "password handed out before".to_owned(),
    }
}

/// Reads `{"dbm", "names", "renew"}` on stdin; writes `{name: password}` of those issued.
/// Three groups of four letters and digits, none easily confused: about 59 bits.
const ISSUE_PY: &str = r#"import bcrypt, dbm, json, secrets, sys
request = json.load(sys.stdin)
alphabet = 'abcdefghjkmnpqrstuvwxyz23456789'
issued = {}
with dbm.open(request['dbm'], 'c', 0o600) as db:
    for name in request['names']:
        if name.encode() in db and name not in request['renew']:
            continue
        password = '-'.join(''.join(secrets.choice(alphabet) for _ in range(4)) for _ in range(3))
        db[name.encode()] = bcrypt.hashpw(password.encode(), bcrypt.gensalt())
        issued[name] = password
json.dump(issued, sys.stdout)
"#;
