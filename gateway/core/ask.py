"""Questions a server asks its client mid-call, and their answers."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any


class AskKind(Enum):
    ELICIT = "elicitation/create"
    SAMPLE = "sampling/createMessage"
    LIST_ROOTS = "roots/list"

    @property
    def method(self) -> str:
        return self.value

    @classmethod
    def for_method(cls, method: object) -> AskKind | None:
        return ASK_KINDS.get(method) if isinstance(method, str) else None


# A method name's AskKind (a dict: Enum's own lookup by value is a Python call chain).
ASK_KINDS: dict[str, AskKind] = {kind.value: kind for kind in AskKind}


@dataclass(frozen=True, slots=True)
class Ask:
    """One question: elicitation, sampling or roots, with its params as sent."""

    kind: AskKind
    params: dict[str, Any]

    @property
    def method(self) -> str:
        return self.kind.method

    def capability(self) -> dict[str, Any]:
        """The client capability this ask needs (for -32021's requiredCapabilities)."""
        if self.kind is AskKind.ELICIT:
            mode = self.params.get("mode", "form")
            return {"elicitation": {mode: {}}}
        if self.kind is AskKind.SAMPLE:
            return {"sampling": {"tools": {}} if self.params.get("tools") else {}}
        return {"roots": {}}

    def allowed_by(self, capabilities: dict[str, Any]) -> bool:
        """Whether a client that declared ``capabilities`` may be sent this ask."""
        if self.kind is AskKind.ELICIT:
            declared = capabilities.get("elicitation")
            if not isinstance(declared, dict):
                return False
            mode = self.params.get("mode", "form")
            if "form" not in declared and "url" not in declared:
                return bool(mode == "form")  # `elicitation: {}` means form only
            return mode in declared
        if self.kind is AskKind.SAMPLE:
            declared = capabilities.get("sampling")
            if not isinstance(declared, dict):
                return False
            return not self.params.get("tools") or "tools" in declared
        return isinstance(capabilities.get("roots"), dict)


@dataclass(frozen=True, slots=True)
class Answer:
    """A client's answer to one Ask: a result, or a JSON-RPC error object."""

    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None

    @classmethod
    def from_response(cls, message: dict[str, Any]) -> Answer:
        if "error" in message and isinstance(message["error"], dict):
            return cls(error=message["error"])
        result = message.get("result")
        return cls(result=result if isinstance(result, dict) else {})

    @classmethod
    def refusal(cls, kind: AskKind) -> Answer:
        """What to tell a server whose ask cannot or will not reach the client."""
        if kind is AskKind.ELICIT:
            return cls(result={"action": "cancel"})
        if kind is AskKind.SAMPLE:
            return cls(error={"code": -1, "message": "sampling is not available"})
        return cls(error={"code": -32601, "message": "roots are not available"})
