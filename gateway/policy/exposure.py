"""A route's exposure: which tools, prompts and resources its callers see and use.

What a rule hides is answered as a server answers a name it does not have, in the
client's revision: a tool's call ``Unknown tool`` (invalid params, -32602), a
prompt's likewise, a resource's read, subscription or listen "Resource not found"
(-32002 in the handshake era, -32602 in the stateless one), a completion that
refers to a hidden prompt or resource invalid params.  Nothing of it reaches the
upstream.  Lists are filtered, and a page the rule thinned is refilled from the
pages after it, so a client that follows ``nextCursor`` gets every exposed item
once: the cursor handed back is the upstream's own, after the last page read.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

from gateway.core import PAGINATED, Call, Failure, FailureKind, Operation, Outcome, Value
from gateway.policy.rules import Rule
from gateway.protocol import adapter_of

# Upstream pages one list request may read to refill a page the rule thinned: past
# it the page goes out short, its cursor where the reading stopped.
MAX_REFILL_PAGES = 16
# A hidden name echoed in a refusal is cut to this many characters.
MAX_SHOWN = 200

Run = Callable[[Call], Awaitable[Outcome]]

# What names an item of each list: (the rule's kind, the item's field).
_LISTED: dict[Operation, tuple[str, str]] = {
    Operation.TOOLS_LIST: ("tools", "name"),
    Operation.PROMPTS_LIST: ("prompts", "name"),
    Operation.RESOURCES_LIST: ("resources", "uri"),
    Operation.RESOURCES_TEMPLATES_LIST: ("resources", "uriTemplate"),
}
# The parameter that names what each call is about.
_NAMED: dict[Operation, str] = {
    Operation.TOOLS_CALL: "name",
    Operation.PROMPTS_GET: "name",
    Operation.RESOURCES_READ: "uri",
    Operation.RESOURCES_SUBSCRIBE: "uri",
    Operation.RESOURCES_UNSUBSCRIBE: "uri",
}
_RESOURCE_OPERATIONS = frozenset(
    {Operation.RESOURCES_READ, Operation.RESOURCES_SUBSCRIBE, Operation.RESOURCES_UNSUBSCRIBE}
)


@dataclass(frozen=True)
class Exposure:
    """The route's rules (None: that kind is exposed whole)."""

    tools: Rule | None = None
    prompts: Rule | None = None
    resources: Rule | None = None

    def __bool__(self) -> bool:
        return any(rule is not None for rule in (self.tools, self.prompts, self.resources))

    def _rule(self, kind: str) -> Rule | None:
        rule: Rule | None = getattr(self, kind)
        return rule

    # ------------------------------------------------------------- calls

    def refusal(self, call: Call) -> Failure | None:
        """Why ``call`` may not go upstream (None: it may)."""
        op = call.operation
        params = call.params
        malformed = _not_a_name(op, params)
        if malformed is not None:
            return malformed
        if op is Operation.TOOLS_CALL and self.tools is not None:
            name = params.get("name")
            return None if self.tools.allows(name) else _unknown("tool", name)
        if op is Operation.PROMPTS_GET and self.prompts is not None:
            name = params.get("name")
            return None if self.prompts.allows(name) else _unknown("prompt", name)
        if op in _RESOURCE_OPERATIONS and self.resources is not None:
            uri = params.get("uri")
            return None if self.resources.allows(uri) else _missing(uri)
        if op is Operation.COMPLETE:
            return self._completion(params.get("ref"))
        if op is Operation.LISTEN and self.resources is not None:
            return self._listen(call)
        return None

    def _completion(self, ref: Any) -> Failure | None:
        """A completion refers to a prompt (by name) or a resource (by URI or template)."""
        if not isinstance(ref, dict):
            return None
        kind = ref.get("type")
        if kind == "ref/prompt" and self.prompts is not None:
            name = ref.get("name")
            return None if self.prompts.allows(name) else _unknown("prompt", name)
        if kind == "ref/resource" and self.resources is not None:
            uri = ref.get("uri")
            return None if self.resources.allows(uri) else _unknown("resource", uri)
        return None

    def _listen(self, call: Call) -> Failure | None:
        """A listen (the stateless revisions' subscriptions) that watches a hidden resource."""
        adapter = adapter_of(call.client)
        if adapter is None or self.resources is None:
            return None
        try:
            uris = adapter.listen_interest(call.params).uris or ()
        except Failure as failure:
            return failure
        hidden = next((uri for uri in uris if not self.resources.allows(uri)), None)
        return None if hidden is None else _missing(hidden)

    # ------------------------------------------------------------- lists

    def filters(self, call: Call) -> bool:
        """Whether ``call`` lists something a rule thins."""
        listed = _LISTED.get(call.operation)
        return listed is not None and self._rule(listed[0]) is not None

    async def list(self, call: Call, run: Run) -> Outcome:
        """The list ``call`` asks for, read with ``run`` and filtered; a thinned page is
        refilled from the upstream's next pages (at most ``MAX_REFILL_PAGES`` read)."""
        kind, field = _LISTED[call.operation]
        rule = self._rule(kind)
        outcome = await run(call)
        key = PAGINATED[call.operation]
        items = outcome.result.get(key) if isinstance(outcome, Value) else None
        if rule is None or not isinstance(outcome, Value) or not isinstance(items, list):
            return outcome
        wanted = len(items)
        kept = _allowed(rule, items, field)
        last = outcome.result
        for _ in range(MAX_REFILL_PAGES - 1):
            cursor = last.get("nextCursor")
            if len(kept) >= wanted or not isinstance(cursor, str) or not cursor:
                break
            page = await run(replace(call, params={**call.params, "cursor": cursor}))
            more = page.result.get(key) if isinstance(page, Value) else None
            if not isinstance(page, Value) or not isinstance(more, list):
                break  # the client reads on from this cursor and meets the failure itself
            kept.extend(_allowed(rule, more, field))
            last = page.result
        result = {k: v for k, v in outcome.result.items() if k != "nextCursor"}
        result[key] = kept
        if "nextCursor" in last:
            result["nextCursor"] = last["nextCursor"]
        return Value(result)


def _not_a_name(op: Operation, params: dict[str, Any]) -> Failure | None:
    """A name or URI that is not a string, refused before any rule is asked: a rule
    cannot read it, and an upstream that reads names loosely might."""
    if op in _NAMED:
        names = [(_NAMED[op], params.get(_NAMED[op]))]
    elif op is Operation.COMPLETE and isinstance(params.get("ref"), dict):
        ref = params["ref"]
        names = [(key, ref[key]) for key in ("name", "uri") if key in ref]
    else:
        return None
    for key, value in names:
        if value is not None and not isinstance(value, str):
            return Failure(FailureKind.INVALID_PARAMS, f"{key} must be a string")
    return None


def _allowed(rule: Rule, items: list[Any], field: str) -> list[Any]:
    return [item for item in items if isinstance(item, dict) and rule.allows(item.get(field))]


def _shown(name: Any) -> str:
    text = name if isinstance(name, str) else repr(name)
    return text if len(text) <= MAX_SHOWN else text[:MAX_SHOWN] + "..."


def _unknown(kind: str, name: Any) -> Failure:
    return Failure(FailureKind.INVALID_PARAMS, f"Unknown {kind}: {_shown(name)}")


def _missing(uri: Any) -> Failure:
    return Failure(FailureKind.RESOURCE_NOT_FOUND, "Resource not found", {"uri": _shown(uri)})
