"""The downstream session store: ids, principal binding, idle expiry, the bound on
sessions, and what ending a session releases.  Time is the test's (an injected clock)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from gateway.core import Answer, Ask, AskKind, FailureKind
from gateway.transport import sessions as sessions_module
from gateway.transport.sessions import MAX_QUEUED, SessionStore

IDLE = 60.0


class Clock:
    def __init__(self) -> None:
        self.now = 5000.0

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(sessions_module, "time", SimpleNamespace(monotonic=fake.monotonic))
    return fake


def make(store: SessionStore, principal: str, clock: Clock) -> str:
    session = store.create("2025-06-18", principal, {"roots": {}}, {"name": "c"})
    session.last_seen = clock.now  # (the dataclass default reads the real clock)
    return session.id


def test_ids_are_unguessable_visible_ascii(clock: Clock) -> None:
    store = SessionStore()
    ids = {make(store, "alice", clock) for _ in range(50)}
    assert len(ids) == 50
    for session_id in ids:
        assert len(session_id) >= 40
        assert all(0x21 <= ord(c) <= 0x7E for c in session_id)


def test_a_session_belongs_to_its_principal(clock: Clock) -> None:
    store = SessionStore()
    sid = make(store, "alice", clock)
    session = store.get(sid, "alice")
    assert session is not None and session.view.protocol_version == "2025-06-18"
    assert session.view.capabilities == {"roots": {}}
    # Anyone else is told nothing: the same answer as an unknown id.
    assert store.get(sid, "bob") is None
    assert store.get(sid, "") is None
    assert store.get("nope", "alice") is None
    assert store.get(None, "alice") is None
    assert store.get(sid, "alice") is session  # bob's tries did not end it


def test_an_idle_session_expires_on_its_next_use(clock: Clock) -> None:
    store = SessionStore(idle_timeout=IDLE)
    sid = make(store, "alice", clock)
    clock.now += IDLE  # exactly the timeout: still alive
    assert store.get(sid, "alice") is not None
    clock.now += IDLE - 1  # each use starts the idle time again
    assert store.get(sid, "alice") is not None
    clock.now += IDLE + 1
    assert store.get(sid, "alice") is None
    assert len(store) == 0


def test_another_principals_try_does_not_keep_a_session_alive(clock: Clock) -> None:
    store = SessionStore(idle_timeout=IDLE)
    sid = make(store, "alice", clock)
    clock.now += IDLE - 1
    assert store.get(sid, "bob") is None
    clock.now += 2
    assert store.get(sid, "alice") is None


def test_sweep_ends_idle_sessions_but_not_an_open_stream(clock: Clock) -> None:
    store = SessionStore(idle_timeout=IDLE)
    idle, streaming = make(store, "a", clock), make(store, "b", clock)
    reading = store.get(streaming, "b")
    assert reading is not None
    reading.stream_open = True  # a client reading its stream is not idle
    clock.now += IDLE + 1
    assert store.sweep() == 1
    assert len(store) == 1 and not reading.closed
    assert store.get(idle, "a") is None


def test_a_full_store_sweeps_the_idle_before_refusing(clock: Clock) -> None:
    store = SessionStore(idle_timeout=IDLE, max_sessions=2)
    old = make(store, "a", clock)
    clock.now += IDLE + 1
    keep = make(store, "b", clock)
    assert store.room_for("c") is None  # the idle one is swept to make room
    third = make(store, "c", clock)
    assert len(store) == 2
    assert store.get(old, "a") is None
    assert store.get(keep, "b") is not None and store.get(third, "c") is not None


def test_a_full_store_ends_the_heaviest_callers_oldest_idle_session(clock: Clock) -> None:
    """Issue: one caller's abandoned sessions used to lock everyone else out until they
    expired; now the heaviest holder's least recently used idle session gives way."""
    store = SessionStore(idle_timeout=IDLE * 100, max_sessions=3)
    mallory = [make(store, "mallory", clock) for _ in range(2)]
    alice = make(store, "alice", clock)
    closed: list[str] = []
    for sid in store._sessions:
        store._sessions[sid].on_close.append(lambda sid=sid: closed.append(sid))
    assert store.room_for("bob") is None
    assert closed == [mallory[0]]
    assert store.get(mallory[0], "mallory") is None
    assert store.get(alice, "alice") is not None


def test_a_full_store_of_busy_or_equal_callers_refuses_and_ends_nobody(clock: Clock) -> None:
    store = SessionStore(idle_timeout=IDLE * 100, max_sessions=3)
    made = [(make(store, p, clock), p) for p in ("a", "b", "c")]
    closed: list[str] = []
    for sid, _ in made:
        store._sessions[sid].on_close.append(lambda sid=sid: closed.append(sid))
        store._sessions[sid].stream_open = True  # each reads its stream: none is idle
    refused = store.room_for("d")
    assert refused is not None and refused.kind is FailureKind.OVERLOADED
    assert len(store) == 3 and closed == []
    assert all(store.get(sid, p) is not None for sid, p in made)


def test_one_principal_at_its_quota_is_refused_others_are_not(clock: Clock) -> None:
    store = SessionStore(idle_timeout=IDLE * 100, max_sessions=10, per_principal=2)
    make(store, "a", clock)
    make(store, "a", clock)
    refused = store.room_for("a")
    assert refused is not None and refused.kind is FailureKind.QUOTA_EXCEEDED
    assert store.room_for("b") is None


async def test_ending_a_session_releases_what_it_held(clock: Clock) -> None:
    store = SessionStore()
    sid = make(store, "alice", clock)
    session = store.get(sid, "alice")
    assert session is not None
    hooks: list[str] = []
    session.on_close.append(lambda: hooks.append("closed"))
    _, asked = session.questions.ask(Ask(AskKind.ELICIT, {}))
    assert session.deliver({"jsonrpc": "2.0", "method": "notifications/x"})
    assert store.delete(sid) and not store.delete(sid)
    assert hooks == ["closed"] and asked.cancelled()
    assert session.closed and not session.deliver({"m": 1})
    # A reader of the stream gets what was queued, then the end.
    assert session.outbox.get_nowait() == {"jsonrpc": "2.0", "method": "notifications/x"}
    assert session.outbox.get_nowait() is None
    session.close()  # twice: the hooks ran once
    assert hooks == ["closed"]


async def test_answers_resolve_their_own_request_once(clock: Clock) -> None:
    store = SessionStore()
    session = store.get(make(store, "alice", clock), "alice")
    assert session is not None
    first, future = session.questions.ask(Ask(AskKind.ELICIT, {}))
    assert first == "gw-1"
    answer = Answer.refusal(AskKind.ELICIT)
    assert not session.resolve("gw-2", answer)
    assert not session.resolve(1, answer)  # an id of another type names nothing
    assert session.resolve(first, answer) and future.result() == answer
    assert not session.resolve(first, answer)


def test_a_full_outbox_refuses_instead_of_growing(clock: Clock) -> None:
    store = SessionStore()
    session = store.get(make(store, "alice", clock), "alice")
    assert session is not None
    for n in range(MAX_QUEUED):
        assert session.deliver({"n": n})
    assert not session.deliver({"n": "one too many"})
    assert session.outbox.qsize() == MAX_QUEUED


def test_close_all(clock: Clock) -> None:
    store = SessionStore()
    ids = [make(store, p, clock) for p in "abc"]
    store.close_all()
    assert len(store) == 0
    assert all(store.get(s, p) is None for s, p in zip(ids, "abc", strict=True))
