//! Listening sockets of the three kinds a Jupyter kernel binds (ROUTER, PUB, and REP for the
//! heartbeat), each connection on two threads of its own: one reads, one writes.
//!
//! What a peer can do is bounded by the connection it holds:
//! - a frame's claimed length is checked before any allocation, and its buffer grows with
//!   what arrives ([`Reader::frame`]), so neither a huge header nor a trickle reaches memory
//!   or another connection;
//! - a peer that does not read fills its own queue, up to [`Limits::queue_bytes`]; what would
//!   go over is dropped for that peer alone (as libzmq drops at its high-water mark), and a
//!   write blocked for [`Limits::send_timeout`] closes that connection. No send waits on a
//!   peer: not the publisher's, not the heartbeat's;
//! - a second peer that names a routing identity already live is refused (libzmq's default,
//!   `ZMQ_ROUTER_HANDOVER` off), so no one takes another's replies;
//! - anything that breaks ZMTP ends that connection with one line in the log.
//!
//! ```
//! use attention_lab_wire::zmtp::{bind, Endpoint, Kind, Limits};
//! let log = std::sync::Arc::new(|line: &str| eprintln!("{line}"));
//! let endpoint = Endpoint::Tcp { ip: "127.0.0.1".into(), port: 0 };
//! let socket = bind(Kind::Router, "shell", &endpoint, Limits::default(), log).unwrap();
//! assert!(socket.local_port().unwrap() > 0);
//! ```

use super::frame::{encode_message, properties, ready};
use super::frame::{Frame, Incoming, Reader, ZmtpError};
use std::collections::HashMap;
use std::fmt;
use std::io::{self, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
#[cfg(unix)]
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Where the kernel writes one line about a peer it closed or a message it dropped.
pub type Log = Arc<dyn Fn(&str) + Send + Sync>;

/// The socket types a kernel binds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// shell, control, stdin: messages arrive with the peer's routing identity first, and a
    /// reply goes to the peer its first frame names.
    Router,
    /// iopub: every message goes to every subscriber whose topic prefixes it.
    Pub,
    /// The heartbeat: a REP that echoes each request to the peer that sent it, on that
    /// peer's own connection (no peer waits on another).
    Echo,
}

impl Kind {
    /// The `Socket-Type` this socket announces.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Router => "ROUTER",
            Kind::Pub => "PUB",
            Kind::Echo => "REP",
        }
    }

    /// Whether a peer of `socket_type` may talk to this kind (ZMTP's valid combinations).
    pub fn accepts(self, socket_type: &[u8]) -> bool {
        let ok: &[&[u8]] = match self {
            Kind::Router => &[b"DEALER", b"REQ", b"ROUTER"],
            Kind::Pub => &[b"SUB", b"XSUB"],
            Kind::Echo => &[b"REQ", b"DEALER"],
        };
        ok.contains(&socket_type)
    }
}

/// Where a socket listens: a TCP port, or a Unix socket file (Jupyter's `ipc` transport).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// `tcp://ip:port`; port 0 picks a free one.
    Tcp {
        /// The address to bind (`*` is every interface).
        ip: String,
        /// The port.
        port: u16,
    },
    /// `ipc://path`.
    Ipc(PathBuf),
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Tcp { ip, port } => write!(f, "tcp://{ip}:{port}"),
            Endpoint::Ipc(path) => write!(f, "ipc://{}", path.display()),
        }
    }
}

/// What one socket allows its peers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The largest frame, and message in all, read from a peer; a larger one closes that
    /// connection.
    pub max_frame: u64,
    /// Connections at once; one more is closed at once, with a line.
    pub max_peers: usize,
    /// Bytes waiting to be written to one peer; a message that would go over is dropped for
    /// that peer.
    pub queue_bytes: usize,
    /// Time for a new connection's greeting and READY.
    pub handshake: Duration,
    /// A write that blocks this long (the peer reads nothing) closes the connection.
    pub send_timeout: Duration,
}

impl Default for Limits {
    /// 1 MiB frames, 64 peers, 32 MiB queued a peer, 10 s to greet, 60 s for a write.
    fn default() -> Limits {
        Limits {
            max_frame: 1 << 20,
            max_peers: 64,
            queue_bytes: 32 << 20,
            handshake: Duration::from_secs(10),
            send_timeout: Duration::from_secs(60),
        }
    }
}

/// Why a message was not queued for a peer.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SendError {
    /// A ROUTER message whose first frame names no connected peer.
    NoPeer,
    /// The peer's queue is full: it does not read.
    Full,
    /// A ROUTER message with no frame after the identity, or none at all.
    Empty,
}

impl fmt::Display for SendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SendError::NoPeer => "no peer of that identity is connected",
            SendError::Full => "the peer reads nothing: its queue is full, the message dropped",
            SendError::Empty => "no frames to send",
        })
    }
}

impl std::error::Error for SendError {}

/// A socket's connections and where their messages go.
struct Shared {
    kind: Kind,
    name: String,
    limits: Limits,
    peers: Mutex<HashMap<Vec<u8>, Peer>>,
    live: AtomicUsize,
    next_id: AtomicU32,
    inbox: SyncSender<Vec<Vec<u8>>>,
    log: Limited,
}

/// One connected peer, as the senders see it (and its own reader, which queues its echoes).
#[derive(Clone)]
struct Peer {
    out: Sender<Arc<Vec<u8>>>,
    queued: Arc<AtomicUsize>,
    subscriptions: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl Peer {
    /// Queues `bytes` unless that would take the peer over its budget.
    fn queue(&self, bytes: &Arc<Vec<u8>>, budget: usize) -> Result<(), SendError> {
        let before = self.queued.fetch_add(bytes.len(), Ordering::SeqCst);
        if before + bytes.len() > budget {
            self.queued.fetch_sub(bytes.len(), Ordering::SeqCst);
            return Err(SendError::Full);
        }
        self.out.send(bytes.clone()).map_err(|_| {
            self.queued.fetch_sub(bytes.len(), Ordering::SeqCst);
            SendError::NoPeer
        })
    }

    fn subscribed(&self, topic: &[u8]) -> bool {
        lock(&self.subscriptions)
            .iter()
            .any(|prefix| topic.starts_with(prefix))
    }
}

/// A bound socket: [`Socket::recv`] the next message from any peer, [`Socket::send`] to one
/// (ROUTER) or to every subscriber (PUB). Neither ever waits on a peer.
pub struct Socket {
    shared: Arc<Shared>,
    inbox: Mutex<Receiver<Vec<Vec<u8>>>>,
    port: Option<u16>,
}

/// Messages waiting to be read by the socket's owner, from all peers together: a peer that
/// sends faster than they are read waits on its own connection.
const INBOX: usize = 64;
/// At most this many subscriptions a peer; more are ignored.
const MAX_SUBSCRIPTIONS: usize = 1024;
/// Each connection's threads: small stacks, since every buffer is on the heap.
const STACK: usize = 256 << 10;

/// Binds a socket of `kind` at `endpoint`, named `name` in the log, and starts accepting.
///
/// # Errors
/// The address cannot be bound (in use, not ours, no such folder).
pub fn bind(
    kind: Kind,
    name: &str,
    endpoint: &Endpoint,
    limits: Limits,
    log: Log,
) -> io::Result<Socket> {
    let listener = Listener::bind(endpoint)?;
    let port = listener.port();
    let (inbox, receiver) = mpsc::sync_channel(INBOX);
    let shared = Arc::new(Shared {
        kind,
        name: name.to_string(),
        limits,
        peers: Mutex::new(HashMap::new()),
        live: AtomicUsize::new(0),
        next_id: AtomicU32::new(1),
        inbox,
        log: Limited::new(log),
    });
    let accepting = shared.clone();
    std::thread::Builder::new()
        .name(format!("{name} accept"))
        .stack_size(STACK)
        .spawn(move || accept_loop(&accepting, &listener))?;
    Ok(Socket {
        shared,
        inbox: Mutex::new(receiver),
        port,
    })
}

impl Socket {
    /// The TCP port bound (the one picked when asked for port 0); `None` for `ipc`.
    pub fn local_port(&self) -> Option<u16> {
        self.port
    }

    /// The next message from any peer; on a ROUTER its first frame is the peer's identity.
    /// Blocks until one comes.
    pub fn recv(&self) -> Vec<Vec<u8>> {
        let inbox = lock(&self.inbox);
        // The accept loop holds a sender for the socket's life: recv never ends.
        inbox.recv().unwrap_or_default()
    }

    /// Waits until every message queued so far is written to its peer's connection, or
    /// `timeout` has passed; whether all were. Before a process exits (a shutdown's reply),
    /// since the writers are threads that exit would end.
    ///
    /// ```
    /// # use attention_lab_wire::zmtp::{bind, Endpoint, Kind, Limits};
    /// # let endpoint = Endpoint::Tcp { ip: "127.0.0.1".into(), port: 0 };
    /// # let socket = bind(Kind::Pub, "iopub", &endpoint, Limits::default(), std::sync::Arc::new(|_: &str| {})).unwrap();
    /// assert!(socket.flush(std::time::Duration::from_millis(10)));
    /// ```
    pub fn flush(&self, timeout: Duration) -> bool {
        let start = Instant::now();
        loop {
            let queued: usize = lock(&self.shared.peers)
                .values()
                .map(|p| p.queued.load(Ordering::SeqCst))
                .sum();
            if queued == 0 {
                return true;
            }
            if start.elapsed() >= timeout {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Queues a message: on a ROUTER for the peer its first frame names, on a PUB for every
    /// subscriber whose topic prefixes it (a subscriber whose queue is full misses it).
    ///
    /// # Errors
    /// On a ROUTER, [`SendError`] when the message cannot be queued for its peer.
    pub fn send<F: AsRef<[u8]>>(&self, frames: &[F]) -> Result<(), SendError> {
        let s = &self.shared;
        match s.kind {
            Kind::Router => {
                let (id, rest) = frames.split_first().ok_or(SendError::Empty)?;
                if rest.is_empty() {
                    return Err(SendError::Empty);
                }
                let bytes = Arc::new(encode_message(rest));
                let peers = lock(&s.peers);
                let peer = peers.get(id.as_ref()).ok_or(SendError::NoPeer)?;
                peer.queue(&bytes, s.limits.queue_bytes)
            }
            Kind::Pub | Kind::Echo => {
                let topic = frames.first().map_or(&[][..], |f| f.as_ref());
                let bytes = Arc::new(encode_message(frames));
                let mut dropped = 0;
                for peer in lock(&s.peers).values() {
                    if peer.subscribed(topic) && peer.queue(&bytes, s.limits.queue_bytes).is_err() {
                        dropped += 1;
                    }
                }
                if dropped > 0 {
                    s.log.line(&format!(
                        "{}: {dropped} subscriber(s) read nothing: a message dropped for them",
                        s.name
                    ));
                }
                Ok(())
            }
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// At most 20 lines a second reach the log; the rest are counted and said with the next.
struct Limited {
    log: Log,
    state: Mutex<(Instant, u32, u64)>,
}

impl Limited {
    fn new(log: Log) -> Limited {
        Limited {
            log,
            state: Mutex::new((Instant::now(), 0, 0)),
        }
    }

    fn line(&self, text: &str) {
        let mut state = lock(&self.state);
        let (since, lines, held) = &mut *state;
        if since.elapsed() >= Duration::from_secs(1) {
            *since = Instant::now();
            *lines = 0;
        }
        if *lines >= 20 {
            *held += 1;
            return;
        }
        *lines += 1;
        let held = std::mem::take(held);
        drop(state);
        if held > 0 {
            (self.log)(&format!("{text} (and {held} lines like it not shown)"));
        } else {
            (self.log)(text);
        }
    }
}

enum Listener {
    Tcp(TcpListener),
    #[cfg(unix)]
    Unix(UnixListener),
}

impl Listener {
    fn bind(endpoint: &Endpoint) -> io::Result<Listener> {
        match endpoint {
            Endpoint::Tcp { ip, port } => {
                let ip = if ip == "*" { "0.0.0.0" } else { ip };
                Ok(Listener::Tcp(TcpListener::bind((ip, *port))?))
            }
            #[cfg(unix)]
            Endpoint::Ipc(path) => {
                use std::os::unix::fs::FileTypeExt;
                // A socket file left by an earlier kernel is replaced, as libzmq's ipc does;
                // any other file is not ours to remove.
                if let Ok(meta) = std::fs::symlink_metadata(path) {
                    if meta.file_type().is_socket() {
                        std::fs::remove_file(path)?;
                    }
                }
                Ok(Listener::Unix(UnixListener::bind(path)?))
            }
            #[cfg(not(unix))]
            Endpoint::Ipc(_) => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "ipc needs Unix sockets",
            )),
        }
    }

    fn port(&self) -> Option<u16> {
        match self {
            Listener::Tcp(l) => l.local_addr().ok().map(|a| a.port()),
            #[cfg(unix)]
            Listener::Unix(_) => None,
        }
    }

    fn accept(&self) -> io::Result<(Stream, String)> {
        match self {
            Listener::Tcp(l) => l
                .accept()
                .map(|(s, addr)| (Stream::Tcp(s), addr.to_string())),
            #[cfg(unix)]
            Listener::Unix(l) => l
                .accept()
                .map(|(s, _)| (Stream::Unix(s), "a local socket".to_string())),
        }
    }
}

enum Stream {
    Tcp(TcpStream),
    #[cfg(unix)]
    Unix(UnixStream),
}

impl Stream {
    fn try_clone(&self) -> io::Result<Stream> {
        match self {
            Stream::Tcp(s) => s.try_clone().map(Stream::Tcp),
            #[cfg(unix)]
            Stream::Unix(s) => s.try_clone().map(Stream::Unix),
        }
    }

    fn shutdown(&self) {
        let _ = match self {
            Stream::Tcp(s) => s.shutdown(Shutdown::Both),
            #[cfg(unix)]
            Stream::Unix(s) => s.shutdown(Shutdown::Both),
        };
    }

    fn timeouts(&self, read: Option<Duration>, write: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => {
                s.set_read_timeout(read)?;
                s.set_write_timeout(write)
            }
            #[cfg(unix)]
            Stream::Unix(s) => {
                s.set_read_timeout(read)?;
                s.set_write_timeout(write)
            }
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            #[cfg(unix)]
            Stream::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            #[cfg(unix)]
            Stream::Unix(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.flush(),
            #[cfg(unix)]
            Stream::Unix(s) => s.flush(),
        }
    }
}

fn accept_loop(shared: &Arc<Shared>, listener: &Listener) {
    loop {
        let (stream, from) = match listener.accept() {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of descriptors, say: wait rather than spin a core.
                shared.log.line(&format!("{}: accept: {e}", shared.name));
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        if shared.live.load(Ordering::SeqCst) >= shared.limits.max_peers {
            shared.log.line(&format!(
                "{}: refused a connection from {from}: {} peers already",
                shared.name, shared.limits.max_peers
            ));
            stream.shutdown();
            continue;
        }
        shared.live.fetch_add(1, Ordering::SeqCst);
        let conn = shared.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("{} peer", shared.name))
            .stack_size(STACK)
            .spawn(move || {
                if let Err(e) = connection(&conn, stream) {
                    if !quiet(&e) {
                        conn.log.line(&format!(
                            "{}: closed a connection from {from}: {e}",
                            conn.name
                        ));
                    }
                }
                conn.live.fetch_sub(1, Ordering::SeqCst);
            });
        if spawned.is_err() {
            shared.live.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// A peer that leaves is no fault worth a line.
fn quiet(e: &ZmtpError) -> bool {
    matches!(e, ZmtpError::Io(e) if matches!(
        e.kind(),
        io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe
    ))
}

/// Removes its peer from the socket, and closes the connection, however the reader ends.
struct Registered<'a> {
    shared: &'a Shared,
    id: Vec<u8>,
    stream: Stream,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        lock(&self.shared.peers).remove(&self.id);
        self.stream.shutdown();
    }
}

/// One connection: the handshake, then its messages until it ends.
fn connection(shared: &Shared, stream: Stream) -> Result<(), ZmtpError> {
    let limits = shared.limits;
    stream.timeouts(Some(limits.handshake), Some(limits.handshake))?;
    let mut writer = stream.try_clone()?;
    let closer = stream.try_clone()?;
    let mut reader = Reader::new(BufReader::new(stream), limits.max_frame);
    // Both greetings at once: libzmq peers accept a whole greeting, and wait for none.
    writer.write_all(&super::frame::greeting())?;
    reader.greeting()?;
    writer.write_all(&ready(shared.kind.name(), b""))?;
    let identity = match reader.frame()? {
        Frame::Command { name, data } if name == b"READY" => peer_identity(shared, &data)?,
        Frame::Command { name, .. } if name == b"ERROR" => {
            return Err(ZmtpError::Command("the peer sent ERROR".into()))
        }
        _ => return Err(ZmtpError::Command("the first frame is not READY".into())),
    };
    let id = match (shared.kind, identity) {
        (Kind::Router, Some(id)) => id,
        _ => generated(shared),
    };
    let (out, queue) = mpsc::channel::<Arc<Vec<u8>>>();
    let own = Peer {
        out,
        queued: Arc::new(AtomicUsize::new(0)),
        subscriptions: Arc::new(Mutex::new(Vec::new())),
    };
    {
        let mut peers = lock(&shared.peers);
        if peers.contains_key(&id) {
            return Err(ZmtpError::IdentityTaken(printable(&id)));
        }
        peers.insert(id.clone(), own.clone());
    }
    let registered = Registered {
        shared,
        id: id.clone(),
        stream: closer,
    };
    registered
        .stream
        .timeouts(None, Some(limits.send_timeout))?;
    let writing = own.queued.clone();
    std::thread::Builder::new()
        .name(format!("{} writer", shared.name))
        .stack_size(STACK)
        .spawn(move || {
            for bytes in queue {
                let sent = writer.write_all(&bytes);
                writing.fetch_sub(bytes.len(), Ordering::SeqCst);
                if sent.is_err() {
                    // A peer that reads nothing for send_timeout, or has gone: closing the
                    // connection ends its reader too.
                    writer.shutdown();
                    return;
                }
            }
        })?;
    loop {
        match reader.incoming()? {
            Incoming::Message(frames) => match shared.kind {
                Kind::Router => {
                    let mut message = Vec::with_capacity(frames.len() + 1);
                    message.push(id.clone());
                    message.extend(frames);
                    if shared.inbox.send(message).is_err() {
                        return Ok(());
                    }
                }
                Kind::Pub => {
                    // ZMTP 3.0's subscriptions: a message of one frame, 1 then the topic.
                    if let [frame] = &frames[..] {
                        match frame.split_first() {
                            Some((1, topic)) => subscribe(&own.subscriptions, topic),
                            Some((0, topic)) => unsubscribe(&own.subscriptions, topic),
                            _ => {}
                        }
                    }
                }
                Kind::Echo => {
                    // A peer that does not read its echoes misses them; no one else does.
                    let _ = own.queue(&Arc::new(encode_message(&frames)), limits.queue_bytes);
                }
            },
            // ZMTP 3.1's: peers that speak it may still send the commands.
            Incoming::Command { name, data } => match &name[..] {
                b"SUBSCRIBE" if shared.kind == Kind::Pub => subscribe(&own.subscriptions, &data),
                b"CANCEL" if shared.kind == Kind::Pub => unsubscribe(&own.subscriptions, &data),
                b"ERROR" => return Ok(()),
                _ => {}
            },
        }
    }
}

fn subscribe(subscriptions: &Mutex<Vec<Vec<u8>>>, topic: &[u8]) {
    let mut subscriptions = lock(subscriptions);
    if subscriptions.len() < MAX_SUBSCRIPTIONS {
        subscriptions.push(topic.to_vec());
    }
}

fn unsubscribe(subscriptions: &Mutex<Vec<Vec<u8>>>, topic: &[u8]) {
    let mut subscriptions = lock(subscriptions);
    if let Some(at) = subscriptions.iter().position(|t| t == topic) {
        subscriptions.swap_remove(at);
    }
}

/// The peer's READY, checked: its socket type must fit ours. Its `Identity`, if any, must be
/// at most 255 bytes and not start with a zero byte (ZMQ keeps those for generated ones).
fn peer_identity(shared: &Shared, data: &[u8]) -> Result<Option<Vec<u8>>, ZmtpError> {
    let mut socket_type = None;
    let mut identity = None;
    for (name, value) in properties(data)? {
        if name.eq_ignore_ascii_case(b"Socket-Type") {
            socket_type = Some(value);
        } else if name.eq_ignore_ascii_case(b"Identity") && !value.is_empty() {
            identity = Some(value);
        }
    }
    let theirs =
        socket_type.ok_or_else(|| ZmtpError::Command("READY without Socket-Type".into()))?;
    if !shared.kind.accepts(&theirs) {
        return Err(ZmtpError::Incompatible {
            ours: shared.kind.name(),
            theirs: String::from_utf8_lossy(&theirs).into_owned(),
        });
    }
    if let Some(id) = &identity {
        if id.len() > 255 || id[0] == 0 {
            return Err(ZmtpError::Command(
                "an identity over 255 bytes, or starting with a zero byte".into(),
            ));
        }
    }
    Ok(identity)
}

/// A fresh routing identity, as libzmq makes them: a zero byte and a counter.
fn generated(shared: &Shared) -> Vec<u8> {
    let n = shared.next_id.fetch_add(1, Ordering::SeqCst);
    let mut id = vec![0];
    id.extend(n.to_be_bytes());
    id
}

/// An identity for the log: its text when printable, else its hex.
fn printable(id: &[u8]) -> String {
    match std::str::from_utf8(id) {
        Ok(text) if text.chars().all(|c| !c.is_control()) => format!("{text:?}"),
        _ => id.iter().map(|b| format!("{b:02x}")).collect(),
    }
}
