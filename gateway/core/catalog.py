"""Normalized declarations of what an upstream offers, and who it is.

Each spec keeps every field the upstream sent (``extra="allow"``): adapters
decide, per revision, what a client may see.  The named fields are the union
of what any revision defines.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class _Spec(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True, frozen=True)

    def wire(self) -> dict[str, Any]:
        """The declaration as sent on the wire, every field it arrived with."""
        return self.model_dump(by_alias=True, exclude_unset=True)


class ToolSpec(_Spec):
    name: str
    title: str | None = None
    description: str | None = None
    inputSchema: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})
    outputSchema: dict[str, Any] | bool | None = None
    annotations: dict[str, Any] | None = None
    icons: list[Any] | None = None
    execution: dict[str, Any] | None = None
    meta: dict[str, Any] | None = Field(default=None, alias="_meta")


class ResourceSpec(_Spec):
    uri: str
    name: str
    title: str | None = None
    description: str | None = None
    mimeType: str | None = None
    size: int | None = None
    annotations: dict[str, Any] | None = None
    icons: list[Any] | None = None
    meta: dict[str, Any] | None = Field(default=None, alias="_meta")


class ResourceTemplateSpec(_Spec):
    uriTemplate: str
    name: str
    title: str | None = None
    description: str | None = None
    mimeType: str | None = None
    annotations: dict[str, Any] | None = None
    icons: list[Any] | None = None
    meta: dict[str, Any] | None = Field(default=None, alias="_meta")


class PromptSpec(_Spec):
    name: str
    title: str | None = None
    description: str | None = None
    arguments: list[dict[str, Any]] | None = None
    icons: list[Any] | None = None
    meta: dict[str, Any] | None = Field(default=None, alias="_meta")


class ServerProfile(BaseModel):
    """An upstream's identity and capabilities, however it told us (initialize or discover)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    info: dict[str, Any] = Field(default_factory=lambda: {"name": "upstream", "version": "0"})
    capabilities: dict[str, Any] = Field(default_factory=dict)
    instructions: str | None = None
    # The revisions the upstream speaks; the first is the one the gateway uses.
    versions: tuple[str, ...] = ()
    # Caching hints for clients that require them when the upstream gives none.
    cache_ttl_ms: int = 0
    cache_scope: str = "private"
    # Method names of the asks the upstream's revision can send mid-call.
    ask_kinds: tuple[str, ...] = ()

    @property
    def version(self) -> str | None:
        return self.versions[0] if self.versions else None
