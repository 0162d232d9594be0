"""In the gateway's own process: record every call of a `gateway/` function between two signals.

Installed by ``python -m bench.gwlaunch --trace PATH -- serve ...`` before the
gateway's CLI runs, so the product code carries no hook.  SIGUSR1 switches a
profile function on (`sys.setprofile` for the thread running the event loop,
`threading.setprofile` for threads started later) and writes ``PATH.on`` once it
is on; SIGUSR2 switches it off and writes ``PATH`` (JSON, atomically).

Only frames whose ``co_filename`` lies under the `gateway` package are kept,
in the order they were entered.  A coroutine or generator frame reports a
"call" each time it is resumed, not only when it starts; each record says which
(``fresh``), so `bench.path` can count calls and resumptions apart.  A fresh
call also records its caller: the nearest enclosing `gateway/` frame (None when
the loop or a library started it), so `bench.spine` can count hand-offs between
layers by who called whom.
"""

from __future__ import annotations

import dis
import json
import os
import signal
import sys
import threading
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

import gateway

ROOT = Path(gateway.__file__).resolve().parent
_GENERATOR_LIKE = 0x20 | 0x80 | 0x200  # CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR
_files: dict[str, str | None] = {}  # co_filename -> path under ROOT, None: not gateway's
_starts: dict[CodeType, int] = {}  # generator-like code -> offset of its first RESUME
_events: list[tuple[CodeType, bool, CodeType | None]] = []
# The plain (not coroutine) gateway frames on the stack when tracing starts: the ones
# that run the event loop (``cli._run``).  A call whose nearest gateway frame is one of
# them was started by the loop (a socket's ``data_received``, a task's first step), not
# called by that frame, whatever the loop is written in (uvloop has no Python frames).
_hosts: list[FrameType] = []


def _relative(filename: str) -> str | None:
    try:
        return Path(filename).resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return None


def _first_resume(code: CodeType) -> int:
    for instruction in dis.get_instructions(code):
        if instruction.opname == "RESUME":
            return instruction.offset
    return 0


def _in_gateway(code: CodeType) -> bool:
    filename = code.co_filename
    if filename not in _files:
        _files[filename] = _relative(filename)
    return _files[filename] is not None


def _caller(frame: FrameType) -> CodeType | None:
    """The nearest `gateway/` frame below this one (an awaiting coroutine counts)."""
    back = frame.f_back
    while back is not None and not _in_gateway(back.f_code):
        back = back.f_back
    if back is None or any(back is host for host in _hosts):
        return None
    return back.f_code


def _profile(frame: FrameType, event: str, arg: Any) -> None:
    if event != "call":
        return
    code = frame.f_code
    if not _in_gateway(code):
        return
    fresh = True
    if code.co_flags & _GENERATOR_LIKE:
        start = _starts.get(code)
        if start is None:
            start = _starts[code] = _first_resume(code)
        fresh = frame.f_lasti <= start
    _events.append((code, fresh, _caller(frame) if fresh else None))


def _on(path: Path, frame: FrameType | None) -> None:
    _events.clear()
    _hosts.clear()
    while frame is not None:
        if _in_gateway(frame.f_code) and not frame.f_code.co_flags & _GENERATOR_LIKE:
            _hosts.append(frame)
        frame = frame.f_back
    threading.setprofile(_profile)
    sys.setprofile(_profile)
    path.with_name(path.name + ".on").write_text(str(os.getpid()))


def _off(path: Path) -> None:
    sys.setprofile(None)
    threading.setprofile(None)
    records = [
        [_files[code.co_filename], code.co_qualname, code.co_firstlineno, fresh, _where(caller)]
        for code, fresh, caller in _events
    ]
    _events.clear()
    report = {"root": str(ROOT), "python": sys.version.split()[0], "events": records}
    scratch = path.with_name(path.name + ".tmp")
    scratch.write_text(json.dumps(report))
    os.replace(scratch, path)


def _where(code: CodeType | None) -> list[Any] | None:
    return (
        None if code is None else [_files[code.co_filename], code.co_qualname, code.co_firstlineno]
    )


def install(path: Path) -> None:
    """SIGUSR1: start recording; SIGUSR2: stop and write ``path``."""
    signal.signal(signal.SIGUSR1, lambda signum, frame: _on(path, frame))
    signal.signal(signal.SIGUSR2, lambda signum, frame: _off(path))
