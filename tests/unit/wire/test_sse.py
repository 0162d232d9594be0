"""The SSE parser: pure, fed in arbitrary chunks."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.wire.sse import (
    SseError,
    SseEvent,
    SseParser,
    encode_event,
)


def parse(*chunks: bytes, max_event_size: int = 1 << 20) -> list[SseEvent]:
    parser = SseParser(max_event_size)
    events: list[SseEvent] = []
    for chunk in chunks:
        events.extend(parser.feed(chunk))
    return events


def split_every(stream: bytes, cuts: list[int]) -> list[bytes]:
    bounds = [0, *sorted(cuts), len(stream)]
    return [stream[a:b] for a, b in itertools.pairwise(bounds)]


STREAM = (
    b"\xef\xbb\xbf: hello\r\n"
    b"retry: 1500\r\n"
    b"id: 1\r\n"
    b"data:\r\n\r\n"
    b"event: message\n"
    b'data: {"a":\n'
    b"data:  1}\n\n"
    b"event: endpoint\r"
    b"data: /messages?s=x\r\r"
    b"data: \xc3\xa9t\xc3\xa9\r\n"
    b"id: 2\n\n"
)
EXPECTED = [
    SseEvent(data="", event=None, id="1", retry=1500),
    SseEvent(data='{"a":\n 1}', event="message", id="1"),
    SseEvent(data="/messages?s=x", event="endpoint", id="1"),
    SseEvent(data="été", event=None, id="2"),
]


def test_whole_stream() -> None:
    assert parse(STREAM) == EXPECTED


def test_every_single_split_point() -> None:
    for cut in range(len(STREAM) + 1):
        assert parse(STREAM[:cut], STREAM[cut:]) == EXPECTED, cut


def test_every_pair_of_split_points() -> None:
    for a in range(len(STREAM) + 1):
        for b in range(a, len(STREAM) + 1):
            assert parse(STREAM[:a], STREAM[a:b], STREAM[b:]) == EXPECTED, (a, b)


def test_byte_by_byte() -> None:
    assert parse(*(STREAM[i : i + 1] for i in range(len(STREAM)))) == EXPECTED


def test_unnamed_event_has_message_type() -> None:
    [event] = parse(b"data: x\n\n")
    assert event.event is None
    assert event.type == "message"
    [named] = parse(b"event: endpoint\ndata: /m\n\n")
    assert named.type == "endpoint"


def test_multiline_data_joined_with_lf() -> None:
    [event] = parse(b"data: a\ndata: b\ndata:\ndata: c\n\n")
    assert event.data == "a\nb\n\nc"


def test_only_one_leading_space_is_stripped() -> None:
    [event] = parse(b"data:   x \n\n")
    assert event.data == "  x "


def test_field_without_colon() -> None:
    [event] = parse(b"data\n\n")
    assert event.data == ""
    assert parse(b"data:x\nevent\n\n")[0].event is None


def test_comments_and_unknown_fields_are_ignored() -> None:
    events = parse(b":keepalive\n\n: another\ndata: x\nfoo: bar\n:mid\ndata: y\n\n")
    assert events == [SseEvent(data="x\ny")]


def test_block_without_data_dispatches_nothing() -> None:
    parser = SseParser()
    assert parser.feed(b"id: 7\nretry: 250\nevent: ping\n\n") == []
    # ...but its id and retry stay with the stream.
    assert parser.last_event_id == "7"
    assert parser.retry == 250
    [event] = parser.feed(b"data: x\n\n")
    assert event == SseEvent(data="x", id="7", retry=None)


def test_id_carries_over_and_can_be_reset() -> None:
    events = parse(b"id: a\ndata: 1\n\ndata: 2\n\nid\ndata: 3\n\n")
    assert [e.id for e in events] == ["a", "a", ""]


def test_id_with_nul_is_ignored() -> None:
    events = parse(b"id: a\ndata: 1\n\nid: b\x00c\ndata: 2\n\n")
    assert [e.id for e in events] == ["a", "a"]


def test_invalid_retry_is_ignored() -> None:
    parser = SseParser()
    [event] = parser.feed(b"retry: 12a\ndata: x\n\n")
    assert event.retry is None
    assert parser.retry is None
    [event] = parser.feed(b"retry: 0\ndata: x\n\n")
    assert event.retry == 0


def test_event_name_does_not_leak_into_the_next_event() -> None:
    events = parse(b"event: a\ndata: 1\n\ndata: 2\n\n")
    assert [e.type for e in events] == ["a", "message"]


def test_crlf_split_between_chunks_is_one_line_ending() -> None:
    # If the LF after a trailing CR were read as a second line end, the event
    # would be dispatched early with only "a".
    assert parse(b"data: a\r", b"\ndata: b\r\n\r\n") == [SseEvent(data="a\nb")]


def test_lone_cr_line_endings() -> None:
    assert parse(b"data: a\rdata: b\r\r") == [SseEvent(data="a\nb")]


def test_bom_only_at_start_and_split() -> None:
    assert parse(b"\xef", b"\xbb", b"\xbfdata: x\n\n") == [SseEvent(data="x")]
    # A second BOM is not stripped: it becomes part of the field name.
    assert parse(b"\xef\xbb\xbf\xef\xbb\xbfdata: x\n\n") == []
    # Bytes that merely start like a BOM are kept.
    assert parse(b"\xef", b"data: x\n\n") == []  # field name "\ufffddata"
    assert parse(b"d", b"ata: x\n\n") == [SseEvent(data="x")]


def test_invalid_utf8_is_replaced() -> None:
    [event] = parse(b"data: \xff\n\n")
    assert event.data == "\ufffd"


def test_unterminated_event_is_not_dispatched() -> None:
    assert parse(b"data: x\n") == []
    assert parse(b"data: x") == []


def test_empty_chunks_are_harmless() -> None:
    assert parse(b"", b"data: x\r", b"", b"\n", b"", b"\n") == [SseEvent(data="x")]


def test_size_limit_on_accumulated_data() -> None:
    parser = SseParser(max_event_size=10)
    assert parser.feed(b"data: 01234\ndata: 5678\n\n") == [SseEvent(data="01234\n5678")]
    with pytest.raises(SseError, match="exceeds the limit of 10 bytes"):
        parser.feed(b"data: 01234\ndata: 56789\n\n")


def test_size_limit_on_an_unfinished_line() -> None:
    parser = SseParser(max_event_size=16)
    parser.feed(b"data: " + b"x" * 10)
    with pytest.raises(SseError):
        parser.feed(b"y" * 10)


def test_size_limit_resets_between_events() -> None:
    parser = SseParser(max_event_size=8)
    for _ in range(100):
        assert parser.feed(b"data: 12345678\n\n") == [SseEvent(data="12345678")]


def test_size_limit_must_be_positive() -> None:
    with pytest.raises(ValueError):
        SseParser(0)


def test_long_line_in_small_chunks_is_linear_enough() -> None:
    # 1 MiB line in 1 KiB chunks: a quadratic rescan would take many seconds.
    parser = SseParser()
    chunk = b"x" * 1024
    parser.feed(b"data: ")
    for _ in range(1024):
        assert parser.feed(chunk) == []
    [event] = parser.feed(b"\n\n")
    assert len(event.data) == 1024 * 1024


def test_encode_event_round_trip() -> None:
    raw = encode_event('{"x":1}', event="message", id="42", retry=100)
    assert raw == b'event: message\nid: 42\nretry: 100\ndata: {"x":1}\n\n'
    assert parse(raw) == [SseEvent(data='{"x":1}', event="message", id="42", retry=100)]


def test_encode_event_multiline_and_empty() -> None:
    assert encode_event(b"a\r\nb\rc\nd") == b"data: a\ndata: b\ndata: c\ndata: d\n\n"
    assert encode_event("", id="p") == b"id: p\ndata:\n\n"
    assert parse(encode_event("", id="p")) == [SseEvent(data="", id="p")]
    assert parse(encode_event("a\n\nb")) == [SseEvent(data="a\n\nb")]


@pytest.mark.parametrize(
    "data", [b'{"x":"y"}', b"", "caf\u00e9".encode(), b"a\nb", b"a\rb", b"\xff"]
)
def test_encode_event_frames_bytes_as_their_text(data: bytes) -> None:
    """Bytes (the gateway's own JSON, framed without decoding when they are one line
    of ASCII) give exactly the frame their text gives; invalid UTF-8 is refused."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        with pytest.raises(UnicodeDecodeError):
            encode_event(data)
        return
    for fields in ({}, {"event": "message", "id": "3.1", "retry": 5}):
        assert encode_event(data, **fields) == encode_event(text, **fields)  # type: ignore[arg-type]
    lines = text.replace("\r\n", "\n").replace("\r", "\n")  # what SSE can carry
    assert parse(encode_event(data, event="message")) == [SseEvent(data=lines, event="message")]


def test_a_cr_after_a_long_line_still_ends_it() -> None:
    parser = SseParser()
    assert parser.feed(b"data: " + b"x" * 5000) == []
    assert parser.feed(b"y" * 5000 + b"\r") == []
    [event] = parser.feed(b"\r")
    assert event.data == "x" * 5000 + "y" * 5000


@pytest.mark.parametrize(
    "kwargs",
    [{"event": "a\nb"}, {"id": "a\rb"}, {"id": "a\x00b"}, {"retry": -1}],
)
def test_encode_event_rejects_what_cannot_be_framed(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        encode_event("x", **kwargs)  # type: ignore[arg-type]


# ------------------------------------------------------------------ property tests

_text = st.text(
    alphabet=st.characters(codec="utf-8", exclude_characters="\x00"),
    max_size=40,
)
_name = _text.filter(lambda s: "\r" not in s and "\n" not in s)
_event = st.tuples(
    _text,
    st.none() | _name.filter(bool),
    st.none() | _name,
    st.none() | st.integers(min_value=0, max_value=10**6),
)


@given(
    events=st.lists(_event, max_size=8),
    bom=st.booleans(),
    cuts=st.lists(st.integers(min_value=0, max_value=4096), max_size=12),
)
def test_random_splits_give_the_same_events(
    events: list[tuple[str, str | None, str | None, int | None]],
    bom: bool,
    cuts: list[int],
) -> None:
    stream = (b"\xef\xbb\xbf" if bom else b"") + b"".join(
        encode_event(data, event=name, id=id_, retry=retry) for data, name, id_, retry in events
    )
    whole = parse(stream)
    pieces = split_every(stream, [c % (len(stream) + 1) for c in cuts])
    assert parse(*pieces) == whole

    # And what comes out is what went in (line breaks normalised to LF).
    last_id: str | None = None
    expected = []
    for data, name, id_, retry in events:
        last_id = id_ if id_ is not None else last_id
        normalised = data.replace("\r\n", "\n").replace("\r", "\n")
        expected.append(SseEvent(data=normalised, event=name, id=last_id, retry=retry))
    assert whole == expected


_FIELDS = st.sampled_from([b"data", b"data: ", b"event: ", b"id: ", b"retry: ", b": ", b"x"])
_VALUES = st.binary(max_size=12).map(lambda v: v.replace(b"\r", b"").replace(b"\n", b""))


@given(
    lines=st.lists(st.tuples(_FIELDS, _VALUES), max_size=12),
    endings=st.lists(st.sampled_from([b"\r\n", b"\n", b"\r"]), min_size=1, max_size=3),
    one_kind=st.booleans(),
    cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=4),
)
def test_any_chunking_of_any_line_endings_reads_as_byte_by_byte(
    lines: list[tuple[bytes, bytes]], endings: list[bytes], one_kind: bool, cuts: list[int]
) -> None:
    """Whatever the line endings (one kind throughout, which the parser splits at once,
    or mixed) and wherever the chunks break, the events are those read a byte at a
    time (where no shortcut applies)."""
    stream = b"".join(
        field + value + (endings[0] if one_kind else endings[i % len(endings)])
        for i, (field, value) in enumerate(lines)
    ) + (endings[0] * 2)
    chunks = split_every(stream, [c for c in cuts if c <= len(stream)])
    single = [stream[i : i + 1] for i in range(len(stream))]
    assert parse(*chunks) == parse(*single) == parse(stream)
