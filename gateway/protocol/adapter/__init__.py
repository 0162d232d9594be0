"""The Adapter: one instance per MCP revision, shared, holding no per-request state.

`Adapter` combines the roles, each in a file of its own: `base.py` (flags, tables,
failure mapping), `projection.py` (what a client of the revision may see),
`server.py` (toward clients: decode, encode, header rules, the handshake) and
`client.py` (toward upstreams: the `client_*` methods).  Each revision file
subclasses `Adapter`, sets the tables and overrides the hooks that differ.
Nothing here names a revision: the tables in the revision files do.
"""

from gateway.protocol.adapter.base import (
    ANSWERS_ARGUMENT,
    STATE_ARGUMENT,
    TASKS_EXTENSION,
    AdapterBase,
    Message,
    adapter_of,
    asked_in_result,
    decode_header_value,
    encode_header_value,
)
from gateway.protocol.adapter.client import LIST_CHANGES, AdapterClientRole, runs_tool_tasks
from gateway.protocol.adapter.projection import Projection
from gateway.protocol.adapter.server import AdapterServerRole, Decoded, declares_tasks_extension

__all__ = [
    "ANSWERS_ARGUMENT",
    "LIST_CHANGES",
    "STATE_ARGUMENT",
    "TASKS_EXTENSION",
    "Adapter",
    "AdapterBase",
    "AdapterClientRole",
    "AdapterServerRole",
    "Decoded",
    "Message",
    "Projection",
    "adapter_of",
    "asked_in_result",
    "declares_tasks_extension",
    "decode_header_value",
    "encode_header_value",
    "runs_tool_tasks",
]


class Adapter(AdapterServerRole, AdapterClientRole):
    """One MCP revision, in both roles: server (toward clients), client (toward upstreams)."""
