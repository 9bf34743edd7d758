//! ZMTP 3.0, the protocol under ZeroMQ, as a Jupyter kernel serves it: its bytes
//! ([`frame`]) and listening sockets ([`socket`]) built so that no peer without the key can
//! end the kernel, stall a channel or take another peer's replies.
//!
//! Why our own and not a ZeroMQ crate: zeromq 0.6 reserves a frame's claimed length before
//! reading it (a 1 TiB header aborts the process), zero-fills that reservation on every read,
//! hands a live identity to a newcomer and awaits slow peers in its sends. libzmq, with
//! `ZMQ_MAXMSGSIZE` and no handover, would do, but needs a C++ compiler to build, which a
//! fresh machine with only Rust and Python may lack. A kernel needs three socket types and the
//! NULL mechanism: about 700 lines, each length checked before use, and a fuzz target.
//!
//! ```
//! use attention_lab_wire::zmtp::{bind, Endpoint, Kind, Limits};
//! let log = std::sync::Arc::new(|_: &str| {});
//! let endpoint = Endpoint::Tcp { ip: "127.0.0.1".into(), port: 0 };
//! let pub_socket = bind(Kind::Pub, "iopub", &endpoint, Limits::default(), log).unwrap();
//! // No subscriber yet: the message goes to no one, and the send does not wait.
//! pub_socket.send(&[b"status".to_vec()]).unwrap();
//! ```

pub mod frame;
pub mod socket;

pub use frame::ZmtpError;
pub use socket::{bind, Endpoint, Kind, Limits, Log, SendError, Socket};
