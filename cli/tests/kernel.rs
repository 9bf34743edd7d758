//! `attention-lab kernel`: the kernelspec it writes, and that serving a kernel leaves the
//! user's other kernels (evcxr_jupyter's `kernels/rust`) byte-identical, and its protocol side
//! against a hostile peer.
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is the test failing, as a failed assert is"
)]

use std::fs;
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use attention_lab_wire::{Key, Message, Session, DELIMITER};
use serde_json::{json, Value};
use std::process::Child;
use zeromq::{Socket, SocketRecv, SocketSend, ZmqMessage};

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
             lab, hub, kernel, encode, generate (attention-lab --help says more)\n",
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

// The kernel's protocol side against a hostile peer, as any user of the machine can be: bad
// frames, messages signed with another key or none, on every channel (a forged shutdown on
// control among them), then the owner's next cell must see the variables of the earlier one
// in the same process, and the owner's shutdown must end it.
const WAIT: Duration = Duration::from_secs(300);

fn zmq(frames: Vec<Vec<u8>>) -> ZmqMessage {
    ZmqMessage::try_from(
        frames
            .into_iter()
            .map(bytes::Bytes::from)
            .collect::<Vec<_>>(),
    )
    .unwrap()
}

struct Client {
    rt: tokio::runtime::Runtime,
    key: Key,
    session: Session,
    ports: Value,
}

impl Client {
    fn port(&self, channel: &str) -> u16 {
        let port = self.ports[format!("{channel}_port")].as_u64().unwrap();
        u16::try_from(port).unwrap()
    }

    fn endpoint(&self, channel: &str) -> String {
        format!("tcp://127.0.0.1:{}", self.port(channel))
    }

    fn dealer(&self, channel: &str) -> zeromq::DealerSocket {
        self.rt.block_on(async {
            let mut socket = zeromq::DealerSocket::new();
            socket.connect(&self.endpoint(channel)).await.unwrap();
            socket
        })
    }

    /// Sends `request` on `socket` and waits for its reply, skipping replies to anything else.
    fn ask(&self, socket: &mut zeromq::DealerSocket, request: &Message) -> Message {
        self.rt.block_on(async {
            socket.send(zmq(request.encode(&self.key))).await.unwrap();
            loop {
                let frames = tokio::time::timeout(WAIT, socket.recv())
                    .await
                    .unwrap_or_else(|_| panic!("no reply to {}", request.msg_type()))
                    .unwrap();
                let reply = Message::decode(&frames.into_vec(), &self.key).unwrap();
                if reply.parent_header["msg_id"] == request.header["msg_id"] {
                    return reply;
                }
            }
        })
    }

    /// Runs `code`; returns the reply and the iopub messages that answered it, up to idle.
    fn execute(
        &self,
        shell: &mut zeromq::DealerSocket,
        iopub: &mut zeromq::SubSocket,
        code: &str,
    ) -> (Message, Vec<Message>) {
        let request = Message::new(
            &self.session,
            "execute_request",
            json!({"code": code, "silent": false}),
        );
        let reply = self.ask(shell, &request);
        let mut published = Vec::new();
        self.rt.block_on(async {
            loop {
                let frames = tokio::time::timeout(WAIT, iopub.recv())
                    .await
                    .expect("no idle")
                    .unwrap();
                let message = Message::decode(&frames.into_vec(), &self.key).unwrap();
                if message.parent_header["msg_id"] != request.header["msg_id"] {
                    continue;
                }
                let idle =
                    message.msg_type() == "status" && message.content["execution_state"] == "idle";
                published.push(message);
                if idle {
                    break;
                }
            }
        });
        (reply, published)
    }

    /// Every kind of bad message an outsider can send, on a new connection to `channel`.
    fn attack(&self, channel: &str) {
        let mut socket = self.dealer(channel);
        let outsider = Key::new(b"a guess");
        let mut frames: Vec<Vec<Vec<u8>>> = vec![
            vec![b"raw bytes".to_vec()],
            vec![DELIMITER.to_vec(), b"00".to_vec()],
            // An odd-length hex signature (evcxr_jupyter's kernel ended on it).
            vec![
                DELIMITER.to_vec(),
                b"abc".to_vec(),
                b"{}".to_vec(),
                b"{}".to_vec(),
                b"{}".to_vec(),
                b"{}".to_vec(),
            ],
        ];
        for msg_type in [
            "kernel_info_request",
            "shutdown_request",
            "execute_request",
            "interrupt_request",
        ] {
            let forged = Message::new(
                &self.session,
                msg_type,
                json!({"code": "let x = 0;", "restart": false}),
            );
            frames.push(forged.encode(&outsider));
            frames.push(forged.encode(&Key::new(b"")));
        }
        self.rt.block_on(async {
            for f in frames {
                socket.send(zmq(f)).await.unwrap();
            }
            // Nothing comes back to an outsider.
            assert!(
                tokio::time::timeout(Duration::from_millis(500), socket.recv())
                    .await
                    .is_err()
            );
        });
    }
}

fn start(home: &Path, connection: &Value) -> Child {
    let file = home.join("connection.json");
    fs::write(&file, connection.to_string()).unwrap();
    command(home)
        .args(["kernel", "serve", "--control-file"])
        .arg(&file)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// A kernel on five free ports of 127.0.0.1 with the owner's key, once it listens.
fn serve_kernel(home: &Path) -> (Child, Client) {
    let ports = json!({
        "shell_port": free_port(), "iopub_port": free_port(), "stdin_port": free_port(),
        "control_port": free_port(), "hb_port": free_port(),
    });
    let mut connection = ports.clone();
    connection["ip"] = json!("127.0.0.1");
    connection["transport"] = json!("tcp");
    connection["signature_scheme"] = json!("hmac-sha256");
    connection["key"] = json!("the owner's key");
    let mut kernel = start(home, &connection);
    let client = Client {
        rt: tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap(),
        key: Key::new(b"the owner's key"),
        session: Session::new("owner"),
        ports,
    };
    let started = Instant::now();
    while TcpStream::connect(("127.0.0.1", client.port("shell"))).is_err() {
        assert!(
            kernel.try_wait().unwrap().is_none(),
            "the kernel ended before it listened"
        );
        assert!(started.elapsed() < WAIT, "the kernel never listened");
        std::thread::sleep(Duration::from_millis(100));
    }
    (kernel, client)
}

#[test]
fn bad_messages_on_every_channel_change_nothing_and_the_owner_s_shutdown_ends_it() {
    let home = tempfile::tempdir().unwrap();
    let (mut kernel, client) = serve_kernel(home.path());
    let mut shell = client.dealer("shell");
    let mut control = client.dealer("control");
    let mut iopub = client.rt.block_on(async {
        let mut socket = zeromq::SubSocket::new();
        socket.connect(&client.endpoint("iopub")).await.unwrap();
        socket.subscribe("").await.unwrap();
        socket
    });
    let info = client.ask(
        &mut shell,
        &Message::new(&client.session, "kernel_info_request", json!({})),
    );
    assert_eq!(info.content["implementation"], "attention-lab");
    let (reply, _) = client.execute(&mut shell, &mut iopub, "let x = 41;");
    assert_eq!(reply.content["status"], "ok", "{:?}", reply.content);

    for channel in ["shell", "control", "stdin", "shell", "control"] {
        client.attack(channel);
    }
    // The heartbeat echoes whatever it gets, and keeps doing so.
    client.rt.block_on(async {
        let mut hb = zeromq::ReqSocket::new();
        hb.connect(&client.endpoint("hb")).await.unwrap();
        for ping in [&b"\xff\x00 not a ping"[..], b"ping"] {
            hb.send(ZmqMessage::from(ping.to_vec())).await.unwrap();
            let pong = tokio::time::timeout(WAIT, hb.recv())
                .await
                .unwrap()
                .unwrap();
            assert_eq!(pong.get(0).unwrap().as_ref(), ping);
        }
    });

    assert!(
        kernel.try_wait().unwrap().is_none(),
        "a bad message ended the kernel"
    );
    let (reply, published) = client.execute(&mut shell, &mut iopub, "x + 1");
    assert_eq!(reply.content["status"], "ok", "{:?}", reply.content);
    let result = published
        .iter()
        .find(|m| m.msg_type() == "execute_result")
        .expect("no result");
    assert_eq!(result.content["data"]["text/plain"], "42");
    // A cell that does not compile: an error message with rustc's words, and the reply says so.
    let (reply, published) = client.execute(&mut shell, &mut iopub, "let y: i32 = \"s\";");
    assert_eq!(reply.content["status"], "error", "{:?}", reply.content);
    let error = published
        .iter()
        .find(|m| m.msg_type() == "error")
        .expect("no error message");
    assert!(
        error.content["evalue"]
            .as_str()
            .unwrap_or("")
            .contains("mismatched types"),
        "{:?}",
        error.content
    );
    assert_eq!(reply.content["evalue"], error.content["evalue"]);

    let shutdown = Message::new(
        &client.session,
        "shutdown_request",
        json!({"restart": false}),
    );
    let reply = client.ask(&mut control, &shutdown);
    assert_eq!(reply.content["status"], "ok");
    let stopped = Instant::now();
    let status = loop {
        if let Some(status) = kernel.try_wait().unwrap() {
            break status;
        }
        assert!(
            stopped.elapsed() < Duration::from_secs(30),
            "still running after its shutdown"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = kernel.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(status.success(), "{status}: {log}");
    // Each dropped message is one line that names the channel.
    for channel in ["shell", "control", "stdin"] {
        if channel != "stdin" {
            assert!(
                log.contains(&format!("dropped a message on {channel}: ")),
                "{log}"
            );
        }
    }
    assert!(log.contains("signature does not match the key"), "{log}");
}

#[test]
fn a_bad_connection_file_is_one_line_naming_it_with_status_2() {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("connection.json");
    for (text, says) in [
        ("not json", "not a Jupyter connection file"),
        (
            r#"{"ip": "127.0.0.1", "transport": "udp", "shell_port": 1, "iopub_port": 2, "stdin_port": 3, "control_port": 4, "hb_port": 5}"#,
            "transport \"udp\"",
        ),
        (
            r#"{"ip": "127.0.0.1", "signature_scheme": "hmac-md5", "shell_port": 1, "iopub_port": 2, "stdin_port": 3, "control_port": 4, "hb_port": 5}"#,
            "hmac-sha256 only",
        ),
    ] {
        fs::write(&file, text).unwrap();
        let out = command(home.path())
            .args(["kernel", "serve", "--control-file"])
            .arg(&file)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.contains(&file.display().to_string()) && stderr.contains(says),
            "{stderr}"
        );
    }
}

// Issue 41: a local peer with no key, as any user of the machine can be, on the kernel's TCP
// ports. After each attack, the owner's next cell sees its variable and the heartbeat answers
// the owner within 5 s.

/// A raw connection that has greeted as ZMTP 3.0 and said READY as `socket_type`.
fn raw_peer(port: u16, socket_type: &str, identity: &[u8]) -> TcpStream {
    use attention_lab_wire::zmtp::frame::{greeting, ready};
    use std::io::{Read, Write};
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(&greeting()).unwrap();
    let mut theirs = [0u8; 64];
    s.read_exact(&mut theirs).unwrap();
    s.write_all(&ready(socket_type, identity)).unwrap();
    s
}

/// Whether the kernel closes `s` within 10 s.
fn closed_by_kernel(mut s: TcpStream) -> bool {
    use std::io::Read;
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return true,
            Ok(_) => {}
        }
    }
}

/// The owner: shell and heartbeat through the zeromq crate, iopub read raw and at once (so that
/// the owner is never the slow reader), as Jupyter's own client reads it.
struct Owner {
    shell: zeromq::DealerSocket,
    /// Kept between cells: its buffer may hold the start of the next message.
    iopub: Option<attention_lab_wire::zmtp::frame::Reader<std::io::BufReader<TcpStream>>>,
    hb: zeromq::ReqSocket,
}

impl Owner {
    /// Runs `code`: its reply, and the iopub messages under it up to idle.
    fn execute(&mut self, client: &Client, code: &str) -> (Message, Vec<Message>) {
        let request = Message::new(
            &client.session,
            "execute_request",
            json!({"code": code, "silent": false}),
        );
        let id = request.header["msg_id"].clone();
        let key = client.key.clone();
        let mut reader = self.iopub.take().expect("iopub");
        let reading = std::thread::spawn(move || {
            let mut published = Vec::new();
            loop {
                let frames = reader.message().expect("iopub ended before idle");
                let Ok(message) = Message::decode(&frames, &key) else {
                    continue;
                };
                if message.parent_header["msg_id"] != id {
                    continue;
                }
                let idle =
                    message.msg_type() == "status" && message.content["execution_state"] == "idle";
                published.push(message);
                if idle {
                    return (reader, published);
                }
            }
        });
        let reply = client.ask(&mut self.shell, &request);
        let (reader, published) = reading.join().unwrap();
        self.iopub = Some(reader);
        (reply, published)
    }

    /// Connects as the kernel's owner: its shell named by the session id, as jupyter_client
    /// names it (returned too, for a stranger to claim), its heartbeat, and iopub subscribed
    /// to all and past the kernel's READY.
    fn connect(client: &Client) -> (Owner, Vec<u8>) {
        use attention_lab_wire::zmtp::frame::encode_message;
        use std::io::{Read, Write};
        let identity = client.session.header("x")["session"]
            .as_str()
            .unwrap()
            .as_bytes()
            .to_vec();
        let (shell, hb) = client.rt.block_on(async {
            let mut options = zeromq::SocketOptions::default();
            options.peer_identity(zeromq::util::PeerIdentity::try_from(identity.clone()).unwrap());
            let mut shell = zeromq::DealerSocket::with_options(options);
            shell.connect(&client.endpoint("shell")).await.unwrap();
            let mut hb = zeromq::ReqSocket::new();
            hb.connect(&client.endpoint("hb")).await.unwrap();
            (shell, hb)
        });
        let mut iopub = raw_peer(client.port("iopub"), "SUB", b"");
        iopub.write_all(&encode_message(&[vec![1u8]])).unwrap();
        // The kernel's READY: flags and a short length, then its body.
        let mut ready = [0u8; 2];
        iopub.read_exact(&mut ready).unwrap();
        let mut body = vec![0u8; usize::from(ready[1])];
        iopub.read_exact(&mut body).unwrap();
        iopub.set_read_timeout(Some(WAIT)).unwrap();
        let iopub =
            attention_lab_wire::zmtp::frame::Reader::new(std::io::BufReader::new(iopub), 1 << 30);
        let owner = Owner {
            shell,
            iopub: Some(iopub),
            hb,
        };
        (owner, identity)
    }

    /// The owner's next cell sees `x`, and the heartbeat echoes within 5 s.
    fn still_served(&mut self, client: &Client, kernel: &mut Child, after: &str) {
        assert!(
            kernel.try_wait().unwrap().is_none(),
            "{after}: the kernel ended"
        );
        let ping = format!("ping after {after}").into_bytes();
        client.rt.block_on(async {
            self.hb.send(ZmqMessage::from(ping.clone())).await.unwrap();
            let pong = tokio::time::timeout(Duration::from_secs(5), self.hb.recv())
                .await
                .unwrap_or_else(|_| panic!("{after}: no heartbeat within 5 s"))
                .unwrap();
            assert_eq!(pong.get(0).unwrap().as_ref(), &ping[..]);
        });
        let started = Instant::now();
        let (reply, published) = self.execute(client, "x + 1");
        assert_eq!(
            reply.content["status"], "ok",
            "{after}: {:?}",
            reply.content
        );
        let result = published.iter().find(|m| m.msg_type() == "execute_result");
        assert_eq!(
            result.expect("no result").content["data"]["text/plain"],
            "42",
            "{after}"
        );
        assert!(started.elapsed() < Duration::from_secs(60), "{after}");
    }
}

#[test]
fn no_local_peer_without_the_key_can_end_stall_or_take_the_kernel() {
    use attention_lab_wire::zmtp::frame::{encode_message, greeting};
    use std::io::Write;
    let home = tempfile::tempdir().unwrap();
    let (mut kernel, client) = serve_kernel(home.path());
    let (mut owner, identity) = Owner::connect(&client);
    let (reply, _) = owner.execute(&client, "let x = 41;");
    assert_eq!(reply.content["status"], "ok", "{:?}", reply.content);
    let channels = ["shell", "control", "stdin", "iopub", "hb"];

    // 1. A frame header claiming 1 TiB, before any handshake, on each of the five ports.
    for channel in channels {
        let mut s = TcpStream::connect(("127.0.0.1", client.port(channel))).unwrap();
        let mut attack = greeting().to_vec();
        attack.push(0x02);
        attack.extend((1u64 << 40).to_be_bytes());
        s.write_all(&attack).unwrap();
        assert!(closed_by_kernel(s), "1 TiB on {channel}");
    }
    owner.still_served(&client, &mut kernel, "a 1 TiB frame header");

    // 2. A 100 MB frame trickled in on shell and on control, while the owner works.
    let mut trickles = Vec::new();
    for channel in ["shell", "control"] {
        let mut s = raw_peer(client.port(channel), "DEALER", b"");
        let mut header = vec![0x02];
        header.extend((100u64 << 20).to_be_bytes());
        s.write_all(&header).unwrap();
        trickles.push(std::thread::spawn(move || {
            for _ in 0..100 {
                if s.write_all(&[0u8; 4096]).is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }));
    }
    owner.still_served(&client, &mut kernel, "a trickled 100 MB frame");
    let info = Message::new(&client.session, "kernel_info_request", json!({}));
    let mut control = client.dealer("control");
    let asked = Instant::now();
    assert_eq!(
        client.ask(&mut control, &info).content["implementation"],
        "attention-lab"
    );
    assert!(asked.elapsed() < Duration::from_secs(10));

    // 3. A stranger on shell with the owner's socket identity is refused.
    let stranger = raw_peer(client.port("shell"), "DEALER", &identity);
    assert!(closed_by_kernel(stranger));
    owner.still_served(&client, &mut kernel, "a stranger with the owner's identity");

    // 4. A 64 MB heartbeat ping, and pings under the cap whose echoes are never read.
    let mut big = raw_peer(client.port("hb"), "REQ", b"");
    let _ = big.write_all(&encode_message(&[Vec::new(), vec![1u8; 64 << 20]]));
    assert!(closed_by_kernel(big));
    let mut sleeper = raw_peer(client.port("hb"), "REQ", b"");
    let ping = encode_message(&[Vec::new(), vec![2u8; 900 << 10]]);
    let sleeping = std::thread::spawn(move || {
        for _ in 0..64 {
            if sleeper.write_all(&ping).is_err() {
                break;
            }
        }
        sleeper
    });
    owner.still_served(&client, &mut kernel, "64 MB heartbeat pings never read");

    // 5. Malformed ZMTP commands, and a frame length of 2^64 - 1.
    for attack in &malformed_commands() {
        for channel in channels {
            let mut s = TcpStream::connect(("127.0.0.1", client.port(channel))).unwrap();
            s.write_all(&greeting()).unwrap();
            s.write_all(attack).unwrap();
            assert!(closed_by_kernel(s), "{attack:?} on {channel}");
        }
    }
    owner.still_served(&client, &mut kernel, "malformed commands");

    // 6. A subscriber that never reads, while the owner's cell prints 40 MB.
    let mut lurker = raw_peer(client.port("iopub"), "SUB", b"");
    lurker.write_all(&encode_message(&[vec![1u8]])).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let (reply, published) = owner.execute(
        &client,
        "for _ in 0..10000 { println!(\"{}\", \"y\".repeat(4000)); }",
    );
    assert_eq!(reply.content["status"], "ok", "{:?}", reply.content);
    assert_eq!(streamed(&published, 'y'), 40_000_000);
    owner.still_served(&client, &mut kernel, "a subscriber that never reads");

    drop((lurker, sleeping.join().unwrap()));
    for t in trickles {
        let _ = t.join();
    }
    assert_logged(
        kernel,
        &[
            "a frame of 1099511627776 bytes, over the channel's cap of 268435456",
            "over the channel's cap of 1048576",
            "is already connected; a second peer may not take it",
            "an empty command frame",
            "READY: a value runs past the command",
            "a frame of 18446744073709551615 bytes",
        ],
    );
}

/// How many times `c` is in the stream messages of `published`.
fn streamed(published: &[Message], c: char) -> usize {
    published
        .iter()
        .filter(|m| m.msg_type() == "stream")
        .map(|m| m.content["text"].as_str().unwrap_or("").matches(c).count())
        .sum()
}

/// Step 5's attacks after the greeting: an empty command frame, a command whose name runs
/// past it, a READY whose property's value runs past it, and a frame of 2^64 - 1 bytes.
fn malformed_commands() -> [Vec<u8>; 4] {
    let mut long_property = vec![4u8, 0, 5];
    long_property.extend(b"READY");
    long_property.push(11);
    long_property.extend(b"Socket-Type");
    long_property.extend(u32::MAX.to_be_bytes());
    long_property[1] = u8::try_from(long_property.len() - 2).unwrap();
    let mut longest = vec![0x02];
    longest.extend(u64::MAX.to_be_bytes());
    [
        vec![0x04, 0x00],
        vec![0x04, 0x03, 0xff, b'A', b'B'],
        long_property,
        longest,
    ]
}

/// Ends the kernel; its log has a line with each of `says` and no panic.
fn assert_logged(mut kernel: Child, says: &[&str]) {
    let _ = kernel.kill();
    let out = kernel.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    for says in says {
        assert!(
            log.contains(says),
            "no line with {says:?} in the log:\n{log}"
        );
    }
    assert!(!log.contains("panicked"), "{log}");
}
