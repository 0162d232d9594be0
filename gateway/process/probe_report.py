"""`gateway probe`: what an upstream MCP server is and offers, as a report."""

from __future__ import annotations

import shlex
from typing import Any

import aiohttp

from gateway import __version__
from gateway.core import Call, ClientContext, Exchange, Failure, FailureKind, Operation, Value
from gateway.protocol import AdapterSet
from gateway.upstream.link import UpstreamLink, UpstreamSettings, Verdict

# Pagination guard: a server that never stops paging is reported, not followed.
MAX_PAGES = 1000
# How the report names the transport it found.


async def probe_upstream(
    settings: UpstreamSettings, adapters: AdapterSet, headers: dict[str, str]
) -> dict[str, Any]:
    """What `gateway probe` reports of an upstream: its era, revision, transport,
    identity, capabilities and how many of each list it offers."""
    async with aiohttp.ClientSession(
        timeout=aiohttp.ClientTimeout(total=None), headers=headers
    ) as http:
        link = UpstreamLink(settings, adapters, http)
        try:
            verdict = await link.ensure("anonymous", {})
            return {
                "upstream": settings.url or shlex.join(settings.command or []),
                "era": "legacy" if verdict.adapter.has_handshake else "modern",
                "revision": verdict.adapter.version,
                "transport": verdict.transport,
                "supported_revisions": list(verdict.profile.versions),
                "server_info": verdict.profile.info,
                "capabilities": verdict.profile.capabilities,
                "instructions": verdict.profile.instructions,
                "counts": await _counts(link, verdict),
            }
        finally:
            await link.close()


# What `probe` counts: (list operation, capability that declares it, result key).
LISTS = {
    "tools": (Operation.TOOLS_LIST, "tools", "tools"),
    "resources": (Operation.RESOURCES_LIST, "resources", "resources"),
    "resource_templates": (Operation.RESOURCES_TEMPLATES_LIST, "resources", "resourceTemplates"),
    "prompts": (Operation.PROMPTS_LIST, "prompts", "prompts"),
}


async def _counts(link: UpstreamLink, verdict: Verdict) -> dict[str, int | None]:
    """How many of each the upstream lists, every page followed (None: it declares
    no such capability)."""
    counts: dict[str, int | None] = {}
    client = ClientContext(
        protocol_version=verdict.adapter.version,
        info={"name": "gateway-probe", "version": __version__},
    )
    for name, (operation, capability, key) in LISTS.items():
        if capability not in verdict.profile.capabilities:
            counts[name] = None
            continue
        total, cursor = 0, None
        for page in range(1, MAX_PAGES + 1):
            params: dict[str, Any] = {"cursor": cursor} if cursor is not None else {}
            call = Call(
                id=page, operation=operation, method=operation.value, params=params, client=client
            )
            outcome = await link.handle(
                call, Exchange(call=call, route="probe", profile=verdict.profile)
            )
            if isinstance(outcome, Failure):
                raise outcome
            if not isinstance(outcome, Value):
                raise Failure(FailureKind.UPSTREAM_PROTOCOL, f"{operation.value} asked for input")
            items = outcome.result.get(key)
            total += len(items) if isinstance(items, list) else 0
            cursor = outcome.result.get("nextCursor")
            if not cursor:
                break
        counts[name] = total
    return counts


def as_text(report: dict[str, Any]) -> str:
    """The report as aligned lines, for a person."""
    info = report["server_info"] or {}
    name = info.get("name", "?")
    server_version = info.get("version", "?")
    counts = report["counts"]
    lines = [
        f"upstream:            {report['upstream']}",
        f"era:                 {report['era']}",
        f"revision:            {report['revision']}",
        f"transport:           {report['transport']}",
        f"supported revisions: {', '.join(report['supported_revisions']) or '-'}",
        f"server:              {name} {server_version}",
        f"capabilities:        {', '.join(sorted(report['capabilities'])) or '-'}",
    ]
    for key, value in counts.items():
        label = key.replace("_", " ") + ":"
        lines.append(f"{label:<21}{'-' if value is None else value}")
    return "\n".join(lines)
