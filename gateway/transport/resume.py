"""Resumable SSE streams toward a session's client (revisions with `resumable_streams`).

Every event the gateway writes on one of a session's streams (a POST's answer, the
standalone GET stream) gets an id ``<stream>.<seq>`` and is kept, so a client that
reconnects with ``Last-Event-ID`` gets what that stream sent after it, and nothing of
another stream.  What is kept is bounded per session, by count and by bytes: the
oldest events go first, so a client that stays away too long misses them.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from gateway.wire.sse import encode_event, one_ascii_line

# What one session keeps for replay, across its streams.
MAX_EVENTS = 64
MAX_BYTES = 256 * 1024
# The reconnection delay a priming event asks for, in milliseconds.
RETRY_MS = 1000


@dataclass
class _Stream:
    seq: int = 0
    done: bool = False
    # Made at the first event kept: an empty deque is not small, and an idle stream
    # (or a POST answered in one piece) keeps none.
    events: deque[tuple[int, bytes]] | None = None


class EventLog:
    """One session's SSE streams: their event ids and recent events."""

    def __init__(self, max_events: int = MAX_EVENTS, max_bytes: int = MAX_BYTES) -> None:
        self.max_events = max_events
        self.max_bytes = max_bytes
        self._streams: dict[int, _Stream] = {}
        # (stream, size), oldest first; made at the first event kept (see _Stream.events).
        self._order: deque[tuple[int, int]] | None = None
        self._bytes = 0
        self._next = 0
        # The standalone (GET) stream's number: resumed, it goes on with new messages.
        self.standalone: int | None = None

    def open(self) -> int:
        """A new stream's number."""
        self._next += 1
        self._streams[self._next] = _Stream()
        # Streams that ended without an event kept (a dropped POST) are forgotten, all
        # but the newest, once they could be as many as the streams with events (at
        # most max_events): each look frees at least max_events, so a stream's open
        # costs O(1) on average, not a walk of the table per call.
        if len(self._streams) > 2 * self.max_events:
            for number in [n for n, s in self._streams.items() if not s.events][:-1]:
                del self._streams[number]
        return self._next

    def priming(self, stream: int) -> bytes:
        """The event that opens a stream: its first id, no data, the retry delay (what
        ``encode_event("", id=..., retry=RETRY_MS)`` frames; the id is the gateway's
        own digits, so it is formatted at once, with nothing to check)."""
        return b"id: %d.0\nretry: %d\ndata:\n\n" % (stream, RETRY_MS)

    def record(self, stream: int, data: bytes | str) -> bytes:
        """One message event on ``stream``, with its id; kept for replay."""
        entry = self._streams.setdefault(stream, _Stream())
        entry.seq += 1
        if type(data) is bytes and data and one_ascii_line(data):
            # The usual event (JSON the gateway encoded), formatted at once: what
            # encode_event frames it as, without its checks of the gateway's own id.
            frame = b"event: message\nid: %d.%d\ndata: %b\n\n" % (stream, entry.seq, data)
        else:
            frame = encode_event(data, event="message", id=f"{stream}.{entry.seq}")
        if len(frame) <= self.max_bytes:
            if entry.events is None:
                entry.events = deque()
            if self._order is None:
                self._order = deque()
            entry.events.append((entry.seq, frame))
            self._order.append((stream, len(frame)))
            self._bytes += len(frame)
            self._evict()
        return frame

    def finish(self, stream: int) -> None:
        """The stream said all it will say (its events stay for a late reconnect)."""
        entry = self._streams.get(stream)
        if entry is not None:
            entry.done = True
            if not entry.events:
                del self._streams[stream]

    def after(self, last_event_id: str) -> tuple[int, list[bytes], bool] | None:
        """The stream a `Last-Event-ID` names, its events since, and whether it is done;
        None for an id this session never gave (or whose stream is forgotten)."""
        number, _, seq = last_event_id.partition(".")
        if not (number.isdigit() and seq.isdigit()):
            return None
        entry = self._streams.get(int(number))
        if entry is None:
            return None
        missed = [frame for n, frame in entry.events or () if n > int(seq)]
        return int(number), missed, entry.done

    @property
    def size(self) -> tuple[int, int]:
        """Events and bytes kept."""
        return len(self._order or ()), self._bytes

    def _evict(self) -> None:
        order = self._order
        while order and (len(order) > self.max_events or self._bytes > self.max_bytes):
            stream, size = order.popleft()
            self._bytes -= size
            entry = self._streams[stream]
            assert entry.events is not None  # (it holds the event `order` named)
            entry.events.popleft()
            if entry.done and not entry.events:
                del self._streams[stream]
