"""Typed params of the client requests every revision shares (pydantic v2).

All models allow extra fields: MCP has no closed types, and whatever a model
does not name must pass through untouched.  Per-revision differences are
subclasses in the revision's own file.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr

LogLevel = Literal["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]
LOG_LEVELS: tuple[str, ...] = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)


class Params(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    meta: dict[str, Any] | None = Field(default=None, alias="_meta")


class Implementation(BaseModel):
    model_config = ConfigDict(extra="allow")

    name: StrictStr
    version: StrictStr


class InitializeParams(Params):
    protocolVersion: StrictStr
    capabilities: dict[str, Any]
    clientInfo: Implementation


class PaginatedParams(Params):
    cursor: StrictStr | None = None


class CallToolParams(Params):
    name: StrictStr
    arguments: dict[str, Any] | None = None


class ReadResourceParams(Params):
    uri: StrictStr


class SubscribeParams(Params):
    uri: StrictStr


class GetPromptParams(Params):
    name: StrictStr
    arguments: dict[str, StrictStr] | None = None


class PromptReference(BaseModel):
    model_config = ConfigDict(extra="allow")

    type: Literal["ref/prompt", "ref/resource"]


class CompletionArgument(BaseModel):
    model_config = ConfigDict(extra="allow")

    name: StrictStr
    value: StrictStr


class CompleteParams(Params):
    ref: PromptReference
    argument: CompletionArgument


class SetLevelParams(Params):
    level: LogLevel


class CancelledParams(Params):
    requestId: StrictStr | StrictInt | None = None
    reason: StrictStr | None = None


class ProgressParams(Params):
    progressToken: StrictStr | StrictInt
    progress: float
    total: float | None = None
    message: StrictStr | None = None


class TaskParams(Params):
    taskId: StrictStr


class ListenParams(Params):
    notifications: dict[str, Any]
