"""Incremental ``text/event-stream`` parsing and encoding (no I/O).

The parser follows the WHATWG "event stream interpretation" rules: CRLF, LF
and lone CR all end a line, a leading UTF-8 BOM is dropped, lines starting
with ``:`` are comments, a blank line dispatches the event, and a block
without any ``data`` line dispatches nothing.  Bytes arrive in arbitrary
chunks, so every piece of state survives between :meth:`SseParser.feed`
calls, including a CR that may turn out to be the first half of a CRLF.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DEFAULT_MAX_EVENT_SIZE = 16 * 1024 * 1024

_BOM = b"\xef\xbb\xbf"
_EOL = re.compile(rb"\r\n|\r|\n")
_DIGITS = re.compile(r"[0-9]+")
_SPLIT_LINES = re.compile(r"\r\n|\r|\n")


class SseError(ValueError):
    """The stream broke a limit (an event larger than allowed)."""


@dataclass(frozen=True, slots=True)
class SseEvent:
    """One dispatched event.

    ``event`` is the ``event`` field, or None when the block had none (which
    SSE treats as ``message``).  ``id`` is the last event id seen on the
    stream so far (SSE carries it over between events, which is what a
    reconnect's ``Last-Event-ID`` needs).  ``retry`` is the reconnection delay
    in milliseconds when this very block set one.
    """

    data: str
    event: str | None = None
    id: str | None = None
    retry: int | None = None

    @property
    def type(self) -> str:
        """The event type as SSE defines it (``message`` when unnamed)."""
        return self.event or "message"


class SseParser:
    """Feed it bytes, get back complete events.

    ``max_event_size`` bounds the bytes held for one event (its data plus
    any unfinished line), so an upstream that never sends a blank line cannot
    make us buffer without end.  After an :class:`SseError` the parser's state
    is undefined: drop the stream.
    """

    def __init__(self, max_event_size: int = DEFAULT_MAX_EVENT_SIZE) -> None:
        if max_event_size <= 0:
            raise ValueError("max_event_size must be positive")
        self.max_event_size = max_event_size
        self.last_event_id: str | None = None
        self.retry: int | None = None
        self._buf = bytearray()
        self._at_start = True  # BOM still possible
        self._skip_lf = False  # previous chunk ended with CR: a leading LF completes it
        self._data: list[str] = []
        self._data_size = 0
        self._event: str | None = None
        self._block_retry: int | None = None

    def feed(self, chunk: bytes) -> list[SseEvent]:
        """Consume ``chunk`` and return the events it completed, in order."""
        if not chunk:
            return []
        if self._skip_lf:
            self._skip_lf = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        # The previous buffer holds no line ending, so scan only the new bytes.
        scan_from = len(self._buf)
        self._buf += chunk
        if self._at_start:
            if len(self._buf) < len(_BOM) and _BOM.startswith(bytes(self._buf)):
                return []  # could still be a BOM split across chunks
            self._at_start = False
            if self._buf.startswith(_BOM):
                del self._buf[: len(_BOM)]
            scan_from = 0

        events: list[SseEvent] = []
        buf = self._buf
        # What was held before holds no line ending (CR included): looking for a CR in
        # the new bytes alone keeps a long line that arrives in many chunks linear.
        if buf.find(b"\r", scan_from) < 0:
            # LF only (what servers send): split at once, no pattern search per line.
            return self._split(b"\n", events)
        crlf = buf.count(b"\r\n", scan_from)
        if buf.count(b"\r", scan_from) == crlf == buf.count(b"\n", scan_from):
            # CRLF only (sse-starlette's, the Python SDK's), none split across chunks
            # (a CR ending the bytes is counted alone): split at once too.
            return self._split(b"\r\n", events)
        start = 0
        while (m := _EOL.search(buf, max(start, scan_from))) is not None:
            self._line(bytes(buf[start : m.start()]), events)
            start = m.end()
            if start == len(buf) and m.group() == b"\r":
                self._skip_lf = True
        del buf[:start]
        self._check_size(len(buf))
        return events

    def _split(self, eol: bytes, events: list[SseEvent]) -> list[SseEvent]:
        """The buffer's complete lines, all ending in ``eol`` (and only its lines
        since the last call hold any line ending at all)."""
        buf = self._buf
        end = buf.rfind(eol)
        if end >= 0:
            for line in bytes(memoryview(buf)[:end]).split(eol):  # one copy, not two
                self._line(line, events)
            del buf[: end + len(eol)]
        self._check_size(len(buf))
        return events

    def _check_size(self, pending: int) -> None:
        if self._data_size + pending > self.max_event_size:
            raise SseError(f"SSE event exceeds the limit of {self.max_event_size} bytes")

    def _line(self, raw: bytes, events: list[SseEvent]) -> None:
        if not raw:
            self._dispatch(events)
            return
        if raw[:1] == b":":
            return
        name, sep, value = raw.partition(b":")
        if sep and value[:1] == b" ":
            value = value[1:]
        if name == b"data":
            # Counted as joined: one "\n" between consecutive data lines.
            self._data_size += len(value) + (1 if self._data else 0)
            self._check_size(0)
            self._data.append(value.decode("utf-8", "replace"))
        elif name == b"event":
            self._event = value.decode("utf-8", "replace")
        elif name == b"id":
            if b"\0" not in value:
                self.last_event_id = value.decode("utf-8", "replace")
        elif name == b"retry":
            text = value.decode("ascii", "replace")
            if _DIGITS.fullmatch(text):
                self.retry = self._block_retry = int(text)
        # Any other field name is ignored, as SSE requires.

    def _dispatch(self, events: list[SseEvent]) -> None:
        if self._data:
            events.append(
                SseEvent(
                    data="\n".join(self._data),
                    event=self._event or None,
                    id=self.last_event_id,
                    retry=self._block_retry,
                )
            )
        self._data = []
        self._data_size = 0
        self._event = None
        self._block_retry = None


def encode_event(
    data: bytes | str,
    event: str | None = None,
    id: str | None = None,
    retry: int | None = None,
) -> bytes:
    """Frame one event; multi-line ``data`` becomes one ``data`` line per line."""
    head = _head(event, id, retry)
    if isinstance(data, bytes) and one_ascii_line(data):
        # One line of ASCII (JSON the gateway encoded): framed as it is, with no
        # decoding, splitting or encoding again of what may be megabytes.
        return b"".join((head, b"data: " if data else b"data:", data, b"\n\n"))
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    lines = _SPLIT_LINES.split(text) if "\n" in text or "\r" in text else (text,)
    # "data:" with nothing after it still dispatches an (empty) event.
    body = "".join(f"data: {line}\n" if line else "data:\n" for line in lines)
    return head + (body + "\n").encode("utf-8")


def one_ascii_line(data: bytes) -> bool:
    """Data framed as one ``data`` line as it is: ASCII, with no line break."""
    return b"\n" not in data and b"\r" not in data and data.isascii()


def _head(event: str | None, id: str | None, retry: int | None) -> bytes:
    """The event's field lines before its data."""
    out: list[str] = []
    if event is not None:
        _check_field("event", event)
        out.append(f"event: {event}\n")
    if id is not None:
        _check_field("id", id)
        if "\0" in id:
            raise ValueError("SSE id must not contain NUL")
        out.append(f"id: {id}\n")
    if retry is not None:
        if retry < 0:
            raise ValueError("SSE retry must be non-negative")
        out.append(f"retry: {retry}\n")
    return "".join(out).encode("utf-8")


def _check_field(name: str, value: str) -> None:
    if "\r" in value or "\n" in value:
        raise ValueError(f"SSE {name} must not contain line breaks")
