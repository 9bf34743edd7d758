"""pytest plugin: give evcxr_jupyter's last output lines a moment before nbval stops reading.

evcxr_jupyter 0.22 forwards a cell's stdout on a thread of its own and may publish the last
lines after the cell's "idle" status (its core.rs sleeps 1 ms to "increase the odds"). nbval
stops reading at "idle", so such a line is lost and the cell fails at random (seen here: one
cell in about 200). Here, on "idle", the messages that arrive within GRACE seconds are handed
to nbval first; only the order changes, nothing is added or removed.

Use: PYTHONPATH=.ci pytest -p nbval_grace --nbval notebooks/
"""
import queue

from nbval.plugin import IPyNbFile

GRACE = 0.5
_read = IPyNbFile.get_kernel_message


def _is_idle(msg):
    return msg["msg_type"] == "status" and msg["content"].get("execution_state") == "idle"


def get_kernel_message(self, timeout=None, stream="iopub"):
    pending = self.__dict__.setdefault("_grace_pending", [])
    if pending:
        return pending.pop(0)
    msg = _read(self, timeout=timeout, stream=stream)
    if stream != "iopub" or not _is_idle(msg):
        return msg
    while True:
        try:
            pending.append(_read(self, timeout=GRACE, stream=stream))
        except queue.Empty:
            break
    pending.append(msg)
    return pending.pop(0)


IPyNbFile.get_kernel_message = get_kernel_message
