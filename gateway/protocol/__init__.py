"""The adapters: one file per MCP revision, the only place a revision is named."""

from gateway.protocol.adapter import Adapter
from gateway.protocol.selection import AdapterSet

__all__ = ["Adapter", "AdapterSet"]
