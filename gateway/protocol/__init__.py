"""The adapters: one file per MCP revision, the only place a revision is named."""

from gateway.protocol.adapter import Adapter, adapter_of
from gateway.protocol.selection import AdapterSet
from gateway.protocol.v2026_07_28 import SUBSCRIPTION_ID

__all__ = ["SUBSCRIPTION_ID", "Adapter", "AdapterSet", "adapter_of"]
