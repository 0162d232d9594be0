"""Elicitation schemas fit the client's revision (issue #15, item 7).

`@modelcontextprotocol/server-everything` sends 2025-11-25 elicitation schemas (titled
single- and multi-select enums, defaults on every kind) whatever revision the session
speaks.  The official Python client 1.22.0 speaks 2025-06-18, whose schema knows plain
primitives, `enum` + `enumNames`, and defaults on booleans only.  Directly it gets the
newer forms; through the gateway it gets the schema projected onto 2025-06-18 (titled
enums as `enum` + `enumNames`, the optional multi-selects left out), and the call
completes either way.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from peers.registry import peer, require_installed
from peers.thirdparty import SERVER_EVERYTHING
from peers.thirdparty import require_installed as require_thirdparty

from tests.e2e.gateway_proc import gateway

pytestmark = pytest.mark.interop

CLIENT = "python-1.22.0-client"
SCRIPT = Path(__file__).with_name("elicit_client.py")
TOOL = "trigger-elicitation-request"
# What a 2025-06-18 elicitation field may say (its schema.json, PrimitiveSchemaDefinition).
KEYS_0618 = {
    "string": {"type", "title", "description", "minLength", "maxLength", "format"},
    "number": {"type", "title", "description", "minimum", "maximum"},
    "integer": {"type", "title", "description", "minimum", "maximum"},
    "boolean": {"type", "title", "description", "default"},
    "enum": {"type", "title", "description", "enum", "enumNames"},
}


def run(url: str) -> dict[str, Any]:
    python = peer(CLIENT).argv[0]
    done = subprocess.run(
        [python, str(SCRIPT), url, TOOL], capture_output=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    out: dict[str, Any] = json.loads(done.stdout.decode().strip().splitlines()[-1])
    return out


def off_revision(schema: dict[str, Any]) -> list[str]:
    """The fields (and keys) of a requestedSchema that 2025-06-18 does not define."""
    found = [f"top-level {key}" for key in schema if key not in ("type", "properties", "required")]
    for name, prop in schema["properties"].items():
        kind = "enum" if prop.get("type") == "string" and "enum" in prop else prop.get("type")
        extra = set(prop) - KEYS_0618.get(kind, set())
        if kind not in KEYS_0618 or extra:
            found.append(f"{name}: {sorted(extra) or kind}")
    return found


def test_a_2025_06_18_client_gets_a_2025_06_18_schema(
    everything_urls: dict[str, str], tmp_path: Path
) -> None:
    require_installed(peer(CLIENT))
    require_thirdparty(SERVER_EVERYTHING)
    url = everything_urls["streamable-http"]
    direct = run(url)
    assert direct["protocolVersion"] == "2025-06-18"
    assert len(direct["schemas"]) == 1
    assert off_revision(direct["schemas"][0])  # the control: newer forms, directly
    with gateway(f"/mcp={url},timeout=20", tmp_path=tmp_path) as gw:
        via = run(gw.url("/mcp"))
    assert via["protocolVersion"] == "2025-06-18"
    assert "error" not in via and not via["isError"], via
    assert "Name: Ada" in via["text"], via["text"]
    [schema] = via["schemas"]
    assert off_revision(schema) == [], json.dumps(schema, indent=1)
    props = schema["properties"]
    assert props["titledSingleSelectEnum"]["enum"] == ["hero-1", "hero-2", "hero-3"]
    assert props["titledSingleSelectEnum"]["enumNames"] == [
        "Superman",
        "Green Lantern",
        "Wonder Woman",
    ]
    assert "untitledMultipleSelectEnum" not in props  # optional, with no 2025-06-18 form
    assert "titledMultipleSelectEnum" not in props
    assert schema["required"] == ["name"]
