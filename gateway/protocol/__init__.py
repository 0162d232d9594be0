"""The adapters: one file per MCP revision, the only place a revision is named."""

from gateway.protocol.adapter import (
    ANSWERS_ARGUMENT,
    STATE_ARGUMENT,
    Adapter,
    adapter_of,
    asked_in_result,
)
from gateway.protocol.selection import AdapterSet
from gateway.protocol.v2026_07_28 import SUBSCRIPTION_ID

__all__ = [
    "ANSWERS_ARGUMENT",
    "STATE_ARGUMENT",
    "SUBSCRIPTION_ID",
    "Adapter",
    "AdapterSet",
    "adapter_of",
    "asked_in_result",
]
