"""The operations a client message may ask for, by its method name."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.core import Operation


@pytest.mark.parametrize("operation", [op for op in Operation if op is not Operation.OTHER])
def test_each_defined_method_names_its_operation(operation: Operation) -> None:
    assert Operation.for_method(operation.value) is operation
    assert operation.is_notification is operation.value.startswith("notifications/")


@pytest.mark.parametrize("method", ["acme/frobnicate", "", "TOOLS/LIST", "*", 5, None, ["ping"]])
def test_any_other_method_is_forwarded_as_other(method: Any) -> None:
    assert Operation.for_method(method) is Operation.OTHER
