"""The pass-through lane's rule on answers (``verbatim_result``): whatever it lets
through is exactly what the full path's projection would have made of it."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.core import Operation, ServerProfile
from gateway.protocol.selection import DEFAULT_ADAPTERS
from gateway.protocol.v2024_11_05 import Adapter2024_11_05
from gateway.protocol.v2025_03_26 import Adapter2025_03_26
from gateway.protocol.v2026_07_28 import Adapter2026_07_28

SERVER_INFO = "io.modelcontextprotocol/serverInfo"
PROFILE = ServerProfile(info={"name": "up", "version": "1", "secret": "x"})
ADAPTER = Adapter2026_07_28()

_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=5))
_json = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)
_block = st.one_of(
    st.fixed_dictionaries(
        {"type": st.sampled_from(["text", "image", "audio", "resource", "resource_link", "x", 3])},
        optional={
            "text": st.text(max_size=5),
            "_meta": _json,
            "annotations": _json,
            "icons": _json,
        },
    ),
    _json,
)
_meta = st.one_of(
    st.dictionaries(st.sampled_from([SERVER_INFO, "a", "b"]), _json, max_size=3), _json
)
_fields = {
    "content": st.lists(_block, max_size=3) | _json,
    "structuredContent": _json,
    "isError": st.booleans(),
    "_meta": _meta,
    "resultType": st.sampled_from(["complete", "input_required", "task", "other"]),
    "description": st.text(max_size=5),
    "messages": st.lists(
        st.fixed_dictionaries({"role": st.just("user"), "content": _block}) | _json, max_size=3
    )
    | _json,
    "ttlMs": st.integers(),
    "requestState": st.text(max_size=5),
    "unknown": _json,
}
_result = st.fixed_dictionaries({}, optional=_fields)


@settings(max_examples=600)
@given(
    adapter=st.sampled_from([kind() for kind in DEFAULT_ADAPTERS]),
    operation=st.sampled_from([Operation.TOOLS_CALL, Operation.PROMPTS_GET]),
    result=_result,
)
def test_what_passes_is_what_the_projection_makes(
    adapter: Any, operation: Operation, result: dict[str, Any]
) -> None:
    """For every revision: a result let through equals its full-path projection."""
    message = {"jsonrpc": "2.0", "id": 1, "result": result}
    passed = adapter.verbatim_result(operation, message, PROFILE)
    if passed is not None:
        assert operation in adapter.verbatim_operations
        assert passed == adapter.project_result(operation, result, PROFILE)


def test_the_usual_answers_pass() -> None:
    """Not a rule that refuses everything: the common shapes go through, and the two
    defaults are filled in."""
    plain = {"content": [{"type": "text", "text": "hi"}]}
    message = {"jsonrpc": "2.0", "id": 1, "result": plain}
    passed = ADAPTER.verbatim_result(Operation.TOOLS_CALL, message, PROFILE)
    assert passed == ADAPTER.project_result(Operation.TOOLS_CALL, plain, PROFILE)
    assert passed is not None and passed["resultType"] == "complete"
    named = {**plain, "resultType": "complete", "_meta": {SERVER_INFO: {"name": "up"}}}
    message = {"jsonrpc": "2.0", "id": 1, "result": named}
    assert ADAPTER.verbatim_result(Operation.TOOLS_CALL, message, PROFILE) is named
    prompt = {"messages": [{"role": "user", "content": {"type": "text", "text": "q"}}]}
    message = {"jsonrpc": "2.0", "id": 1, "result": prompt}
    assert ADAPTER.verbatim_result(Operation.PROMPTS_GET, message, PROFILE) is not None


def test_what_takes_the_full_path() -> None:
    def passes(result: Any, operation: Operation = Operation.TOOLS_CALL) -> bool:
        message = {"jsonrpc": "2.0", "id": 1, "result": result}
        return ADAPTER.verbatim_result(operation, message, PROFILE) is not None

    assert not passes({"resultType": "input_required", "requestState": "s"})
    assert not passes({"resultType": "task"})
    assert not passes({"content": [{"type": "video"}]})  # a type this revision lacks
    assert not passes({"content": [], "vendor": 1})  # a field the projection may rework
    assert not passes({"content": []}, Operation.TOOLS_LIST)  # not a verbatim operation
    assert not passes([1])
    error = {"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": "boom"}}
    assert ADAPTER.verbatim_result(Operation.TOOLS_CALL, error, PROFILE) is None


def test_revisions_whose_blocks_are_reworked_pass_nothing() -> None:
    """Before 2025-06-18 a block's ``_meta`` and annotations are projected away: the
    full path's to do."""
    plain = {"jsonrpc": "2.0", "id": 1, "result": {"content": []}}
    for adapter in (Adapter2025_03_26(), Adapter2024_11_05()):
        assert not adapter.verbatim_operations
        assert adapter.verbatim_result(Operation.TOOLS_CALL, plain, PROFILE) is None
