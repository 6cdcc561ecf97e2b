"""`make run`'s command starts a real Streamlit server that answers on its health endpoint."""

import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from benchmarks.ports import free_port, serves, wait_until_serving

ROOT = Path(__file__).resolve().parents[1]


def test_streamlit_server_answers_health_and_serves_the_page():
    streamlit = Path(sys.executable).with_name("streamlit")
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    deadline = time.monotonic() + 60
    for _ in range(3):  # a port another test's server took meanwhile: another port
        port = free_port()
        server = subprocess.Popen(
            [str(streamlit), "run", "app.py", "--server.port", str(port), "--server.headless", "true",
             "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false"],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )
        if wait_until_serving(server, port, deadline):
            break
    try:
        assert server.poll() is None, server.stdout.read().decode()
        page = urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5).read()
        assert b"<title>" in page.lower() or b"streamlit" in page.lower()
        assert serves(server.pid, port)
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_serves_tells_the_process_that_listens_from_one_that_does_not():
    """What the server helpers rely on to know that the health check was answered by their server."""
    listener = subprocess.Popen(
        [sys.executable, "-c", "import socket, sys, time\n"
         "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(); print(s.getsockname()[1], flush=True)\n"
         "time.sleep(60)"],
        stdout=subprocess.PIPE, text=True, start_new_session=True,
    )
    try:
        port = int(listener.stdout.readline())
        assert serves(listener.pid, port)
        assert not serves(os.getpid(), port)  # this process does not hold it
        assert not serves(listener.pid, free_port())  # nor does the listener hold any other port
    finally:
        listener.kill()
        listener.wait()
