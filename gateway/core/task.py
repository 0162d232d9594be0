"""A task, as both tasks designs describe it, in the gateway's own words."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# What a task may tell about itself besides its id, in neutral names.  A fact the
# upstream did not give stays absent; an unlimited lifetime stays None.
TASK_FACTS = (
    "status",
    "status_message",
    "created_at",
    "last_updated_at",
    "ttl_ms",
    "poll_interval_ms",
)
# Statuses (both designs share them).
TERMINAL = frozenset({"completed", "failed", "cancelled"})
# Terminal statuses whose outcome the task's result tells.
WITH_RESULT = frozenset({"completed", "failed"})
INPUT_REQUIRED = "input_required"


@dataclass(frozen=True, slots=True)
class Task:
    """One task: its id and the facts (keys of TASK_FACTS) its server gave."""

    id: str
    facts: dict[str, Any] = field(default_factory=dict)

    @property
    def status(self) -> Any:
        return self.facts.get("status")
