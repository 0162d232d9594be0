"""`python -m bench.faults`: a route of three targets under steady mixed load while
they fail one way after another, and come back (issue 40, item 7).

Three `bench.faultserver` processes (2026-07-28, each recording every tool run in a
file of its own), one `gateway serve --route /mcp=A,also=B|C`, and eight callers
making 2026-07-28 calls in turn: `read_it` (readOnlyHint), `same_again`
(idempotentHint), `plain` (no hint), `tools/list`, `resources/read`.  The phases:

    0 s   all well (the baseline)
    4 s   target 1 killed (SIGKILL), calls in flight on it    8 s  started again
   12 s   target 2 answers HTTP 500 after running the tool    16 s  well again
   20 s   target 3 resets each connection after running it    24 s  well again
   28 s   target 1 hangs (takes connections, answers pings,  36 s  well again
          never a tool call; the route's timeout is 1.5 s)
   40 s   the end

Besides them a 2025-11-25 session client calls `read_it` in its own session, which
lives on one target: when that target dies or hangs, it is told its session is over
(404) and starts a new one.

It prints the calls answered, failed (and whether each failure was a clear JSON-RPC
error naming the route), sent again (the gateway's own count), run twice where that
was not safe (a `plain` op the servers' files hold twice: must be 0) and where it
was (the safe tools), what the failed calls were told (must be 0: told to send again,
by `Retry-After` or `retryAfterSeconds`, a call that may have run; told "not sent" of
a call that ran), the hanging target's time to be ejected, the time-outs it cost and
whether /readyz ever showed it up while it hung, each target's time to be ejected
and re-admitted as /readyz saw it, the session client's sessions ended and started
again, and the latency of answered calls per phase against the baseline.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from bench.procs import free_port

MODERN = "2026-07-28"
CALLERS = 8
PHASES = [  # (at, label, action)
    (0.0, "baseline", None),
    (4.0, "t1 killed", ("kill", 0)),
    (8.0, "t1 back", ("start", 0)),
    (12.0, "t2 500s", ("mode", 1, "500")),
    (16.0, "t2 well", ("mode", 1, "ok")),
    (20.0, "t3 resets", ("mode", 2, "reset")),
    (24.0, "t3 well", ("mode", 2, "ok")),
    (28.0, "t1 hangs", ("mode", 0, "hang")),
    (36.0, "t1 well", ("mode", 0, "ok")),
]
END = 40.0
HANG, HANG_END = 28.0, 36.0
KINDS = ("read_it", "same_again", "plain", "tools/list", "resources/read")


@dataclass
class Call:
    phase: str
    kind: str
    op: str
    latency: float
    ok: bool
    clear: bool = True
    status: int = 200
    advice: bool = False  # told when to send it again (Retry-After, retryAfterSeconds)
    not_sent: bool = False  # told it was not sent


@dataclass
class Lab:
    dir: Path
    ports: list[int]
    servers: list[subprocess.Popen[bytes] | None] = field(default_factory=list)
    gateway: subprocess.Popen[bytes] | None = None
    base: str = ""

    def start_server(self, index: int) -> None:
        argv = [sys.executable, "-m", "bench.faultserver", str(self.ports[index])]
        argv.append(str(self.dir / f"runs-{index}.txt"))
        process = subprocess.Popen(argv, stdout=subprocess.PIPE, start_new_session=True)
        assert process.stdout is not None
        process.stdout.readline()  # its URL: listening
        if index < len(self.servers):
            self.servers[index] = process
        else:
            self.servers.append(process)

    def kill_server(self, index: int) -> None:
        process = self.servers[index]
        if process is not None:
            process.send_signal(signal.SIGKILL)
            process.wait()
            self.servers[index] = None

    def urls(self) -> list[str]:
        return [f"http://127.0.0.1:{port}/mcp" for port in self.ports]

    def start_gateway(self) -> None:
        port = free_port()
        first, *more = self.urls()
        route = f"/mcp={first},also={'|'.join(more)},health_every=0.25,timeout=1.5"
        argv = [sys.executable, "-m", "gateway", "serve", "--listen", f"127.0.0.1:{port}"]
        argv += ["--route", route, "--log-level", "warning"]
        log = open(self.dir / "gateway.log", "wb")  # noqa: SIM115 (the process keeps it)
        self.gateway = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        self.base = f"http://127.0.0.1:{port}"

    def close(self) -> None:
        for process in [*self.servers, self.gateway]:
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()

    def runs(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for path in self.dir.glob("runs-*.txt"):
            for line in path.read_text().split():
                counts[line] = counts.get(line, 0) + 1
        return counts


def _request(kind: str, op: str) -> tuple[dict[str, Any], dict[str, str]]:
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
    }
    if kind in ("tools/list", "resources/read"):
        params: dict[str, Any] = {"_meta": meta}
        if kind == "resources/read":
            params["uri"] = "file:///doc"
            headers["Mcp-Name"] = "file:///doc"
        headers["Mcp-Method"] = kind
        return {"jsonrpc": "2.0", "id": op, "method": kind, "params": params}, headers
    params = {"name": kind, "arguments": {"op": op}, "_meta": meta}
    headers.update({"Mcp-Method": "tools/call", "Mcp-Name": kind})
    return {"jsonrpc": "2.0", "id": op, "method": "tools/call", "params": params}, headers


async def _call(http: aiohttp.ClientSession, url: str, kind: str, op: str, phase: str) -> Call:
    body, headers = _request(kind, op)
    started = time.monotonic()
    try:
        async with http.post(url, data=orjson.dumps(body), headers=headers) as response:
            message = orjson.loads(await response.read())
            status, retry_after = response.status, "Retry-After" in response.headers
    except (aiohttp.ClientError, orjson.JSONDecodeError, TimeoutError):
        return Call(phase, kind, op, time.monotonic() - started, False, False)
    latency = time.monotonic() - started
    error = message.get("error") if isinstance(message, dict) else None
    if error is None:
        return Call(phase, kind, op, latency, True)
    if not isinstance(error, dict):
        return Call(phase, kind, op, latency, False, False, status, retry_after)
    said = str(error.get("message"))
    advice = retry_after or "retryAfterSeconds" in str(error.get("data"))
    clear = "route /mcp" in said
    return Call(phase, kind, op, latency, False, clear, status, advice, "was not sent" in said)


SCALE = 1.0  # the timeline's (--tiny: a quarter)


def _phase(now: float) -> str:
    return [label for at, label, _ in PHASES if at * SCALE <= now][-1]


async def _load(http: aiohttp.ClientSession, url: str, t0: float, calls: list[Call]) -> None:
    ops = itertools.count()
    kinds = itertools.cycle(KINDS)

    async def caller(n: int) -> None:
        while (now := time.monotonic() - t0) < END * SCALE:
            kind = next(kinds)
            calls.append(await _call(http, url, kind, f"c{n}-{next(ops)}", _phase(now)))

    await asyncio.gather(*(caller(n) for n in range(CALLERS)))


@dataclass
class SessionClient:
    """A 2025-11-25 client in a session of its own: what it was told, call by call."""

    calls: int = 0
    answered: int = 0
    ended: int = 0  # told its session is over (404): it starts a new one
    failed: int = 0
    advised: int = 0  # of the failures, told to send again
    sessions: int = 0


HANDSHAKE = "2025-11-25"


async def _session_client(
    http: aiohttp.ClientSession, url: str, t0: float, client: SessionClient
) -> None:
    session: str | None = None
    ops = itertools.count()
    while time.monotonic() - t0 < END * SCALE:
        if session is None:
            session = await _open(http, url)
            client.sessions += session is not None
            if session is None:
                await asyncio.sleep(0.1)  # nowhere to open it: a moment, then again
                continue
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
        body["params"] = {"name": "read_it", "arguments": {"op": f"s-{next(ops)}"}}
        headers = _session_headers(session)
        client.calls += 1
        try:
            async with http.post(url, data=orjson.dumps(body), headers=headers) as response:
                status, text = response.status, await response.text()
        except (aiohttp.ClientError, TimeoutError):
            client.failed += 1
            continue
        if status == 404:
            client.ended, session = client.ended + 1, None
        elif '"error"' in text:
            client.failed += 1
            client.advised += "retryAfterSeconds" in text
        else:
            client.answered += 1


def _session_headers(session: str | None = None) -> dict[str, str]:
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": HANDSHAKE,
    }
    if session is not None:
        headers["Mcp-Session-Id"] = session
    return headers


async def _open(http: aiohttp.ClientSession, url: str) -> str | None:
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": HANDSHAKE,
            "capabilities": {},
            "clientInfo": {"name": "s", "version": "0"},
        },
    }
    try:
        async with http.post(url, data=orjson.dumps(init), headers=_session_headers()) as response:
            session = response.headers.get("Mcp-Session-Id")
            await response.read()
        if session is None:
            return None
        done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        async with http.post(url, data=orjson.dumps(done), headers=_session_headers(session)):
            pass
        return session
    except (aiohttp.ClientError, TimeoutError):
        return None


async def _watch(
    http: aiohttp.ClientSession, lab: Lab, t0: float, seen: list[tuple[float, int, str]]
) -> None:
    """Every change of a target's state as /readyz says it: (seconds, target, state)."""
    last: dict[int, str] = {}
    while time.monotonic() - t0 < END * SCALE + 5:
        with contextlib.suppress(aiohttp.ClientError, orjson.JSONDecodeError, KeyError):
            async with http.get(lab.base + "/readyz") as response:
                body = orjson.loads(await response.read())
            for i, row in enumerate(body["routes"]["/mcp"].get("targets", [])):
                if last.get(i) != row["state"]:
                    last[i] = row["state"]
                    seen.append((time.monotonic() - t0, i, row["state"]))
        await asyncio.sleep(0.05)


async def _drive(lab: Lab, t0: float) -> None:
    async with aiohttp.ClientSession() as control:
        for at, _, action in PHASES:
            await asyncio.sleep(max(0.0, t0 + at * SCALE - time.monotonic()))
            if action is None:
                continue
            if action[0] == "kill":
                lab.kill_server(action[1])
            elif action[0] == "start":
                await asyncio.to_thread(lab.start_server, action[1])
            else:
                url = f"http://127.0.0.1:{lab.ports[action[1]]}/control"
                async with control.post(url, data=action[2]) as response:
                    await response.read()


async def run() -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-faults-") as scratch:
        lab = Lab(Path(scratch), [free_port() for _ in range(3)])
        try:
            for index in range(3):
                lab.start_server(index)
            lab.start_gateway()
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http:
                await _ready(http, lab.base)
                calls: list[Call] = []
                seen: list[tuple[float, int, str]] = []
                session = SessionClient()
                t0 = time.monotonic()
                await asyncio.gather(
                    _load(http, lab.base + "/mcp", t0, calls),
                    _session_client(http, lab.base + "/mcp", t0, session),
                    _watch(http, lab, t0, seen),
                    _drive(lab, t0),
                )
                async with http.get(lab.base + "/metrics") as response:
                    metrics = await response.text()
            figures = _figures(calls, seen, lab.runs(), metrics)
            figures["session_client"] = vars(session)
            return figures
        finally:
            lab.close()


async def _ready(http: aiohttp.ClientSession, base: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with contextlib.suppress(aiohttp.ClientError):
            async with http.get(base + "/readyz") as response:
                if response.status == 200:
                    return
        await asyncio.sleep(0.1)
    raise RuntimeError("the gateway did not become ready")


def _figures(
    calls: list[Call], seen: list[tuple], runs: dict[str, int], metrics: str
) -> dict[str, Any]:
    plain_twice = sum(1 for c in calls if c.kind == "plain" and runs.get(c.op, 0) > 1)
    safe_twice = sum(
        1 for c in calls if c.kind in ("read_it", "same_again") and runs.get(c.op, 0) > 1
    )
    retried = {
        line.split('why="')[1].split('"')[0]: float(line.rsplit(" ", 1)[1])
        for line in metrics.splitlines()
        if line.startswith("gateway_upstream_retries_total{")
    }
    base = [c.latency for c in calls if c.ok and c.phase == "baseline"]
    p50 = statistics.median(base) if base else float("nan")
    phases = []
    for _, label, _ in PHASES:
        mine = [c for c in calls if c.phase == label]
        answered = [c.latency for c in mine if c.ok]
        phases.append(
            {
                "phase": label,
                "calls": len(mine),
                "answered": len(answered),
                "failed": len(mine) - len(answered),
                "unclear": sum(1 for c in mine if not c.ok and not c.clear),
                "p50_ms": round(statistics.median(answered) * 1000, 1) if answered else None,
                "added_p50_ms": round((statistics.median(answered) - p50) * 1000, 1)
                if answered
                else None,
            }
        )
    return {
        **_told_figures(calls, runs),
        **_hang_figures(calls, seen),
        "calls": len(calls),
        "answered": sum(c.ok for c in calls),
        "failed_clear": sum(1 for c in calls if not c.ok and c.clear),
        "failed_unclear": sum(1 for c in calls if not c.ok and not c.clear),
        "sent_again": retried,
        "run_twice_unsafe": plain_twice,
        "run_twice_safe": safe_twice,
        "target_states": [(round(t, 2), i + 1, s) for t, i, s in seen],
        "phases": phases,
    }


def _told_figures(calls: list[Call], runs: dict[str, int]) -> dict[str, Any]:
    """What failed calls were told, against what ran."""
    failed = [c for c in calls if not c.ok]
    tools = [c for c in failed if c.kind not in ("tools/list", "resources/read")]
    return {
        # Told to send again a tool call that ran, or may have: a client following the
        # advice could run it twice (the safe tools excepted: twice does no harm).
        "unsafe_retry_advice": sum(
            1 for c in tools if c.kind == "plain" and c.advice and runs.get(c.op, 0) > 0
        ),
        "said_not_sent_but_ran": sum(1 for c in tools if c.not_sent and runs.get(c.op, 0) > 0),
        "told": {
            f"{status} {'retry' if advice else 'no retry'}": sum(
                1 for c in failed if c.status == status and c.advice == advice
            )
            for status, advice in sorted({(c.status, c.advice) for c in failed})
        },
    }


def _hang_figures(calls: list[Call], seen: list[tuple[float, int, str]]) -> dict[str, Any]:
    """The hanging target (target 1, from HANG to HANG_END): how soon it was out, what
    it cost, and whether /readyz showed it up while it hung."""
    start, end = HANG * SCALE, HANG_END * SCALE
    ejected = [t for t, i, s in seen if i == 0 and s == "ejected" and start <= t < end]
    up = [t for t, i, s in seen if i == 0 and s == "up" and ejected and ejected[0] < t < end]
    return {
        "hang_ejected_after_s": round(ejected[0] - start, 2) if ejected else None,
        "hang_time_outs": sum(1 for c in calls if c.phase == "t1 hangs" and c.status == 504),
        "hang_shown_up": len(up),
    }


def render(figures: dict[str, Any]) -> str:
    lines = [
        f"calls {figures['calls']}, answered {figures['answered']}, failed with a clear error "
        f"{figures['failed_clear']}, failed otherwise {figures['failed_unclear']}",
        f"sent again by the gateway: {figures['sent_again']}",
        f"run twice where not safe (plain): {figures['run_twice_unsafe']}   "
        f"where safe (read_it, same_again): {figures['run_twice_safe']}",
        f"told to send again a call that may have run: {figures['unsafe_retry_advice']}   "
        f"told 'not sent' of a call that ran: {figures['said_not_sent_but_ran']}",
        f"what failed calls were told (HTTP status, advice): {figures['told']}",
        f"hanging target: ejected after {figures['hang_ejected_after_s']} s, "
        f"{figures['hang_time_outs']} time-outs while it hung, "
        f"shown up {figures['hang_shown_up']} times while it hung",
        f"session client: {figures['session_client']}",
        "",
        f"{'phase':<12} {'calls':>6} {'answered':>9} {'failed':>7} {'p50 ms':>8} {'+p50 ms':>8}",
    ]
    for row in figures["phases"]:
        lines.append(
            f"{row['phase']:<12} {row['calls']:>6} {row['answered']:>9} {row['failed']:>7} "
            f"{row['p50_ms']!s:>8} {row['added_p50_ms']!s:>8}"
        )
    lines += ["", "target states as /readyz saw them (seconds, target, state):"]
    lines += [f"  {t:6.2f}s  t{i}  {s}" for t, i, s in figures["target_states"]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.faults", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--tiny", action="store_true", help="the timeline in a quarter")
    args = parser.parse_args(argv)
    global SCALE
    SCALE = 0.25 if args.tiny else 1.0
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    figures = asyncio.run(run())
    print(orjson.dumps(figures).decode() if args.json else render(figures))
    bad = figures["run_twice_unsafe"] + figures["unsafe_retry_advice"]
    return 1 if bad + figures["said_not_sent_but_ran"] else 0


if __name__ == "__main__":
    sys.exit(main())
