"""Phases of a cold build with their elapsed time.

On a terminal the display is one line, rewritten in place while a phase runs
(`grid-rbd iiwa14 [3/5] compile (cpu, g++)  2.4 s`); elsewhere (a pipe, a log file, CI)
every phase writes a start and a finish line. `$GRID_RBD_PROGRESS` picks the mode:
`auto` (default: terminal when stderr is one), `tty`, `log` or `off`.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

MODES = ("auto", "tty", "log", "off")
_TICK_SECONDS = 0.1


def _mode() -> str:
    mode = os.environ.get("GRID_RBD_PROGRESS", "auto").strip().lower() or "auto"
    if mode not in MODES:
        raise ValueError(f"GRID_RBD_PROGRESS must be one of {MODES}, got {mode!r}")
    return mode


class Progress:
    """Reports the phases of one registration to `stream` (default: the current stderr).

    `with progress.phase("compile", "cpu, g++"):` times a phase; `phases` lists
    `(name, seconds)` of the finished ones; `finish(summary)` ends the display.
    """

    def __init__(self, label: str, total_phases: int, stream: TextIO | None = None,
                 mode: str | None = None) -> None:
        # Shown on a terminal: whatever the caller passed, nothing in it may move the
        # cursor or end the line (registration names are validated; this is the backstop).
        self.label = "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in label)
        self.total = total_phases
        self.stream = stream if stream is not None else sys.stderr
        mode = mode or _mode()
        if mode == "auto":
            isatty = getattr(self.stream, "isatty", None)
            mode = "tty" if isatty is not None and isatty() else "log"
        self.mode = mode
        self.phases: list[tuple[str, float]] = []
        self._start = time.monotonic()
        self._line_len = 0
        self._lock = threading.Lock()

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self._start

    @contextmanager
    def phase(self, name: str, detail: str = "") -> Iterator[None]:
        """Time the phase `name`; `detail` is shown beside it (e.g. the compiler)."""
        index = len(self.phases) + 1
        title = f"[{index}/{self.total}] {name}" + (f" ({detail})" if detail else "")
        start = time.monotonic()
        stop = threading.Event()
        ticker = None
        if self.mode == "log":
            self._write_line(f"{title} ...")
        elif self.mode == "tty":
            ticker = threading.Thread(target=self._tick, args=(title, start, stop),
                                      daemon=True)
            ticker.start()
        try:
            yield
        finally:
            seconds = time.monotonic() - start
            stop.set()
            if ticker is not None:
                ticker.join()
            self.phases.append((name, seconds))
            if self.mode == "log":
                self._write_line(f"{title} done in {seconds:.2f} s")
            elif self.mode == "tty":
                self._rewrite(f"{title} {seconds:5.1f} s")

    def finish(self, summary: str) -> None:
        """End the display with `summary` and the per-phase times."""
        times = ", ".join(f"{name} {seconds:.2f} s" for name, seconds in self.phases)
        text = f"{summary} in {self.elapsed:.2f} s ({times})"
        if self.mode == "tty":
            self._rewrite(text)
            with self._lock:
                self.stream.write("\n")
                self.stream.flush()
                self._line_len = 0
        elif self.mode == "log":
            self._write_line(text)

    def _prefix(self) -> str:
        return f"grid-rbd {self.label}"

    def _write_line(self, text: str) -> None:
        with self._lock:
            self.stream.write(f"[{self._prefix()} +{self.elapsed:.2f}s] {text}\n")
            self.stream.flush()

    def _rewrite(self, text: str) -> None:
        line = f"{self._prefix()} {text}"
        with self._lock:
            pad = max(0, self._line_len - len(line))
            self.stream.write("\r" + line + " " * pad)
            self.stream.flush()
            self._line_len = len(line)

    def _tick(self, title: str, start: float, stop: threading.Event) -> None:
        while True:
            self._rewrite(f"{title} {time.monotonic() - start:5.1f} s")
            if stop.wait(_TICK_SECONDS):
                return
