"""One POST's answer toward the client: plain JSON, or an SSE stream once something
must be streamed first (an event, a question, a call that may run long), kept alive
while it is quiet (:mod:`.heartbeat`)."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson

from gateway.transport.heartbeat import Heartbeat
from gateway.transport.post import PostRequest, Sink, WholeAnswer
from gateway.transport.resume import EventLog
from gateway.wire.sse import encode_event

JSON = "application/json"
EVENT_STREAM = "text/event-stream"
# A call that may run long has its answer stream opened (and primed) once it has run
# this long (seconds); one answered sooner is sent in one go.
PRIME_AFTER = 0.05
# What a quiet SSE stream gets (a comment: clients and the event log ignore it).
KEEPALIVE_COMMENT = b": keepalive\n\n"


class AnswerSent(RuntimeError):
    """A message for a POST whose answer has gone out: there is nowhere to send it."""


class Responder:
    """One POST's answer: plain JSON unless something must be streamed first.

    With a session's ``log`` (a revision with resumable streams) every event has an
    id and is kept for a reconnect; with ``priming`` the stream opens with a priming
    event."""

    def __init__(
        self,
        request: PostRequest,
        headers: dict[str, str],
        log: EventLog | None = None,
        *,
        priming: bool = False,
        keepalive: float = 0.0,
    ) -> None:
        self.request = request
        self.headers = headers
        self.stream: Sink | None = None
        self._lock = asyncio.Lock()
        self._log = log
        self._priming = priming
        self._number = 0
        # Once the stream is open and quiet for ``keepalive`` seconds, a comment.
        self._beat = Heartbeat(keepalive, self._comment) if keepalive > 0 else None
        # A stream to open shortly (open_soon): the timer, then the opening.
        self._soon: asyncio.TimerHandle | None = None
        self._opening: asyncio.Task[Sink] | None = None
        # Set as the answer goes out: nothing opens a stream (a response) after it.
        self._finished = False
        self._streamed = False

    async def open(self) -> Sink:
        """The SSE stream, opened (and primed) now if it was not yet."""
        if self.stream is None:
            head = await self._start()
            if head:
                await self._started().write(head)
        return self._started()

    async def _start(self) -> bytes:
        """Open the stream (its headers wait for the first write); its priming event."""
        self.stream = await self.request.open_stream(
            {**self.headers, "Content-Type": EVENT_STREAM, "Cache-Control": "no-cache"}
        )
        if self._beat is not None:
            self._beat.start()
        if self._log is None:
            return b""
        self._number = self._log.open()
        return self._log.priming(self._number) if self._priming else b""

    def _started(self) -> Sink:
        assert self.stream is not None
        return self.stream

    def open_soon(self) -> None:
        """A call that may run long is answered on a (primed, resumable) stream; it is
        opened after PRIME_AFTER, so that an answer ready sooner goes out with its
        headers and priming event in one send instead of three."""
        self._streamed = True
        self._soon = asyncio.get_running_loop().call_later(PRIME_AFTER, self._open_now)

    def _open_now(self) -> None:
        self._soon = None
        self._opening = asyncio.get_running_loop().create_task(self._open_locked())

    async def _open_locked(self) -> Sink:
        async with self._lock:
            return await self.open()

    def _not_soon(self) -> None:
        if self._soon is not None:
            self._soon.cancel()
            self._soon = None

    async def _comment(self) -> None:
        """A quiet stream's keep-alive (a comment: no id, no event, not logged)."""
        async with self._lock:
            if self.stream is not None:
                await self.stream.write(KEEPALIVE_COMMENT)

    def disarm(self) -> None:
        """The request ends (answered or abandoned): no opening left behind."""
        self._not_soon()
        if self._beat is not None:
            self._beat.stop()
            self._beat = None
        opening, self._opening = self._opening, None
        if opening is not None:
            if opening.done():
                if not opening.cancelled():
                    opening.exception()  # retrieved: the answer's own write reports it
            else:
                opening.cancel()

    async def send(self, message: dict[str, Any]) -> None:
        """One message before the answer (AnswerSent once the answer is out: a late
        question reaches nobody here, and must not open a second response)."""
        if self._finished:
            raise AnswerSent("the request's answer has gone out")
        async with self._lock:
            if self._finished:  # the answer went out while this waited for the lock
                raise AnswerSent("the request's answer has gone out")
            stream = await self.open()
            await stream.write(self._frame(message))
            if self._beat is not None:
                self._beat.wrote()

    def _whole(self, message: Any) -> bytes:
        """A stream that opens and ends at once: its events, kept for a reconnect."""
        log = self._log
        if log is None:
            return self._frame(message)
        self._number = log.open()
        head = log.priming(self._number) if self._priming else b""
        frame = self._frame(message)
        log.finish(self._number)
        return head + frame

    def _frame(self, message: Any) -> bytes:
        data = orjson.dumps(message)
        if self._log is not None:
            return self._log.record(self._number, data)
        return encode_event(data, event="message")

    async def finish(self, message: Any, status: int = 200) -> WholeAnswer | Sink:
        self._finished = True
        self._not_soon()
        if self._beat is not None:
            self._beat.stop()
        if self._opening is not None:
            await self._opening
        if self._lock.locked():  # a send opening the stream (or writing) is waited for
            async with self._lock:
                pass
        # No wait from here to the answer: nothing opens the stream meanwhile.
        if self.stream is None and (not self._streamed or status != 200):
            # Nothing streamed yet, and a status to tell (a refusal known before the
            # upstream was asked, say a rate limit's 429): plain JSON carries it.
            return WholeAnswer(status, self.headers, orjson.dumps(message), JSON)
        if self.stream is None:
            # Answered before its stream had to open: the whole stream (its priming
            # event, the answer, its end) in one answer of known length.
            headers = {**self.headers, "Cache-Control": "no-cache"}
            return WholeAnswer(200, headers, self._whole(message), EVENT_STREAM)
        async with self._lock:
            frame = self._frame(message)
            if self._log is not None:
                self._log.finish(self._number)
            # The last event and the stream's end in one send.
            await self._started().write_eof(frame)
        return self._started()
