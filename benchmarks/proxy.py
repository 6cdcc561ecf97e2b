"""The shipped scale-out, run on loopback: app replicas behind Debian's nginx with
deploy/nginx-attention-viz.conf (its ports rewritten), and a visitor's sticky key.

Used by the load test (``--replicas``) and tests/test_scale_out.py.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SNIPPET = ROOT / "deploy" / "nginx-attention-viz.conf"
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
COOKIE = "attention_viz_replica"
SHIPPED_SERVERS = ("    server 127.0.0.1:8501;\n", "    server 127.0.0.1:8502;\n")


def nginx_config(folder: Path, port: int, replicas: list[int]) -> Path:
    """The shipped snippet with one upstream line per replica port and ``port`` to listen on, inside
    a main config that keeps every nginx file in ``folder``."""
    snippet = SNIPPET.read_text()
    if any(snippet.count(line) != 1 for line in SHIPPED_SERVERS) or snippet.count("listen 8080;") != 1:
        raise ValueError(f"{SNIPPET.name} no longer has the two replica lines and the listen line this expects")
    servers = "".join(f"    server 127.0.0.1:{replica};\n" for replica in replicas)
    snippet = snippet.replace(SHIPPED_SERVERS[0] + SHIPPED_SERVERS[1], servers)
    snippet = snippet.replace("listen 8080;", f"listen 127.0.0.1:{port};")
    (folder / "attention-viz.conf").write_text(snippet)
    temp = " ".join(f"{kind}_temp_path {folder / kind};" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    main = folder / "nginx.conf"
    main.write_text(f"""
worker_processes 1;
error_log {folder / 'error.log'} warn;
pid {folder / 'nginx.pid'};
events {{ worker_connections 1024; }}
http {{
    {temp}
    # which sticky key went to which replica (tests/test_scale_out.py reads it back)
    log_format sticky '$attention_viz_sticky $upstream_addr $status';
    access_log {folder / 'access.log'} sticky;
    include {folder / 'attention-viz.conf'};
}}
""")
    return main


def started_nginx(config: Path, port: int) -> subprocess.Popen:
    """nginx in the foreground with ``config``, once it answers on ``port``."""
    check = subprocess.run([NGINX, "-t", "-p", str(config.parent), "-c", str(config)], capture_output=True, text=True)
    if check.returncode != 0:
        raise RuntimeError(check.stderr)
    nginx = subprocess.Popen([NGINX, "-p", str(config.parent), "-c", str(config), "-g", "daemon off;"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 20
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2)
            return nginx
        except OSError:
            if nginx.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError((config.parent / "error.log").read_text()) from None
            time.sleep(0.1)


@contextmanager
def proxy(folder: Path, port: int, replicas: list[int]) -> Iterator[str]:
    """nginx in front of the replicas on these ports; yields its URL, stops it at the end."""
    nginx = started_nginx(nginx_config(folder, port, replicas), port)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        os.killpg(nginx.pid, signal.SIGTERM)
        nginx.wait(timeout=10)


def cookies_of(url: str, path: str, key: str | None = None) -> dict[str, str]:
    """The cookies a GET of ``path`` sets (sending the sticky key, if the visitor has one)."""
    request = urllib.request.Request(url + path, headers={"Cookie": f"{COOKIE}={key}"} if key else {})
    with urllib.request.urlopen(request, timeout=60) as response:
        return dict(c.split(";")[0].split("=", 1) for c in response.headers.get_all("Set-Cookie") or [])


def sticky_key(url: str) -> str:
    """What a browser's first page load through the proxy hands out: the visitor's sticky key."""
    return cookies_of(url, "/")[COOKIE]
