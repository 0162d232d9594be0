"""The sealed `requestState`: it opens only for the call, caller and route it was issued to.

Every refusal is a Failure of kind INVALID_PARAMS (the client's adapter renders
it as -32602) whose message says why; nothing else ever escapes `open`.
"""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.bridge.state import PREFIX, StateSealer, params_digest
from gateway.core import Call, ClientContext, Failure, FailureKind, Operation

ROUTE = "/mcp"
ALICE = "principal-alice"
BODY = {"k": "parked", "i": "call-1", "n": 1}


def make_call(
    name: str = "ask_name",
    arguments: dict[str, Any] | None = None,
    method: str = "tools/call",
) -> Call:
    params: dict[str, Any] = {"name": name, "arguments": arguments or {"x": 1}}
    return Call(
        id=7,
        operation=Operation.for_method(method),
        method=method,
        params=params,
        client=ClientContext(protocol_version="2026-07-28"),
    )


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _parts(token: str) -> tuple[str, str]:
    assert token.startswith(PREFIX)
    body, tag = token[len(PREFIX) :].split(".")
    return body, tag


def refused(
    sealer: StateSealer,
    token: str,
    call: Call | None = None,
    route: str = ROUTE,
    principal: str = ALICE,
) -> Failure:
    with pytest.raises(Failure) as caught:
        sealer.open(token, call or make_call(), route, principal)
    failure = caught.value
    assert failure.kind is FailureKind.INVALID_PARAMS, failure
    return failure


@pytest.fixture
def sealer() -> StateSealer:
    return StateSealer(key=b"k" * 32, ttl=60.0)


# --------------------------------------------------------------------------- valid


def test_round_trip_returns_the_body_and_the_bindings(sealer: StateSealer) -> None:
    call = make_call()
    token = sealer.seal(call, ROUTE, ALICE, BODY)
    assert StateSealer.is_ours(token)
    claims = sealer.open(token, call, ROUTE, ALICE)
    assert {k: claims[k] for k in BODY} == BODY
    assert claims["r"] == ROUTE
    assert claims["p"] == ALICE
    assert claims["m"] == "tools/call"
    assert claims["d"] == params_digest(call)


def test_an_equal_call_decoded_again_opens(sealer: StateSealer) -> None:
    """The retry is a new Call object with the same method and params: it opens."""
    token = sealer.seal(make_call(arguments={"a": 1, "b": 2}), ROUTE, ALICE, BODY)
    retry = make_call(arguments={"b": 2, "a": 1})  # key order does not matter
    retry.id = "another-id"  # nor does the JSON-RPC id
    assert sealer.open(token, retry, ROUTE, ALICE)["i"] == "call-1"


def test_a_fresh_token_every_seal_opens_independently(sealer: StateSealer) -> None:
    call = make_call()
    first = sealer.seal(call, ROUTE, ALICE, {**BODY, "n": 1})
    second = sealer.seal(call, ROUTE, ALICE, {**BODY, "n": 2})
    assert first != second
    assert sealer.open(first, call, ROUTE, ALICE)["n"] == 1
    assert sealer.open(second, call, ROUTE, ALICE)["n"] == 2


# --------------------------------------------------------------------------- forged


def test_tampered_payload_is_refused(sealer: StateSealer) -> None:
    token = sealer.seal(make_call(), ROUTE, ALICE, BODY)
    body, tag = _parts(token)
    claims = json.loads(_unb64(body))
    claims["i"] = "someone-elses-call"
    forged = PREFIX + _b64(json.dumps(claims, sort_keys=True).encode()) + "." + tag
    failure = refused(sealer, forged)
    assert "not valid" in failure.message
    assert "tampered" in failure.message


def test_payload_with_one_character_changed_is_refused(sealer: StateSealer) -> None:
    token = sealer.seal(make_call(), ROUTE, ALICE, BODY)
    body, tag = _parts(token)
    flipped = body[:5] + ("A" if body[5] != "A" else "B") + body[6:]
    assert "not valid" in refused(sealer, PREFIX + flipped + "." + tag).message


def test_tampered_tag_is_refused(sealer: StateSealer) -> None:
    token = sealer.seal(make_call(), ROUTE, ALICE, BODY)
    body, tag = _parts(token)
    raw = bytearray(_unb64(tag))
    raw[0] ^= 0x01
    failure = refused(sealer, PREFIX + body + "." + _b64(bytes(raw)))
    assert "not valid" in failure.message


def test_truncated_tag_is_refused(sealer: StateSealer) -> None:
    token = sealer.seal(make_call(), ROUTE, ALICE, BODY)
    assert "not valid" in refused(sealer, token[:-4]).message


def test_a_token_of_another_key_is_refused(sealer: StateSealer) -> None:
    other = StateSealer(key=b"o" * 32, ttl=60.0)
    token = other.seal(make_call(), ROUTE, ALICE, BODY)
    assert "not issued here" in refused(sealer, token).message


@pytest.mark.parametrize(
    "garbage",
    [
        "",
        PREFIX,
        PREFIX + ".",
        PREFIX + "garbage",
        PREFIX + "a.b.c",
        PREFIX + "!!!.???",
        PREFIX + "été.ünï",
        PREFIX + "\x00\x01.\x02",
        "not a token at all",
    ],
)
def test_garbage_is_refused(sealer: StateSealer, garbage: str) -> None:
    assert "not valid" in refused(sealer, garbage).message


def test_a_valid_signature_over_something_not_an_object_is_refused(sealer: StateSealer) -> None:
    """Only reachable with the key: the check is still there."""
    import hashlib
    import hmac

    payload = b"[1, 2, 3]"
    tag = hmac.new(sealer.key, payload, hashlib.sha256).digest()
    token = PREFIX + _b64(payload) + "." + _b64(tag)
    assert "not valid" in refused(sealer, token).message


@pytest.mark.parametrize("prefix", ["gw0.", "gw2.", "GW1.", "xx1.", "", "gw1"])
def test_wrong_prefix_is_refused(sealer: StateSealer, prefix: str) -> None:
    token = sealer.seal(make_call(), ROUTE, ALICE, BODY)
    body, tag = _parts(token)
    other = prefix + body + "." + tag
    assert not StateSealer.is_ours(other)
    assert "not valid" in refused(sealer, other).message


def test_is_ours_only_for_strings_with_the_prefix() -> None:
    assert StateSealer.is_ours(PREFIX + "x")
    assert not StateSealer.is_ours("upstream-own-state")
    assert not StateSealer.is_ours(None)


# --------------------------------------------------------------------------- expired


def test_expired_is_refused() -> None:
    sealer = StateSealer(key=b"k" * 32, ttl=-5.0)
    token = sealer.seal(make_call(), ROUTE, ALICE, BODY)
    assert "expired" in refused(sealer, token).message


def test_expiry_follows_the_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1_000_000.0]
    monkeypatch.setattr(time, "time", lambda: now[0])
    sealer = StateSealer(key=b"k" * 32, ttl=30.0)
    call = make_call()
    token = sealer.seal(call, ROUTE, ALICE, BODY)
    now[0] += 29.0
    assert sealer.open(token, call, ROUTE, ALICE)["i"] == "call-1"
    now[0] += 2.0
    assert "expired" in refused(sealer, token, call).message


# --------------------------------------------------------------------------- foreign


def test_other_route_is_refused(sealer: StateSealer) -> None:
    token = sealer.seal(make_call(), ROUTE, ALICE, BODY)
    failure = refused(sealer, token, route="/other")
    assert "another caller" in failure.message


def test_other_principal_is_refused(sealer: StateSealer) -> None:
    token = sealer.seal(make_call(), ROUTE, ALICE, BODY)
    failure = refused(sealer, token, principal="principal-mallory")
    assert "another caller" in failure.message


def test_anonymous_cannot_use_a_principals_state(sealer: StateSealer) -> None:
    token = sealer.seal(make_call(), ROUTE, ALICE, BODY)
    assert "another caller" in refused(sealer, token, principal="anonymous").message


def test_other_method_is_refused(sealer: StateSealer) -> None:
    token = sealer.seal(make_call(), ROUTE, ALICE, BODY)
    failure = refused(sealer, token, make_call(method="prompts/get"))
    assert "different request" in failure.message
    assert "method" in failure.message


def test_other_tool_is_refused(sealer: StateSealer) -> None:
    token = sealer.seal(make_call(), ROUTE, ALICE, BODY)
    failure = refused(sealer, token, make_call(name="delete_everything"))
    assert "different request" in failure.message


def test_other_arguments_are_refused(sealer: StateSealer) -> None:
    token = sealer.seal(make_call(arguments={"x": 1}), ROUTE, ALICE, BODY)
    failure = refused(sealer, token, make_call(arguments={"x": 2}))
    assert "different request" in failure.message
    assert "params" in failure.message


def test_extra_argument_is_refused(sealer: StateSealer) -> None:
    token = sealer.seal(make_call(arguments={"x": 1}), ROUTE, ALICE, BODY)
    assert (
        "different request" in refused(sealer, token, make_call(arguments={"x": 1, "y": 0})).message
    )


# --------------------------------------------------------------------------- fuzz

_B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_="


@settings(max_examples=400, deadline=None)
@given(
    st.one_of(
        st.text(max_size=200),
        st.text(max_size=200).map(lambda s: PREFIX + s),
        st.tuples(st.text(alphabet=_B64, max_size=120), st.text(alphabet=_B64, max_size=60)).map(
            lambda parts: PREFIX + parts[0] + "." + parts[1]
        ),
        st.binary(max_size=120).map(lambda b: PREFIX + _b64(b) + "." + _b64(b[:32])),
    )
)
def test_random_strings_never_open(token: str) -> None:
    sealer = StateSealer(key=b"f" * 32, ttl=60.0)
    call = make_call()
    try:
        sealer.open(token, call, ROUTE, ALICE)
    except Failure as failure:
        assert failure.kind is FailureKind.INVALID_PARAMS
        assert failure.message
    else:  # pragma: no cover - a forgery
        pytest.fail(f"a random string opened: {token!r}")
