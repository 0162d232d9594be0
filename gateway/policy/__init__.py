"""Route policy: which tools, prompts and resources a route exposes, and how fast
each caller may call it (token buckets, shared by a cluster's replicas).

What a shared store needs of the buckets (``Limit``, ``Taken``, and the bucket
arithmetic ``take_one_each`` and ``full_after``) is said here: the cluster imports
this package, never its modules (an import-linter contract)."""

from gateway.policy.buckets import (
    MAX_BUCKETS,
    Limit,
    LocalBuckets,
    Rate,
    Taken,
    full_after,
    take_one_each,
)
from gateway.policy.exposure import Exposure
from gateway.policy.limiter import FALLBACKS, Fallback, RateLimiter, SharedBuckets
from gateway.policy.route_policy import RoutePolicy
from gateway.policy.rules import Rule
from gateway.policy.uris import canonical_uri

__all__ = [
    "FALLBACKS",
    "MAX_BUCKETS",
    "Exposure",
    "Fallback",
    "Limit",
    "LocalBuckets",
    "Rate",
    "RateLimiter",
    "RoutePolicy",
    "Rule",
    "SharedBuckets",
    "Taken",
    "canonical_uri",
    "full_after",
    "take_one_each",
]
