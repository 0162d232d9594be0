"""Print the interop matrix recorded by test_matrix.py as a Markdown table."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # `peers.registry`, as in conftest

from tests.interop.test_matrix import CLIENTS, RESULTS, REVISIONS, SERVERS


def table(results: dict[str, dict[str, str]]) -> str:
    lines = [
        "| client \\ upstream | " + " | ".join(REVISIONS) + " |",
        "|---|" + "---|" * len(REVISIONS),
    ]
    for client in REVISIONS:
        cells = []
        for server in REVISIONS:
            verdicts = results.get(f"{client}|{server}")
            if verdicts is None:
                cells.append("not run")
                continue
            failed = [step for step, verdict in verdicts.items() if verdict != "ok"]
            cells.append(
                f"works ({len(verdicts)}/{len(verdicts)})"
                if not failed
                else "FAILS: " + ", ".join(failed)
            )
        lines.append(f"| **{client}** | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("Peers: clients " + ", ".join(f"{r}: `{n}`" for r, n in CLIENTS.items()))
    lines.append("servers " + ", ".join(f"{r}: `{n}`" for r, n in SERVERS.items()))
    return "\n".join(lines)


def main(path: Path = RESULTS) -> int:
    if not path.exists():
        print(f"no results at {path}: run the matrix tests first", file=sys.stderr)
        return 1
    results = json.loads(path.read_text())
    print(table(results))
    return 0 if all(all(v == "ok" for v in r.values()) for r in results.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
