"""Logs and metrics: structlog set up once for the process, Prometheus per gateway.

Logs: every line is one JSON object in ``json`` mode (the gateway's own
structlog events and whatever the libraries log through stdlib ``logging``
alike), human-readable lines in ``console`` mode.  Every finished call is one
``call`` event with the request id, route, both revisions, method, duration
and outcome.

Metrics: a registry per gateway, so several gateways in one process (tests)
never collide.  Gauges are read when scraped, from the routes themselves.
"""

from __future__ import annotations

import contextlib
import logging
import re
import sys
import time
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, MutableMapping
from itertools import accumulate
from typing import IO, TYPE_CHECKING, Any

import structlog
from aiohttp.http_exceptions import HttpProcessingError
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import generate_latest
from prometheus_client.openmetrics.exposition import CONTENT_TYPE_LATEST as OPENMETRICS_CONTENT_TYPE
from prometheus_client.openmetrics.exposition import generate_latest as openmetrics_latest
from prometheus_client.registry import Collector
from prometheus_client.samples import Exemplar, Sample
from prometheus_client.utils import floatToGoString

from gateway import __version__
from gateway.core import Operation
from gateway.core.log_context import REQUEST_CONTEXT
from gateway.core.redaction import REDACTED, is_secret_key, redact, scrub

if TYPE_CHECKING:
    from gateway.transport.route import Route

METRICS_CONTENT_TYPE = CONTENT_TYPE_LATEST
# Outcomes that are not errors: a result, or a request for more input.
SUCCESS_OUTCOMES = frozenset({"ok", "input_required"})
UNKNOWN = "unknown"
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
# The longest a log field may be (longer values are cut, with how much was cut).
MAX_LOG_FIELD = 1024

call_log = structlog.get_logger("gateway.calls")
# How many distinct sets of a record's label fields a gateway remembers the labelled
# metrics of (then it starts again).
MAX_SEEN_LABELS = 1024
# A record whose values are longer than this in all is not remembered (a method
# name is the client's: a flood of long ones would be kept otherwise).
MAX_SEEN_KEY = 256


class _Levels:
    """What ``configure_logging`` enabled (everything until it is called)."""

    info = True


_levels = _Levels()


# ------------------------------------------------------------------ logging


def configure_logging(
    level: str = "info", fmt: str = "json", stream: IO[str] | None = None
) -> None:
    """Route structlog and stdlib logging to one handler with one renderer."""
    numeric = logging.getLevelNamesMapping()[level.upper()]
    _levels.info = numeric <= logging.INFO
    shared: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        merge_request_context,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        one_line_http_errors,
        redact_fields,
        truncate_fields,
        escape_control,
    ]
    renderer: structlog.typing.Processor
    if fmt == "auto":  # a person at a terminal reads lines; anything else gets JSON
        fmt = "console" if (stream or sys.stderr).isatty() else "json"
    if fmt == "json":
        renderer = structlog.processors.JSONRenderer()
        final: list[structlog.typing.Processor] = [
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            scrub_exception,  # a traceback's text under the one redaction rule too
            renderer,
        ]
    else:  # colour codes only for a terminal, never into a file or a pipe
        renderer = structlog.dev.ConsoleRenderer(colors=(stream or sys.stderr).isatty())
        final = [renderer]
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[*shared, structlog.stdlib.PositionalArgumentsFormatter()],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *final],
    )
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(formatter)
    handler.addFilter(quiet_trace_context)
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(numeric)
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        cache_logger_on_first_use=False,
    )


# Libraries that log what a client wrote when they find it invalid: OpenTelemetry's
# trace state and baggage parsers (one warning per request, the value verbatim).
_ECHOING_LOGGERS = (
    "opentelemetry.trace.span",
    "opentelemetry.baggage",
    "opentelemetry.trace.propagation",
)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def merge_request_context(
    _logger: Any, _name: str, event: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """The request the line was written in (its id, the client's trace ids), below
    the line's own fields and anything bound since (a span's ids)."""
    context = REQUEST_CONTEXT.get()
    if context:
        for key, value in context.items():
            event.setdefault(key, value)
    return event


def quiet_trace_context(record: logging.LogRecord) -> bool:
    """A request's invalid trace context is the gateway's fixed line at debug, never
    the value the client wrote (nor a warning per request)."""
    if record.name.startswith(_ECHOING_LOGGERS):
        record.msg, record.args = "a request's trace context was not valid; ignored", ()
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger().isEnabledFor(logging.DEBUG)
    return True


def escape_control(
    logger: Any, method: str, event: structlog.typing.EventDict
) -> structlog.typing.EventDict:
    """Control characters in a field are written escaped (``\\x0a``), in every format:
    a CR or LF a client sent can never start a log line of its own."""
    for key, value in event.items():
        if isinstance(value, str) and not key.startswith("_") and _CONTROL.search(value):
            event[key] = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", value)
    return event


def scrub_exception(
    logger: Any, method: str, event: structlog.typing.EventDict
) -> structlog.typing.EventDict:
    """A rendered traceback (its exception messages may quote a URL) made safe."""
    for key in ("exception", "stack"):
        value = event.get(key)
        if isinstance(value, str):
            event[key] = scrub(value)
    return event


def redact_fields(
    logger: Any, method: str, event: structlog.typing.EventDict
) -> structlog.typing.EventDict:
    """The one redaction rule (gateway.core.redaction) on every line: a secret-looking
    field's value is never written, nor a URL's user info or query values."""
    for key, value in event.items():
        if key.startswith("_") or key == "exc_info":
            continue
        if is_secret_key(key):
            event[key] = REDACTED
        elif isinstance(value, str):
            if "://" in value or "@" in value or "gw1." in value:
                event[key] = scrub(value)
        elif isinstance(value, dict | list | tuple):
            event[key] = redact(value)
    return event


def truncate_fields(
    logger: Any, method: str, event: structlog.typing.EventDict
) -> structlog.typing.EventDict:
    """No field of a log line is longer than ``MAX_LOG_FIELD`` characters: whatever a
    client sends (a 4 MB method name) costs the log a bounded line."""
    for key, value in event.items():
        if key.startswith("_") or key == "exc_info":
            continue
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        elif isinstance(value, dict | list | tuple | set):
            text = repr(value)
            if len(text) <= MAX_LOG_FIELD:
                continue
            value = text
        if isinstance(value, str) and len(value) > MAX_LOG_FIELD:
            event[key] = f"{value[:MAX_LOG_FIELD]}... ({len(value) - MAX_LOG_FIELD} more)"
    return event


def one_line_http_errors(
    logger: Any, method: str, event: structlog.typing.EventDict
) -> structlog.typing.EventDict:
    """aiohttp logs a malformed request (bad request line, headers, framing) as an
    error with its traceback: it is the client's fault, so one warning line."""
    exc_info = event.get("exc_info")
    exc = exc_info[1] if isinstance(exc_info, tuple) and len(exc_info) == 3 else exc_info
    if isinstance(exc, HttpProcessingError) and event.get("logger") == "aiohttp.server":
        event.pop("exc_info", None)
        event["level"] = "warning"
        # Only the parser's own words: the excerpt it quotes after them is what the
        # client sent (an Authorization header's value, say), never logged.
        said = str(exc.message or exc).split(":\n", 1)[0].splitlines()[0:1]
        event["error"] = f"{type(exc).__name__}: {said[0] if said else ''}"
    return event


class CallObservers:
    """A route's observers of finished calls, told in order through one door:
    tracing first when it is on (it puts the span's ids in the record), then the
    call log, then the metrics."""

    def __init__(self, *observers: Callable[[dict[str, Any]], None]) -> None:
        self._observers = observers

    def observe(self, record: dict[str, Any]) -> None:
        for observer in self._observers:
            observer(record)


def log_call(record: dict[str, Any]) -> None:
    """A route observer: one ``call`` log event per finished call."""
    if record.get("outcome") in SUCCESS_OUTCOMES:
        if _levels.info:  # else not even the lazy logger's per-call bind
            call_log.info("call", **record)
    else:
        call_log.warning("call", **record)


# ------------------------------------------------------------------ metrics


def method_label(method: Any) -> str:
    """Known MCP methods by name; anything else (vendor methods) as ``other``."""
    if not isinstance(method, str):
        return UNKNOWN
    return method if Operation.for_method(method) is not Operation.OTHER else "other"


class _RouteGauges(Collector):
    """Gauges read from the routes when scraped."""

    def __init__(self, routes: Callable[[], Iterable[Route]], in_flight: Callable[[], int]) -> None:
        self._routes = routes
        self._in_flight = in_flight

    def collect(self) -> Iterator[Metric]:
        sessions = GaugeMetricFamily(
            "gateway_sessions", "Open downstream client sessions.", labels=["route"]
        )
        parked = GaugeMetricFamily(
            "gateway_parked_calls",
            "Calls parked while waiting for a client's answer to an upstream's question.",
            labels=["route"],
        )
        upstream = GaugeMetricFamily(
            "gateway_upstream_info",
            "The revision and transport each route's upstream was found to speak (1 once known).",
            labels=["route", "upstream_revision", "transport"],
        )
        pooled = GaugeMetricFamily(
            "gateway_upstream_connections",
            "Keep-alive connections to each route's upstream (the h1 client's pool).",
            labels=["route", "state"],
        )
        upstream_sessions = GaugeMetricFamily(
            "gateway_upstream_sessions",
            "Open handshake-era sessions with each route's upstream.",
            labels=["route"],
        )
        restarts = CounterMetricFamily(
            "gateway_tool_index_restarts",
            "Times a caller's tool index passed its bound and started again (tools it "
            "forgot go unchecked until listed again).",
            labels=["route"],
        )
        for route in self._routes():
            restarts.add_metric([route.path], route.backend.tool_index_restarts())
            sessions.add_metric([route.path], len(route.sessions))
            parked.add_metric([route.path], _parked(route))
            busy, idle = route.backend.upstream_connections()
            pooled.add_metric([route.path, "busy"], busy)
            pooled.add_metric([route.path, "idle"], idle)
            upstream_sessions.add_metric([route.path], route.backend.upstream_sessions())
            revision = route.backend.upstream_revision
            transport = route.backend.upstream_transport
            if revision is not None and transport is not None:
                upstream.add_metric([route.path, revision, transport], 1)
        yield sessions
        yield parked
        yield upstream
        yield pooled
        yield upstream_sessions
        yield restarts
        yield from _target_gauges(self._routes())
        yield GaugeMetricFamily(
            "gateway_in_flight_requests", "Client requests being handled.", value=self._in_flight()
        )


class _LaneGauges(Collector):
    """The lane's connections and handoffs, read when scraped (nothing without a
    lane)."""

    def __init__(self, lane: Callable[[], tuple[int, int] | None]) -> None:
        self._lane = lane

    def collect(self) -> Iterator[Metric]:
        figures = self._lane()
        if figures is None:
            return
        connections, handoffs = figures
        yield GaugeMetricFamily(
            "gateway_lane_connections",
            "Client connections the lane carries (the others are aiohttp's).",
            value=connections,
        )
        yield CounterMetricFamily(
            "gateway_lane_handoffs",
            "Connections the lane handed to aiohttp's server (a request it does not carry).",
            value=handoffs,
        )


def _target_gauges(routes: Iterable[Route]) -> Iterator[Metric]:
    """Each target of a route with several: whether it takes calls, its ejections; and
    each route's calls sent again."""
    up = GaugeMetricFamily(
        "gateway_upstream_target_up",
        "1 while a target of a route with several upstreams takes calls, 0 while ejected.",
        labels=["route", "target"],
    )
    ejections = CounterMetricFamily(
        "gateway_upstream_target_ejections",
        "Times a target was ejected after failing (or failing a check).",
        labels=["route", "target"],
    )
    retries = CounterMetricFamily(
        "gateway_upstream_retries",
        "Upstream calls sent once more after a failure, by why: never_sent (no connection "
        "was made), read_only_method, safe_tool (its readOnlyHint or idempotentHint).",
        labels=["route", "why"],
    )
    for route in routes:
        targets = route.backend.targets
        for row in targets.states() if targets is not None else []:
            labels = [route.path, row["target"]]
            up.add_metric(labels, 0 if row["state"] == "ejected" else 1)
            ejections.add_metric(labels, row["ejections"])
        for why, count in route.backend.upstream_retries().items():
            retries.add_metric([route.path, why], count)
    yield up
    yield ejections
    yield retries


def _parked(route: Route) -> int:
    try:
        return int(route.backend.forwarder.parked_count)
    except Exception:  # a gauge must never break the scrape
        return 0


CALL_LABELS = ("route", "method", "client_revision", "upstream_revision", "outcome")
LATENCY_LABELS = ("route", "client_revision", "upstream_revision")
_LE = [*map(floatToGoString, LATENCY_BUCKETS), "+Inf"]


class _Count:
    """One labelled counter: its value and when it began (its ``_created``)."""

    __slots__ = ("created", "value")

    def __init__(self) -> None:
        self.value = 0.0
        self.created = time.time()


class _Timings:
    """One labelled latency histogram: the count in each bucket (not yet cumulative),
    the sum, and each bucket's latest exemplar (a traced call's ids)."""

    __slots__ = ("counts", "created", "exemplars", "total")

    def __init__(self) -> None:
        self.counts = [0] * len(_LE)
        self.total = 0.0
        self.created = time.time()
        self.exemplars: dict[int, Exemplar] = {}

    def observe(self, seconds: float, exemplar: dict[str, str] | None = None) -> None:
        bucket = bisect_left(LATENCY_BUCKETS, seconds)  # the first bound not below it
        self.counts[bucket] += 1
        self.total += seconds
        if exemplar is not None:
            self.exemplars[bucket] = Exemplar(exemplar, seconds, time.time())


# A call's counter, error counter (None for a success) and latency histogram.
_Children = tuple[_Count, _Count | None, _Timings]


class _CallSeries(Collector):
    """The series every call adds to (calls, errors, pass-through answers, latency),
    kept as plain numbers: every call is observed on the event loop's one thread, so
    none needs the lock and the method calls a prometheus_client child takes per
    update (about 24 k instructions a call for the four); a scrape, on the same
    thread, reads them out as the metric families those children would have made."""

    def __init__(self) -> None:
        self.calls: dict[tuple[str, ...], _Count] = {}
        self.errors: dict[tuple[str, ...], _Count] = {}
        self.passed: dict[str, _Count] = {}
        self.latency: dict[tuple[str, ...], _Timings] = {}

    def collect(self) -> Iterator[Metric]:
        yield _counters(
            "gateway_requests",
            "Calls finished, by route, method, revision pair and outcome.",
            CALL_LABELS,
            self.calls,
        )
        yield _counters(
            "gateway_request_errors",
            "Calls that ended in an error, by route, method, revision pair and outcome.",
            CALL_LABELS,
            self.errors,
        )
        passed: dict[tuple[str, ...], _Count] = {(r,): n for r, n in self.passed.items()}
        yield _counters(
            "gateway_pass_through",
            "Calls answered by the pass-through lane (no translation: the same revision "
            "both sides, nothing to rewrite), by route; the rest took the full path.",
            ("route",),
            passed,
        )
        yield self._latency()

    def _latency(self) -> Metric:
        name = "gateway_request_duration_seconds"
        family = HistogramMetricFamily(
            name,
            "Call latency through the gateway, by route and revision pair.",
            labels=LATENCY_LABELS,
        )
        for key, timings in list(self.latency.items()):
            cumulative = accumulate(timings.counts)
            buckets = [
                (le, float(n), timings.exemplars[i]) if i in timings.exemplars else (le, float(n))
                for i, (le, n) in enumerate(zip(_LE, cumulative, strict=True))
            ]
            family.add_metric(key, buckets, timings.total)
            labels = dict(zip(LATENCY_LABELS, key, strict=True))
            family.samples.append(Sample(f"{name}_created", labels, timings.created))
        return family


def _counters(
    name: str, help_text: str, labels: tuple[str, ...], counts: dict[tuple[str, ...], _Count]
) -> Metric:
    family = CounterMetricFamily(name, help_text, labels=labels)
    for key, count in list(counts.items()):
        family.add_metric(key, count.value, created=count.created)
    return family


class Metrics:
    """The Prometheus metrics of one gateway."""

    def __init__(
        self,
        routes: Callable[[], Iterable[Route]] = tuple,
        in_flight: Callable[[], int] = lambda: 0,
        lane: Callable[[], tuple[int, int] | None] = lambda: None,
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.series = _CallSeries()
        self.registry.register(self.series)
        self.policy_refusals = Counter(
            "gateway_policy_refusals",
            "Calls a route's policy refused, by route and reason (hidden: not exposed; "
            "rate, tool_rate: over a rate limit; store_down: limits uncheckable, fail closed).",
            ["route", "reason"],
            registry=self.registry,
        )
        build = GaugeMetricFamily(
            "gateway_build_info", "The gateway's version.", labels=["version"]
        )
        build.add_metric([__version__], 1)
        self._build = build
        # Calls are traced, so their latencies carry exemplars (set by the app).
        self.exemplars = False
        self._children: dict[tuple[str, str, str, str, str], _Children] = {}
        self._seen: dict[tuple[Any, ...], _Children] = {}
        self.registry.register(_RouteGauges(routes, in_flight))
        self.registry.register(_LaneGauges(lane))
        self.registry.register(_Static([build]))

    def observe(self, record: dict[str, Any]) -> None:
        """A route observer: count the call and time it."""
        # Looked up by the record's own values first: the labels are worked out once
        # per distinct set (a method is a label only if known, say).
        get = record.get
        given = (
            get("route"),
            get("method"),
            get("client_revision"),
            get("upstream_revision"),
            get("outcome"),
        )
        try:
            children = self._seen.get(given)
        except TypeError:  # an unhashable value: no shortcut
            children = None
        if children is None:
            route = str(record.get("route") or UNKNOWN)
            client = str(record.get("client_revision") or UNKNOWN)
            upstream = str(record.get("upstream_revision") or UNKNOWN)
            outcome = str(record.get("outcome") or UNKNOWN)
            key = (route, method_label(record.get("method")), client, upstream, outcome)
            children = self._children.get(key)
            if children is None:
                children = self._children[key] = self._bind(key)
            self._remember(given, children)
        counted, failed, timed = children
        counted.value += 1
        if get("pass_through"):
            self._pass(given[0])
        if failed is not None:
            failed.value += 1
        duration = record.get("duration_ms")
        if isinstance(duration, int | float):
            trace_id = get("trace_id")
            if trace_id is None:
                timed.observe(duration / 1000)
            else:  # a traced call (gateway/otel): its trace, the exemplar of its bucket
                exemplar = {"trace_id": str(trace_id), "span_id": str(get("span_id"))}
                timed.observe(duration / 1000, exemplar)

    def _pass(self, route: Any) -> None:
        passed = self.series.passed
        count = passed.get(route)
        if count is None:  # the routes are the configured ones: a bounded table
            count = passed[route] = _Count()
        count.value += 1

    def refused(self, route: str, reason: str) -> None:
        """A route policy's observer: one refusal counted (the reasons are the
        policy's own few words, the routes the configured ones: bounded labels)."""
        self.policy_refusals.labels(route, reason).inc()

    def _remember(self, given: tuple[Any, ...], children: _Children) -> None:
        """Bounded: unknown methods all share the ``other`` label, not their own entry."""
        if sum(len(part) for part in given if isinstance(part, str)) > MAX_SEEN_KEY:
            return
        if len(self._seen) >= MAX_SEEN_LABELS:
            self._seen.clear()
        with contextlib.suppress(TypeError):
            self._seen[given] = children

    def _bind(self, key: tuple[str, str, str, str, str]) -> _Children:
        """The series of one route, method, revision pair and outcome (found once)."""
        route, _, client, upstream, outcome = key
        series = self.series
        counted = series.calls.setdefault(key, _Count())
        failed = (
            series.errors.setdefault(key, _Count()) if outcome not in SUCCESS_OUTCOMES else None
        )
        timed = series.latency.get((route, client, upstream))
        if timed is None:
            timed = series.latency[(route, client, upstream)] = _Timings()
        return counted, failed, timed

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def negotiate(self, accept: str) -> tuple[bytes, str]:
        """The metrics and their content type: OpenMetrics (which alone carries the
        latency histogram's exemplars) when the scraper accepts it and calls are
        traced (``exemplars``); else Prometheus text, as always."""
        if self.exemplars and OPENMETRICS_CONTENT_TYPE.split(";")[0] in accept:
            return openmetrics_latest(self.registry), OPENMETRICS_CONTENT_TYPE  # type: ignore[no-untyped-call]
        return self.render(), METRICS_CONTENT_TYPE


class _Static(Collector):
    def __init__(self, metrics: list[Metric]) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[Metric]:
        yield from self._metrics
