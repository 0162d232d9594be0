"""OpenTelemetry traces of the gateway (the optional ``otel`` extra).

Switched on by the standard environment, as any OpenTelemetry SDK is:
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or
``OTEL_TRACES_EXPORTER=otlp``, to the default ``http://localhost:4318``), and
off with ``OTEL_SDK_DISABLED=true`` or ``OTEL_TRACES_EXPORTER=none``.  The rest
(``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_TRACES_SAMPLER`` and
``_ARG``, ``OTEL_PROPAGATORS``, ``OTEL_BSP_*``, the exporter's headers, timeout,
compression and certificates) is read by the SDK itself.  Spans go out over
OTLP/HTTP (protobuf) from the SDK's batch processor thread.

Off, nothing here is imported beyond this module, opentelemetry is not
imported at all, and a call's path reads one attribute per hook
(:mod:`gateway.core.tracing`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping

import structlog

from gateway.core import tracing

log = structlog.get_logger(__name__)

ENDPOINTS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
PROTOCOLS = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
# How long the spans still queued at exit may take to leave (seconds): a collector
# that is not there must not hold up the process's exit.
FLUSH_TIMEOUT = 3.0
INSTALL_HINT = "pip install '.[otel]' (from the gateway's clone; the image has it)"

# Ends the running tracer provider (flushing what is queued); None while off.
_stop: Callable[[], None] | None = None


def requested(environ: Mapping[str, str]) -> bool:
    """Whether the environment asks for traces."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter == "none":
        return False
    return exporter != "" or any(environ.get(name, "").strip() for name in ENDPOINTS)


def unsupported(environ: Mapping[str, str]) -> str | None:
    """Why traces that were asked for cannot be sent (None: they can)."""
    exporter = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter not in ("", "otlp"):
        return f"OTEL_TRACES_EXPORTER={exporter}: only otlp is supported"
    for name in PROTOCOLS:
        protocol = environ.get(name, "").strip().lower()
        if protocol:
            if protocol != "http/protobuf":
                return f"{name}={protocol}: only http/protobuf is supported"
            break  # the traces' own setting wins over the general one
    return None


def start(environ: Mapping[str, str] | None = None) -> bool:
    """Start tracing when the environment asks for it (see the module); True when
    started.  What is asked for but cannot be done is a warning, not a failure: an
    environment that sets ``OTEL_*`` for every container must not stop the gateway.
    ``environ`` (the process's by default) decides whether; the SDK reads the rest
    from the process's own environment."""
    global _stop
    environ = os.environ if environ is None else environ
    if _stop is not None or not requested(environ):
        return _stop is not None
    problem = unsupported(environ)
    if problem is not None:
        log.warning("traces not started", reason=problem)
        return False
    try:
        from gateway.otel.setup import build
    except ImportError as exc:
        log.warning(
            "traces not started: OpenTelemetry is not installed",
            missing=exc.name,
            install=INSTALL_HINT,
        )
        return False
    try:
        spans, shutdown, described = build(environ)
    except Exception as exc:  # a setting the SDK cannot take: say so, serve untraced
        log.warning("traces not started", error=f"{type(exc).__name__}: {exc}")
        return False
    tracing.active = spans
    _stop = shutdown
    log.info("traces on", **described)
    return True


def stop(timeout: float = FLUSH_TIMEOUT) -> None:
    """Stop tracing: hooks off, queued spans sent (at most ``timeout`` seconds)."""
    global _stop
    shutdown, _stop = _stop, None
    tracing.active = None
    if shutdown is None:
        return
    # The SDK's shutdown waits up to 30 s for an unreachable collector: in a thread
    # of its own (a daemon, so it never holds up the exit) for at most ``timeout``.
    worker = threading.Thread(target=shutdown, name="otel-shutdown", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        log.warning("traces still queued at exit were not all sent", timeout_s=timeout)
