"""A transparent tap in front of a stdio MCP server: every line its client writes is
appended to a record file, then passed on to the server unchanged; the server's
stdout and stderr are its own (inherited).  So a test can see exactly what a
real server received (its `_meta`, say) without changing the server.

    python -m tests.e2e.stdio_tap RECORD -- SERVER ARGV...

Ends when its stdin ends (the server's stdin is closed then, and the tap exits
with the server's code) or on SIGTERM (passed on to the server).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from types import FrameType


def main(argv: list[str]) -> int:
    record, separator, *command = argv
    assert separator == "--" and command, "usage: stdio_tap RECORD -- SERVER ARGV..."
    server = subprocess.Popen(command, stdin=subprocess.PIPE)
    assert server.stdin is not None

    def stop(signum: int, frame: FrameType | None) -> None:
        server.terminate()
        sys.exit(server.wait(10))

    signal.signal(signal.SIGTERM, stop)
    # O_APPEND: several taps (one per spawned server) may share one record file.
    fd = os.open(record, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        for line in sys.stdin.buffer:
            os.write(fd, line)
            server.stdin.write(line)
            server.stdin.flush()
    except BrokenPipeError:
        pass
    finally:
        os.close(fd)
    server.stdin.close()
    return server.wait(10)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
