"""The playground's HTML: the picker, the lists (a form per tool built from its input
schema), and a call's state (the questions it is asked, its outcome, its wire).
Everything the route or its upstream wrote is escaped."""

from __future__ import annotations

from html import escape
from typing import Any

import orjson

from gateway.console.playground import Run
from gateway.console.recent import redact
from gateway.core import Ask, AskKind, Failure, InputRequired, Value

__all__ = ["lists", "picker", "run_fragment"]

FIELD_TYPES = {"string", "number", "integer", "boolean"}


def _options(values: list[str]) -> str:
    return "".join(f"<option>{escape(v)}</option>" for v in values)


def picker(routes: list[str], revisions: list[str]) -> str:
    return (
        "<form class=picker method=post action=/playground/list data-target=lists>"
        f"<label>Route <select name=route>{_options(routes)}</select></label>"
        f"<label>Client revision <select name=revision>{_options(revisions)}</select></label>"
        "<button>List tools, resources and prompts</button></form>"
        "<div id=lists></div><div id=run></div>"
    )


def _field(prefix: str, name: str, schema: Any, required: bool) -> str:
    kind = schema.get("type") if isinstance(schema, dict) else None
    kind = kind if kind in FIELD_TYPES else "json"
    title = schema.get("description", "") if isinstance(schema, dict) else ""
    key = escape(f"{prefix}{name}")
    if kind == "boolean":
        control = f'<input type=checkbox name="{key}" value=true>'
    elif kind == "json":
        control = f'<textarea name="{key}" rows=2 placeholder="JSON"></textarea>'
    else:
        html_type = "number" if kind in ("number", "integer") else "text"
        step = " step=any" if kind == "number" else ""
        need = " required" if required else ""
        control = f'<input type={html_type}{step} name="{key}"{need}>'
    return (
        f'<label title="{escape(str(title))}">{escape(name)}{" *" if required else ""} '
        f'{control}<input type=hidden name="{escape("type:" + prefix + name)}" value={kind}>'
        "</label>"
    )


def _fields(prefix: str, schema: Any) -> str:
    if not isinstance(schema, dict):
        return ""
    props = schema.get("properties")
    required = schema.get("required") or []
    if not isinstance(props, dict):
        return ""
    return "".join(_field(prefix, str(n), s, n in required) for n, s in props.items())


def _call_form(route: str, revision: str, method: str, target: str, fields: str, label: str) -> str:
    return (
        "<form class=item method=post action=/playground/call data-target=run>"
        f'<input type=hidden name=route value="{escape(route)}">'
        f'<input type=hidden name=revision value="{escape(revision)}">'
        f'<input type=hidden name=method value="{escape(method)}">'
        f'<input type=hidden name=target value="{escape(target)}">'
        f"<b>{escape(target)}</b> {fields} <button>{escape(label)}</button></form>"
    )


def lists(route: str, revision: str, found: dict[str, Any]) -> str:
    parts = [f"<h2>{escape(route)} as a {escape(revision)} client</h2>"]
    for what, key, method, label in (
        ("tools", "tools", "tools/call", "Call"),
        ("resources", "resources", "resources/read", "Read"),
        ("prompts", "prompts", "prompts/get", "Get"),
    ):
        result = found.get(what)
        if isinstance(result, str):
            parts.append(f"<h3>{what}</h3><p class=note>{escape(result)}</p>")
            continue
        items = result.get(key, []) if isinstance(result, dict) else []
        forms = []
        for item in items if isinstance(items, list) else []:
            if not isinstance(item, dict):
                continue
            target = str(item.get("uri" if what == "resources" else "name", ""))
            if what == "tools":
                fields = _fields("arg:", item.get("inputSchema"))
            elif what == "prompts":
                args = item.get("arguments") or []
                schema = {
                    "properties": {
                        a.get("name"): {"type": "string"} for a in args if isinstance(a, dict)
                    },
                    "required": [
                        a.get("name") for a in args if isinstance(a, dict) and a.get("required")
                    ],
                }
                fields = _fields("arg:", schema)
            else:
                fields = ""
            forms.append(_call_form(route, revision, method, target, fields, label))
        parts.append(f"<h3>{what} ({len(forms)})</h3>" + ("".join(forms) or "<p>none</p>"))
    return "".join(parts)


def _question(run: Run, key: str, ask: Ask) -> str:
    k = escape(key)
    if ask.kind is AskKind.ELICIT:
        schema = ask.params.get("requestedSchema")
        body = (
            f"<p class=ask>{escape(str(ask.params.get('message', '')))}</p>"
            + _fields(f"ans:{key}:", schema)
            + f'<button name="action:{k}" value=accept>Accept</button>'
            f'<button name="action:{k}" value=decline>Decline</button>'
        )
    elif ask.kind is AskKind.SAMPLE:
        shown = orjson.dumps(ask.params.get("messages"), option=orjson.OPT_INDENT_2).decode()
        body = (
            f"<p class=ask>The route asks for a completion of:</p><pre>{escape(shown)}</pre>"
            f'<textarea name="sample:{k}" rows=3 placeholder="your reply"></textarea>'
            f'<button name="action:{k}" value=accept>Send</button>'
        )
    else:
        body = f'<button name="action:{k}" value=accept>Send no roots</button>'
    return (
        f"<form class=question method=post action=/playground/run/{escape(run.id)}/answer "
        f"data-target=run><h3>{escape(ask.kind.value)}</h3>{body}</form>"
    )


def _json(message: Any) -> str:
    shown = orjson.dumps(redact(message), option=orjson.OPT_INDENT_2, default=str).decode()
    return shown[:8000]


def _wire(run: Run) -> str:
    items = "".join(
        f"<div class='msg {direction}'><b>{'→ sent' if direction == 'sent' else '← got'}</b>"
        f"<pre>{escape(_json(message))}</pre></div>"
        for direction, message in run.wire
    )
    return (
        f"<section class=wire><h2>Playground client ({escape(run.revision)})</h2>{items}</section>"
    )


def _outcome(run: Run) -> str:
    outcome = run.outcome
    if run.error is not None:
        return f"<p class=failure>{escape(run.error)}</p>"
    if isinstance(outcome, Failure):
        return f"<p class=failure>{escape(outcome.kind.value)}: {escape(outcome.message)}</p>"
    if isinstance(outcome, Value):
        texts = [
            c.get("text")
            for c in outcome.result.get("content", []) or []
            if isinstance(c, dict) and isinstance(c.get("text"), str)
        ]
        shown = "".join(f"<p class=result-text>{escape(str(t))}</p>" for t in texts)
        return shown or "<p class=result-text>(a result without text)</p>"
    if isinstance(outcome, InputRequired):
        return "<p class=failure>the call still needed input after the last round</p>"
    return ""


def run_fragment(run: Run, upstream: str | None) -> str:
    target = str(run.params.get("name") or run.params.get("uri") or "")
    head = (
        f"<h2>{escape(run.method)} {escape(target)} on {escape(run.route)} "
        f"as {escape(run.revision)}</h2>"
    )
    if run.questions:
        body = "".join(_question(run, key, ask) for key, ask in run.questions.items())
        return f"<div class=run data-state=asking>{head}{body}{_wire_pair(run, upstream)}</div>"
    if not run.done:
        return (
            f'<div class=run data-state=running data-poll="/playground/run/{escape(run.id)}">'
            f"{head}<p>running…</p></div>"
        )
    return f"<div class=run data-state=done>{head}{_outcome(run)}{_wire_pair(run, upstream)}</div>"


def _wire_pair(run: Run, upstream: str | None) -> str:
    right = ""
    if upstream:
        right = (
            "<section class=wire><h2>What the gateway recorded of it</h2>"
            f"<pre>{escape(upstream)}</pre></section>"
        )
    return f"<div class=wires>{_wire(run)}{right}</div>"
