"""Loopback ports for the servers the tests and benchmarks start, and whether the server answering on
one is the one just started.

A port is only free at the moment it is chosen. Between choosing it and the new server binding it,
another process (the server of a test running beside, on the other pytest worker) may take it: the
new server then exits ("Port N is not available") while the health check is answered by the other
one, and the caller would go on with a dead server. :func:`wait_until_serving` tells the two apart
from the kernel's socket table (Linux's /proc), and the callers start again on another port.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

LISTEN = "0A"  # a socket's state in /proc/net/tcp


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening_sockets(port: int) -> set[str]:
    """Inodes of the TCP sockets listening on ``port``."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == LISTEN:
                inodes.add(fields[9])
    return inodes


def _group_of(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[2])
    except (OSError, IndexError, ValueError):
        return None


def serves(pid: int, port: int) -> bool:
    """Whether process ``pid``, or a process of the group it leads (``make run`` and its Streamlit),
    holds a socket listening on ``port``."""
    inodes = _listening_sockets(port)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or (int(entry.name) != pid and _group_of(int(entry.name)) != pid):
            continue
        try:
            links = [os.readlink(fd) for fd in (entry / "fd").iterdir()]
        except OSError:  # the process ended meanwhile, or its file descriptors are not ours to read
            continue
        if any(link.startswith("socket:[") and link[len("socket:[") : -1] in inodes for link in links):
            return True
    return False


def wait_until_serving(process: subprocess.Popen, port: int, deadline: float) -> bool:
    """Until ``process`` (a server just started on ``port``) answers Streamlit's health check itself:
    True. False if it exited first (the port was taken meanwhile). RuntimeError at ``deadline``."""
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        try:
            healthy = urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2).read() == b"ok"
        except OSError:
            healthy = False
        if healthy and serves(process.pid, port):
            return True
        time.sleep(0.2)
    raise RuntimeError(f"the app did not answer on port {port} in time")
