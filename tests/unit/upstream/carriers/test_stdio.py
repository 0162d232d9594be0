"""The stdio carrier against small child processes written here (run with sys.executable)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import textwrap
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from structlog.testing import capture_logs

from gateway.core.jsonrpc import response_id
from gateway.upstream.carriers import stdio as stdio_module
from gateway.upstream.carriers.base import CarrierError, Message, UpstreamReply
from gateway.upstream.carriers.stdio import StdioCarrier
from gateway.wire.lines import HEAD, Oversized, encode_line, iter_lines

# One fake server, its behaviour picked per request by method (and per process by argv[1]).
SERVER = textwrap.dedent(
    r"""
    import json, os, signal, subprocess, sys, time

    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode == "stubborn":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if mode == "exit-at-start":
        sys.exit(7)

    def out(message):
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()

    chatty = None
    while True:
        line = sys.stdin.readline()
        if not line:
            break
        msg = json.loads(line)
        method = msg.get("method")
        if "method" not in msg:  # a reply to our server request
            if chatty is not None and msg.get("id") == "srv-1":
                out({"jsonrpc": "2.0", "id": chatty, "result": {"reply": msg.get("result")}})
                chatty = None
            continue
        if "id" not in msg:
            if method == "notifications/ping-me":
                out({"jsonrpc": "2.0", "method": "notifications/pong", "params": {}})
            continue
        rid = msg["id"]
        params = msg.get("params") or {}
        if method == "chatty":
            token = params.get("_meta", {}).get("progressToken")
            out({"jsonrpc": "2.0", "method": "notifications/progress",
                 "params": {"progressToken": token, "progress": 1}})
            out({"jsonrpc": "2.0", "method": "notifications/message",
                 "params": {"level": "info", "data": "working"}})
            out({"jsonrpc": "2.0", "id": "srv-1", "method": "sampling/createMessage",
                 "params": {"maxTokens": 5}})
            chatty = rid
        elif method == "crash":
            sys.stdout.write('{"jsonrpc": "2.0", "method": "notifications/message"}\n')
            sys.stdout.flush()
            os._exit(3)
        elif method == "garbage":
            sys.stdout.write("this is not json\n[1, 2\n\n42\n")
            sys.stdout.flush()
            out({"jsonrpc": "2.0", "id": rid, "result": {"after": "garbage"}})
        elif method == "garbage-exit":
            sys.stdout.write("oops\n")
            sys.stdout.flush()
            os._exit(5)
        elif method == "flood":
            chunk = ("e" * 999 + "\n") * 1024  # ~1 MB of 1000-byte lines
            for _ in range(params["mb"]):
                sys.stderr.write(chunk)
            sys.stderr.write("x" * (8 * 1024 * 1024))  # one 8 MB line
            sys.stderr.write("\nlast stderr line\n")
            sys.stderr.flush()
            out({"jsonrpc": "2.0", "id": rid, "result": {"flooded": params["mb"]}})
        elif method == "big":
            out({"jsonrpc": "2.0", "id": rid, "result": {"blob": "y" * params["size"],
                 "echo": params.get("text")}})
        elif method == "big-late-id":  # the id after the result: unknown from the head
            out({"result": {"blob": "y" * params["size"]}, "jsonrpc": "2.0", "id": rid})
        elif method == "big-ask":  # a large request of the server's, with the same id
            out({"jsonrpc": "2.0", "id": rid, "method": "sampling/createMessage",
                 "params": {"blob": "y" * params["size"]}})
            out({"jsonrpc": "2.0", "id": rid, "result": {"after": "ask"}})
        elif method == "spawn":
            grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
            out({"jsonrpc": "2.0", "id": rid,
                 "result": {"pid": os.getpid(), "grandchild": grandchild.pid}})
        elif method == "hang":
            pass
        elif method == "tag":  # a notification naming a listen, then the answer
            out({"jsonrpc": "2.0", "method": "notifications/message",
                 "params": {"level": "info", "data": "for the listen",
                            "_meta": {"listen-tag": params["listen"]}}})
            out({"jsonrpc": "2.0", "id": rid, "result": {}})
        else:
            out({"jsonrpc": "2.0", "id": rid, "result": {"method": method, "params": params}})
    if mode == "stubborn":
        while True:  # ignores the end of stdin, and SIGTERM
            time.sleep(0.05)
    """
)

TIMEOUT = 10.0


def req(id_: int | str, method: str = "tools/call", **params: Any) -> Message:
    return {"jsonrpc": "2.0", "id": id_, "method": method, "params": params}


async def collect(exchange: UpstreamReply) -> list[Message]:
    async with asyncio.timeout(TIMEOUT):
        return [m async for m in exchange.messages]


async def call(carrier: StdioCarrier, message: Message) -> list[Message]:
    return await collect(await carrier.request(message, {}))


Factory = Callable[..., StdioCarrier]


@pytest.fixture
async def make(tmp_path: Path) -> AsyncIterator[Factory]:
    script = tmp_path / "server.py"
    script.write_text(SERVER)
    made: list[StdioCarrier] = []

    def factory(*args: str, **options: Any) -> StdioCarrier:
        defaults: dict[str, Any] = {
            "route": "/test",
            "backoff_initial": 0.01,
            "backoff_max": 0.05,
            "close_timeout": 2.0,
            "term_timeout": 2.0,
        }
        carrier = StdioCarrier(
            [sys.executable, "-u", str(script), *args], **{**defaults, **options}
        )
        made.append(carrier)
        return carrier

    yield factory
    for carrier in made:
        await carrier.close()


def _state(pid: int) -> str | None:
    """The /proc state letter of ``pid`` (Z: zombie), or None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return stat.rsplit(")", 1)[1].split()[0]


def _zombie_children() -> list[int]:
    me = os.getpid()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] == "Z" and int(fields[1]) == me:
            found.append(int(entry.name))
    return found


async def _gone(pid: int, within: float = 5.0) -> bool:
    """Whether ``pid`` ends (or is a zombie some other parent must reap) ``within``
    seconds: a pidfd turns readable when its process ends, so nothing polls."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    loop = asyncio.get_running_loop()
    ended = asyncio.Event()
    loop.add_reader(pidfd, ended.set)
    try:
        if _state(pid) in (None, "Z"):
            return True
        async with asyncio.timeout(within):
            await ended.wait()
        return True
    except TimeoutError:
        return False
    finally:
        loop.remove_reader(pidfd)
        os.close(pidfd)


# ------------------------------------------------------------------ framing


async def _lines(data: bytes, max_line: int, *, truncate: bool = False) -> list[Any]:
    reader = asyncio.StreamReader()
    reader.feed_data(data)
    reader.feed_eof()
    return [line async for line in iter_lines(reader.read, max_line, truncate=truncate)]


async def test_iter_lines_splits_and_bounds() -> None:
    assert await _lines(b"a\nbb\n\nccc", 10) == [b"a", b"bb", b"", b"ccc"]
    big = b"x" * 200_000
    head = big[:HEAD]  # what is kept of a dropped line
    assert await _lines(b"a\n" + big + b"\nb\n", 100) == [b"a", Oversized(200_000, head), b"b"]
    assert await _lines(b"a\n" + big + b"\nb\n", 100, truncate=True) == [b"a", b"x" * 100, b"b"]
    assert await _lines(big, 100) == [Oversized(200_000, head)]
    # A line longer than one read chunk but within the limit arrives whole.
    assert await _lines(big + b"\n", 300_000) == [big]


def test_encode_line_has_one_newline() -> None:
    line = encode_line({"text": "a\nb\r\nc\u2028"})
    assert line.count(b"\n") == 1 and line.endswith(b"\n")


# ------------------------------------------------------------------ basics


async def test_echo_request_and_response(make: Factory) -> None:
    carrier = make()
    await carrier.start()
    assert carrier.is_open and carrier.generation == 1 and carrier.restarts == 0
    messages = await call(carrier, req(1, "tools/call", name="echo"))
    assert messages == [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "result": {"method": "tools/call", "params": {"name": "echo"}},
        }
    ]


async def test_request_before_start_fails(make: Factory) -> None:
    carrier = make()
    with pytest.raises(CarrierError, match="not running"):
        await carrier.request(req(1), {})
    with pytest.raises(ValueError):
        await carrier.request({"jsonrpc": "2.0", "method": "x"}, {})


async def test_concurrent_requests_are_correlated_by_id(make: Factory) -> None:
    carrier = make()
    await carrier.start()
    results = await asyncio.gather(*(call(carrier, req(i, "m", n=i)) for i in range(50)))
    for i, messages in enumerate(results):
        assert messages[-1]["id"] == i and messages[-1]["result"]["params"] == {"n": i}


async def test_notifications_and_server_request_go_to_the_single_request(make: Factory) -> None:
    carrier = make()
    await carrier.start()
    exchange = await carrier.request(req("c1", "chatty", _meta={"progressToken": "tok"}), {})
    seen: list[Message] = []
    async with asyncio.timeout(TIMEOUT):
        async for message in exchange.messages:
            seen.append(message)
            if message.get("method") == "sampling/createMessage":
                reply = {"jsonrpc": "2.0", "id": message["id"], "result": {"text": "hi"}}
                await carrier.send(reply, {})
    assert [m.get("method") for m in seen] == [
        "notifications/progress",
        "notifications/message",
        "sampling/createMessage",
        None,
    ]
    assert seen[-1] == {"jsonrpc": "2.0", "id": "c1", "result": {"reply": {"text": "hi"}}}


async def test_progress_follows_its_token_when_several_are_in_flight(make: Factory) -> None:
    carrier = make()
    await carrier.start()
    hanging = await carrier.request(req("h", "hang"), {})
    exchange = await carrier.request(req("c2", "chatty", _meta={"progressToken": 99}), {})
    listener = await carrier.listen({})
    assert listener is not None
    first = await asyncio.wait_for(anext(exchange.messages), TIMEOUT)
    assert first["method"] == "notifications/progress"
    # Two in flight: the log and the server request cannot be attributed.
    unattributed = [await asyncio.wait_for(anext(listener), TIMEOUT) for _ in range(2)]
    assert [m["method"] for m in unattributed] == [
        "notifications/message",
        "sampling/createMessage",
    ]
    await hanging.aclose()
    await exchange.aclose()


def tagged_listen(message: Message) -> Any:
    """A namer reading this fake server's own tag: the carrier knows none of its own."""
    meta = message.get("params", {}).get("_meta")
    return meta.get("listen-tag") if isinstance(meta, dict) else None


@pytest.mark.parametrize("named", [True, False])
async def test_a_listen_gets_what_its_users_namer_says_names_it(make: Factory, named: bool) -> None:
    carrier = make(**({"listen_named": tagged_listen} if named else {}))
    await carrier.start()
    listen = await carrier.stream(req("L", "hang"), {})
    messages = await call(carrier, req(2, "tag", listen="L"))
    tagged = [m for m in messages if m.get("method") == "notifications/message"]
    # Named, it is the listen's; unnamed, the one call in flight besides the listen's.
    assert len(tagged) == (0 if named else 1)
    if named:
        async with asyncio.timeout(TIMEOUT):
            first = await anext(aiter(listen.messages))
        assert first["params"]["data"] == "for the listen"
    await listen.aclose()


async def test_unsolicited_messages_reach_listen(make: Factory) -> None:
    carrier = make()
    await carrier.start()
    listener = await carrier.listen({})
    assert listener is not None
    await carrier.send({"jsonrpc": "2.0", "method": "notifications/ping-me"}, {})
    message = await asyncio.wait_for(anext(listener), TIMEOUT)
    assert message["method"] == "notifications/pong"


async def test_large_messages_both_ways(make: Factory) -> None:
    carrier = make()
    await carrier.start()
    text = "z" * (3 * 1024 * 1024)
    messages = await call(carrier, req(1, "big", size=2 * 1024 * 1024, text=text))
    assert len(messages[-1]["result"]["blob"]) == 2 * 1024 * 1024
    assert messages[-1]["result"]["echo"] == text


async def test_an_oversized_answer_fails_its_request_at_once(make: Factory) -> None:
    carrier = make(max_message_size=64 * 1024)
    await carrier.start()
    with capture_logs() as logs:
        waiting = await carrier.request(req(7, "hang"), {})
        with pytest.raises(CarrierError, match="exceeds the route's bound of 65536 bytes"):
            await call(carrier, req(1, "big", size=200_000))
    dropped = [e for e in logs if e["event"] == "dropping a stdout line over the size limit"]
    assert [(e["answers"], e["limit"]) for e in dropped] == [(1, 64 * 1024)]
    # Only that request: the one beside it still waits, the channel still answers.
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.2):
            await anext(waiting.messages)
    assert (await call(carrier, req(2, "ok")))[-1]["id"] == 2
    await waiting.aclose()


async def test_an_oversized_line_that_names_no_answer_is_only_dropped(make: Factory) -> None:
    carrier = make(max_message_size=64 * 1024)
    await carrier.start()
    with capture_logs() as logs:
        exchange = await carrier.request(req(1, "big-late-id", size=200_000), {})
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.5):  # unknown whose answer: the caller's deadline
                await anext(exchange.messages)
        await exchange.aclose()
        # A large request of the server's that reuses a request's id is not its answer.
        messages = await call(carrier, req(3, "big-ask", size=200_000))
    assert messages[-1] == {"jsonrpc": "2.0", "id": 3, "result": {"after": "ask"}}
    dropped = [e for e in logs if e["event"] == "dropping a stdout line over the size limit"]
    assert [e["answers"] for e in dropped] == [None, None]


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        (b'{"jsonrpc":"2.0","id":12,"result":{"content":[', 12),
        (b' { "jsonrpc" : "2.0" , "id" : "a\\"b" , "error" : {"code":', 'a"b'),
        (b'{"id":3,"jsonrpc":"2.0","result":"xxxx', 3),
        (b'{"jsonrpc":"2.0","id":12', None),  # the id may go on: 123...
        (b'{"jsonrpc":"2.0","id":1', None),
        (b'{"jsonrpc":"2.0","id":5,"method":"sampling/createMessage","params":{', None),
        (b'{"result":{"id":4},"jsonrpc":"2.0","id":5}', None),
        (b'{"jsonrpc":"2.0","meta":{"id":4},"id":5,"result":{}}', None),
        (b'{"jsonrpc":"2.0","id":null,"error":{}}', None),
        (b'{"jsonrpc":"2.0","id":1.5,"result":{}}', None),
        (b'{"jsonrpc":"2.0","id":true,"result":{}}', None),
        (b'[{"jsonrpc":"2.0","id":1,"result":{}}', None),  # a batch: not read
        (b"", None),
        (b"not json", None),
    ],
)
def test_response_id_reads_only_what_the_head_shows(head: bytes, expected: object) -> None:
    assert response_id(head) == expected


# ------------------------------------------------------------------ failures


async def test_child_exiting_mid_call_fails_waiters_then_restarts(make: Factory) -> None:
    carrier = make()
    await carrier.start()
    first_pid = carrier.pid
    hanging = await carrier.request(req("h", "hang"), {})
    crashing = await carrier.request(req("c", "crash"), {})
    for exchange in (hanging, crashing):
        with pytest.raises(CarrierError, match=r"the stdio server exited with code 3"):
            await collect(exchange)
    assert not carrier.is_open
    # A new process is a new session: nothing goes through until start().
    with pytest.raises(CarrierError, match="call start"):
        await carrier.request(req(1), {})
    with pytest.raises(CarrierError):
        await carrier.send({"jsonrpc": "2.0", "method": "x"}, {})
    assert carrier.restarts == 0 and carrier.generation == 1
    await carrier.start()
    assert carrier.restarts == 1 and carrier.generation == 2 and carrier.pid != first_pid
    assert (await call(carrier, req(1, "ok")))[-1]["result"]["method"] == "ok"
    assert first_pid is not None and _state(first_pid) is None  # reaped


class _Clock:
    """The carrier's clock and its sleeps, under the test's control: a sleep is
    recorded and moves the clock on at once."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []
        self._sleep = asyncio.sleep

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, delay: float) -> None:
        self.sleeps.append(delay)
        self.now += delay
        await self._sleep(0)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> _Clock:
    fake = _Clock()
    monkeypatch.setattr(stdio_module, "time", SimpleNamespace(monotonic=fake.monotonic))
    monkeypatch.setattr(
        stdio_module, "asyncio", SimpleNamespace(**{**vars(asyncio), "sleep": fake.sleep})
    )
    return fake


async def test_start_waits_a_backoff_that_grows_with_crashes_in_a_row(
    make: Factory, clock: _Clock
) -> None:
    carrier = make("exit-at-start", backoff_initial=0.1, backoff_max=0.4)
    # The first start does not wait; each crash in a row doubles the wait ...
    for waited in ([], [0.1], [0.2]):
        clock.sleeps.clear()
        await carrier.start()
        assert clock.sleeps == waited
        with pytest.raises(CarrierError, match="exited with code 7"):
            await call(carrier, req(1))
    assert carrier.restarts == 2 and carrier.generation == 3
    # ... until it is a crash loop: a start within the back-off is refused at once,
    # saying so (a caller is not kept waiting on a command that keeps exiting).
    clock.sleeps.clear()
    with pytest.raises(
        CarrierError, match="keeps exiting or failing to start \\(3 times in a row\\)"
    ) as refused:
        await carrier.start()
    assert refused.value.not_started and clock.sleeps == [] and carrier.generation == 3
    # Once the back-off has passed, start() spawns at once, and the wait doubles on.
    clock.now += 0.5
    assert carrier.backoff_delay() == 0.0
    await carrier.start()
    assert clock.sleeps == [] and carrier.generation == 4
    with pytest.raises(CarrierError, match="exited with code 7"):
        await call(carrier, req(1))
    assert carrier.backoff_delay() == pytest.approx(0.4)  # the max


async def test_auto_restart(make: Factory) -> None:
    carrier = make(auto_restart=True)
    assert (await call(carrier, req(1, "ok")))[-1]["id"] == 1  # started on first use
    with pytest.raises(CarrierError, match="exited with code 3"):
        await call(carrier, req(2, "crash"))
    assert (await call(carrier, req(3, "ok")))[-1]["id"] == 3
    assert carrier.restarts == 1 and carrier.generation == 2


async def test_missing_command_is_a_carrier_error(tmp_path: Path) -> None:
    carrier = StdioCarrier([str(tmp_path / "nope")], backoff_initial=0.01)
    with pytest.raises(CarrierError, match="could not start"):
        await carrier.start()
    await carrier.close()


async def test_garbage_on_stdout_is_logged_and_skipped(make: Factory) -> None:
    carrier = make()
    await carrier.start()
    with capture_logs() as logs:
        messages = await call(carrier, req(1, "garbage"))
        assert messages == [{"jsonrpc": "2.0", "id": 1, "result": {"after": "garbage"}}]
        assert (await call(carrier, req(2, "ok")))[-1]["id"] == 2  # the carrier survived
        with pytest.raises(CarrierError, match="exited with code 5"):
            await call(carrier, req(3, "garbage-exit"))
    skipped = [e for e in logs if e["event"].startswith("skipping a stdout line")]
    assert len(skipped) >= 3
    assert all(e["route"] == "/test" for e in skipped)
    assert any("this is not json" in e["excerpt"] for e in skipped)
    assert any(e["excerpt"] == "oops" for e in skipped)


async def test_a_stderr_flood_is_read_throttled_and_truncated(make: Factory) -> None:
    carrier = make(stderr_lines_per_second=50.0)
    await carrier.start()
    with capture_logs() as logs:
        messages = await call(carrier, req(1, "flood", mb=50))
        assert messages[-1]["result"] == {"flooded": 50}
        # Everything the child wrote was read (it could not have answered otherwise
        # if the pipe had filled); stderr's end arrives independently of stdout.
        async with asyncio.timeout(TIMEOUT):
            while carrier.stderr_bytes < 50 * 1000 * 1024 + 8 * 1024:  # noqa: ASYNC110
                await asyncio.sleep(0.01)  # polling, bounded by the timeout
    # (What the flood costs in memory is measured by `python -m bench.memory`.)
    lines = [e for e in logs if e["event"] == "stdio server stderr"]
    assert lines and all(e["route"] == "/test" for e in lines)
    assert len(lines) < 1000  # throttled
    assert max(len(e["line"]) for e in lines) <= 8 * 1024  # truncated


# ------------------------------------------------------------------ shutdown


async def test_close_is_graceful_and_reaps(make: Factory) -> None:
    carrier = make()
    await carrier.start()
    result = (await call(carrier, req(1, "spawn")))[-1]["result"]
    pid, grandchild = result["pid"], result["grandchild"]
    hanging = await carrier.request(req(2, "hang"), {})
    await carrier.close()
    with pytest.raises(CarrierError, match="closed"):
        await collect(hanging)
    assert carrier.last_exit_code == 0  # it left on its own when stdin closed
    assert _state(pid) is None
    assert await _gone(grandchild)  # the group was killed too: no orphan
    assert _zombie_children() == []


async def test_stubborn_child_is_killed_after_the_grace(make: Factory) -> None:
    carrier = make("stubborn", close_timeout=0.2, term_timeout=0.2)
    await carrier.start()
    assert (await call(carrier, req(1, "ok")))[-1]["id"] == 1
    pid = carrier.pid
    assert pid is not None
    with capture_logs() as logs:
        async with asyncio.timeout(TIMEOUT):  # bounded: 0.4 s of grace, then SIGKILL
            await carrier.close()
    assert carrier.last_exit_code == -9  # SIGKILL
    assert any(e["event"] == "the stdio server ignored SIGTERM: SIGKILL" for e in logs)
    assert _state(pid) is None
    assert _zombie_children() == []
    # A closed carrier can be started again (a fresh process).
    await carrier.start()
    assert (await call(carrier, req(2, "ok")))[-1]["id"] == 2
    assert carrier.restarts == 0  # closing is not crashing


async def test_close_while_idle_and_twice(make: Factory) -> None:
    carrier = make()
    await carrier.close()
    await carrier.start()
    await carrier.close()
    await carrier.close()
    assert not carrier.is_open
    assert _zombie_children() == []


async def test_a_child_that_runs_well_ends_the_crash_loop(make: Factory) -> None:
    """Crashes in a row are a loop (not ready; calls refused in its back-off) only
    until a child runs well: then they are forgotten, not reported forever."""
    carrier = make(healthy_after=0.05)
    carrier.crashes.failures = 5  # three and more: a crash loop ...
    assert carrier.crashes.looping
    carrier.crashes.last = -1e9  # (its back-off long over)
    await carrier.start()
    assert (await call(carrier, req(1, "ok")))[-1]["id"] == 1
    deadline = asyncio.get_running_loop().time() + 5
    while carrier.crashes.looping:  # ... until this child has run well for a while
        assert asyncio.get_running_loop().time() < deadline, carrier.crashes.failures
        await asyncio.sleep(0.01)  # polling, bounded by the deadline
    assert carrier.crashes.failures == 0


async def test_a_line_to_a_child_that_closed_its_input_is_not_sent() -> None:
    """The child closed its stdin (and lives on): a line written after the loop knew is
    refused as never sent (the full path may open a new session for it); one the child
    may have read is never called unsent."""
    code = "import os, time; os.close(0); time.sleep(30)"
    carrier = StdioCarrier([sys.executable, "-c", code], route="/test", close_timeout=2.0)
    await carrier.start()
    try:
        child = carrier._child  # the pipe's state is what is under test
        assert child is not None and child.proc.stdin is not None
        with contextlib.suppress(ConnectionError):  # the loop hears the pipe close
            await asyncio.wait_for(child.proc.stdin.wait_closed(), 10)
        assert child.proc.stdin.is_closing()
        with pytest.raises(CarrierError) as caught:
            await carrier.request(req(1), {})
        assert caught.value.unreached, caught.value
    finally:
        await carrier.close()
