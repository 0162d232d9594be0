"""Wiring: builds the running gateway from settings (filled in with the transport)."""
