"""How a stdio route's command has been failing: crashes in a row, the back-off before
the next child, and the last lines it wrote to stderr.

One record per route (every child of the command shares it, whether one child serves
the route or one per client session), so a command that exits at once is started
again after a back-off that doubles up to a minute, not at every new session or
check; and what it last said is at hand for the warning of each exit, /readyz and the
console.  Plain state: the caller passes ``now`` (monotonic seconds).
"""

from __future__ import annotations

from collections import deque

DEFAULT_BACKOFF = 0.1
DEFAULT_BACKOFF_MAX = 60.0
STDERR_KEPT = 5  # the last lines kept
# Crashes in a row from which the command is in a crash loop: not ready, and a call
# meanwhile is told its server could not be started rather than wait out the back-off.
LOOP = 3


class Crashes:
    def __init__(
        self, backoff_initial: float = DEFAULT_BACKOFF, backoff_max: float = DEFAULT_BACKOFF_MAX
    ) -> None:
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.failures = 0  # crashes (or failed spawns) in a row
        self.last = 0.0  # when the last one happened
        self.stderr: deque[str] = deque(maxlen=STDERR_KEPT)

    def failed(self, now: float, *, ran_well: bool = False) -> None:
        """A child crashed or could not start; ``ran_well``: it had run long enough
        first (not a crash loop: the count starts again)."""
        if ran_well:
            self.failures = 0
        self.failures += 1
        self.last = now

    def recovered(self) -> None:
        """A child has run well: the crashes before it are no loop."""
        self.failures = 0

    def delay(self, now: float) -> float:
        """How long the next start waits."""
        if self.failures == 0:
            return 0.0
        backoff = min(self.backoff_initial * 2.0 ** (self.failures - 1), self.backoff_max)
        return max(0.0, backoff - (now - self.last))

    @property
    def looping(self) -> bool:
        return self.failures >= LOOP

    def said(self, line: str) -> None:
        self.stderr.append(line)

    def last_said(self) -> list[str]:
        return list(self.stderr)
