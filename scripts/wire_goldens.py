#!/usr/bin/env python3
"""Write messages as Jupyter's own client frames and signs them into wire/tests/data/.

Run: .venv/bin/python scripts/wire_goldens.py (jupyter-client from requirements.txt)
Deterministic: fixed keys, headers and contents; rerunning rewrites the same bytes.

messages.json lists, for each case, the key, the frames jupyter_client's Session.serialize
makes (hex), and the four parts as JSON values; wire's tests decode the frames with the key
and must find those values, and must sign the parts to the same signature.
"""

import json
import os

from jupyter_client.session import Session

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "wire", "tests", "data")


def case(key, msg_type, content, parent=None, metadata=None, identities=()):
    session = Session(key=key.encode(), username="golden", session="golden-session")
    header = {
        "msg_id": f"golden-{msg_type}",
        "session": "golden-session",
        "username": "golden",
        "date": "2026-11-26T12:00:00.000000Z",
        "msg_type": msg_type,
        "version": "5.3",
    }
    msg = {
        "header": header,
        "parent_header": parent or {},
        "metadata": metadata or {},
        "content": content,
    }
    frames = session.serialize(msg, ident=[i.encode() for i in identities])
    return {
        "key": key,
        "frames": [bytes(f).hex() for f in frames],
        "header": header,
        "parent_header": parent or {},
        "metadata": metadata or {},
        "content": content,
        "identities": list(identities),
    }


def main():
    os.makedirs(OUT, exist_ok=True)
    cases = [
        case("a0436f6c-1916-498b-8eb9-e81ab9368e84", "kernel_info_request", {}),
        case(
            "k",
            "execute_request",
            {"code": "let x = 1;\nx + 1", "silent": False, "store_history": True,
             "user_expressions": {}, "allow_stdin": True, "stop_on_error": True},
            identities=("shell-peer",),
        ),
        case("", "shutdown_request", {"restart": False}),
        case(
            "ключ",
            "execute_reply",
            {"status": "ok", "execution_count": 3, "text": "héllo ✓"},
            parent={"msg_id": "p", "msg_type": "execute_request"},
            metadata={"started": "now"},
            identities=("a", "b"),
        ),
    ]
    with open(os.path.join(OUT, "messages.json"), "w") as f:
        json.dump(cases, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
