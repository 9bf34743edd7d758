//! The kernel's Jupyter side: the five sockets of a connection file, the messages of the
//! messaging protocol, busy and idle, the heartbeat and the control channel. The cells run in
//! an engine behind replay's seam ([`Session`]: run, complete, inspect, interrupt), evcxr's
//! in the kernel (`kernel::context`), so that the protocol is tested without evcxr.
//!
//! Two rules shape it:
//! - **Nothing a peer sends stops the kernel.** Every message goes through
//!   [`Message::decode`]; one whose signature fails, or that cannot be read, is dropped with
//!   one line on stderr (the server's log), and the channel goes on reading. Any user of the
//!   machine can reach a TCP port; only the key's holder can make the kernel act.
//! - **No peer can stall, end or take a channel.** The sockets are the wire crate's own ZMTP
//!   ([`attention_lab_wire::zmtp`]): every connection is read and written on threads of its
//!   own, a frame over the channel's cap closes its connection with one line, no send waits on
//!   a peer, and a second peer cannot take a live routing identity. The caps are settings:
//!   `ATTENTION_LAB_MAX_FRAME_SHELL` (default 256M) for shell, `ATTENTION_LAB_MAX_FRAME`
//!   (default 1M) for control, stdin, iopub and the heartbeat.

use crate::replay::engine::{Interrupt, Live, Output, Session};
use attention_lab_io::error::{warn, Result};
use attention_lab_io::problem;
use attention_lab_wire::zmtp::{self, Endpoint, Kind, Limits, Socket};
use attention_lab_wire::{Key, Message};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The setting of shell's frame cap, and its default: a cell's code, or a comm's buffers.
const SHELL_CAP: (&str, &str) = ("ATTENTION_LAB_MAX_FRAME_SHELL", "256M");
/// The other channels' cap: their messages are small.
const OTHER_CAP: (&str, &str) = ("ATTENTION_LAB_MAX_FRAME", "1M");

/// The name of the thread the kernel's server starts once its engine has started (its control
/// channel's): the hub's priority watcher (`priority`) waits for it.
pub const SERVING_THREAD: &str = "alab-serving";

/// The connection file Jupyter writes for a kernel.
#[derive(Debug, serde::Deserialize)]
struct Connection {
    #[serde(default = "tcp")]
    transport: String,
    ip: String,
    #[serde(default)]
    key: String,
    #[serde(default = "hmac_sha256")]
    signature_scheme: String,
    shell_port: u16,
    iopub_port: u16,
    stdin_port: u16,
    control_port: u16,
    hb_port: u16,
}

fn tcp() -> String {
    "tcp".into()
}

fn hmac_sha256() -> String {
    "hmac-sha256".into()
}

impl Connection {
    fn read(path: &Path) -> Result<Connection> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            problem!(
                "{}: {}",
                path.display(),
                attention_lab_io::error::io_text(&e)
            )
        })?;
        let connection: Connection = serde_json::from_str(&text)
            .map_err(|e| problem!("{}: not a Jupyter connection file: {e}", path.display()))?;
        if connection.signature_scheme != "hmac-sha256" {
            return Err(problem!(
                "{}: signature_scheme {:?}, this kernel signs with hmac-sha256 only",
                path.display(),
                connection.signature_scheme
            ));
        }
        if !matches!(connection.transport.as_str(), "tcp" | "ipc") {
            return Err(problem!(
                "{}: transport {:?}, expected tcp or ipc",
                path.display(),
                connection.transport
            ));
        }
        Ok(connection)
    }

    /// Where a channel listens, as Jupyter's client connects to it: `ipc` sockets are files
    /// named `{ip}-{port}`.
    fn endpoint(&self, port: u16) -> Endpoint {
        match self.transport.as_str() {
            "ipc" => Endpoint::Ipc(PathBuf::from(format!("{}-{port}", self.ip))),
            _ => Endpoint::Tcp {
                ip: self.ip.clone(),
                port,
            },
        }
    }
}

/// A frame cap from its setting `(variable, default)`.
fn frame_cap((variable, default): (&str, &str)) -> Result<u64> {
    let text = std::env::var(variable).unwrap_or_else(|_| default.to_string());
    attention_lab_io::size::parse_size(&text).map_err(|e| problem!("{variable}: {e}"))
}

/// What every channel's thread shares.
struct Kernel {
    key: Key,
    session: attention_lab_wire::Session,
    iopub: Socket,
    /// The request whose cell is running, and its execution count: what the engine passes
    /// while it runs is published as the request's children.
    running: Mutex<Option<(Message, u64)>>,
}

impl Kernel {
    /// Publishes a message on iopub; a failed send is one line in the log (the frontend
    /// reconnects), never the kernel's end.
    fn publish(&self, message: Message) {
        self.send(&self.iopub, "iopub", &message);
    }

    /// Signs and queues `message` on `socket`; a failed send is one line naming `what`.
    fn send(&self, socket: &Socket, what: &str, message: &Message) {
        if let Err(error) = socket.send(&message.encode(&self.key)) {
            warn(&format!("attention-lab kernel: {what}: {error}"));
        }
    }

    fn status(&self, parent: &Message, state: &str) {
        self.publish(parent.reply(&self.session, "status", json!({"execution_state": state})));
    }

    /// Publishes `output` of the cell that `parent` runs (execution `count`).
    fn publish_output(&self, parent: &Message, count: u64, output: &Output) {
        let (kind, content) = output.to_message(count);
        self.publish(parent.reply(&self.session, kind, content));
    }

    fn set_running(&self, running: Option<(Message, u64)>) {
        *self.running.lock().unwrap_or_else(|e| e.into_inner()) = running;
    }
}

/// A ROUTER channel (shell, control) read on the calling thread.
struct Channel {
    name: &'static str,
    socket: Socket,
}

impl Channel {
    /// The next message whose signature holds; anything else is dropped with a line.
    fn next(&mut self, kernel: &Kernel) -> Message {
        loop {
            let frames = self.socket.recv();
            match Message::decode(&frames, &kernel.key) {
                Ok(message) => return message,
                Err(error) => warn(&format!(
                    "attention-lab kernel: dropped a message on {}: {error}",
                    self.name
                )),
            }
        }
    }

    fn send(&mut self, kernel: &Kernel, message: Message) {
        // The peer may have gone (a transient channel of the server): the reply has no one
        // to go to, which is no fault of the kernel.
        let what = format!("{} reply", self.name);
        kernel.send(&self.socket, &what, &message);
    }
}

/// Serves the kernel of `connection_file`, its cells run by the engine that `start` makes,
/// until a shutdown request.
///
/// ```no_run
/// use attention_lab_jupyter::kernel::server::serve;
/// use attention_lab_jupyter::replay::engine::{CellRun, Session};
/// /// Runs nothing: every cell gives no output.
/// struct Nothing;
/// impl Session for Nothing {
///     fn run(&mut self, _count: usize, _code: &str) -> CellRun {
///         CellRun { outputs: Vec::new(), raised: None, seconds: 0.0 }
///     }
///     fn lost(&self) -> Option<&str> {
///         None
///     }
///     fn shutdown(self: Box<Self>) {}
/// }
/// serve(std::path::Path::new("kernel-1.json"), |_live| Ok(Box::new(Nothing)))?;
/// # Ok::<(), attention_lab_io::error::Error>(())
/// ```
///
/// # Errors
/// An unreadable connection file, a port that cannot be bound, the engine failing to start.
pub fn serve(
    connection_file: &Path,
    start: impl FnOnce(Live) -> Result<Box<dyn Session>>,
) -> Result<()> {
    serve_naming(connection_file, start, SERVING_THREAD)
}

/// [`serve`], its control thread named `serving` (a test's server must not look like a
/// kernel to the priority watcher's test in the same process).
fn serve_naming(
    connection_file: &Path,
    start: impl FnOnce(Live) -> Result<Box<dyn Session>>,
    serving: &str,
) -> Result<()> {
    let connection = Connection::read(connection_file)?;
    let shell_cap = frame_cap(SHELL_CAP)?;
    let other_cap = frame_cap(OTHER_CAP)?;
    let c = &connection;
    let shell = listen(Kind::Router, "shell", c.endpoint(c.shell_port), shell_cap)?;
    let control = listen(
        Kind::Router,
        "control",
        c.endpoint(c.control_port),
        other_cap,
    )?;
    // Bound (clients connect to it), but cells never read input.
    let _stdin = listen(Kind::Router, "stdin", c.endpoint(c.stdin_port), other_cap)?;
    let iopub = listen(Kind::Pub, "iopub", c.endpoint(c.iopub_port), other_cap)?;
    // Whatever comes to the heartbeat goes back unchanged, on the socket's own threads.
    let _hb = listen(Kind::Echo, "hb", c.endpoint(c.hb_port), other_cap)?;
    let kernel = Arc::new(Kernel {
        key: Key::new(connection.key.as_bytes()),
        session: attention_lab_wire::Session::new("kernel"),
        iopub,
        running: Mutex::new(None),
    });
    let live: Live = {
        let kernel = kernel.clone();
        Arc::new(move |output| {
            let running = kernel
                .running
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            if let Some((parent, count)) = running {
                kernel.publish_output(&parent, count, &output);
            }
        })
    };
    let engine = start(live)?;
    let interrupt = engine.interrupter();
    let mut shell = Shell {
        kernel,
        channel: Channel {
            name: "shell",
            socket: shell,
        },
        engine,
        interrupt: interrupt.clone(),
        execution_count: 0,
    };
    {
        let kernel = shell.kernel.clone();
        let channel = Channel {
            name: "control",
            socket: control,
        };
        // Named so that the hub's priority watcher sees that the start is done.
        std::thread::Builder::new()
            .name(serving.into())
            .spawn(move || control_loop(&kernel, channel, &interrupt))
            .map_err(|e| problem!("no thread for control: {e}"))?;
    }
    shell.run();
    Ok(())
}

/// A socket of `kind` listening on `endpoint` (the channel `name`'s), reading frames of at
/// most `max_frame` bytes; what it refuses goes to the log, one line each.
fn listen(kind: Kind, name: &str, endpoint: Endpoint, max_frame: u64) -> Result<Socket> {
    let limits = Limits {
        max_frame,
        ..Limits::default()
    };
    let log: zmtp::Log = Arc::new(|line: &str| warn(&format!("attention-lab kernel: {line}")));
    zmtp::bind(kind, name, &endpoint, limits, log)
        .map_err(|e| problem!("cannot listen on {endpoint} ({name}): {e}"))
}

fn kernel_info() -> Value {
    json!({
        "status": "ok",
        "protocol_version": attention_lab_wire::PROTOCOL_VERSION,
        "implementation": "attention-lab",
        "implementation_version": env!("CARGO_PKG_VERSION"),
        "language_info": super::spec::language_info(),
        "banner": "attention-lab: Rust through evcxr",
        "help_links": [{"text": "Rust std docs", "url": "https://doc.rust-lang.org/stable/std/"}],
    })
}

fn control_loop(kernel: &Kernel, mut channel: Channel, interrupt: &Interrupt) {
    loop {
        let request = channel.next(kernel);
        match request.msg_type() {
            "kernel_info_request" => channel.send(
                kernel,
                request.reply(&kernel.session, "kernel_info_reply", kernel_info()),
            ),
            "interrupt_request" => {
                interrupt();
                channel.send(
                    kernel,
                    request.reply(&kernel.session, "interrupt_reply", json!({"status": "ok"})),
                );
            }
            "shutdown_request" => shut_down(kernel, &mut channel, &request, interrupt),
            other => warn(&format!(
                "attention-lab kernel: control: no handler for {other:?}"
            )),
        }
    }
}

fn shut_down(
    kernel: &Kernel,
    channel: &mut Channel,
    request: &Message,
    interrupt: &Interrupt,
) -> ! {
    let restart = request.content["restart"].as_bool().unwrap_or(false);
    let content = json!({"status": "ok", "restart": restart});
    channel.send(
        kernel,
        request.reply(&kernel.session, "shutdown_reply", content),
    );
    // The reply is queued for the channel's writer thread, which exit would end unwritten.
    channel.socket.flush(Duration::from_secs(2));
    kernel.iopub.flush(Duration::from_secs(2));
    // No process of the engine (evcxr's child) outlives the kernel.
    interrupt();
    std::process::exit(0)
}

struct Shell {
    kernel: Arc<Kernel>,
    channel: Channel,
    engine: Box<dyn Session>,
    interrupt: Interrupt,
    execution_count: u64,
}

impl Shell {
    fn run(&mut self) {
        loop {
            let request = self.channel.next(&self.kernel);
            self.kernel.status(&request, "busy");
            self.answer(&request);
            self.kernel.status(&request, "idle");
        }
    }

    fn reply(&mut self, request: &Message, msg_type: &str, content: Value) {
        let reply = request.reply(&self.kernel.session, msg_type, content);
        self.channel.send(&self.kernel, reply);
    }

    fn answer(&mut self, request: &Message) {
        let code = request.content["code"].as_str().unwrap_or("").to_string();
        match request.msg_type() {
            "kernel_info_request" => self.reply(request, "kernel_info_reply", kernel_info()),
            "execute_request" => self.execute(request, &code),
            "is_complete_request" => {
                self.reply(request, "is_complete_reply", json!({"status": "complete"}))
            }
            "complete_request" => {
                let content = self.complete(&code, cursor(request));
                self.reply(request, "complete_reply", content)
            }
            "inspect_request" => {
                let content = self.inspect(&code, cursor(request));
                self.reply(request, "inspect_reply", content)
            }
            "comm_info_request" => self.reply(
                request,
                "comm_info_reply",
                json!({"status": "ok", "comms": {}}),
            ),
            "history_request" => self.reply(
                request,
                "history_reply",
                json!({"status": "ok", "history": []}),
            ),
            "comm_open" => {
                // No comm targets: the comm is closed at once, as the protocol asks.
                let comm_id = request.content["comm_id"].clone();
                let close = json!({"comm_id": comm_id, "data": {}});
                self.kernel
                    .publish(request.reply(&self.kernel.session, "comm_close", close));
            }
            "shutdown_request" => {
                shut_down(&self.kernel, &mut self.channel, request, &self.interrupt)
            }
            other => warn(&format!(
                "attention-lab kernel: shell: no handler for {other:?}"
            )),
        }
    }

    fn execute(&mut self, request: &Message, code: &str) {
        let silent = request.content["silent"].as_bool().unwrap_or(false);
        if !silent {
            self.execution_count += 1;
        }
        let count = self.execution_count;
        let kernel = self.kernel.clone();
        kernel.publish(request.reply(
            &kernel.session,
            "execute_input",
            json!({"code": code, "execution_count": count}),
        ));
        kernel.set_running(Some((request.clone(), count)));
        // What the engine passed live went out as it came; the run holds the rest.
        let run = self
            .engine
            .run(usize::try_from(count).unwrap_or(usize::MAX), code);
        let mut failed = None;
        for output in &run.outputs {
            if let Output::Error { evalue, traceback } = output {
                failed = Some((evalue.clone(), traceback.clone()));
            }
            kernel.publish_output(request, count, output);
        }
        kernel.set_running(None);
        let reply = match failed {
            None => {
                json!({"status": "ok", "execution_count": count, "user_expressions": {}, "payload": []})
            }
            Some((evalue, traceback)) => json!({
                "status": "error",
                "execution_count": count,
                "ename": "Error",
                "evalue": evalue,
                "traceback": traceback,
            }),
        };
        self.reply(request, "execute_reply", reply);
    }

    fn complete(&mut self, code: &str, cursor: usize) -> Value {
        match self.engine.complete(code, cursor) {
            Ok(found) => {
                let (start, end) = (found.start, found.end);
                let matches: Vec<&str> = found.items.iter().map(|c| c.code.as_str()).collect();
                let types: Vec<Value> = found
                    .items
                    .iter()
                    .map(|c| json!({"text": c.label, "type": c.kind, "start": start, "end": end}))
                    .collect();
                json!({
                    "status": "ok", "matches": matches, "cursor_start": start, "cursor_end": end,
                    "metadata": {"_jupyter_types_experimental": types},
                })
            }
            Err(error) => {
                json!({"status": "error", "ename": error, "evalue": "", "traceback": []})
            }
        }
    }

    fn inspect(&mut self, code: &str, cursor: usize) -> Value {
        match self.engine.inspect(code, cursor) {
            Some(data) => json!({"status": "ok", "found": true, "data": data, "metadata": {}}),
            None => json!({"status": "ok", "found": false, "data": {}, "metadata": {}}),
        }
    }
}

fn cursor(request: &Message) -> usize {
    request.content["cursor_pos"]
        .as_u64()
        .and_then(|c| usize::try_from(c).ok())
        .unwrap_or(0)
}

// Unix: the tests' client connects to `ipc` sockets. The path holds whether this file is
// `kernel/server.rs` or, without evcxr, lib.rs's `#[path]` to it.
// Two attributes, not `all(test, unix)`: clippy knows a test module by a plain `cfg(test)`
// (its unwraps are then allowed as any test's).
#[cfg(test)]
#[cfg(unix)]
#[path = "server/tests.rs"]
mod tests;
