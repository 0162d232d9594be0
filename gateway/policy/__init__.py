"""Route policy: which tools, prompts and resources a route exposes, and how fast
each caller may call it (token buckets, shared by a cluster's replicas)."""

from gateway.policy.buckets import MAX_BUCKETS, Limit, LocalBuckets, Rate, Taken
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
]
