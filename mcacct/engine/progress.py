"""Progress lines on stderr (phase, samples, rate, ETA), rate-limited."""

from __future__ import annotations

import sys
import time

__all__ = ["Progress", "CompileClock"]


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


class CompileClock:
    """Seconds JAX spent tracing, lowering and compiling (``/jax/core/compile/*`` duration events) and the
    persistent-cache hits, accumulated process-wide from the first :meth:`start`; read the difference over a
    run with :meth:`since`."""

    _EVENTS = ("/jax/core/compile/jaxpr_trace_duration", "/jax/core/compile/jaxpr_to_mlir_module_duration",
               "/jax/core/compile/backend_compile_duration")
    _totals = {"compile_seconds": 0.0, "cache_hits": 0}
    _installed = False

    @classmethod
    def start(cls) -> dict:
        """Install the listeners (once) and return the current totals."""
        if not cls._installed:
            import jax

            def on_duration(event: str, duration: float, **_: object) -> None:
                if event in cls._EVENTS:
                    cls._totals["compile_seconds"] += float(duration)

            def on_event(event: str, **_: object) -> None:
                if event == "/jax/compilation_cache/cache_hits":
                    cls._totals["cache_hits"] += 1

            jax.monitoring.register_event_duration_secs_listener(on_duration)
            jax.monitoring.register_event_listener(on_event)
            cls._installed = True
        return dict(cls._totals)

    @classmethod
    def since(cls, start: dict) -> dict:
        """``compile_seconds`` and ``cache_hits`` since ``start`` (a value of :meth:`start`)."""
        return {k: cls._totals[k] - start[k] for k in cls._totals}
