"""EventLog: the ids and bounded replay buffer of a session's SSE streams."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gateway.transport.resume import RETRY_MS, EventLog
from gateway.wire.sse import SseParser, encode_event


def parse(frames: list[bytes]) -> list[tuple[str | None, str]]:
    parser = SseParser()
    return [(e.id, e.data) for f in frames for e in parser.feed(f)]


def test_ids_name_the_stream_and_replay_stays_on_it() -> None:
    log = EventLog()
    a, b = log.open(), log.open()
    priming = log.priming(a)
    assert b"retry: %d\n" % RETRY_MS in priming and priming.endswith(b"data:\n\n")
    frames_a = [log.record(a, f"a{i}") for i in range(3)]
    log.record(b, "b0")
    assert parse(frames_a) == [(f"{a}.1", "a0"), (f"{a}.2", "a1"), (f"{a}.3", "a2")]
    found = log.after(f"{a}.1")
    assert found is not None
    number, missed, done = found
    assert number == a and not done
    assert parse(missed) == [(f"{a}.2", "a1"), (f"{a}.3", "a2")]
    assert log.after(f"{a}.0") is not None  # the priming id: everything since
    log.finish(a)
    assert log.after(f"{a}.3") == (a, [], True)


def test_unknown_or_malformed_ids() -> None:
    log = EventLog()
    log.open()
    for bad in ("", "x", "9.1", "1", "1.x", "-1.2"):
        assert log.after(bad) is None


def test_bounded_by_count_and_bytes_oldest_first() -> None:
    log = EventLog(max_events=4, max_bytes=10_000)
    s = log.open()
    for i in range(10):
        log.record(s, f"m{i}")
    assert log.size[0] == 4
    found = log.after(f"{s}.0")
    assert found is not None
    assert [d for _, d in parse(found[1])] == ["m6", "m7", "m8", "m9"]
    small = EventLog(max_events=100, max_bytes=200)
    t = small.open()
    for _ in range(20):
        small.record(t, "x" * 40)
    events, size = small.size
    assert size <= 200 and events < 20
    assert small.record(t, "y" * 500)  # too big to keep: sent, not kept
    assert small.size[1] <= 200


def test_finished_streams_are_forgotten_once_their_events_are() -> None:
    log = EventLog(max_events=2)
    old = log.open()
    log.record(old, "1")
    log.finish(old)
    new = log.open()
    log.record(new, "2")
    log.record(new, "3")
    assert log.after(f"{old}.0") is None
    empty = log.open()
    log.finish(empty)
    assert log.after(f"{empty}.0") is None


def test_streams_that_never_kept_an_event_stay_bounded_and_the_newest_stays() -> None:
    """Dropped POSTs (a stream opened, never written, never finished) are forgotten
    once they pass the bound, the newest kept; a stream with events is not."""
    log = EventLog(max_events=4)
    kept = log.open()
    frame = log.record(kept, "{}")
    newest = 0
    for _ in range(1000):
        newest = log.open()
        assert len(log._streams) <= 2 * 4 + 1
    assert newest in log._streams
    assert log.after(f"{kept}.0") == (kept, [frame], False)


@given(
    data=st.one_of(st.text().map(str.encode), st.binary().filter(bytes.isascii), st.text()),
    stream=st.integers(min_value=1, max_value=10**9),
)
def test_an_event_is_framed_as_encode_event_frames_it(data: bytes | str, stream: int) -> None:
    """The log formats its usual event (and its priming event) at once: byte for byte
    what encode_event makes of the same data, id and retry delay."""
    log = EventLog()
    for seq in (1, 2):
        framed = encode_event(data, event="message", id=f"{stream}.{seq}")
        assert log.record(stream, data) == framed
    assert log.priming(stream) == encode_event("", id=f"{stream}.0", retry=RETRY_MS)
