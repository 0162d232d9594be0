"""The handshake era (2024-11-05 to 2025-11-25): `initialize` opens a session, the
client's capabilities are said once, servers ask by sending requests of their own.

What every revision of the era shares is here, as the stateless era's is in
:mod:`.stateless`; each revision's file subclasses the one before it with what
changed (a new revision is a new file).
"""

from __future__ import annotations

from gateway.protocol import legacy_tables
from gateway.protocol.adapter import Adapter


class HandshakeEra(Adapter):
    """The handshake era's flags and failure tables; a revision adds its own."""

    has_handshake = True
    can_ask = False  # no input_required: servers push their asks (or, before
    # elicitation, clients carry them in tool arguments)
    codes = legacy_tables.CODES
    statuses = legacy_tables.STATUSES
