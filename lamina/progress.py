"""Progress for long work: count, rate and time left, on stderr, only when stderr is a terminal.

Machines reading `--json` output never see it; people watching a 500 MB ingest do. One line is
drawn at a time, in place; `clear_line()` wipes it before anything else is printed, so a result
never runs into a progress line (the bar comes back at its next update). A bar that reaches its
total always draws it, so the last thing it shows is 100%, not the last throttled update.
"""

from __future__ import annotations

import math
import sys
import time
from typing import TextIO

from ._closing import Closing

__all__ = ["Progress", "clear_line"]


def _human(n: float, unit: str) -> str:
    if unit == "B":
        for suffix in ("B", "KB", "MB", "GB"):
            if abs(n) < 1024 or suffix == "GB":
                return f"{n:,.0f} {suffix}" if suffix == "B" else f"{n:,.1f} {suffix}"
            n /= 1024
    return f"{n:,.0f} {unit}".rstrip()


_shown: Progress | None = None
"""The bar whose line is on the terminal now, if any."""


def clear_line() -> None:
    """Wipe the progress line, if one is drawn, so that what is printed next starts a clean
    line; the bar draws again at its next update."""
    global _shown
    bar, _shown = _shown, None
    if bar is not None and bar._drawn:
        bar.stream.write("\r\x1b[2K")
        bar.stream.flush()
        bar._drawn = False
        bar._last_draw = 0.0


class Progress(Closing):
    """A one-line progress display. Quiet unless the stream is a terminal (or `force`). With
    `leave`, closing it leaves its last line (its total, when reached) on the terminal;
    otherwise the line is wiped."""

    def __init__(
        self,
        label: str,
        total: float | None = None,
        unit: str = "",
        *,
        stream: TextIO | None = None,
        interval: float = 0.2,
        delay: float = 0.5,
        force: bool = False,
        leave: bool = False,
    ) -> None:
        self.label = label
        self.total = total
        self.unit = unit
        self.stream = stream or sys.stderr
        self.enabled = force or (hasattr(self.stream, "isatty") and self.stream.isatty())
        self.interval = interval
        self.delay = delay
        self.done = 0.0
        self.started = time.monotonic()
        self._last_draw = -math.inf  # the first update draws, however long the clock has run
        self._drawn = False
        self._ever_drawn = False
        self.leave = leave

    def update(self, done: float) -> None:
        """Set how much is done (absolute, in the unit of `total`)."""
        self.done = done
        if not self.enabled:
            return
        now = time.monotonic()
        finished = bool(self.total) and done >= (self.total or 0)
        if now - self.started < self.delay:
            return
        if now - self._last_draw < self.interval and not finished:
            return
        self._last_draw = now
        self._draw(now)

    def advance(self, step: float = 1) -> None:
        self.update(self.done + step)

    def line(self, now: float | None = None) -> str:
        now = time.monotonic() if now is None else now
        elapsed = max(now - self.started, 1e-9)
        rate = self.done / elapsed
        text = f"{self.label}: {_human(self.done, self.unit)}"
        if self.total:
            pct = min(100.0, 100.0 * self.done / self.total)
            text += f" / {_human(self.total, self.unit)} ({pct:.0f}%)"
        text += f", {_human(rate, self.unit)}/s"
        if self.total and rate > 0 and self.done < self.total:
            left = (self.total - self.done) / rate
            text += f", {int(left // 60)}:{int(left % 60):02d} left"
        return text

    def _draw(self, now: float) -> None:
        global _shown
        if _shown is not None and _shown is not self:
            _shown._drawn = False  # its line is overwritten by this one
        self.stream.write("\r\x1b[2K" + self.line(now))
        self.stream.flush()
        self._drawn = self._ever_drawn = True
        _shown = self

    def close(self) -> None:
        global _shown
        if self.leave and self._ever_drawn:
            self._draw(time.monotonic())  # the final count, whatever the throttle skipped
            self.stream.write("\n")
        elif self._drawn:
            self.stream.write("\r\x1b[2K")
        else:
            return
        self.stream.flush()
        self._drawn = False
        if _shown is self:
            _shown = None
