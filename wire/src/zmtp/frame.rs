//! ZMTP 3.0's bytes (rfc.zeromq.org/spec/23): the greeting, frames and commands, read from any
//! `Read` with every length checked before anything is allocated.
//!
//! ```
//! use attention_lab_wire::zmtp::frame::{encode_message, Frame, Reader};
//! let bytes = encode_message(&[b"id".to_vec(), b"hello".to_vec()]);
//! let mut reader = Reader::new(&bytes[..], 1 << 20);
//! assert_eq!(reader.message().unwrap(), vec![b"id".to_vec(), b"hello".to_vec()]);
//! ```

use std::fmt;
use std::io::{self, Read};

/// A greeting's length: signature (10), version (2), mechanism (20), as-server (1), filler (31).
pub const GREETING_LEN: usize = 64;

/// The most frames one message may have: a Jupyter message has its identities, the delimiter,
/// the signature, four parts and its buffers. More is a flood, not a message.
pub const MAX_FRAMES: usize = 4096;

/// The largest command frame read (READY's properties, SUBSCRIBE's topic): commands are small.
pub const MAX_COMMAND: u64 = 64 << 10;

const MORE: u8 = 0x01;
const LONG: u8 = 0x02;
const COMMAND: u8 = 0x04;

/// What ends a connection: the peer's bytes break ZMTP, or the connection failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum ZmtpError {
    /// The socket failed or closed (an unexpected end is `UnexpectedEof`).
    Io(io::Error),
    /// The first 64 bytes are not a ZMTP 3 greeting.
    Greeting(&'static str),
    /// A security mechanism other than NULL (Jupyter signs its messages instead).
    Mechanism(String),
    /// A frame longer than the channel allows: named before a byte of it is read.
    TooLarge {
        /// The length the frame's header claims.
        len: u64,
        /// The channel's cap.
        cap: u64,
    },
    /// A message of more than [`MAX_FRAMES`] frames, or more bytes than the cap in all.
    TooManyFrames(usize),
    /// A command that cannot be read (its name, a property, an unexpected command).
    Command(String),
    /// A second peer that names a routing identity already connected (shown as text or hex).
    IdentityTaken(String),
    /// A peer whose socket type cannot talk to this one (a PUB connecting to a ROUTER).
    Incompatible {
        /// This socket's type.
        ours: &'static str,
        /// The peer's `Socket-Type`.
        theirs: String,
    },
}

impl fmt::Display for ZmtpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ZmtpError::Io(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                write!(f, "the peer closed the connection")
            }
            ZmtpError::Io(e) => write!(f, "{e}"),
            ZmtpError::Greeting(what) => write!(f, "not a ZMTP 3 greeting: {what}"),
            ZmtpError::Mechanism(m) => write!(f, "security mechanism {m:?}, only NULL is served"),
            ZmtpError::TooLarge { len, cap } => {
                write!(f, "a frame of {len} bytes, over the channel's cap of {cap}")
            }
            ZmtpError::TooManyFrames(n) => {
                write!(
                    f,
                    "a message of more than {n} frames or over the cap in all"
                )
            }
            ZmtpError::Command(what) => write!(f, "bad command: {what}"),
            ZmtpError::IdentityTaken(id) => {
                write!(
                    f,
                    "identity {id} is already connected; a second peer may not take it"
                )
            }
            ZmtpError::Incompatible { ours, theirs } => {
                write!(f, "a {theirs:?} socket cannot talk to a {ours}")
            }
        }
    }
}

impl std::error::Error for ZmtpError {}

impl From<io::Error> for ZmtpError {
    fn from(e: io::Error) -> ZmtpError {
        ZmtpError::Io(e)
    }
}

/// Our greeting: ZMTP 3.0 (so that libzmq peers send subscriptions as messages, which 3.1
/// peers also accept), mechanism NULL, as-server set.
///
/// ```
/// use attention_lab_wire::zmtp::frame::{check_greeting, greeting};
/// assert!(check_greeting(&greeting()).is_ok());
/// ```
pub fn greeting() -> [u8; GREETING_LEN] {
    let mut g = [0u8; GREETING_LEN];
    g[0] = 0xff;
    g[9] = 0x7f;
    g[10] = 3;
    g[11] = 0;
    g[12..16].copy_from_slice(b"NULL");
    g[32] = 1;
    g
}

/// ZMTP's signature, the greeting's first 10 bytes: 0xff, padding, then a byte ending in 1.
fn signature(g: &[u8; GREETING_LEN]) -> Result<(), ZmtpError> {
    if g[0] != 0xff || g[9] & 1 != 1 {
        return Err(ZmtpError::Greeting("no signature"));
    }
    Ok(())
}

/// Checks a peer's greeting: the signature, major version 3 or later, mechanism NULL.
///
/// # Errors
/// [`ZmtpError::Greeting`] or [`ZmtpError::Mechanism`].
pub fn check_greeting(g: &[u8; GREETING_LEN]) -> Result<(), ZmtpError> {
    signature(g)?;
    if g[10] < 3 {
        return Err(ZmtpError::Greeting("ZMTP before 3.0"));
    }
    let mechanism = &g[12..32];
    let name = mechanism.split(|&b| b == 0).next().unwrap_or_default();
    if name != b"NULL" {
        return Err(ZmtpError::Mechanism(
            String::from_utf8_lossy(name).into_owned(),
        ));
    }
    Ok(())
}

/// One frame as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// A part of a message; `more` when another part follows.
    Message {
        /// Another frame of the same message follows.
        more: bool,
        /// The part's bytes.
        body: Vec<u8>,
    },
    /// A command: READY, ERROR, SUBSCRIBE, CANCEL, PING, PONG.
    Command {
        /// The command's name.
        name: Vec<u8>,
        /// What follows the name.
        data: Vec<u8>,
    },
}

/// What a connection receives after its handshake: a whole message or a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Incoming {
    /// Every frame of one message.
    Message(Vec<Vec<u8>>),
    /// A command between messages.
    Command {
        /// Its name.
        name: Vec<u8>,
        /// Its data.
        data: Vec<u8>,
    },
}

/// Reads frames from `R` with a cap on every frame and on every message.
pub struct Reader<R> {
    inner: R,
    cap: u64,
}

impl<R: Read> Reader<R> {
    /// A reader that refuses any frame, and any message in all, of more than `cap` bytes.
    pub fn new(inner: R, cap: u64) -> Reader<R> {
        Reader { inner, cap }
    }

    /// The peer's greeting, checked.
    ///
    /// # Errors
    /// The connection's error, or what is wrong with the greeting.
    pub fn greeting(&mut self) -> Result<(), ZmtpError> {
        let mut g = [0u8; GREETING_LEN];
        // The signature first: a peer that sends something else is named at once.
        self.inner.read_exact(&mut g[..10])?;
        signature(&g)?;
        self.inner.read_exact(&mut g[10..])?;
        check_greeting(&g)
    }

    /// The next frame. A frame's length is checked against the cap (commands against
    /// [`MAX_COMMAND`]) before any of it is read, and its buffer grows with what arrives, so a
    /// peer that claims a large frame and sends little costs little.
    ///
    /// # Errors
    /// The connection's error, [`ZmtpError::TooLarge`], or a command with no name.
    pub fn frame(&mut self) -> Result<Frame, ZmtpError> {
        let mut flags = [0u8; 1];
        self.inner.read_exact(&mut flags)?;
        let flags = flags[0];
        let len = if flags & LONG != 0 {
            let mut len = [0u8; 8];
            self.inner.read_exact(&mut len)?;
            u64::from_be_bytes(len)
        } else {
            let mut len = [0u8; 1];
            self.inner.read_exact(&mut len)?;
            u64::from(len[0])
        };
        let command = flags & COMMAND != 0;
        let cap = if command {
            MAX_COMMAND.min(self.cap)
        } else {
            self.cap
        };
        if len > cap {
            return Err(ZmtpError::TooLarge { len, cap });
        }
        let mut body = Vec::new();
        (&mut self.inner).take(len).read_to_end(&mut body)?;
        if (body.len() as u64) < len {
            return Err(ZmtpError::Io(io::ErrorKind::UnexpectedEof.into()));
        }
        if !command {
            let more = flags & MORE != 0;
            return Ok(Frame::Message { more, body });
        }
        if flags & MORE != 0 {
            return Err(ZmtpError::Command("a command frame marked MORE".into()));
        }
        let (&n, rest) = body
            .split_first()
            .ok_or_else(|| ZmtpError::Command("an empty command frame".into()))?;
        if rest.len() < usize::from(n) {
            return Err(ZmtpError::Command(format!(
                "a name of {n} bytes in a frame of {len}"
            )));
        }
        let (name, data) = rest.split_at(usize::from(n));
        Ok(Frame::Command {
            name: name.to_vec(),
            data: data.to_vec(),
        })
    }

    /// The next whole message or command. A command between the frames of a message is an
    /// error, and so is a message of more than [`MAX_FRAMES`] frames or `cap` bytes in all.
    ///
    /// # Errors
    /// As [`Reader::frame`], and [`ZmtpError::TooManyFrames`].
    pub fn incoming(&mut self) -> Result<Incoming, ZmtpError> {
        let mut frames = Vec::new();
        let mut total = 0u64;
        loop {
            match self.frame()? {
                Frame::Command { name, data } if frames.is_empty() => {
                    return Ok(Incoming::Command { name, data })
                }
                Frame::Command { .. } => {
                    return Err(ZmtpError::Command("a command inside a message".into()))
                }
                Frame::Message { more, body } => {
                    total += body.len() as u64;
                    frames.push(body);
                    if frames.len() > MAX_FRAMES || total > self.cap {
                        return Err(ZmtpError::TooManyFrames(MAX_FRAMES));
                    }
                    if !more {
                        return Ok(Incoming::Message(frames));
                    }
                }
            }
        }
    }

    /// The next message, skipping commands.
    ///
    /// # Errors
    /// As [`Reader::incoming`].
    pub fn message(&mut self) -> Result<Vec<Vec<u8>>, ZmtpError> {
        loop {
            if let Incoming::Message(frames) = self.incoming()? {
                return Ok(frames);
            }
        }
    }
}

fn frame_header(out: &mut Vec<u8>, flags: u8, len: usize) {
    match u8::try_from(len) {
        Ok(short) => out.extend([flags, short]),
        Err(_) => {
            out.push(flags | LONG);
            out.extend((len as u64).to_be_bytes());
        }
    }
}

/// A message's bytes on the wire: each frame with its header, all but the last marked MORE.
///
/// ```
/// use attention_lab_wire::zmtp::frame::encode_message;
/// assert_eq!(encode_message(&[b"a".to_vec(), Vec::new()]), vec![1, 1, b'a', 0, 0]);
/// ```
pub fn encode_message<F: AsRef<[u8]>>(frames: &[F]) -> Vec<u8> {
    let total: usize = frames.iter().map(|f| f.as_ref().len() + 9).sum();
    let mut out = Vec::with_capacity(total);
    for (i, frame) in frames.iter().enumerate() {
        let frame = frame.as_ref();
        let flags = if i + 1 < frames.len() { MORE } else { 0 };
        frame_header(&mut out, flags, frame.len());
        out.extend_from_slice(frame);
    }
    out
}

/// A command frame's bytes: `name` (at most 255 bytes) and its data.
///
/// ```
/// use attention_lab_wire::zmtp::frame::encode_command;
/// assert_eq!(encode_command(b"PING", b""), vec![4, 5, 4, b'P', b'I', b'N', b'G']);
/// ```
pub fn encode_command(name: &[u8], data: &[u8]) -> Vec<u8> {
    let name = &name[..name.len().min(255)];
    let mut out = Vec::with_capacity(name.len() + data.len() + 10);
    frame_header(&mut out, COMMAND, 1 + name.len() + data.len());
    out.push(name.len() as u8);
    out.extend_from_slice(name);
    out.extend_from_slice(data);
    out
}

/// READY's data: each property's name (at most 255 bytes) and value.
///
/// ```
/// use attention_lab_wire::zmtp::frame::{properties, ready_data};
/// let data = ready_data(&[("Socket-Type", b"ROUTER")]);
/// assert_eq!(properties(&data).unwrap(), vec![(b"Socket-Type".to_vec(), b"ROUTER".to_vec())]);
/// ```
pub fn ready_data(props: &[(&str, &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, value) in props {
        let name = &name.as_bytes()[..name.len().min(255)];
        out.push(name.len() as u8);
        out.extend_from_slice(name);
        out.extend((value.len() as u32).to_be_bytes());
        out.extend_from_slice(value);
    }
    out
}

/// A READY property: its name and value.
pub type Property = (Vec<u8>, Vec<u8>);

/// The READY command's bytes for a socket of `socket_type`, with its `identity` when not empty.
///
/// ```
/// use attention_lab_wire::zmtp::frame::{ready, Frame, Reader};
/// let bytes = ready("DEALER", b"me");
/// let read = Reader::new(&bytes[..], 1024).frame().unwrap();
/// assert!(matches!(read, Frame::Command { name, .. } if name == b"READY"));
/// ```
pub fn ready(socket_type: &str, identity: &[u8]) -> Vec<u8> {
    let mut props = vec![("Socket-Type", socket_type.as_bytes())];
    if !identity.is_empty() {
        props.push(("Identity", identity));
    }
    encode_command(b"READY", &ready_data(&props))
}

/// READY's properties, each length checked against what is left of the data.
///
/// # Errors
/// [`ZmtpError::Command`] naming the property that runs past the end.
pub fn properties(mut data: &[u8]) -> Result<Vec<Property>, ZmtpError> {
    let short = |what: &str| ZmtpError::Command(format!("READY: {what} runs past the command"));
    let mut props = Vec::new();
    while let Some((&n, rest)) = data.split_first() {
        let name = rest.get(..usize::from(n)).ok_or_else(|| short("a name"))?;
        let rest = &rest[usize::from(n)..];
        let len = rest.get(..4).ok_or_else(|| short("a value's length"))?;
        let len = u32::from_be_bytes([len[0], len[1], len[2], len[3]]);
        let len = usize::try_from(len).map_err(|_| short("a value"))?;
        let value = rest.get(4..).and_then(|r| r.get(..len));
        let value = value.ok_or_else(|| short("a value"))?;
        props.push((name.to_vec(), value.to_vec()));
        data = &rest[4 + len..];
    }
    Ok(props)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(bytes: &[u8], cap: u64) -> Result<Incoming, ZmtpError> {
        Reader::new(bytes, cap).incoming()
    }

    #[test]
    fn a_claimed_length_over_the_cap_is_refused_before_reading() {
        let mut bytes = vec![LONG];
        bytes.extend((1u64 << 40).to_be_bytes());
        let got = read(&bytes, 1 << 20);
        assert!(
            matches!(got, Err(ZmtpError::TooLarge { len, cap }) if len == 1 << 40 && cap == 1 << 20)
        );
        let mut bytes = vec![LONG];
        bytes.extend(u64::MAX.to_be_bytes());
        assert!(matches!(
            read(&bytes, u64::MAX - 1),
            Err(ZmtpError::TooLarge { .. })
        ));
    }

    #[test]
    fn a_short_frame_is_an_unexpected_end_not_a_hang() {
        let mut bytes = vec![LONG];
        bytes.extend(100u64.to_be_bytes());
        bytes.extend([7u8; 10]);
        assert!(
            matches!(read(&bytes, 1 << 20), Err(ZmtpError::Io(e)) if e.kind() == io::ErrorKind::UnexpectedEof)
        );
    }

    #[test]
    fn malformed_commands_are_errors() {
        // An empty command, a name longer than its frame, a READY property past the end.
        assert!(matches!(read(&[4, 0], 1024), Err(ZmtpError::Command(_))));
        assert!(matches!(
            read(&[4, 3, 0xff, b'A', b'B'], 1024),
            Err(ZmtpError::Command(_))
        ));
        let mut data = vec![1, b'X'];
        data.extend(u32::MAX.to_be_bytes());
        assert!(properties(&data).is_err());
        assert!(properties(&[5, b'a']).is_err());
        assert!(properties(&[1, b'a', 0, 0]).is_err());
    }

    #[test]
    fn messages_and_commands_read_back() {
        let big = vec![9u8; 300];
        let frames = vec![b"x".to_vec(), big.clone(), Vec::new()];
        let mut bytes = encode_command(b"READY", &ready_data(&[("Socket-Type", b"REQ")]));
        bytes.extend(encode_message(&frames));
        let mut r = Reader::new(&bytes[..], 1 << 20);
        match r.incoming().unwrap() {
            Incoming::Command { name, data } => {
                assert_eq!(name, b"READY");
                assert_eq!(properties(&data).unwrap()[0].1, b"REQ");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(r.incoming().unwrap(), Incoming::Message(frames));
        // The whole message counts against the cap too.
        assert!(matches!(
            Reader::new(&encode_message(&[&big, &big])[..], 400).incoming(),
            Err(ZmtpError::TooManyFrames(_))
        ));
    }

    #[test]
    fn greetings_are_checked() {
        let ours = greeting();
        Reader::new(&ours[..], 0).greeting().unwrap();
        let mut g = greeting();
        g[12..16].copy_from_slice(b"CURV");
        assert!(matches!(
            check_greeting(&g),
            Err(ZmtpError::Mechanism(m)) if m == "CURV"
        ));
        g = greeting();
        g[10] = 2;
        assert!(check_greeting(&g).is_err());
        let mut r = Reader::new(&b"GET / HTTP/1.1\r\n"[..], 0);
        assert!(matches!(r.greeting(), Err(ZmtpError::Greeting(_))));
    }
}
