"""Who calls whom across layers on one traced round: the figures of issue 38.

`bench.path` counts files; a reader feels something else: how often a call
crosses from one layer into another, through how many doors, and whether it
ever calls back up.  Each fresh call in the trace carries its caller (the
nearest `gateway/` frame), so these are counted by caller, not by file order.

Layers: a top-level module is a layer (``cli.py`` -> ``cli``), a package is one
(``bridge/`` -> ``bridge``), ``upstream/carriers/`` is one of its own; ``core/``
and ``wire/`` are vocabulary, not layers, and calls into or out of them are not
counted.  The order of layers, from the outermost down, is the import-linter
``layers`` contract in pyproject.toml (carriers just below ``upstream``).

* hand-off: a fresh call whose caller and callee lie in different layers;
* door: a distinct function through which the round enters a layer;
* call back up: into a higher layer, or into a module that imports the
  caller's module, other than a hook (a base class, an adapter base
  among them, calling an override), an operator (``x[k]``), a call through
  a method a ``typing.Protocol`` declares in a module the caller imports, or
  the ask closure.
"""

from __future__ import annotations

import ast
import functools
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

REPO = Path(__file__).resolve().parent.parent
GATEWAY = REPO / "gateway"
VOCABULARY = frozenset({"core", "wire"})
# What every revision of an era overrides lives in its era's base (issue 38's siblings).
ERA_FILES = frozenset({"protocol/adapter/handshake.py", "protocol/adapter/stateless.py"})


class Traced(Protocol):
    @property
    def file(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def fresh(self) -> bool: ...
    @property
    def caller(self) -> tuple[str, str, int] | None: ...


def layer_of(file: str) -> str | None:
    """The layer of a file under gateway/, None for the vocabulary (core, wire)."""
    parts = PurePosixPath(file).parts
    if len(parts) == 1:
        return PurePosixPath(file).stem
    if parts[0] in VOCABULARY:
        return None
    if parts[:2] == ("upstream", "carriers"):
        return "upstream.carriers"
    return parts[0]


@functools.cache
def ranks() -> dict[str, float]:
    """Layer -> rank, 0 the outermost, from the import-linter layers contract."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    layers = next(c["layers"] for c in contracts if c["type"] == "layers")
    order: dict[str, float] = {}
    for rank, row in enumerate(layers):
        for module in row.split("|"):
            order[module.strip().removeprefix("gateway.")] = float(rank)
    if "upstream" in order:
        order["upstream.carriers"] = order["upstream"] + 0.5
    return order


def module_of(file: str) -> str:
    path = PurePosixPath(file)
    parts = path.parent.parts if path.stem == "__init__" else (*path.parent.parts, path.stem)
    return ".".join(("gateway", *parts))


@functools.cache
def _tree(file: str) -> ast.Module:
    return ast.parse((GATEWAY / file).read_text())


@functools.cache
def imports_of(file: str) -> frozenset[str]:
    """Modules a file imports (relative imports resolved), and `from X import name` as X.name."""
    package = module_of(file).rsplit(".", 1)[0] if not file.endswith("__init__.py") else None
    base = package or module_of(file)
    found: set[str] = set()
    for node in ast.walk(_tree(file)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            origin = _resolve(base, node.module, node.level)
            found.add(origin)
            reexports = _reexports(origin)
            for alias in node.names:
                found.add(f"{origin}.{alias.name}")
                found.update(reexports.get(alias.name, ()))
                if alias.name in _defined_in_init(origin):
                    # A class the package's __init__ builds from its modules' classes.
                    found.update(m for modules in reexports.values() for m in modules)
    return frozenset(found)


@functools.cache
def _defined_in_init(package: str) -> frozenset[str]:
    init = GATEWAY.joinpath(*package.split(".")[1:], "__init__.py")
    if not package.startswith("gateway.") or not init.is_file():
        return frozenset()
    body = _tree(init.relative_to(GATEWAY).as_posix()).body
    return frozenset(
        node.name
        for node in body
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
    )


@functools.cache
def _reexports(package: str) -> dict[str, tuple[str, ...]]:
    """Name -> the module a package's ``__init__`` takes it from (one level deep)."""
    init = GATEWAY.joinpath(*package.split(".")[1:], "__init__.py")
    if not package.startswith("gateway.") or not init.is_file():
        return {}
    names: dict[str, tuple[str, ...]] = {}
    for node in ast.walk(_tree(init.relative_to(GATEWAY).as_posix())):
        if isinstance(node, ast.ImportFrom):
            origin = _resolve(package, node.module, node.level)
            for alias in node.names:
                names[alias.asname or alias.name] = (origin,)
    return names


def _resolve(base: str, module: str | None, level: int) -> str:
    if level == 0:
        return module or ""
    parts = base.split(".")
    anchor = parts[: len(parts) - (level - 1)]
    return ".".join([*anchor, module] if module else anchor)


@functools.cache
def protocol_methods() -> dict[str, frozenset[str]]:
    """Module -> names of methods its ``typing.Protocol`` classes declare."""
    found: dict[str, frozenset[str]] = {}
    for path in GATEWAY.rglob("*.py"):
        file = path.relative_to(GATEWAY).as_posix()
        names: set[str] = set()
        for node in ast.walk(_tree(file)):
            if isinstance(node, ast.ClassDef) and any(_is_protocol(b) for b in node.bases):
                names.update(
                    item.name
                    for item in node.body
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
                )
        if names:
            found[module_of(file)] = frozenset(names)
    return found


def _is_protocol(base: ast.expr) -> bool:
    if isinstance(base, ast.Subscript):
        base = base.value
    return (isinstance(base, ast.Name) and base.id == "Protocol") or (
        isinstance(base, ast.Attribute) and base.attr == "Protocol"
    )


@dataclass(frozen=True)
class Hop:
    caller: str  # file:qualname
    callee: str
    exempt: str = ""  # why a call back up is not counted ("hook", "protocol X", "ask closure")


def _bases(file: str, name: str) -> frozenset[str]:
    """The names a class in `file` (by the first part of a qualname) lists as its bases."""
    cls = name.split(".", 1)[0]
    for node in _tree(file).body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            return frozenset(ast.unparse(base).rsplit(".", 1)[-1] for base in node.bases)
    return frozenset()


def _exemption(caller: tuple[str, str], callee_file: str, callee_name: str) -> str:
    caller_file, caller_name = caller
    method = callee_name.rsplit(".", 1)[-1]
    if "<locals>" in callee_name and method == "ask":
        return "ask closure"
    if callee_file in ERA_FILES or (
        PurePosixPath(callee_file).parts[0] == "protocol"
        and PurePosixPath(callee_file).name.startswith("v")
    ):
        return "revision hook"  # a revision's (or its era's) override, called by the base
    if caller_name.split(".", 1)[0] in _bases(callee_file, callee_name):
        return "override hook"
    if method.startswith("__") and method.endswith("__"):
        return "protocol (operator)"
    seen = imports_of(caller_file) | {module_of(caller_file)}
    for module, names in protocol_methods().items():
        if method in names and (module in seen or any(m.startswith(module + ".") for m in seen)):
            return f"protocol in {module}"
    return ""


def _goes_up(caller_file: str, callee_file: str) -> bool:
    up, down = layer_of(callee_file), layer_of(caller_file)
    order = ranks()
    if up and down and up != down and up in order and down in order and order[up] < order[down]:
        return True
    caller_module = module_of(caller_file)
    return caller_file != callee_file and any(
        name == caller_module or name.startswith(caller_module + ".")
        for name in imports_of(callee_file)
    )


def spine(calls: Iterable[Traced]) -> dict[str, Any]:
    handoffs: list[Hop] = []
    back_up: list[Hop] = []
    from_loop = 0
    for call in calls:
        if not call.fresh:
            continue
        if call.caller is None:
            from_loop += 1
            continue
        caller_file, caller_name, _ = call.caller
        hop = Hop(f"{caller_file}:{caller_name}", f"{call.file}:{call.name}")
        there, here = layer_of(call.file), layer_of(caller_file)
        if there and here and there != here:
            handoffs.append(hop)
        if _goes_up(caller_file, call.file):
            why = _exemption((caller_file, caller_name), call.file, call.name)
            back_up.append(Hop(hop.caller, hop.callee, why))
    doors = sorted({hop.callee for hop in handoffs})
    counted = [hop for hop in back_up if not hop.exempt]
    return {
        "handoffs": len(handoffs),
        "doors": len(doors),
        "calls_back_up": len(counted),
        "calls_back_up_exempt": len(back_up) - len(counted),
        "started_by_loop": from_loop,
        "handoff_list": [f"{hop.caller} -> {hop.callee}" for hop in handoffs],
        "door_list": doors,
        "back_up_list": [
            f"{hop.caller} -> {hop.callee}" + (f"  ({hop.exempt})" if hop.exempt else "")
            for hop in back_up
        ],
    }


def render(figures: dict[str, Any]) -> list[str]:
    return [
        f"layer hand-offs               {figures['handoffs']:5d}",
        f"doors                         {figures['doors']:5d}",
        f"calls back up                 {figures['calls_back_up']:5d}"
        f"  (+ {figures['calls_back_up_exempt']} exempt: hooks, protocols, the ask closure)",
        f"calls started by the loop     {figures['started_by_loop']:5d}",
        "",
        "doors (a layer entered through):",
        *(f"  {door}" for door in figures["door_list"]),
        "calls back up:",
        *(f"  {hop}" for hop in figures["back_up_list"]),
    ]
