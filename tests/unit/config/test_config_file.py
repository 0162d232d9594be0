"""The TOML config file: read once, every problem one line naming the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.config.config_file import SettingsError, read_config_file


def test_a_config_file_is_read_as_toml(tmp_path: Path) -> None:
    path = tmp_path / "gateway.toml"
    path.write_text('listen = "127.0.0.1:1"\n[[routes]]\npath = "/a"\nupstream = "stdio:x"\n')
    assert read_config_file(path) == {
        "listen": "127.0.0.1:1",
        "routes": [{"path": "/a", "upstream": "stdio:x"}],
    }


@pytest.mark.parametrize(
    ("text", "said"),
    [(None, "not found"), ("listen = ", "not valid TOML"), ('config = "x"', "cannot be set")],
)
def test_a_config_file_that_cannot_be_used_is_one_line(
    tmp_path: Path, text: str | None, said: str
) -> None:
    path = tmp_path / "gateway.toml"
    if text is not None:
        path.write_text(text)
    with pytest.raises(SettingsError, match=said) as caught:
        read_config_file(path)
    assert str(path) in str(caught.value) and "\n" not in str(caught.value)
