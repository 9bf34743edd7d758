//! The Jupyter wire format as attention-lab's kernel reads and writes it: a message's frames,
//! its HMAC-SHA256 signature, and its four JSON parts.
//!
//! Everything that reaches a kernel's port is outside data: another user on the machine can
//! send anything. [`Message::decode`] therefore never panics, checks the signature in constant
//! time before it parses any JSON, and names what is wrong in a [`WireError`]; the kernel drops
//! such a message with one line in its log and goes on serving.
//!
//! ```
//! use attention_lab_wire::{Key, Message, Session};
//! let key = Key::new(b"secret");
//! let session = Session::new("kernel");
//! let request = Message::new(&session, "kernel_info_request", serde_json::json!({}));
//! let frames = request.encode(&key);
//! let read = Message::decode(&frames, &key).unwrap();
//! assert_eq!(read.msg_type(), "kernel_info_request");
//! // Another key's signature is refused, and so is a message signed by no key at all.
//! assert!(Message::decode(&frames, &Key::new(b"other")).is_err());
//! assert!(Message::decode(&request.encode(&Key::new(b"")), &key).is_err());
//! ```

pub mod zmtp;

use hmac::{Hmac, KeyInit, Mac};
use serde_json::{json, Value};
use sha2::Sha256;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

/// The frame between a message's routing identities and its signature.
pub const DELIMITER: &[u8] = b"<IDS|MSG>";
/// The version of the messaging protocol this kernel speaks.
pub const PROTOCOL_VERSION: &str = "5.3";

/// What is wrong with a message that was not accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum WireError {
    /// No `<IDS|MSG>` frame.
    NoDelimiter,
    /// Fewer than the signature and four JSON parts after the delimiter.
    TooFewFrames(usize),
    /// The signature is not the HMAC of the four parts under the connection's key.
    BadSignature,
    /// A part is not JSON.
    Json {
        /// `header`, `parent_header`, `metadata` or `content`.
        part: &'static str,
        /// serde_json's message.
        error: String,
    },
    /// A part is JSON but not an object.
    NotAnObject(&'static str),
    /// The header has no string `msg_type`.
    NoMsgType,
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::NoDelimiter => write!(f, "no <IDS|MSG> frame"),
            WireError::TooFewFrames(n) => {
                write!(f, "{n} frames after <IDS|MSG>, expected at least 5")
            }
            WireError::BadSignature => write!(f, "signature does not match the key"),
            WireError::Json { part, error } => write!(f, "{part} is not JSON: {error}"),
            WireError::NotAnObject(part) => write!(f, "{part} is not a JSON object"),
            WireError::NoMsgType => write!(f, "header has no msg_type"),
        }
    }
}

impl std::error::Error for WireError {}

/// The connection's signing key (the connection file's `key`); an empty key signs nothing and
/// accepts only unsigned messages.
///
/// ```
/// use attention_lab_wire::Key;
/// let key = Key::new(b"k");
/// let parts: [&[u8]; 4] = [b"{}", b"{}", b"{}", b"{}"];
/// let signature = key.sign(parts);
/// assert_eq!(signature.len(), 64);
/// assert!(key.verify(signature.as_bytes(), parts).is_ok());
/// assert!(key.verify(b"00", parts).is_err());
/// ```
#[derive(Clone)]
pub struct Key(Option<Hmac<Sha256>>);

impl Key {
    /// The key of a connection file.
    pub fn new(key: &[u8]) -> Key {
        Key(if key.is_empty() {
            None
        } else {
            // HMAC takes a key of any length.
            Hmac::<Sha256>::new_from_slice(key).ok()
        })
    }

    fn mac(&self, parts: [&[u8]; 4]) -> Option<Hmac<Sha256>> {
        let mut mac = self.0.clone()?;
        for part in parts {
            mac.update(part);
        }
        Some(mac)
    }

    /// The hex signature of a message's four JSON parts (empty without a key).
    pub fn sign(&self, parts: [&[u8]; 4]) -> String {
        self.mac(parts)
            .map(|mac| hex::encode(mac.finalize().into_bytes()))
            .unwrap_or_default()
    }

    /// Checks a hex signature in constant time.
    ///
    /// # Errors
    /// [`WireError::BadSignature`] when it is not the parts' HMAC under this key (without a
    /// key: when it is not empty).
    pub fn verify(&self, signature: &[u8], parts: [&[u8]; 4]) -> Result<(), WireError> {
        let ok = match self.mac(parts) {
            None => signature.is_empty(),
            Some(mac) => hex::decode(signature).is_ok_and(|tag| mac.verify_slice(&tag).is_ok()),
        };
        ok.then_some(()).ok_or(WireError::BadSignature)
    }
}

/// The sender's side of the headers: the session id and a counter for message ids.
///
/// ```
/// use attention_lab_wire::Session;
/// let session = Session::new("kernel");
/// let a = session.header("status");
/// let b = session.header("status");
/// assert_ne!(a["msg_id"], b["msg_id"]);
/// assert_eq!(a["session"], b["session"]);
/// ```
#[derive(Debug)]
pub struct Session {
    id: String,
    username: String,
    sent: AtomicU64,
}

impl Session {
    /// A session of `username`, its id unique to this process and moment.
    pub fn new(username: &str) -> Session {
        use std::hash::{BuildHasher, Hasher};
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u32(std::process::id());
        hasher.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or_default(),
        );
        Session {
            id: format!("{:016x}{:08x}", hasher.finish(), std::process::id()),
            username: username.to_string(),
            sent: AtomicU64::new(0),
        }
    }

    /// A new header for a message of type `msg_type`.
    pub fn header(&self, msg_type: &str) -> Value {
        let n = self.sent.fetch_add(1, Ordering::Relaxed);
        json!({
            "msg_id": format!("{}_{n}", self.id),
            "session": self.id,
            "username": self.username,
            "date": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
            "msg_type": msg_type,
            "version": PROTOCOL_VERSION,
        })
    }
}

/// One Jupyter message: routing identities, the four JSON parts and any binary buffers.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    /// The frames before `<IDS|MSG>`: where a ROUTER socket sends the reply.
    pub identities: Vec<Vec<u8>>,
    /// `msg_id`, `msg_type`, `session`, ...
    pub header: Value,
    /// The header of the message this one answers (`{}` when none).
    pub parent_header: Value,
    /// Free-form.
    pub metadata: Value,
    /// What the message type defines.
    pub content: Value,
    /// Binary frames after the content.
    pub buffers: Vec<Vec<u8>>,
}

const PARTS: [&str; 4] = ["header", "parent_header", "metadata", "content"];

impl Message {
    /// A message with no parent and no identities.
    pub fn new(session: &Session, msg_type: &str, content: Value) -> Message {
        Message {
            identities: Vec::new(),
            header: session.header(msg_type),
            parent_header: json!({}),
            metadata: json!({}),
            content,
            buffers: Vec::new(),
        }
    }

    /// The message's type, from its header (`""` when missing, which decode never lets in).
    pub fn msg_type(&self) -> &str {
        self.header["msg_type"].as_str().unwrap_or("")
    }

    /// A message caused by this one: its parent header is this header, and it goes back to
    /// the same identities (on a ROUTER socket; a PUB socket ignores them).
    ///
    /// ```
    /// use attention_lab_wire::{Message, Session};
    /// let s = Session::new("k");
    /// let request = Message::new(&s, "kernel_info_request", serde_json::json!({}));
    /// let reply = request.reply(&s, "kernel_info_reply", serde_json::json!({"status": "ok"}));
    /// assert_eq!(reply.parent_header["msg_id"], request.header["msg_id"]);
    /// ```
    pub fn reply(&self, session: &Session, msg_type: &str, content: Value) -> Message {
        Message {
            identities: self.identities.clone(),
            header: session.header(msg_type),
            parent_header: self.header.clone(),
            metadata: json!({}),
            content,
            buffers: Vec::new(),
        }
    }

    /// Reads a message from its frames, checking the signature first.
    ///
    /// # Errors
    /// A [`WireError`] naming the first thing wrong; no JSON is parsed before the signature
    /// holds.
    pub fn decode<F: AsRef<[u8]>>(frames: &[F], key: &Key) -> Result<Message, WireError> {
        let at = frames
            .iter()
            .position(|f| f.as_ref() == DELIMITER)
            .ok_or(WireError::NoDelimiter)?;
        let rest = &frames[at + 1..];
        if rest.len() < 5 {
            return Err(WireError::TooFewFrames(rest.len()));
        }
        let parts = [&rest[1], &rest[2], &rest[3], &rest[4]].map(|f| f.as_ref());
        key.verify(rest[0].as_ref(), parts)?;
        let mut values = [0, 1, 2, 3].map(|i| serde_json::from_slice::<Value>(parts[i]));
        let mut take = |i: usize| -> Result<Value, WireError> {
            let value = std::mem::replace(&mut values[i], Ok(Value::Null));
            match value {
                Ok(v @ Value::Object(_)) => Ok(v),
                Ok(_) => Err(WireError::NotAnObject(PARTS[i])),
                Err(e) => Err(WireError::Json {
                    part: PARTS[i],
                    error: e.to_string(),
                }),
            }
        };
        let header = take(0)?;
        if !header["msg_type"].is_string() {
            return Err(WireError::NoMsgType);
        }
        Ok(Message {
            identities: frames[..at].iter().map(|f| f.as_ref().to_vec()).collect(),
            header,
            parent_header: take(1)?,
            metadata: take(2)?,
            content: take(3)?,
            buffers: rest[5..].iter().map(|f| f.as_ref().to_vec()).collect(),
        })
    }

    /// The message's frames, signed with `key`.
    pub fn encode(&self, key: &Key) -> Vec<Vec<u8>> {
        let text = |v: &Value| match v {
            Value::Null => b"{}".to_vec(),
            v => serde_json::to_vec(v).unwrap_or_else(|_| b"{}".to_vec()),
        };
        let parts = [
            text(&self.header),
            text(&self.parent_header),
            text(&self.metadata),
            text(&self.content),
        ];
        let signature = key.sign([&parts[0], &parts[1], &parts[2], &parts[3]].map(|p| &p[..]));
        let mut frames = self.identities.clone();
        frames.push(DELIMITER.to_vec());
        frames.push(signature.into_bytes());
        frames.extend(parts);
        frames.extend(self.buffers.iter().cloned());
        frames
    }
}
