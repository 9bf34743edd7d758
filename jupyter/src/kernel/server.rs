//! The kernel's Jupyter side: the five sockets of a connection file, the messages of the
//! messaging protocol, and evcxr's `CommandContext` running the cells.
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

use attention_lab_io::error::{warn, Result};
use attention_lab_io::problem;
use attention_lab_wire::zmtp::{self, Endpoint, Kind, Limits, Socket};
use attention_lab_wire::{Key, Message, Session};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The setting of shell's frame cap, and its default: a cell's code, or a comm's buffers.
const SHELL_CAP: (&str, &str) = ("ATTENTION_LAB_MAX_FRAME_SHELL", "256M");
/// The other channels' cap: their messages are small.
const OTHER_CAP: (&str, &str) = ("ATTENTION_LAB_MAX_FRAME", "1M");

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
    session: Session,
    iopub: Socket,
    /// The request whose cell is running: its outputs are published as its children.
    running: Mutex<Option<Message>>,
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

/// Serves the kernel of `connection_file` until a shutdown request.
///
/// # Errors
/// An unreadable connection file, a port that cannot be bound, evcxr failing to start.
pub fn serve(connection_file: &Path) -> Result<()> {
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
        session: Session::new("kernel"),
        iopub,
        running: Mutex::new(None),
    });
    let (context, outputs) = evcxr::CommandContext::new().map_err(|e| problem!("evcxr: {e}"))?;
    let child = context.process_handle();
    let flush = spawn_outputs(&kernel, outputs);
    let mut shell = Shell {
        kernel,
        channel: Channel {
            name: "shell",
            socket: shell,
        },
        context,
        flush,
        execution_count: 0,
    };
    if let Err(error) = shell.context.execute(":load_config") {
        warn(&format!("attention-lab kernel: :load_config: {error}"));
    }
    {
        let kernel = shell.kernel.clone();
        let channel = Channel {
            name: "control",
            socket: control,
        };
        // Named so that the hub's priority watcher sees that the start is done.
        std::thread::Builder::new()
            .name(crate::priority::SERVING_THREAD.into())
            .spawn(move || control_loop(&kernel, channel, child))
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

/// Asks the output thread to publish every line evcxr has passed on so far.
type Flush = crossbeam_channel::Sender<crossbeam_channel::Sender<()>>;

/// Publishes the cells' stdout and stderr lines as they come, as `stream` messages under the
/// running request.
fn spawn_outputs(kernel: &Arc<Kernel>, outputs: evcxr::EvalContextOutputs) -> Flush {
    let (flush, flushes) = crossbeam_channel::unbounded::<crossbeam_channel::Sender<()>>();
    let kernel = kernel.clone();
    let _ = std::thread::Builder::new()
        .name("outputs".into())
        .spawn(move || {
            let streams = [("stdout", outputs.stdout), ("stderr", outputs.stderr)];
            let pass = |name: &str, line: String| {
                let parent = kernel
                    .running
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .clone();
                if let Some(parent) = parent {
                    let text = json!({"name": name, "text": format!("{line}\n")});
                    kernel.publish(parent.reply(&kernel.session, "stream", text));
                }
            };
            loop {
                let mut select = crossbeam_channel::Select::new();
                for (_, receiver) in &streams {
                    select.recv(receiver);
                }
                let flush_at = select.recv(&flushes);
                let op = select.select();
                let index = op.index();
                if index == flush_at {
                    let Ok(done) = op.recv(&flushes) else { return };
                    for (name, receiver) in &streams {
                        while let Ok(line) = receiver.try_recv() {
                            pass(name, line);
                        }
                    }
                    let _ = done.send(());
                    continue;
                }
                let (name, receiver) = &streams[index];
                match op.recv(receiver) {
                    Ok(line) => pass(name, line),
                    Err(_) => return,
                }
            }
        });
    flush
}

fn kernel_info() -> Value {
    json!({
        "status": "ok",
        "protocol_version": attention_lab_wire::PROTOCOL_VERSION,
        "implementation": "attention-lab",
        "implementation_version": env!("CARGO_PKG_VERSION"),
        "language_info": super::language_info(),
        "banner": "attention-lab: Rust through evcxr",
        "help_links": [{"text": "Rust std docs", "url": "https://doc.rust-lang.org/stable/std/"}],
    })
}

fn control_loop(kernel: &Kernel, mut channel: Channel, child: Arc<Mutex<std::process::Child>>) {
    loop {
        let request = channel.next(kernel);
        match request.msg_type() {
            "kernel_info_request" => channel.send(
                kernel,
                request.reply(&kernel.session, "kernel_info_reply", kernel_info()),
            ),
            "interrupt_request" => {
                // evcxr runs cells in its child process: ending it ends the cell (and, as in
                // evcxr's own kernel, the variables; the next cell starts a new child).
                let _ = child.lock().unwrap_or_else(|e| e.into_inner()).kill();
                channel.send(
                    kernel,
                    request.reply(&kernel.session, "interrupt_reply", json!({"status": "ok"})),
                );
            }
            "shutdown_request" => shut_down(kernel, &mut channel, &request, &child),
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
    child: &Arc<Mutex<std::process::Child>>,
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
    let _ = child.lock().unwrap_or_else(|e| e.into_inner()).kill();
    std::process::exit(0)
}

struct Shell {
    kernel: Arc<Kernel>,
    channel: Channel,
    context: evcxr::CommandContext,
    flush: Flush,
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
                let child = self.context.process_handle();
                shut_down(&self.kernel, &mut self.channel, request, &child)
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
        *kernel.running.lock().unwrap_or_else(|e| e.into_inner()) = Some(request.clone());
        let result = self.context.execute(code);
        // Every line the cell printed goes out before its result and reply.
        let (done, wait) = crossbeam_channel::bounded(1);
        if self.flush.send(done).is_ok() {
            let _ = wait.recv_timeout(Duration::from_secs(5));
        }
        // The outputs of the cell's result as replay's evcxr engine records them: one piece of
        // code for both.
        let (outputs, _) = crate::cell::outcome(Vec::new(), result);
        let mut failed = None;
        for output in &outputs {
            let (kind, content) = output.to_message(count);
            if kind == "error" {
                failed = Some(content.clone());
            }
            kernel.publish(request.reply(&kernel.session, kind, content));
        }
        let reply = match failed {
            None => {
                json!({"status": "ok", "execution_count": count, "user_expressions": {}, "payload": []})
            }
            Some(error) => json!({
                "status": "error",
                "execution_count": count,
                "ename": error["ename"],
                "evalue": error["evalue"],
                "traceback": error["traceback"],
            }),
        };
        *kernel.running.lock().unwrap_or_else(|e| e.into_inner()) = None;
        self.reply(request, "execute_reply", reply);
    }

    fn complete(&mut self, code: &str, cursor: usize) -> Value {
        let at = byte_offset(code, cursor);
        match self.context.completions(code, at) {
            Ok(found) => {
                let start = char_offset(code, found.start_offset);
                let end = char_offset(code, found.end_offset);
                let matches: Vec<&str> =
                    found.completions.iter().map(|c| c.code.as_str()).collect();
                let types: Vec<Value> = found
                    .completions
                    .iter()
                    .map(|c| json!({"text": c.label, "type": c.kind, "start": start, "end": end}))
                    .collect();
                json!({
                    "status": "ok", "matches": matches, "cursor_start": start, "cursor_end": end,
                    "metadata": {"_jupyter_types_experimental": types},
                })
            }
            Err(error) => {
                json!({"status": "error", "ename": error.to_string(), "evalue": "", "traceback": []})
            }
        }
    }

    fn inspect(&mut self, code: &str, cursor: usize) -> Value {
        let found = self
            .context
            .hover_at(code, byte_offset(code, cursor))
            .ok()
            .filter(|(plain, _)| plain != "No documentation found");
        match found {
            Some((plain, html)) => json!({
                "status": "ok", "found": true,
                "data": {"text/plain": plain, "text/html": html}, "metadata": {},
            }),
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

/// The byte offset of the `cursor`-th character (Jupyter counts cursors in code points),
/// clamped to the end.
fn byte_offset(code: &str, cursor: usize) -> usize {
    code.char_indices()
        .nth(cursor)
        .map_or(code.len(), |(i, _)| i)
}

fn char_offset(code: &str, byte: usize) -> usize {
    code.get(..byte)
        .map_or(code.chars().count(), |head| head.chars().count())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_count_code_points() {
        let code = "é = 1; x";
        assert_eq!(byte_offset(code, 0), 0);
        assert_eq!(byte_offset(code, 1), 2);
        assert_eq!(byte_offset(code, 100), code.len());
        assert_eq!(char_offset(code, 2), 1);
    }

    #[test]
    fn ipc_endpoints_are_named_as_jupyter_names_them() {
        let connection: Connection = serde_json::from_str(
            r#"{"transport": "ipc", "ip": "/run/k", "shell_port": 1, "iopub_port": 2,
                "stdin_port": 3, "control_port": 4, "hb_port": 5, "key": "k"}"#,
        )
        .unwrap();
        assert_eq!(connection.endpoint(4).to_string(), "ipc:///run/k-4");
    }
}
