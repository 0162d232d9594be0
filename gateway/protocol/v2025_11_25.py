"""MCP 2025-11-25: URL elicitation, icons, experimental tasks, sampling with tools."""

from __future__ import annotations

from gateway.core import FailureKind, Operation
from gateway.protocol.v2025_06_18 import Adapter2025_06_18


class Adapter2025_11_25(Adapter2025_06_18):
    version = "2025-11-25"

    methods = Adapter2025_06_18.methods | {
        Operation.TASKS_GET,
        Operation.TASKS_RESULT,
        Operation.TASKS_LIST,
        Operation.TASKS_CANCEL,
    }
    server_notifications = Adapter2025_06_18.server_notifications | {
        "notifications/elicitation/complete",
        "notifications/tasks/status",
    }
    tool_fields = Adapter2025_06_18.tool_fields | {"icons", "execution"}
    resource_fields = Adapter2025_06_18.resource_fields | {"icons"}
    template_fields = Adapter2025_06_18.template_fields | {"icons"}
    prompt_fields = Adapter2025_06_18.prompt_fields | {"icons"}
    implementation_fields = Adapter2025_06_18.implementation_fields | {
        "description",
        "icons",
        "websiteUrl",
    }
    server_capabilities = Adapter2025_06_18.server_capabilities | {"tasks"}
    client_capabilities = Adapter2025_06_18.client_capabilities | {"tasks"}
    client_elicitation_modes = frozenset({"form", "url"})
    flat_elicitation = False  # titled and multi-select enums, defaults everywhere
    primes_streams = True  # SEP-1699: older clients' parsers choke on empty data

    codes = {**Adapter2025_06_18.codes, FailureKind.URL_ELICITATION_REQUIRED: -32042}
