#!/usr/bin/env python3
"""Run as one student on a hub (scripts/hub_faults.py does): tries to reach every kernel of
another user, `victim`, on the machine, as any local user can try.

- TCP: every port of 127.0.0.1 that a process of the victim listens on (/proc/net/tcp names
  each listening socket's owner);
- Unix sockets: every path under the victim's home that /proc/net/unix lists.

On each endpoint it can connect to, it sends what needs no key: raw bytes, a message with an
odd-length signature, and kernel_info, execute and shutdown requests signed with a guessed
key or none (pyzmq DEALER, jupyter_client's Session). Prints one JSON object: the endpoints
found, reached (a connection accepted) and refused (with the error).
"""

import json
import os
import pwd
import socket
import sys
import time

import zmq
from jupyter_client.session import Session


def tcp_ports(uid):
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(table).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, state, owner = fields[1], fields[3], int(fields[7])
            if state == "0A" and owner == uid:  # LISTEN
                ports.add(int(local.rsplit(":", 1)[1], 16))
    return sorted(ports)


def unix_paths(home):
    paths = set()
    for line in open("/proc/net/unix").read().splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 8 and fields[7].startswith(home + "/"):
            paths.add(fields[7])
    return sorted(paths)


def attack(endpoint):
    ctx = zmq.Context.instance()
    guessed = Session(key=b"a guess")
    unsigned = Session(key=b"")
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 1000)
    sock.connect(endpoint)
    sock.send_multipart([b"raw bytes"])
    sock.send_multipart([b"<IDS|MSG>", b"abc", b"{}", b"{}", b"{}", b"{}"])
    for session in (guessed, unsigned):
        for msg_type, content in (("kernel_info_request", {}),
                                  ("execute_request", {"code": "let planted = 1;", "silent": False}),
                                  ("shutdown_request", {"restart": False})):
            session.send(sock, session.msg(msg_type, content))
    time.sleep(0.5)
    sock.close()


def main():
    victim = sys.argv[1]
    entry = pwd.getpwnam(victim)
    found, reached, refused = [], [], []
    for port in tcp_ports(entry.pw_uid):
        found.append(f"tcp://127.0.0.1:{port}")
    for path in unix_paths(entry.pw_dir):
        found.append(f"ipc://{path}")
    for endpoint in found:
        try:
            if endpoint.startswith("tcp://"):
                probe = socket.create_connection(("127.0.0.1", int(endpoint.rsplit(":", 1)[1])), timeout=2)
            else:
                probe = socket.socket(socket.AF_UNIX)
                probe.settimeout(2)
                probe.connect(endpoint[len("ipc://"):])
            probe.close()
        except OSError as e:
            refused.append(f"{endpoint}: {e.strerror or e}")
            continue
        reached.append(endpoint)
        attack(endpoint)
    print(json.dumps({"found": found, "reached": reached, "refused": refused}))


if __name__ == "__main__":
    main()
