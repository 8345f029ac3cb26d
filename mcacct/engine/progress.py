"""Progress lines on stderr (phase, samples, rate, ETA), rate-limited."""

from __future__ import annotations

import sys
import time

__all__ = ["Progress"]


class Progress:
    """Rate-limited progress lines on stderr: samples done, rate, ETA."""

    def __init__(self, label: str, total: int, enabled: bool, every: float = 2.0) -> None:
        self.label, self.total, self.enabled, self.every = label, total, enabled, every
        self.start = time.perf_counter()
        self.last = self.start

    def update(self, done: int, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if not force and now - self.last < self.every:
            return
        self.last = now
        rate = done / max(now - self.start, 1e-9)
        eta = (self.total - done) / rate if rate > 0 else float("inf")
        print(f"[mcacct] {self.label}: {done:,}/{self.total:,} samples, {rate:,.0f}/s, ETA {eta:,.0f}s",
              file=sys.stderr, flush=True)
