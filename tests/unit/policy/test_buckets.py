"""Token buckets on an injected clock: rate, burst, all-or-nothing takes, the bound."""

from __future__ import annotations

import pytest

from gateway.policy import LocalBuckets, Rate


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("text", "burst", "per_second", "expected_burst"),
    [
        ("10/s", None, 10.0, 10),
        ("10", 5, 10.0, 5),
        ("120/m", None, 2.0, 120),
        ("1.5/s", None, 1.5, 2),
        ("36/h", 1, 0.01, 1),
        (" 3 / s ", None, 3.0, 3),
    ],
)
def test_rates_parse(text: str, burst: int | None, per_second: float, expected_burst: int) -> None:
    rate = Rate.parse(text, burst)
    assert rate.per_second == pytest.approx(per_second)
    assert rate.burst == expected_burst


@pytest.mark.parametrize("text", ["", "ten/s", "10/d", "0/s", "-1/s", "10/s/s"])
def test_bad_rates_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        Rate.parse(text)


def test_a_zero_burst_is_refused() -> None:
    with pytest.raises(ValueError, match="burst"):
        Rate.parse("10/s", 0)


def test_a_burst_then_the_rate() -> None:
    clock = Clock()
    buckets = LocalBuckets(clock=clock)
    limit = [("alice", Rate.parse("10/s", 5))]
    assert [buckets.take(limit)[1] for _ in range(5)] == [-1] * 5
    wait, which = buckets.take(limit)
    assert which == 0
    assert wait == pytest.approx(0.1)
    clock.now += 0.1
    assert buckets.take(limit) == (0.0, -1)
    assert buckets.take(limit)[1] == 0
    clock.now += 10  # long idle: full again, never more than the burst
    assert [buckets.take(limit)[1] for _ in range(6)] == [-1] * 5 + [0]


def test_admitted_calls_over_a_second_are_the_burst_plus_the_rate() -> None:
    clock = Clock()
    buckets = LocalBuckets(clock=clock)
    limit = [("alice", Rate.parse("10/s", 5))]
    admitted = 0
    for _ in range(100):  # 100 calls spread over one second
        admitted += buckets.take(limit)[1] < 0
        clock.now += 0.01
    assert 14 <= admitted <= 15


def test_takes_are_all_or_nothing() -> None:
    clock = Clock()
    buckets = LocalBuckets(clock=clock)
    caller = ("alice", Rate.parse("10/s", 10))
    tool = ("alice+search", Rate.parse("1/s", 1))
    assert buckets.take([caller, tool]) == (0.0, -1)
    wait, which = buckets.take([caller, tool])
    assert which == 1 and wait == pytest.approx(1.0)
    # The refused take cost the caller's bucket nothing: 9 more go, the 10th waits.
    assert [buckets.take([caller])[1] for _ in range(10)] == [-1] * 9 + [0]


def test_callers_have_buckets_of_their_own() -> None:
    buckets = LocalBuckets(clock=Clock())
    rate = Rate.parse("1/s", 1)
    assert buckets.take([("alice", rate)])[1] == -1
    assert buckets.take([("alice", rate)])[1] == 0
    assert buckets.take([("bob", rate)])[1] == -1


def test_the_table_is_bounded_and_forgets_the_least_recently_used() -> None:
    clock = Clock()
    buckets = LocalBuckets(max_buckets=3, clock=clock)
    rate = Rate.parse("1/m", 1)
    for name in ("a", "b", "c"):
        buckets.take([(name, rate)])
    buckets.take([("a", rate)])  # a is used again (refused): b is the oldest now
    for n in range(1000):  # a flood of invented callers
        buckets.take([(f"x{n}", rate)])
    assert len(buckets) == 3
    # The flood pushed everyone out: a forgotten bucket is a full one.
    assert buckets.take([("a", rate)])[1] == -1
