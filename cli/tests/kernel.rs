//! `attention-lab kernel`: the kernelspec it writes, and that serving a kernel leaves the
//! user's other kernels (evcxr_jupyter's `kernels/rust`) byte-identical.

use std::fs;
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_attention-lab");

/// The binary with HOME, the cache and every Jupyter/XDG folder inside `home`.
fn command(home: &Path) -> Command {
    let mut command = Command::new(BIN);
    command
        .env("HOME", home)
        .env("ATTENTION_LAB_CACHE", home.join("cache"))
        .env("XDG_DATA_HOME", home.join("data"))
        .env("XDG_CACHE_HOME", home.join("xdg-cache"))
        .env_remove("JUPYTER_DATA_DIR")
        .env_remove("EVCXR_CONFIG_DIR");
    command
}

#[test]
fn install_writes_our_kernelspec_and_uninstall_removes_only_it() {
    let home = tempfile::tempdir().unwrap();
    let jupyter = home.path().join("jupyter");
    let theirs = jupyter.join("kernels").join("rust");
    fs::create_dir_all(&theirs).unwrap();
    fs::write(theirs.join("kernel.json"), "{\"display_name\": \"Rust\"}").unwrap();

    let out = command(home.path())
        .args(["kernel", "install", "--jupyter-path"])
        .arg(&jupyter)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let spec_path = jupyter.join("kernels/attention-lab-rust/kernel.json");
    let spec: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(&spec_path).unwrap()).unwrap();
    assert_eq!(spec["display_name"], "Rust (attention-lab)");
    assert_eq!(spec["argv"][0], BIN);
    assert_eq!(spec["argv"][1], "kernel");
    assert_eq!(spec["argv"][2], "serve");
    let config = home.path().join("cache/evcxr-config");
    assert_eq!(spec["env"]["EVCXR_CONFIG_DIR"], config.to_str().unwrap());
    assert_eq!(
        fs::read_to_string(config.join("init.evcxr")).unwrap(),
        format!(
            ":cache {}\n",
            attention_lab_jupyter::kernel::EVCXR_CACHE_MIB
        )
    );

    let out = command(home.path())
        .args(["kernel", "uninstall", "--jupyter-path"])
        .arg(&jupyter)
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(!spec_path.exists());
    assert_eq!(
        fs::read_to_string(theirs.join("kernel.json")).unwrap(),
        "{\"display_name\": \"Rust\"}"
    );
}

#[test]
fn uninstall_without_our_kernel_says_so() {
    let home = tempfile::tempdir().unwrap();
    let out = command(home.path())
        .args(["kernel", "uninstall", "--jupyter-path"])
        .arg(home.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("no attention-lab-rust kernel"));
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// evcxr_jupyter's `--control_file` path reinstalls `kernels/rust` wherever JUPYTER_PATH or
/// the user's data folder points, when its version.txt differs (here: missing). Ours must not.
#[test]
fn serving_leaves_the_users_rust_kernelspec_byte_identical() {
    let home = tempfile::tempdir().unwrap();
    let decoy = br#"{"argv": ["/their/evcxr_jupyter"], "display_name": "Rust"}"#;
    let jupyter_path = home.path().join("jupyter-path");
    let user_data = home.path().join("data/jupyter");
    for dir in [&jupyter_path, &user_data] {
        let rust = dir.join("kernels/rust");
        fs::create_dir_all(&rust).unwrap();
        fs::write(rust.join("kernel.json"), decoy).unwrap();
    }
    let shell_port = free_port();
    let connection = serde_json::json!({
        "ip": "127.0.0.1", "transport": "tcp", "signature_scheme": "hmac-sha256",
        "key": "00112233", "shell_port": shell_port, "iopub_port": free_port(),
        "stdin_port": free_port(), "control_port": free_port(), "hb_port": free_port(),
    });
    let file = home.path().join("connection.json");
    fs::write(&file, connection.to_string()).unwrap();
    let mut child = command(home.path())
        .env("JUPYTER_PATH", &jupyter_path)
        .args(["kernel", "serve", "--control-file"])
        .arg(&file)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The update check runs before the kernel listens: once it listens, it is past.
    let started = Instant::now();
    let listening = loop {
        if TcpStream::connect(("127.0.0.1", shell_port)).is_ok() {
            break true;
        }
        if child.try_wait().unwrap().is_some() || started.elapsed() > Duration::from_secs(60) {
            break false;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(listening, "the kernel never listened: {stderr}");
    assert!(!stderr.contains("Updated Evcxr"), "{stderr}");
    for dir in [&jupyter_path, &user_data] {
        let rust = dir.join("kernels/rust");
        assert_eq!(fs::read(rust.join("kernel.json")).unwrap(), decoy);
        assert!(!rust.join("version.txt").exists());
    }
    // Its build folder is a persistent one of ours, keyed by nothing (no session name).
    assert!(home.path().join("cache/evcxr-build/slot-0.lock").exists());
}

#[test]
fn a_missing_subcommand_is_named_with_the_choices() {
    let home = tempfile::tempdir().unwrap();
    for (args, line) in [
        (
            &[][..],
            "error: attention-lab: a subcommand is missing: replay, show, solve, exercise, grade, \
             lab, hub, kernel, encode (attention-lab --help says more)\n",
        ),
        (
            &["kernel"][..],
            "error: attention-lab kernel: a subcommand is missing: install, uninstall, serve \
             (attention-lab kernel --help says more)\n",
        ),
    ] {
        let out = command(home.path()).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert_eq!(String::from_utf8_lossy(&out.stderr), line, "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}
