//! The kernel's sockets against hostile peers on the same machine, at the ZMTP level: each
//! attack on one connection, then the owner's connection served as before.
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is the test failing, as a failed assert is"
)]

use attention_lab_wire::zmtp::frame::{
    encode_command, encode_message, greeting, ready, ready_data,
};
use attention_lab_wire::zmtp::frame::{Incoming, Reader};
use attention_lab_wire::zmtp::{bind, Endpoint, Kind, Limits, Log, SendError, Socket};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The kernel's shell: frames up to 256 MiB.
const SHELL: Limits = Limits {
    max_frame: 256 << 20,
    max_peers: 64,
    queue_bytes: 32 << 20,
    handshake: Duration::from_secs(10),
    send_timeout: Duration::from_secs(60),
};

/// A socket on a free port of 127.0.0.1, and the lines it logs.
fn socket(kind: Kind, limits: Limits) -> (Socket, u16, Arc<Mutex<Vec<String>>>) {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let log_lines = lines.clone();
    let log: Log = Arc::new(move |line: &str| log_lines.lock().unwrap().push(line.to_string()));
    let endpoint = Endpoint::Tcp {
        ip: "127.0.0.1".into(),
        port: 0,
    };
    let socket = bind(kind, "test", &endpoint, limits, log).unwrap();
    let port = socket.local_port().unwrap();
    (socket, port, lines)
}

/// A peer that greets and says READY as `socket_type`, with `identity` if not empty.
fn peer(port: u16, socket_type: &str, identity: &[u8]) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(&greeting()).unwrap();
    let mut theirs = [0u8; 64];
    s.read_exact(&mut theirs).unwrap();
    s.write_all(&ready(socket_type, identity)).unwrap();
    let mut reader = Reader::new(&s, 1 << 20);
    assert!(
        matches!(reader.incoming().unwrap(), Incoming::Command { name, .. } if name == b"READY")
    );
    s
}

fn next_message(s: &TcpStream) -> Vec<Vec<u8>> {
    Reader::new(s, 1 << 30).message().unwrap()
}

/// The socket's next message, within 10 s.
fn recv_within(socket: &Arc<Socket>) -> Vec<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    let socket = socket.clone();
    std::thread::spawn(move || {
        let _ = tx.send(socket.recv());
    });
    rx.recv_timeout(Duration::from_secs(10))
        .expect("the owner's message arrives within 10 s")
}

/// The connection is closed by the socket within 10 s (read gives 0 or an error).
fn closed(mut s: TcpStream) -> bool {
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return true,
            Ok(_) => {}
        }
    }
}

/// Waits up to 10 s for a logged line containing `text`.
fn logged(lines: &Arc<Mutex<Vec<String>>>, text: &str) -> bool {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(10) {
        if lines.lock().unwrap().iter().any(|l| l.contains(text)) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// The owner, as DEALER with identity `owner`, sends a message and gets a reply routed to it.
fn owner_round_trip(socket: &Arc<Socket>, owner: &TcpStream) {
    (&*owner)
        .write_all(&encode_message(&[b"ping".to_vec()]))
        .unwrap();
    let got = recv_within(socket);
    assert_eq!(got, vec![b"owner".to_vec(), b"ping".to_vec()]);
    socket.send(&[b"owner".to_vec(), b"pong".to_vec()]).unwrap();
    assert_eq!(next_message(owner), vec![b"pong".to_vec()]);
}

#[test]
fn a_frame_header_claiming_a_tebibyte_closes_that_connection_only() {
    let (socket, port, lines) = socket(Kind::Router, SHELL);
    let socket = Arc::new(socket);
    // Before any handshake: the greeting, then a long frame's header.
    let mut stranger = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut attack = greeting().to_vec();
    attack.push(0x02);
    attack.extend((1u64 << 40).to_be_bytes());
    stranger.write_all(&attack).unwrap();
    assert!(closed(stranger));
    assert!(
        logged(&lines, "a frame of 1099511627776 bytes"),
        "{lines:?}"
    );
    // A frame length of 2^64 - 1 after a READY, the same.
    let mut stranger = peer(port, "DEALER", b"");
    let mut attack = vec![0x02];
    attack.extend(u64::MAX.to_be_bytes());
    stranger.write_all(&attack).unwrap();
    assert!(closed(stranger));
    let owner = peer(port, "DEALER", b"owner");
    owner_round_trip(&socket, &owner);
}

#[test]
fn a_large_frame_trickled_in_stalls_no_other_connection() {
    let (socket, port, _) = socket(Kind::Router, SHELL);
    let socket = Arc::new(socket);
    let mut stranger = peer(port, "DEALER", b"");
    let mut header = vec![0x02];
    header.extend((100u64 << 20).to_be_bytes());
    stranger.write_all(&header).unwrap();
    let trickle = std::thread::spawn(move || {
        for _ in 0..200 {
            if stranger.write_all(&[0u8; 1000]).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    });
    let owner = peer(port, "DEALER", b"owner");
    let start = Instant::now();
    owner_round_trip(&socket, &owner);
    // Not held for the trickle (10 s); 5 s leaves room for a loaded machine.
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    trickle.join().unwrap();
}

#[test]
fn a_second_peer_with_a_live_identity_is_refused_and_the_owner_keeps_its_replies() {
    let (socket, port, lines) = socket(Kind::Router, Limits::default());
    let socket = Arc::new(socket);
    let owner = peer(port, "DEALER", b"owner");
    owner_round_trip(&socket, &owner);
    // The stranger's READY is answered, then the connection closes.
    let mut stranger = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stranger.write_all(&greeting()).unwrap();
    let props = [("Socket-Type", &b"DEALER"[..]), ("Identity", &b"owner"[..])];
    stranger
        .write_all(&encode_command(b"READY", &ready_data(&props)))
        .unwrap();
    assert!(closed(stranger));
    assert!(logged(&lines, "identity \"owner\" is already connected"));
    owner_round_trip(&socket, &owner);
    // Once the owner has gone, its identity is free again.
    drop(owner);
    std::thread::sleep(Duration::from_millis(200));
    let again = peer(port, "DEALER", b"owner");
    owner_round_trip(&socket, &again);
    assert_eq!(
        socket.send(&[b"nobody".to_vec(), b"x".to_vec()]),
        Err(SendError::NoPeer)
    );
}

#[test]
fn an_echo_never_read_stalls_no_one_elses_heartbeat() {
    let (socket, port, lines) = socket(Kind::Echo, Limits::default());
    // Over the cap: closed with a line.
    let mut big = peer(port, "REQ", b"");
    // The socket may close the connection before the last bytes are written.
    let _ = big.write_all(&encode_message(&[Vec::new(), vec![7u8; 2 << 20]]));
    assert!(closed(big));
    assert!(logged(&lines, "over the channel's cap of 1048576"));
    // Under the cap, many pings whose echoes are never read.
    let mut sleeper = peer(port, "REQ", b"");
    let ping = encode_message(&[Vec::new(), vec![1u8; 900 << 10]]);
    std::thread::spawn(move || {
        for _ in 0..64 {
            if sleeper.write_all(&ping).is_err() {
                return;
            }
        }
        std::thread::sleep(Duration::from_secs(30));
    });
    std::thread::sleep(Duration::from_millis(500));
    let mut owner = peer(port, "REQ", b"");
    for i in 0..5u8 {
        let ping = vec![Vec::new(), vec![i; 8]];
        let start = Instant::now();
        owner.write_all(&encode_message(&ping)).unwrap();
        assert_eq!(next_message(&owner), ping);
        // Jupyter declares a kernel dead after 5 s without an echo.
        assert!(start.elapsed() < Duration::from_secs(5));
    }
    drop(socket);
}

#[test]
fn malformed_commands_close_the_connection_with_a_line_and_no_panic() {
    let (socket, port, lines) = socket(Kind::Router, Limits::default());
    let socket = Arc::new(socket);
    let mut long_property = vec![4u8, 0, 5];
    long_property.extend(b"READY");
    long_property.extend([11]);
    long_property.extend(b"Socket-Type");
    long_property.extend(u32::MAX.to_be_bytes());
    long_property[1] = (long_property.len() - 2) as u8;
    let attacks: [&[u8]; 4] = [
        &[0x04, 0x00],
        &[0x04, 0x03, 0xff, b'A', b'B'],
        &long_property,
        b"GET / HTTP/1.1\r\n\r\n",
    ];
    for (i, attack) in attacks.iter().enumerate() {
        let mut stranger = TcpStream::connect(("127.0.0.1", port)).unwrap();
        if i < 3 {
            stranger.write_all(&greeting()).unwrap();
        }
        stranger.write_all(attack).unwrap();
        assert!(closed(stranger), "attack {i}");
    }
    assert!(logged(&lines, "an empty command frame"), "{lines:?}");
    assert!(logged(&lines, "a name of 255 bytes"));
    assert!(logged(&lines, "READY: a value runs past the command"));
    assert!(logged(&lines, "not a ZMTP 3 greeting"));
    let owner = peer(port, "DEALER", b"owner");
    owner_round_trip(&socket, &owner);
}

#[test]
fn a_subscriber_that_never_reads_stalls_no_other_subscriber() {
    let (socket, port, lines) = socket(Kind::Pub, Limits::default());
    let mut stranger = peer(port, "SUB", b"");
    stranger.write_all(&encode_message(&[vec![1u8]])).unwrap();
    let owner = peer(port, "SUB", b"");
    // ZMTP 3.1's SUBSCRIBE command is taken too.
    (&owner)
        .write_all(&encode_command(b"SUBSCRIBE", b""))
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let reading = std::thread::spawn(move || {
        (0..600u32)
            .filter(|i| next_message(&owner)[1] == i.to_be_bytes())
            .count()
    });
    let start = Instant::now();
    // 60 MB: more than the stranger's queue (32 MiB) and its socket's buffers hold.
    for i in 0..600u32 {
        socket
            .send(&[
                b"stream".to_vec(),
                i.to_be_bytes().to_vec(),
                vec![0u8; 100 << 10],
            ])
            .unwrap();
    }
    // Published in well under the 60 s a blocked write would take, all of it to the owner.
    assert!(
        start.elapsed() < Duration::from_secs(15),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(reading.join().unwrap(), 600);
    assert!(logged(&lines, "read nothing: a message dropped"));
    drop(stranger);
}

#[test]
fn peers_over_the_limit_and_slow_greetings_are_closed() {
    let limits = Limits {
        max_peers: 2,
        handshake: Duration::from_millis(300),
        ..Limits::default()
    };
    let (socket, port, lines) = socket(Kind::Router, limits);
    let socket = Arc::new(socket);
    // A connection that never greets is closed once the handshake's time is up.
    let silent = TcpStream::connect(("127.0.0.1", port)).unwrap();
    assert!(closed(silent));
    let first = peer(port, "DEALER", b"a");
    let _second = peer(port, "DEALER", b"b");
    let third = TcpStream::connect(("127.0.0.1", port)).unwrap();
    assert!(closed(third));
    assert!(logged(&lines, "2 peers already"));
    socket.send(&[b"a".to_vec(), b"still".to_vec()]).unwrap();
    assert_eq!(next_message(&first), vec![b"still".to_vec()]);
    // A PUB peer cannot talk to a ROUTER.
    drop(first);
    std::thread::sleep(Duration::from_millis(200));
    let mut wrong = TcpStream::connect(("127.0.0.1", port)).unwrap();
    wrong.write_all(&greeting()).unwrap();
    wrong
        .write_all(&encode_command(
            b"READY",
            &ready_data(&[("Socket-Type", b"PUB")]),
        ))
        .unwrap();
    assert!(closed(wrong));
    assert!(logged(&lines, "a \"PUB\" socket cannot talk to a ROUTER"));
}

#[cfg(unix)]
#[test]
fn ipc_endpoints_are_unix_sockets_and_a_stale_one_is_replaced() {
    use std::os::unix::net::UnixStream;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kernel-1");
    let log: Log = Arc::new(|_: &str| {});
    let endpoint = Endpoint::Ipc(path.clone());
    let shell = || {
        bind(
            Kind::Router,
            "shell",
            &endpoint,
            Limits::default(),
            log.clone(),
        )
    };
    drop(shell().unwrap());
    // The file stays behind, as after a killed kernel; binding again replaces it.
    let socket = shell().unwrap();
    let mut s = UnixStream::connect(&path).unwrap();
    s.write_all(&greeting()).unwrap();
    let mut theirs = [0u8; 64];
    s.read_exact(&mut theirs).unwrap();
    s.write_all(&encode_command(
        b"READY",
        &ready_data(&[("Socket-Type", b"DEALER"), ("Identity", b"me")]),
    ))
    .unwrap();
    s.write_all(&encode_message(&[b"hi".to_vec()])).unwrap();
    assert_eq!(socket.recv(), vec![b"me".to_vec(), b"hi".to_vec()]);
    // A regular file at the path is not removed.
    let file = dir.path().join("notes");
    std::fs::write(&file, "mine").unwrap();
    assert!(bind(
        Kind::Router,
        "x",
        &Endpoint::Ipc(file.clone()),
        Limits::default(),
        log
    )
    .is_err());
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "mine");
}
