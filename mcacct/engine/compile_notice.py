r"""A notice on stderr while a run's first programs compile for longer than 10 s.

A Monte Carlo run compiles its chunk program on its first chunk: a few seconds for most shapes, but a minute or more
for some (truncated b-min-sep's count chains, long horizons) when the shape is new and the persistent compilation
cache (:func:`mcacct.core.platform.enable_compilation_cache`) does not hold it yet. How long a compilation will take is
not known before it ends, so the notice is a watchdog: :class:`CompileNotice` starts a timer when the first chunk
is dispatched and prints one line if no chunk has finished by then (compilation dominates that wait); the first
finished chunk cancels it. Nothing is printed with progress off.
"""

from __future__ import annotations

import sys
import threading
from typing import TextIO

__all__ = ["CompileNotice", "NOTICE_AFTER_S"]

#: Seconds without a finished first chunk before the notice goes out.
NOTICE_AFTER_S = 10.0


class CompileNotice:
    """One line on ``stream`` (default stderr) if :meth:`done` is not called within ``after`` seconds of
    :meth:`start`.

    Parameters
    ----------
    label : str
        What is compiling (the run's progress label).
    enabled : bool
        ``False``: never prints (``--quiet``, ``progress=False``).
    after : float, default :data:`NOTICE_AFTER_S`
        Seconds to wait.
    stream : text stream, optional
        Where the line goes (default ``sys.stderr`` at the time it is printed).
    """

    def __init__(self, label: str, enabled: bool, after: float = NOTICE_AFTER_S, stream: TextIO | None = None):
        self.label, self.enabled, self.after, self.stream = label, bool(enabled), float(after), stream
        self._timer: threading.Timer | None = None
        self.fired = False

    def _fire(self) -> None:
        import jax
        cache = jax.config.jax_compilation_cache_dir
        where = (f"later runs of this shape read them from the compilation cache {cache}" if cache else
                 "the persistent compilation cache is off (MCACCT_CACHE_DIR), so later runs compile again")
        self.fired = True
        print(f"[mcacct] {self.label}: still compiling this shape's programs after {self.after:.0f} s (a new shape "
              f"can take a minute or more, e.g. truncated b-min-sep); {where}",
              file=self.stream if self.stream is not None else sys.stderr, flush=True)

    def start(self) -> "CompileNotice":
        """Start the timer (once; a no-op when disabled).

        Returns
        -------
        CompileNotice
            ``self``, so that ``CompileNotice(...).start()`` can be bound in one expression.
        """
        if self.enabled and self._timer is None:
            self._timer = threading.Timer(self.after, self._fire)
            self._timer.daemon = True
            self._timer.start()
        return self

    def done(self) -> None:
        """The first results are in: cancel the notice (idempotent)."""
        if self._timer is not None:
            self._timer.cancel()
