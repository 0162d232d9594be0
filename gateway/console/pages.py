"""The console's HTML, rendered on the server: every value a client or an upstream
wrote is escaped here (``html.escape``), and no page loads anything from elsewhere."""

from __future__ import annotations

import time
from html import escape
from typing import Any
from urllib.parse import urlencode

from gateway.console.recent import CallRecord

__all__ = ["call_page", "calls_page", "calls_table", "page", "routes_table"]

NAV = (("/routes", "Routes"), ("/calls", "Recent calls"), ("/playground", "Playground"))


def page(title: str, csrf: str, body: str, *, live: str | None = None) -> str:
    """A whole page; ``live`` names the fragment the script refreshes."""
    nav = "".join(
        f'<a href="{href}"{" class=here" if name == title else ""}>{name}</a>' for href, name in NAV
    )
    live_attr = f' data-live="{escape(live)}"' if live else ""
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        f"<title>{escape(title)} · gateway console</title>"
        f'<meta name="console-csrf" content="{escape(csrf)}">'
        '<link rel=stylesheet href="/static/console.css">'
        '<script src="/static/console.js" defer></script></head><body>'
        f"<header><b>MCP gateway</b> console <nav>{nav}</nav></header>"
        f"<main><h1>{escape(title)}</h1><div id=live{live_attr}>{body}</div></main>"
        "</body></html>"
    )


def _when(at: float | None) -> str:
    if at is None:
        return "—"
    return escape(time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(at)))


def routes_table(routes: list[dict[str, Any]]) -> str:
    rows = []
    for r in routes:
        sessions = (
            ", ".join(f"{escape(v)}: {n}" for v, n in sorted(r["sessions"].items())) or "none"
        )
        policy = "<br>".join(escape(p) for p in r["policy"]) or "none"
        shown = _health(r.get("health"))
        rows.append(
            f'<tr data-route="{escape(r["path"])}">'
            f'<td><a href="/calls?{escape(urlencode({"route": r["path"]}))}">'
            f"{escape(r['path'])}</a></td><td>{escape(r['upstream'])}</td>"
            f"<td class=health>{shown}</td>"
            f"<td>{escape(r['transport'] or 'not yet known')}</td>"
            f"<td class=revision>{escape(r['revision'] or 'not yet known')}</td>"
            f"<td class=found>{_when(r['found_at'])}</td><td>{policy}</td>"
            f"<td class=num>{r['calls']}</td><td class=num>{r['failures']}</td>"
            f"<td class=num>{r['refusals']}</td><td class=num>{r['parked']}</td>"
            f"<td>{sessions}</td></tr>"
        )
    head = (
        "<tr><th>Route</th><th>Upstream</th><th>Health</th><th>Transport</th>"
        "<th>Revision found</th>"
        "<th>Found</th><th>Policy</th><th>Calls</th><th>Failures</th>"
        "<th>Refusals</th><th>Parked</th><th>Sessions by client revision</th></tr>"
    )
    return f"<table class=routes>{head}{''.join(rows)}</table>"


def _health(health: dict[str, Any] | None) -> str:
    """Ready or not, why and what to do (a reason and a hint, as the start-up line
    says them), and with several targets each one's state."""
    if health is None:
        return "checking"
    if health.get("ready"):
        shown = "ready"
    else:
        shown = f"<b>not ready</b>: {_why(health)}"
        if "next_start_in_s" in health:
            shown += f" · next start in {escape(str(health['next_start_in_s']))} s"
    targets = health.get("targets")
    if targets:
        items = "".join(_target(t) for t in targets)
        shown += f"<ul class=targets>{items}</ul>"
    return shown


def _why(said: dict[str, Any]) -> str:
    reason = escape(str(said.get("reason") or said.get("error") or ""))
    hint = said.get("hint")
    return f"{reason} <i class=hint>({escape(str(hint))})</i>" if hint else reason


def _target(t: dict[str, Any]) -> str:
    line = f"<code>{escape(str(t.get('target', '')))}</code> <b>{escape(str(t.get('state')))}</b>"
    if t.get("reason"):
        line += f": {_why(t)}"
    if "retry_in" in t:
        line += f" · next try in {escape(str(t['retry_in']))} s"
    return f'<li class="target {escape(str(t.get("state")))}">{line}</li>'


def calls_table(records: list[CallRecord], bodies: bool) -> str:
    note = "" if bodies else "<p class=note>Recording bodies is off (--console-bodies).</p>"
    if not records:
        return note + "<p class=empty>No calls yet.</p>"
    rows = "".join(
        f'<tr class="call {escape(c.outcome)}"><td><a href="/calls/{c.number}">#{c.number}</a></td>'
        f"<td>{_when(c.at)}</td><td>{escape(c.route)}</td>"
        f"<td class=revs>{escape(c.client_revision)} → {escape(c.upstream_revision or '?')}</td>"
        f"<td>{escape(c.method)}</td><td>{escape(c.name or '')}</td>"
        f"<td>{escape(c.outcome)}</td><td class=num>{c.latency_ms}</td>"
        f"<td class=num>{c.answered}/{c.asked}</td><td><code>{escape(c.principal)}</code></td>"
        f"<td><code>{escape(c.trace_id or '')}</code></td></tr>"
        for c in records
    )
    head = (
        "<tr><th>#</th><th>When</th><th>Route</th><th>Client → upstream revision</th>"
        "<th>Method</th><th>Tool / resource</th><th>Outcome</th><th>ms</th>"
        "<th>Answers in / asks out</th><th>Principal</th><th>Trace id</th></tr>"
    )
    return f"{note}<table class=calls>{head}{rows}</table>"


def calls_page(
    filters: dict[str, str], routes: list[str], revisions: list[str], outcomes: list[str]
) -> str:
    def select(name: str, options: list[str]) -> str:
        chosen = filters.get(name, "")
        items = "".join(
            f"<option{' selected' if o == chosen else ''}>{escape(o)}</option>" for o in options
        )
        return (
            f'<label>{name} <select name={name}><option value="">any</option>'
            f"{items}</select></label>"
        )

    return (
        "<form class=filters method=get action=/calls>"
        f"{select('route', routes)}{select('revision', revisions)}{select('outcome', outcomes)}"
        "<button>Filter</button></form>"
    )


def call_page(c: CallRecord) -> str:
    def wire(label: str, text: str | None) -> str:
        shown = escape(text) if text is not None else "<i>not recorded</i>"
        return f"<section class=wire><h2>{escape(label)}</h2><pre>{shown}</pre></section>"

    facts = (
        f"<p class=facts>{escape(c.route)} · <b>{escape(c.client_revision)}</b> client → "
        f"<b>{escape(c.upstream_revision or '?')}</b> upstream · {escape(c.method)} "
        f"{escape(c.name or '')} · {escape(c.outcome)} · {c.latency_ms} ms · principal "
        f"<code>{escape(c.principal)}</code> · trace <code>{escape(c.trace_id or '—')}</code></p>"
    )
    return (
        facts
        + "<div class=wires>"
        + wire("Client sent (decoded)", c.client_sent)
        + wire("Upstream got", c.upstream_got)
        + wire("Client got", c.client_got)
        + wire("Upstream sent", c.upstream_sent)
        + "</div>"
    )
