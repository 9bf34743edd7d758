//! The protocol over real frames on `ipc` sockets, served with an engine of the test's own
//! ([`Echo`]): no evcxr is built (`cargo test -p attention-lab-jupyter --no-default-features`).

use super::*;
use crate::replay::engine::{CellRun, Completion, Completions};
use attention_lab_wire::zmtp::frame::{encode_message, greeting, ready, Incoming, Reader};
use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Instant;

#[test]
fn ipc_endpoints_are_named_as_jupyter_names_them() {
    let connection: Connection = serde_json::from_str(
        r#"{"transport": "ipc", "ip": "/run/k", "shell_port": 1, "iopub_port": 2,
            "stdin_port": 3, "control_port": 4, "hb_port": 5, "key": "k"}"#,
    )
    .unwrap();
    assert_eq!(connection.endpoint(4).to_string(), "ipc:///run/k-4");
}

/// An engine of the test's own: a cell's code goes out live on stdout, its value is its
/// length in characters, and the cell `fail` fails. It completes a word to its capitals,
/// names the word it inspects, and counts its interrupts.
struct Echo {
    live: Live,
    interrupts: Arc<AtomicUsize>,
}

impl Session for Echo {
    fn run(&mut self, _count: usize, code: &str) -> CellRun {
        (self.live)(Output::Stream {
            stderr: false,
            text: format!("{code}\n"),
        });
        let outputs = match code {
            "fail" => vec![Output::error("it failed")],
            _ => {
                let length = code.chars().count().to_string();
                vec![Output::Result(BTreeMap::from([(
                    "text/plain".into(),
                    length,
                )]))]
            }
        };
        CellRun {
            outputs,
            raised: None,
            seconds: 0.0,
        }
    }

    fn lost(&self) -> Option<&str> {
        None
    }

    fn shutdown(self: Box<Self>) {}

    fn complete(&mut self, code: &str, cursor: usize) -> std::result::Result<Completions, String> {
        let word: String = code.chars().take(cursor).collect();
        let item = Completion {
            code: word.to_uppercase(),
            label: word,
            kind: "word".into(),
        };
        Ok(Completions {
            start: 0,
            end: cursor,
            items: vec![item],
        })
    }

    fn inspect(&mut self, code: &str, _cursor: usize) -> Option<BTreeMap<String, String>> {
        Some(BTreeMap::from([(
            "text/plain".into(),
            format!("about {code}"),
        )]))
    }

    fn interrupter(&self) -> Interrupt {
        let interrupts = self.interrupts.clone();
        Arc::new(move || {
            interrupts.fetch_add(1, Ordering::SeqCst);
        })
    }
}

/// A connection to one of the kernel's sockets, greeted as Jupyter's client greets it.
fn connect(path: &Path, socket_type: &str) -> UnixStream {
    // The kernel binds on its own thread: its socket file comes when it does.
    let deadline = Instant::now() + Duration::from_secs(10);
    let stream = loop {
        match UnixStream::connect(path) {
            Ok(stream) => break stream,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            Err(error) => panic!("{}: {error}", path.display()),
        }
    };
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    (&stream).write_all(&greeting()).unwrap();
    let mut reader = Reader::new(&stream, 1 << 20);
    reader.greeting().unwrap();
    (&stream).write_all(&ready(socket_type, b"")).unwrap();
    let answer = reader.incoming().unwrap();
    assert!(matches!(answer, Incoming::Command { name, .. } if name == b"READY"));
    stream
}

/// Jupyter's client of a kernel that serves [`Echo`]: shell and control as DEALERs, iopub's
/// messages as they come.
struct Client {
    key: Key,
    session: attention_lab_wire::Session,
    shell: UnixStream,
    control: UnixStream,
    iopub: mpsc::Receiver<Message>,
    interrupts: Arc<AtomicUsize>,
    _dir: tempfile::TempDir,
}

impl Client {
    /// Serves a kernel on `ipc` sockets of a new folder and connects to it.
    fn start() -> Client {
        let dir = tempfile::tempdir().unwrap();
        let ip = dir.path().join("kernel");
        let file = dir.path().join("kernel.json");
        let connection = json!({
            "transport": "ipc", "ip": ip, "key": "secret", "signature_scheme": "hmac-sha256",
            "shell_port": 1, "iopub_port": 2, "stdin_port": 3, "control_port": 4, "hb_port": 5,
        });
        std::fs::write(&file, connection.to_string()).unwrap();
        let interrupts = Arc::new(AtomicUsize::new(0));
        let counted = interrupts.clone();
        std::thread::spawn(move || {
            let start = |live| {
                let echo = Echo {
                    live,
                    interrupts: counted,
                };
                Ok(Box::new(echo) as Box<dyn Session>)
            };
            serve_naming(&file, start, "test-serving").unwrap();
        });
        let key = Key::new(b"secret");
        let at = |port: u16| PathBuf::from(format!("{}-{port}", ip.display()));
        let iopub = connect(&at(2), "SUB");
        // Every topic: ZMTP 3.0's subscription, 1 then the (empty) topic.
        (&iopub).write_all(&encode_message(&[[1u8]])).unwrap();
        let (published, received) = mpsc::channel();
        let reader_key = Key::new(b"secret");
        std::thread::spawn(move || {
            while let Ok(frames) = Reader::new(&iopub, 1 << 24).message() {
                let message = Message::decode(&frames, &reader_key).unwrap();
                if published.send(message).is_err() {
                    return;
                }
            }
        });
        let client = Client {
            key,
            session: attention_lab_wire::Session::new("client"),
            shell: connect(&at(1), "DEALER"),
            control: connect(&at(4), "DEALER"),
            iopub: received,
            interrupts,
            _dir: dir,
        };
        // The subscription takes effect on a thread of the kernel's: ask for its info
        // until iopub answers, as Jupyter's clients do.
        let subscribed = (0..50).any(|_| {
            client.ask_on(&client.shell, "kernel_info_request", json!({}));
            client
                .iopub
                .recv_timeout(Duration::from_millis(200))
                .is_ok()
        });
        assert!(subscribed, "iopub never published");
        client
    }

    /// Sends a request on `channel` and gives it and its reply.
    fn ask_on(&self, channel: &UnixStream, msg_type: &str, content: Value) -> (Message, Message) {
        let request = Message::new(&self.session, msg_type, content);
        (&*channel)
            .write_all(&encode_message(&request.encode(&self.key)))
            .unwrap();
        let frames = Reader::new(channel, 1 << 24).message().unwrap();
        (request, Message::decode(&frames, &self.key).unwrap())
    }

    /// A shell request's reply, and what iopub published for it up to its idle status.
    fn ask(&self, msg_type: &str, content: Value) -> (Message, Vec<Message>) {
        let (request, reply) = self.ask_on(&self.shell, msg_type, content);
        assert_eq!(reply.parent_header["msg_id"], request.header["msg_id"]);
        let mut published = Vec::new();
        loop {
            let message = self.iopub.recv_timeout(Duration::from_secs(10)).unwrap();
            if message.parent_header["msg_id"] != request.header["msg_id"] {
                continue; // an earlier request's
            }
            let idle = message.content["execution_state"] == "idle";
            published.push(message);
            if idle {
                return (reply, published);
            }
        }
    }
}

fn types(published: &[Message]) -> Vec<&str> {
    published.iter().map(Message::msg_type).collect()
}

#[test]
fn an_execute_request_is_answered_as_jupyter_orders_it() {
    let client = Client::start();
    let code = "x + 1";
    let (reply, published) = client.ask("execute_request", json!({"code": code}));
    assert_eq!(
        types(&published),
        [
            "status",
            "execute_input",
            "stream",
            "execute_result",
            "status"
        ]
    );
    assert_eq!(published[0].content["execution_state"], "busy");
    assert_eq!(
        published[1].content,
        json!({"code": code, "execution_count": 1})
    );
    let line = json!({"name": "stdout", "text": format!("{code}\n")});
    assert_eq!(published[2].content, line);
    let result = &published[3].content;
    assert_eq!(
        result["data"]["text/plain"],
        code.chars().count().to_string()
    );
    assert_eq!(result["execution_count"], 1);
    assert_eq!(reply.msg_type(), "execute_reply");
    assert_eq!(reply.content["status"], "ok");
    assert_eq!(reply.content["execution_count"], 1);

    let (reply, published) = client.ask("execute_request", json!({"code": "fail"}));
    assert_eq!(
        types(&published),
        ["status", "execute_input", "stream", "error", "status"]
    );
    assert_eq!(published[3].content["evalue"], "it failed");
    assert_eq!(reply.content["status"], "error");
    assert_eq!(reply.content["evalue"], "it failed");
    assert_eq!(reply.content["execution_count"], 2);
}

#[test]
fn complete_inspect_and_interrupt_reach_the_engine() {
    let client = Client::start();
    let (reply, published) = client.ask(
        "complete_request",
        json!({"code": "été x", "cursor_pos": 3}),
    );
    assert_eq!(types(&published), ["status", "status"]);
    assert_eq!(reply.content["matches"], json!(["ÉTÉ"]));
    assert_eq!(reply.content["cursor_start"], 0);
    assert_eq!(reply.content["cursor_end"], 3);
    assert_eq!(
        reply.content["metadata"]["_jupyter_types_experimental"][0]["type"],
        "word"
    );

    let (reply, _) = client.ask("inspect_request", json!({"code": "wq", "cursor_pos": 1}));
    assert_eq!(reply.content["found"], true);
    assert_eq!(reply.content["data"]["text/plain"], "about wq");

    assert_eq!(client.interrupts.load(Ordering::SeqCst), 0);
    let (_, reply) = client.ask_on(&client.control, "interrupt_request", json!({}));
    assert_eq!(reply.msg_type(), "interrupt_reply");
    assert_eq!(client.interrupts.load(Ordering::SeqCst), 1);
}
