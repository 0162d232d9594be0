"""Finding 5: every request shape of every revision, on both inbound transports
(Streamable HTTP and stdio), before a handshake-era and a stateless upstream, gets a
4xx or a JSON-RPC answer: never a 5xx, never silence; and the gateway holds no more
descriptors or memory afterwards.

The shapes are bench/fuzz.py's generator, driven by hypothesis's randomness;
`python -m bench.fuzz` runs the same for 100,000 messages (figures in docs/security.md).
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.fuzz import REVISIONS, HttpTarget, Lab, StdioTarget, lab, shape
from bench.procs import open_fds, rss_kib

EXAMPLES = 400


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    with lab(tmp_path_factory.mktemp("fuzz")) as started:
        yield started


# Each fuzzed before a handshake-era upstream (the demo, route /mcp) and a stateless
# one (route /m: every handshake-era method translated for it, and both kinds of
# pass-through lane).
UPSTREAMS = pytest.mark.parametrize("era", ["handshake", "stateless"], indirect=True)


@pytest.fixture(scope="module")
def era(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def http_target(running: Lab, era: str) -> Iterator[HttpTarget]:
    target = HttpTarget(running.gateway, "/mcp" if era == "handshake" else "/m")
    target.open_sessions()
    yield target
    target.close()


@pytest.fixture(scope="module")
def stdio_target(running: Lab, era: str) -> Iterator[StdioTarget]:
    target = StdioTarget(running.upstream if era == "handshake" else running.modern)
    yield target
    target.close()


FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@UPSTREAMS
@FUZZ
@given(rng=st.randoms(use_true_random=False), revision=st.sampled_from(REVISIONS))
def test_http_answers_every_shape(
    http_target: HttpTarget, rng: random.Random, revision: str
) -> None:
    item = shape(rng, revision)
    assert http_target.send(item) is None, item.body[:300]


@UPSTREAMS
@FUZZ
@given(rng=st.randoms(use_true_random=False), revision=st.sampled_from(REVISIONS))
def test_stdio_answers_every_shape(
    stdio_target: StdioTarget, rng: random.Random, revision: str
) -> None:
    item = shape(rng, revision)
    assert stdio_target.send(item) is None, item.body[:300]


@pytest.mark.parametrize("era", ["handshake"], indirect=True)
def test_no_descriptor_or_memory_growth(running: Lab, http_target: HttpTarget) -> None:
    """After a warm-up, a thousand more shapes leave the gateway as it was."""
    rng = random.Random(5)
    for _ in range(300):
        http_target.send(shape(rng))
    fds, rss = open_fds(running.gateway_pid), rss_kib(running.gateway_pid)
    for _ in range(1000):
        assert http_target.send(shape(rng)) is None
    assert open_fds(running.gateway_pid) <= fds + 4
    assert rss_kib(running.gateway_pid) <= rss + 16 * 1024
