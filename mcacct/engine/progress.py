"""Progress on stderr: a bar that updates in place on a terminal (tqdm), plain rate-limited lines elsewhere.

Every long command reports through :class:`Progress` (counted work: samples, examples) or :func:`stage` (a step
without a count: an FFT accounting, a baseline). The rate and the ETA are measured from the *first* completed
unit of work on, so the time JAX spends compiling the first chunk does not inflate the first ETA; the line before
that says ``compiling``. ``--quiet`` turns every line off (the commands pass ``enabled=False``).
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator

__all__ = ["Progress", "CompileClock", "stage", "format_seconds"]

#: Seconds between two plain progress lines (not a terminal: a log file, CI); a terminal bar redraws in place.
PLAIN_EVERY = 15.0


def format_seconds(s: float) -> str:
    """``s`` seconds as ``"42s"``, ``"3m05s"``, ``"2h07m"`` or ``"309.1 days"`` (``"?"`` when not finite).

    Parameters
    ----------
    s : float
        Seconds; negative values print as ``"0s"``.

    Returns
    -------
    str
        Whole seconds below a minute, ``MmSSs`` below an hour, ``HhMMm`` below two days, else days to one decimal.
    """
    if s != s or s in (float("inf"), float("-inf")):
        return "?"
    s = max(0.0, s)
    if s < 60:
        return f"{s:.0f}s"
    if s < 3600:
        return f"{int(s // 60)}m{int(s % 60):02d}s"
    if s < 2 * 86400:
        return f"{int(s // 3600)}h{int(s % 3600 // 60):02d}m"
    return f"{s / 86400:,.1f} days"


class Progress:
    """Counted progress of one phase: ``done`` of ``total`` units, rate and ETA after compilation.

    Parameters
    ----------
    label : str
        The phase, e.g. ``"verify: 8 candidate(s) x 2 directions"``.
    total : int
        Units of work in the phase.
    enabled : bool
        ``False`` prints nothing (``--quiet``).
    unit : str, default "samples"
        What is counted.
    every : float, optional
        Seconds between plain lines (default :data:`PLAIN_EVERY`); a terminal bar redraws at most twice a second.
    stream : file, optional
        Where to write (default ``sys.stderr``); a bar is drawn only when it is a terminal.
    """

    def __init__(self, label: str, total: int, enabled: bool, unit: str = "samples", every: float | None = None,
                 stream=None) -> None:
        self.label, self.total, self.enabled, self.unit = label, int(total), enabled, unit
        self.every = PLAIN_EVERY if every is None else every
        self.stream = sys.stderr if stream is None else stream
        self.start = time.perf_counter()
        self.first: tuple[float, int] | None = None  # (time, done) at the first completed unit: after compiling
        self.last_time, self.last_done, self.done = self.start, -1, 0
        self.bar = None
        if enabled and _is_terminal(self.stream):
            from tqdm import tqdm
            self.bar = tqdm(total=self.total, desc=f"[mcacct] {label}", file=self.stream, leave=True,
                            dynamic_ncols=True, mininterval=0.5,
                            bar_format="{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt}{postfix}")
            self.bar.set_postfix_str("compiling", refresh=True)

    def rate_and_eta(self, done: int, now: float) -> tuple[float | None, float | None]:
        r"""Units per second and seconds left, measured since the first completed unit (``None`` before).

        With :math:`(t_1, d_1)` the time and count at the first completed unit, the rate is
        :math:`r = (d - d_1) / (t - t_1)` and the ETA :math:`(\mathrm{total} - d) / r`.

        Parameters
        ----------
        done : int
            Units complete.
        now : float
            The current ``time.perf_counter()``.

        Returns
        -------
        rate : float or None
            Units per second; ``None`` before a unit past the first is complete or when no time has passed.
        eta : float or None
            Seconds left; ``None`` with ``rate``.
        """
        if self.first is None or done <= self.first[1] or now <= self.first[0]:
            return None, None
        rate = (done - self.first[1]) / (now - self.first[0])
        return rate, (self.total - done) / rate

    def update(self, done: int, force: bool = False) -> None:
        """Record that ``done`` units are complete (cumulative); draw or print when due (always with ``force``).

        Parameters
        ----------
        done : int
            Units complete so far.
        force : bool, default False
            Draw or print now, whatever the time since the last line (a plain line is still not repeated for the same
            count).
        """
        if not self.enabled:
            return
        self.done = done
        now = time.perf_counter()
        if self.first is None and done > 0:
            self.first = (now, done)
        rate, eta = self.rate_and_eta(done, now)
        tail = (f"compiled and ran the first {done:,} in {format_seconds(now - self.start)}" if rate is None
                else f"{rate:,.0f} {self.unit}/s, ETA {format_seconds(eta)}")
        if self.bar is not None:
            if force or done == self.total or now - self.last_time >= 0.5:
                self.bar.n = done
                # tqdm writes ", " before a postfix itself: "8192/600000, 28,422 samples/s, ETA ..."
                self.bar.set_postfix_str(tail if done else "compiling", refresh=True)
                self.last_time, self.last_done = now, done
            return
        due = force or self.last_done < 0 and done > 0 or now - self.last_time >= self.every
        if not due or done == self.last_done:
            return
        self.last_time, self.last_done = now, done
        print(f"[mcacct] {self.label}: {done:,}/{self.total:,} {self.unit}, {tail}", file=self.stream, flush=True)

    def close(self, done: int | None = None) -> None:
        """Final state: the last count (``done``, default the last one recorded) once, never a line repeated.

        Parameters
        ----------
        done : int, optional
            The final count (default: the last recorded).
        """
        if not self.enabled:
            return
        self.update(self.done if done is None else done, force=True)
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def _is_terminal(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


@contextlib.contextmanager
def stage(label: str, enabled: bool, stream=None) -> Iterator[None]:
    """A step without a count: ``[mcacct] label ...`` before, ``[mcacct] label: done in Xs`` after.

    Parameters
    ----------
    label : str
        The step's name.
    enabled : bool
        ``False`` prints nothing.
    stream : file, optional
        Where to write (default ``sys.stderr``).

    Yields
    ------
    None
        Control for the step's body; the ``done`` line follows only if the body returns without an exception.
    """
    out = sys.stderr if stream is None else stream
    t0 = time.perf_counter()
    if enabled:
        print(f"[mcacct] {label} ...", file=out, flush=True)
    yield
    if enabled:
        print(f"[mcacct] {label}: done in {format_seconds(time.perf_counter() - t0)}", file=out, flush=True)


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
        """Install the listeners (once) and return the current totals.

        Returns
        -------
        dict
            A copy of ``{"compile_seconds": float, "cache_hits": int}``, the process-wide totals now.
        """
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
        """``compile_seconds`` and ``cache_hits`` since ``start`` (a value of :meth:`start`).

        Parameters
        ----------
        start : dict
            A value returned by :meth:`start`.

        Returns
        -------
        dict
            ``{"compile_seconds": float, "cache_hits": int}``: the totals now minus those in ``start``.
        """
        return {k: cls._totals[k] - start[k] for k in cls._totals}
