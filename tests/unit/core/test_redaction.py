"""The one redaction rule, with generated keys, URLs and texts: a canary put where a
secret goes never comes out."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.core.redaction import (
    REDACTED,
    SECRET_NAMES,
    SECRET_PARTS,
    is_secret_key,
    redact,
    safe_command,
    safe_url,
    scrub,
)

CANARY = "CANARYq7Zx"
# Keys an attacker or a careless client writes, in the spellings the issue listed.
SPELLED = [
    "accessToken",
    "refreshToken",
    "clientSecret",
    "x-api-key",
    "api-key",
    "private_key",
    "id_token",
    "sessionToken",
    "Proxy-Authorization",
    "passwd",
    "db_password",
    "Authorization",
    "Cookie",
    "Set-Cookie",
    "requestState",
    "_mcp_state",
    "state",
    "X-API-KEY",
    "client.secret",
    "AWS_SECRET_ACCESS_KEY",
    "signature",
    "credentials",
    "pwd",
]
PLAIN = ["name", "author", "message", "a", "b", "uri", "estate", "keyboard", "statement"]

separators = st.sampled_from(["", "_", "-", ".", " ", "__"])
words = st.sampled_from(sorted({*SECRET_PARTS, *SECRET_NAMES}))


@pytest.mark.parametrize("key", SPELLED)
def test_secret_spellings_are_secret(key: str) -> None:
    assert is_secret_key(key)


@pytest.mark.parametrize("key", PLAIN)
def test_plain_names_are_kept(key: str) -> None:
    assert not is_secret_key(key)


@given(word=words, before=st.text("abcXYZ", max_size=6), sep=separators, data=st.data())
def test_any_case_and_separator_of_a_secret_word_is_secret(
    word: str, before: str, sep: str, data: st.DataObject
) -> None:
    # A word of the rule, in any case, split anywhere by any separator.
    cut = data.draw(st.integers(0, len(word)))
    spelled = word[:cut] + sep + word[cut:]
    spelled = "".join(c.upper() if data.draw(st.booleans()) else c for c in spelled)
    key = spelled if word in SECRET_NAMES else before + sep + spelled
    assert is_secret_key(key)


json_leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8))


@settings(max_examples=200)
@given(
    key=st.sampled_from(SPELLED),
    shape=st.recursive(
        st.dictionaries(st.sampled_from(PLAIN), json_leaf, max_size=3),
        lambda inner: st.one_of(
            st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(PLAIN), inner, max_size=3)
        ),
        max_leaves=10,
    ),
    depth=st.integers(0, 4),
)
def test_a_secret_at_any_depth_is_redacted(key: str, shape: object, depth: int) -> None:
    value: object = {key: {"inner": CANARY} if depth % 2 else CANARY}
    for _ in range(depth):
        value = [shape, {"wrap": value}]
    shown = json.dumps(redact(value))
    assert CANARY not in shown
    assert REDACTED in shown


# What a URL may hold (white space and control characters are no URL's: the one URL
# check refuses them, so no configured or followed URL has them).
url_text = st.text(
    st.characters(blacklist_categories=("Cs", "Cc", "Zs", "Zl", "Zp"), blacklist_characters="/?#@"),
    min_size=1,
    max_size=12,
)


@settings(max_examples=300)
@given(
    scheme=st.sampled_from(["http", "https", "redis", "rediss", "redis+sentinel", "ws", "x"]),
    user=url_text,
    host=url_text,
    path=url_text,
    key=url_text,
    where=st.sampled_from(["password", "query", "fragment", "user"]),
)
def test_a_url_never_shows_its_user_info_or_query_values(
    scheme: str, user: str, host: str, path: str, key: str, where: str
) -> None:
    userinfo = {"password": f"{user}:{CANARY}@", "user": f"{CANARY}@"}.get(where, "")
    query = f"?{key.replace('=', '').replace('&', '')}={CANARY}" if where == "query" else ""
    fragment = f"#{CANARY}" if where == "fragment" else ""
    url = f"{scheme}://{userinfo}{host}/{path}{query}{fragment}"
    assert CANARY not in safe_url(url)
    assert CANARY not in scrub(f"POST {url}: refused")


# A secret written raw, unencoded: '/', '?', '#' and '@' end a URL's user info for
# every URL parser, yet Sentinel's (the last '@') and a person's reading take it whole.
raw_text = st.text(st.sampled_from("/?#@:=&ab9%"), max_size=6)
PIECES = ("Kq7wPieceA", "Kq7wPieceB", "Kq7wPieceC")


@settings(max_examples=400)
@given(
    scheme=st.sampled_from(["http", "https", "redis", "redis+sentinel", "unix"]),
    user=st.sampled_from(["", "u", "default"]),
    gaps=st.tuples(raw_text, raw_text),
    password=st.booleans(),
    host=st.sampled_from(["host", "host:6379", "[::1]:8000", "h1:26379,h2:26379"]),
    path=st.sampled_from(["", "/", "/0", "/mcp", "/svc/1"]),
)
def test_a_raw_secret_is_never_shown_in_any_part(
    scheme: str, user: str, gaps: tuple[str, str], password: bool, host: str, path: str
) -> None:
    if not password:
        # A user name alone, with a raw '/': a path to every parser and to a reader
        # too ("https://server.example/@scope/mcp"); only a ':' before it says user info.
        gaps = (gaps[0].replace("/", ""), gaps[1].replace("/", ""))
    secret = PIECES[0] + gaps[0] + PIECES[1] + gaps[1] + PIECES[2]
    userinfo = f"{user}:{secret}@" if password else f"{secret}@"
    url = f"{scheme}://{userinfo}{host}{path}"
    for shown in (safe_url(url), scrub(f"cannot reach {url}: refused")):
        assert not any(piece in shown for piece in PIECES), (url, shown)


@settings(max_examples=300)
@given(
    scheme=st.sampled_from(["http", "redis", "rediss", "unix"]),
    host=st.sampled_from(["h", "h:6379", "[::1]", "[::1]:8000", "u:p@h:1"]),
    path=st.sampled_from(["", "/", "/0", "/mcp/x"]),
    gaps=st.tuples(raw_text, raw_text),
    where=st.sampled_from(["query", "fragment"]),
)
def test_a_query_or_fragment_secret_with_raw_characters_is_never_shown(
    scheme: str, host: str, path: str, gaps: tuple[str, str], where: str
) -> None:
    # (A raw '&' ends a query value for every parser and server alike: not drawn.)
    gaps = (gaps[0].replace("&", ""), gaps[1].replace("&", ""))
    secret = PIECES[0] + gaps[0] + PIECES[1] + gaps[1] + PIECES[2]
    url = f"{scheme}://{host}{path or '/'}" + (
        f"?password={secret}" if where == "query" else f"#{secret}"
    )
    for shown in (safe_url(url), scrub(f"cannot reach {url}: refused")):
        assert not any(piece in shown for piece in PIECES), (url, shown)


def test_a_url_with_no_user_info_is_shown_whole() -> None:
    for url in ("https://server.example/@scope/mcp", "http://h:8000/mcp", "unix:///run/r.sock"):
        assert safe_url(url) == url


@given(st.text(max_size=200))
def test_scrub_and_safe_url_take_any_text(text: str) -> None:
    scrub(text)
    safe_url(text)


def test_text_keeps_what_is_not_secret() -> None:
    said = scrub("POST http://u:PW@host:8000/mcp?token=T&x=1: refused, see http://a/b.")
    assert (
        said == f"POST http://host:8000/mcp?token={REDACTED}&x={REDACTED}: refused, see http://a/b."
    )
    assert (
        scrub("nothing is listening at u:PW@127.0.0.1:9") == "nothing is listening at 127.0.0.1:9"
    )
    assert scrub("no URL here") == "no URL here"


def test_a_commands_secret_options_are_hidden() -> None:
    argv = ["srv", "--api-key", CANARY, f"--token={CANARY}", "--db", f"postgres://u:{CANARY}@h/x"]
    shown = safe_command(argv)
    assert CANARY not in " ".join(shown)
    assert shown[:2] == ["srv", "--api-key"] and shown[4] == "--db"


def test_a_sealed_state_is_hidden_wherever_it_stands() -> None:
    state = "gw1.eyJkIjoiOGFlNDg3OTM2MzhkNGRkYTY4MTE3ZjE5Yzc4.sig_-x"
    text = f"Call the tool again with `_mcp_state` set to the value below.\n_mcp_state: {state}"
    assert state not in scrub(text)
    assert redact({"content": [{"type": "text", "text": text}]}) == {
        "content": [{"type": "text", "text": text.replace(state, REDACTED)}]
    }
