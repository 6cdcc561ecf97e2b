"""How many students one server holds: N concurrent sessions against a fresh app on loopback.

    .venv/bin/python -m benchmarks.load --sessions 30 --json    # one JSON line (the contract below)
    .venv/bin/python -m benchmarks.load --distinct 200 --json   # server RSS while 200 new sentences come in
    .venv/bin/python -m benchmarks.load --table                 # N = 1, 10, 30 and the RSS run, as Markdown
    .venv/bin/python -m benchmarks.load --sessions 30 --replicas 2   # two replicas behind nginx (docs/deploy.md)
    .venv/bin/python -m benchmarks.load --sessions 10 --hostile 3    # p95 alone, then beside 3 hostile visitors

``--sessions N --json`` prints ``{"sessions": N, "p50_s": …, "p95_s": …, "errors": …, "rss_mb": …}``.
Each session is a client speaking Streamlit's websocket protocol (benchmarks/session.py): it opens a
link with its own 64-token sentence, then switches layer, head and view a few times, as a student
would. A time is from the request to the heatmap's arrival (the server's part of what a student
waits for); p50/p95 are over every step of every session. An error is a step that showed an error,
drew no heatmap, drew another session's sentence or timed out. ``rss_mb`` is the server's peak RSS
(with replicas: the peak of their sum).

``--sessions N --hostile H`` measures the ordinary visitors (each taking the steps three times) twice
on one server: alone, then beside
H hostile visitors who keep opening links that ask the most expensive thing each view offers (a
512-token text never seen before, every head removed with mean ablation, value zeroing, flow, the
detector's probe set, patching at every head and position …). It prints both p95s, how many hostile
links were opened and how many the server refused ("busy") or answered with an error.

``--replicas R`` (R ≥ 2) serves the app as docs/deploy.md ships it for a machine with R cores: R
replicas behind Debian's nginx with deploy/nginx-attention-viz.conf, each session with its own
sticky key from a first page load, as a browser gets it.

Bounded: at most 100 sessions, a deadline for the whole run (``--timeout``), a server of its own on a
free loopback port, stopped at the end. The server is warmed up by one session first (the model
load and first imports are a one-off, not what a class waits for).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path

import numpy as np

from .ports import free_port, wait_until_serving
from .proxy import COOKIE, proxy, sticky_key
from .session import RUN_TIMEOUT_S, Session, names_its_tokens, title

ROOT = Path(__file__).resolve().parents[1]
MAX_SESSIONS = 100
MAX_REPLICAS = 8
CONTRACT = ("sessions", "p50_s", "p95_s", "errors", "rss_mb")  # the keys of the JSON line
TOKENS = 64
SESSION_TTL_S = 120  # Streamlit keeps a closed session this long for a reconnect (server.disconnectedSessionTTL)
# (widget label, value, what the heatmap must then show): layer, head and view, a few times over
STEPS = [
    ("Layer", 3, "layer 3"),
    ("Head", "5", "head 5"),
    ("Explore", "All heads", None),  # the sidebar's Explore section
    ("Explore", "Head", "sentence"),
    ("Layer", 5, "layer 5"),
    ("Head", "11", "head 11"),
]


def cpu_s(pid: int) -> float:
    """CPU seconds the process has used (user + system)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


@contextmanager
def app_servers(count: int = 1, timeout: float = 180, attempts: int = 3):
    """``count`` copies of the app as `make run` serves it, each on a free loopback port, started
    side by side; yields [(url, pid)] once every one answers its health check itself (a port another
    process took meanwhile means a new port: benchmarks/ports.py)."""
    servers: list[tuple[int, subprocess.Popen]] = []

    def start() -> tuple[int, subprocess.Popen]:
        port = free_port()
        command = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
                   "--server.address", "127.0.0.1", "--server.headless", "true",
                   "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"]
        return port, subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                      env={**os.environ, "HF_HUB_OFFLINE": "1"}, start_new_session=True)

    try:
        servers = [start() for _ in range(count)]
        deadline = time.monotonic() + timeout
        for i in range(count):
            for _ in range(attempts):
                port, server = servers[i]
                if wait_until_serving(server, port, deadline):
                    break
                servers[i] = start()  # it exited: its port was taken (the old one is reaped below)
                servers.append((port, server))
            else:
                raise RuntimeError(f"the app did not start in {attempts} attempts (exit code {server.poll()})")
        yield [(f"http://127.0.0.1:{port}", server.pid) for port, server in servers[:count]]
    finally:
        for _, server in servers:
            try:
                os.killpg(server.pid, signal.SIGTERM)  # (a replica a test killed is still a zombie here)
            except ProcessLookupError:
                pass
        for _, server in servers:
            try:
                server.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait()


def sentences(count: int, start: int = 0) -> list[tuple[str, list[str]]]:
    """``count`` distinct sentences of exactly 64 minilm tokens, with the labels the heatmap must show."""
    from attention_viz.backends.registry import load_backend
    from benchmarks.texts import text_of_tokens

    backend = load_backend("minilm")
    made = []
    for i in range(start, start + count):
        prefix = f"Student {i} asks:"
        inner = len(backend.tokenize(prefix)[0]) - 2  # without [CLS] and [SEP]
        text = f"{prefix} {text_of_tokens(backend, TOKENS - inner, variant=i)}"
        tokens, dropped = backend.tokenize(text)
        if len(tokens) != TOKENS or dropped:
            raise RuntimeError(f"sentence {i} has {len(tokens)} tokens, not {TOKENS}")
        made.append((text, list(tokens.labels)))
    return made


async def visit(url: str, text: str, labels: list[str], steps: list[tuple],
                key: str | None = None) -> tuple[list[float], int]:
    """One student (with a sticky key behind a proxy): open the link, then each step.
    Returns (seconds to each heatmap, errors)."""
    times, errors = [], 0
    try:
        async with Session(url, cookie=f"{COOKIE}={key}" if key else None) as session:
            plan = [("open", None, "sentence"), *steps]
            for label, value, expect in plan:
                if label == "open":
                    run = await session.open({"text": text, "view": "head"})
                else:
                    run = await session.set(label, value)
                heatmap = run.heatmaps[0] if run.heatmaps else None
                wrong = heatmap is None or run.errors or (
                    expect == "sentence" and not names_its_tokens(heatmap, labels)
                ) or (expect not in (None, "sentence") and expect not in title(heatmap))
                if wrong:
                    errors += 1
                else:
                    times.append(run.seconds_to_heatmap)
    except Exception:  # a dropped connection or a timeout: every step not done is an error
        errors = len(steps) + 1 - len(times)
    return times, errors


async def sample_rss(pids: list[int], peak: list[float]) -> None:
    while True:
        peak[0] = max(peak[0], sum(rss_mb(pid) for pid in pids))
        await asyncio.sleep(0.25)


async def concurrent(url: str, pids: list[int], work: list[tuple[str, list[str]]], steps: list[tuple],
                     timeout: float, keys: list[str | None] | None = None) -> dict:
    peak, cpu_before = [sum(rss_mb(pid) for pid in pids)], sum(cpu_s(pid) for pid in pids)
    sampler = asyncio.create_task(sample_rss(pids, peak))
    keys = keys or [None] * len(work)
    tasks = [asyncio.create_task(visit(url, text, labels, steps, key)) for (text, labels), key in zip(work, keys)]
    done, pending = await asyncio.wait(tasks, timeout=timeout)
    for task in pending:
        task.cancel()
    sampler.cancel()
    times = [t for task in done for t in task.result()[0]]
    errors = sum(task.result()[1] for task in done) + len(pending) * (len(steps) + 1)
    return {
        "sessions": len(work),
        "p50_s": round(float(np.percentile(times, 50)), 3) if times else None,
        "p95_s": round(float(np.percentile(times, 95)), 3) if times else None,
        "errors": errors,
        "rss_mb": round(peak[0], 1),
        # not in the JSON line: the server's CPU per heatmap, far less inflated by a busy machine than wall time
        "cpu_s_per_step": round((sum(cpu_s(pid) for pid in pids) - cpu_before) / max(len(times), 1), 3),
    }


def measure_sessions(n: int, timeout: float, replicas: int = 1) -> dict:
    work = sentences(n + replicas)
    with ExitStack() as stack:
        servers = stack.enter_context(app_servers(replicas))
        for (url, _), warm in zip(servers, work):  # warm-up: each replica's model load and first imports
            asyncio.run(visit(url, *warm, STEPS))
        pids = [pid for _, pid in servers]
        if replicas == 1:
            return asyncio.run(concurrent(servers[0][0], pids, work[1:], STEPS, timeout))
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        url = stack.enter_context(proxy(folder, free_port(), [int(u.rsplit(":", 1)[1]) for u, _ in servers]))
        keys = [sticky_key(url) for _ in range(n)]  # each student's first page load
        return asyncio.run(concurrent(url, pids, work[replicas:], STEPS, timeout, keys))


LONG_TOKENS = 512  # minilm's limit: the longest text a link can make it read
HOSTILE_ROUNDS = 3  # the ordinary visitors take their steps this many times: long enough to meet the hostile links
ALL_HEADS = ",".join(f"{layer}.{head}" for layer in range(6) for head in range(12))  # minilm: 6 × 12
# The most expensive thing each view offers a link (its query parameters, the text added per link).
HOSTILE_LINKS = [
    {"view": "ablation", "ablate": ALL_HEADS, "ablation": "mean"},
    {"view": "head", "weighting": "value_zeroing"},
    {"view": "layers", "weighting": "value_zeroing"},
    {"view": "grid", "weighting": "alti"},
    {"view": "detector"},
    {"view": "compare"},
    {"view": "focus", "weighting": "norms"},
    {"view": "inside"},
    {"view": "patching", "site": "head_positions"},
]


def long_texts(count: int, start: int = 5000) -> list[str]:
    """``count`` distinct texts of minilm's whole 512 tokens: none is ever in the server's caches."""
    from attention_viz.backends.registry import load_backend
    from benchmarks.texts import text_of_tokens

    backend = load_backend("minilm")
    return [text_of_tokens(backend, LONG_TOKENS, variant=i) for i in range(start, start + count)]


async def hostile(url: str, texts: list[str], first: int, stop: asyncio.Event, tally: dict) -> None:
    """One hostile visitor: a new tab per link, each the most expensive thing of the next view, with a
    new long text, until ``stop``. Tallies links opened, refused (the server said it is busy) and failed."""
    i = first
    while not stop.is_set() and i < first + len(texts) * len(HOSTILE_LINKS):
        link = {**HOSTILE_LINKS[i % len(HOSTILE_LINKS)], "text": texts[i % len(texts)]}
        tally["links"] += 1
        try:
            async with Session(url) as session:
                run = await session.open(link)
            if any("busy" in error for error in run.errors):
                tally["refused"] += 1
            elif run.errors:
                tally["failed"] += 1
        except Exception:  # noqa: BLE001 - a dropped connection or a timeout is what we count, not a crash
            tally["failed"] += 1
        i += 1


def measure_hostile(n: int, hostiles: int, timeout: float) -> dict:
    """The ordinary visitors' times alone, then beside ``hostiles`` hostile visitors (new sentences
    for the second run, so neither run is answered from the other's cache)."""
    work = sentences(2 * n + 1)
    texts = long_texts(max(hostiles, 1) * len(HOSTILE_LINKS))
    steps = STEPS * HOSTILE_ROUNDS
    with app_servers() as [(url, pid)]:
        asyncio.run(visit(url, *work[0], STEPS))
        alone = asyncio.run(concurrent(url, [pid], work[1:n + 1], steps, timeout))

        async def beside() -> tuple[dict, dict]:
            stop, tally = asyncio.Event(), {"links": 0, "refused": 0, "failed": 0}
            attackers = [asyncio.create_task(hostile(url, texts, k * 7, stop, tally)) for k in range(hostiles)]
            await asyncio.sleep(2)  # the hostile links are already running when the class arrives
            measured = await concurrent(url, [pid], work[n + 1:], steps, timeout)
            stop.set()
            await asyncio.wait(attackers, timeout=RUN_TIMEOUT_S)
            for task in attackers:
                task.cancel()
            return measured, tally

        with_hostile, tally = asyncio.run(beside())
    return {"sessions": n, "hostile": hostiles,
            "p50_s_alone": alone["p50_s"], "p95_s_alone": alone["p95_s"], "errors_alone": alone["errors"],
            "p50_s_hostile": with_hostile["p50_s"], "p95_s_hostile": with_hostile["p95_s"],
            "errors_hostile": with_hostile["errors"], "rss_mb_alone": alone["rss_mb"],
            "rss_mb_hostile": with_hostile["rss_mb"], "hostile_links": tally["links"],
            "hostile_refused": tally["refused"], "hostile_failed": tally["failed"]}


def measure_distinct(count: int, wave: int, timeout: float, settle: float = SESSION_TTL_S + 10) -> dict:
    """Server RSS as ``count`` sessions, ``wave`` at a time, each bring a sentence never seen before;
    then once more after ``settle`` idle seconds, when Streamlit has dropped the closed sessions."""
    work = sentences(count + 1, start=1000)
    after, errors = {}, 0
    started = time.monotonic()
    with app_servers() as [(url, pid)]:
        asyncio.run(visit(url, *work[0], []))
        after[0] = round(rss_mb(pid), 1)
        for start in range(1, count + 1, wave):
            left = started + timeout - time.monotonic()
            result = asyncio.run(concurrent(url, [pid], work[start:start + wave], [], max(left, 1)))
            errors += result["errors"]
            done = start + wave - 1
            if done % 50 == 0 or done == count:
                after[done] = round(rss_mb(pid), 1)
        seconds = round(time.monotonic() - started)
        time.sleep(settle)
        idle = round(rss_mb(pid), 1)
    return {"sentences": count, "rss_mb_after": after, "rss_mb_idle": idle, "seconds": seconds, "errors": errors}


def table(timeout: float) -> str:
    rows = ["| sessions | replicas | p50 to heatmap | p95 to heatmap | errors | server RSS (peak) | server CPU per step |",
            "|---|---|---|---|---|---|---|"]
    for n, replicas in ((1, 1), (10, 1), (30, 1), (30, 2)):
        r = measure_sessions(n, timeout, replicas)
        print(json.dumps(r), file=sys.stderr, flush=True)
        rows.append(f"| {n} | {replicas} | {r['p50_s']} s | {r['p95_s']} s | {r['errors']} | {r['rss_mb']:.0f} MB "
                    f"| {r['cpu_s_per_step']} s |")
    d = measure_distinct(200, 10, timeout)
    print(json.dumps(d), file=sys.stderr, flush=True)
    marks = ", ".join(f"{k}: {v:.0f} MB" for k, v in d["rss_mb_after"].items())
    return "\n".join(rows) + (
        f"\n\nServer RSS after n distinct 64-token sentences, 10 sessions at a time ({d['errors']} errors, "
        f"{d['seconds']} s): {marks}; {SESSION_TTL_S + 10} s later, idle: {d['rss_mb_idle']:.0f} MB\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--sessions", type=int, help=f"concurrent sessions (1..{MAX_SESSIONS})")
    mode.add_argument("--distinct", type=int, help="distinct sentences, 10 sessions at a time (RSS check)")
    mode.add_argument("--table", action="store_true", help="N = 1, 10, 30 and 200 distinct sentences")
    parser.add_argument("--json", action="store_true", help="one JSON line")
    parser.add_argument("--replicas", type=int, default=1,
                        help=f"with --sessions: app replicas behind nginx (1..{MAX_REPLICAS}; 1: the app alone)")
    parser.add_argument("--hostile", type=int, default=0,
                        help=f"with --sessions: also measure beside this many hostile visitors (0..{MAX_SESSIONS})")
    parser.add_argument("--timeout", type=float, default=600, help="deadline for the whole run, seconds")
    args = parser.parse_args(argv)
    count = args.sessions if args.sessions is not None else args.distinct
    if count is not None and not 1 <= count <= (MAX_SESSIONS if args.sessions else 1000):
        parser.error(f"at most {MAX_SESSIONS} sessions and 1000 sentences")
    if not 1 <= args.replicas <= MAX_REPLICAS or (args.replicas > 1 and not args.sessions):
        parser.error(f"--replicas takes 1..{MAX_REPLICAS}, with --sessions")
    if not 0 <= args.hostile <= MAX_SESSIONS or (args.hostile and (not args.sessions or args.replicas > 1)):
        parser.error(f"--hostile takes 0..{MAX_SESSIONS}, with --sessions on one replica")
    if args.hostile:
        print(json.dumps(measure_hostile(count, args.hostile, args.timeout)))
        return 0
    if args.table:
        print(table(args.timeout))
        return 0
    result = (measure_sessions(count, args.timeout, args.replicas) if args.sessions
              else measure_distinct(count, 10, args.timeout))
    if args.json and args.sessions:
        result = {key: result[key] for key in CONTRACT}
    print(json.dumps(result) if args.json else "  ".join(f"{k}={v}" for k, v in result.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
