"""The cluster store's URL, checked with the settings (gateway/config/store_url.py):
what the cluster code would refuse at start, or misread, is a settings error first,
and no error repeats the store's password, however it is written."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.config.settings import SettingsError, load_settings
from gateway.config.store_url import store_url_problem

GOOD = [
    "memory:",
    "file:///var/lib/gateway",
    "redis://127.0.0.1:6379/0",
    "redis://:p%2Fw@h:6379/0",
    "rediss://default:pw@redis.example:6380/1?ssl_cert_reqs=none",
    "valkey://h/0",
    "unix:///run/redis.sock",
    "redis://h/0?password=a@b",
    "redis+sentinel://:pw@s1:26379,s2:26379/primary/2",
    "redis+cluster://n1:7000,n2:7001",
]
BAD = {
    "http://h:6379": "expected redis://",
    "redis://h:abc/0": "does not parse",
    "redis:///0": "names no host",
    "redis://:ab/cd@h:6379/0": "percent-encode",
    "redis+sentinel://h:26379": "names its service",
    "redis+sentinel://h:26379/svc/x": "DB is a number",
    "redis+sentinel://:p/w@h:26379/svc": "percent-encode",
    "redis+cluster://h": "each host is HOST:PORT",
    "redis+sentinel://h:26379/svc/0?ssl=true": "takes no ?options",
    "redis+cluster://h:7000?x=1": "takes no ?options",
    "redis://h:6379/x": "DB is a number",
    "redis://h:99999/0": "does not parse",
    "unix://:pa/ss@/run/redis.sock": "percent-encode",
    "redis+cluster://": "names no HOST:PORT",
    "unix://": "unix:///PATH",
}


@pytest.mark.parametrize("url", GOOD)
def test_a_store_the_cluster_reads_passes(url: str) -> None:
    assert store_url_problem(url) is None


@pytest.mark.parametrize(("url", "said"), BAD.items())
def test_a_store_it_would_misread_is_refused_in_words(url: str, said: str) -> None:
    problem = store_url_problem(url)
    assert problem is not None and said in problem


PIECES = ("Vb3nPieceA", "Vb3nPieceB")


@settings(max_examples=200)
@given(
    scheme=st.sampled_from(["redis", "rediss", "redis+sentinel", "redis+cluster", "unix"]),
    gap=st.text(st.sampled_from("/?#@:%=&a1"), max_size=5),
    host=st.sampled_from(["h", "h:6379", "h:x", "s1:26379,s2:26379", ""]),
    path=st.sampled_from(["", "/", "/0", "/svc", "/svc/x"]),
)
def test_no_settings_error_shows_the_password(scheme: str, gap: str, host: str, path: str) -> None:
    url = f"{scheme}://:{PIECES[0]}{gap}{PIECES[1]}@{host}{path}"
    try:
        load_settings({"cluster": url})
    except SettingsError as exc:
        assert not any(piece in str(exc) for piece in PIECES), str(exc)
