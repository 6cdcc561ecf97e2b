"""Scale-out as shipped: two app replicas behind Debian's nginx with deploy/nginx-attention-viz.conf.

Every visitor stays on one replica and sees only their own sentence; when a replica dies, the
other serves new visitors (and returning ones). Everything listens on loopback only.
"""

import asyncio
import os
import signal
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

import pytest

from benchmarks.load import app_servers, sentences
from benchmarks.ports import free_port
from benchmarks.proxy import COOKIE, NGINX, cookies_of, nginx_config, started_nginx
from benchmarks.session import Session, names_its_tokens, title

VISITORS = 13  # all on one replica by chance: 2 in 2**13

pytestmark = pytest.mark.skipif(not Path(NGINX).exists(), reason="needs Debian's nginx: run `make nginx`")


def page_load(url: str, key: str | None = None) -> str:
    """GET the page and what its script fetches first, as a browser would; returns the sticky key."""
    given = cookies_of(url, "/", key)[COOKIE]
    assert key is None or given == key  # a key, once given, is kept
    for path in ("/_stcore/health", "/_stcore/host-config"):
        assert cookies_of(url, path, given)[COOKIE] == given
    return given


async def visit(url: str, key: str, text: str, labels: list[str]) -> None:
    """One visitor: open the link, switch the layer; always their own sentence, never an error."""
    async with Session(url, cookie=f"{COOKIE}={key}") as session:
        run = await session.open({"text": text, "view": "head"})
        assert not run.errors and run.heatmaps and names_its_tokens(run.heatmaps[0], labels), (run.errors, text)
        run = await session.set("Layer", 2)
        assert not run.errors and title(run.heatmaps[0]).startswith("layer 2")
        assert names_its_tokens(run.heatmaps[0], labels)


def replicas_by_key(log: Path) -> dict[str, set[str]]:
    """Sticky key → the replicas that answered its requests (the last one tried, when one failed)."""
    served: dict[str, set[str]] = {}
    for line in log.read_text().splitlines():
        key, *upstreams, status = line.replace(",", " ").split()
        if upstreams and upstreams[-1] != "-":
            served.setdefault(key, set()).add(upstreams[-1])
    return served


async def visitors(url: str, keys: list[str], work: list[tuple[str, list[str]]]) -> None:
    await asyncio.gather(*(visit(url, key, text, labels) for key, (text, labels) in zip(keys, work)))


def all_at_once(url: str, keys: list[str], work: list[tuple[str, list[str]]]) -> None:
    """The visitors' sessions run concurrently, on an event loop in a thread of their own: this test
    process may hold Playwright's sync API (the browser fixtures last the whole process), whose loop
    counts as running in this thread, so asyncio.run refuses to start here."""
    with ThreadPoolExecutor(max_workers=1) as thread:
        thread.submit(asyncio.run, visitors(url, keys, work)).result()


def test_two_replicas_behind_nginx_sticky_isolated_and_surviving_a_dead_replica(tmp_path):
    work = sentences(VISITORS + 6, start=500)
    with ExitStack() as stack:
        (a_url, a_pid), (b_url, b_pid) = stack.enter_context(app_servers(2))
        replicas = {a_url.removeprefix("http://"): a_pid, b_url.removeprefix("http://"): b_pid}
        port = free_port()
        nginx = started_nginx(nginx_config(tmp_path, port, [int(a_url.rsplit(":", 1)[1]), int(b_url.rsplit(":", 1)[1])]), port)
        stack.callback(lambda: (os.killpg(nginx.pid, signal.SIGTERM), nginx.wait(timeout=10)))
        url = f"http://127.0.0.1:{port}"

        # A class arrives: each visitor loads the page (gets a key), then all run at once.
        keys = [page_load(url) for _ in range(VISITORS)]
        assert len(set(keys)) == VISITORS
        all_at_once(url, keys, work[:VISITORS])
        served = replicas_by_key(tmp_path / "access.log")
        assert all(len(served[key]) == 1 for key in keys), served  # page, websocket: one replica each
        assert {next(iter(served[key])) for key in keys} == set(replicas)  # and both replicas in use

        # Streamlit's XSRF protection holds through the proxy: a write without the token is refused.
        xsrf = cookies_of(url, "/_stcore/health", keys[0])["_streamlit_xsrf"]  # as the page's script fetches it
        put = urllib.request.Request(f"{url}/_stcore/upload_file/some-session/some-file", data=b"x", method="PUT",
                                     headers={"Cookie": f"{COOKIE}={keys[0]}; _streamlit_xsrf={xsrf}"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(put, timeout=30)
        assert refused.value.code == 403

        # One replica dies. New visitors, and returning ones whose key pointed at it, reach the other.
        dead = next(iter(served[keys[0]]))
        os.killpg(replicas[dead], signal.SIGKILL)
        alive = (set(replicas) - {dead}).pop()
        returning = [key for key in keys if served[key] == {dead}][:2]
        newcomers = [page_load(url) for _ in range(4)]
        assert all(page_load(url, key) == key for key in returning)
        all_at_once(url, newcomers + returning, work[VISITORS:])
        after = replicas_by_key(tmp_path / "access.log")
        assert all(after[key] == {alive} for key in newcomers), after
        assert all(alive in after[key] for key in returning), after
